"""The ``envsched`` command line.

envsched run                          materialise the catalogue on embedded defaults, print a summary
envsched envs list                    registered environment sources
envsched envs verify-gold --source S  replay every gold solution, print ``passed N/M``
envsched sql "SELECT ..."             query the warehouse (read-only)
envsched ui                           start the Dagster web UI on localhost
"""

from __future__ import annotations

import json
import os
import signal
import sys

import click

from pipelines.paths import Paths


def _paths() -> Paths:
    paths = Paths.from_env().ensure()
    # Runs go to the persistent instance under the data folder, so the UI shows them later.
    os.environ["DAGSTER_HOME"] = str(paths.dagster_home)
    return paths


def _parse_options(options: tuple[str, ...]) -> dict:
    parsed = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep:
            raise click.BadParameter(f"{option!r}: expected key=value", param_hint="--option")
        try:
            parsed[key] = json.loads(value)
        except json.JSONDecodeError:
            parsed[key] = value
    return parsed


@click.group()
def main() -> None:
    """EnvSched: environment-aware task scheduling for agentic RL."""


@main.command()
@click.option("--source", "sources", multiple=True, default=("bfcl_v3_multi_turn",), show_default=True)
def run(sources: tuple[str, ...]) -> None:
    """Run the main job on embedded defaults (today: load the environment catalogue)."""
    import dagster as dg

    from pipelines.definitions import defs
    from warehouse.store import Warehouse

    paths = _paths()
    click.echo(f"data folder: {paths.home}")
    result = defs.resolve_job_def("refresh_catalog").execute_in_process(
        instance=dg.DagsterInstance.get(),
        run_config={
            "ops": {"environment_catalog": {"config": {"sources": list(sources)}}},
            "loggers": {"console": {"config": {"log_level": "WARNING"}}},
        },
        raise_on_error=False,
    )
    if not result.success:
        for event in result.all_events:
            if event.is_failure:
                click.echo(event.message, err=True)
        raise SystemExit(1)
    summary = Warehouse(paths.warehouse).query("SELECT * FROM source_summary ORDER BY source")
    click.echo(f"\nCatalogue (warehouse: {paths.warehouse})\n{summary.to_string(index=False)}\n")
    click.echo("Next: `make ui` opens Dagster at http://127.0.0.1:3000 ; query with e.g.")
    click.echo('  .venv/bin/envsched sql "SELECT * FROM environment_summary ORDER BY tasks DESC LIMIT 10"')


@main.group()
def envs() -> None:
    """Environment sources."""


@envs.command("list")
def envs_list() -> None:
    from environments.registry import available_sources

    for name in available_sources():
        click.echo(name)


@envs.command("verify-gold")
@click.option("--source", required=True, help="Registered source name or module:Class.")
@click.option("--option", "options", multiple=True, help="Source constructor option key=value (repeatable).")
@click.option("--limit", type=int, default=None, help="Only the first N tasks.")
@click.option(
    "--envs", type=int, default=None, help="Number of environments (source option envs; synthetic)."
)
@click.option(
    "--tasks-per-env",
    type=int,
    default=None,
    help="Tasks per environment (source option tasks_per_env; synthetic).",
)
def verify_gold_command(
    source: str, options: tuple[str, ...], limit: int | None, envs: int | None, tasks_per_env: int | None
) -> None:
    """Replay every task's gold solution in a fresh environment; exit 1 if any fails."""
    from environments.registry import get_source
    from environments.verify_gold import verify_gold

    parsed = _parse_options(options)
    # The flags are shorthands for the source options of the same name (they win over --option).
    parsed.update({k: v for k, v in (("envs", envs), ("tasks_per_env", tasks_per_env)) if v is not None})
    report = verify_gold(get_source(source, **parsed), limit=limit)
    click.echo(report.summary())
    if report.passed != report.total:
        raise SystemExit(1)


@main.command()
@click.argument("query")
def sql(query: str) -> None:
    """Run a read-only SQL query against the warehouse."""
    import pandas as pd

    from warehouse.store import Warehouse

    with pd.option_context("display.max_rows", 200, "display.max_columns", 50, "display.width", 200):
        click.echo(Warehouse(_paths().warehouse).query(query).to_string(index=False))


@main.command()
@click.option("--port", default=3000, show_default=True)
def ui(port: int) -> None:
    """Start `dagster dev` on localhost (Ctrl-C stops it)."""
    _paths()
    # A process started in the background inherits SIGINT as ignored; reset both signals so
    # `dagster dev` (and its children) can be stopped normally.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    dagster = os.path.join(os.path.dirname(sys.executable), "dagster")
    os.execv(dagster, [dagster, "dev", "-m", "pipelines.definitions", "-h", "127.0.0.1", "-p", str(port)])
