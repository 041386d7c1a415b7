"""The ``envsched`` command line.

envsched run                          materialise the catalogue on embedded defaults, print a summary
envsched envs list                    registered environment sources
envsched envs verify-gold --source S  replay every gold solution, print ``passed N/M``
envsched sql "SELECT ..."             query the warehouse (read-only, no file access)
envsched campaign resume ID [--force] resume a campaign (--force: one that failed, after fixing the cause)

Errors are one line on stderr; the traceback goes to ``<data folder>/envsched.log``.
envsched ui                           start the Dagster web UI on localhost
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from datetime import UTC, datetime

import click

from pipelines.paths import Paths
from training.engines.base import ENGINES


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


def _error_line(exc: BaseException) -> str:
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    text = " ".join(str(text).split()) or type(exc).__name__
    return (
        text
        if isinstance(exc, (ValueError, KeyError, RuntimeError, OSError))
        else f"{type(exc).__name__}: {text}"
    )


class _OneLineErrors(click.Group):
    """Any error of a command: its cause in one line on stderr, exit 1; the traceback to the log."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            log = Paths.from_env().home / "envsched.log"
            try:
                log.parent.mkdir(parents=True, exist_ok=True)
                with log.open("a") as handle:
                    handle.write(
                        f"--- {datetime.now(UTC):%Y-%m-%dT%H:%M:%S} envsched {' '.join(sys.argv[1:])}\n"
                    )
                    handle.write(traceback.format_exc())
                where = f" (traceback in {log})"
            except OSError:
                where = ""
            click.echo(f"envsched: {_error_line(exc)}{where}", err=True)
            raise SystemExit(1) from None


@click.group(cls=_OneLineErrors)
def main() -> None:
    """EnvSched: environment-aware task scheduling for agentic RL."""


def _driver_context():
    """The driver over the data folder's Dagster instance. Every command that writes starts here, so
    runs a killed process left holding a pool slot are failed and their slots freed first."""
    import dagster as dg

    from pipelines.definitions import defs
    from pipelines.driver import DriverContext, recover
    from warehouse.store import Warehouse

    paths = _paths()
    ctx = DriverContext(
        defs=defs,
        instance=dg.DagsterInstance.get(),
        store=Warehouse(paths.warehouse),
        notify=lambda line: click.echo(line, err=True),
    )
    recover(ctx)
    return ctx


def _run_campaign(config, force: bool = False) -> None:
    from tqdm import tqdm

    from pipelines.driver import CampaignFailed, run_campaign

    ctx = _driver_context()
    click.echo(
        f"campaign {config.campaign_id}: {config.scheduler}, {config.engine} engine, B={config.batch_size}, "
        f"G={config.group_size}, {config.steps} steps (data folder {ctx.store.path.parent})"
    )
    done = ctx.store.progress(config.campaign_id)["observed"] if ctx.store.path.exists() else 0
    with tqdm(
        total=config.steps, initial=min(done, config.steps), unit="step", desc=config.campaign_id
    ) as bar:
        try:
            run_campaign(config, ctx, on_step=lambda step: bar.update(1), force=force)
        except CampaignFailed as exc:
            bar.close()
            click.echo(f"campaign {config.campaign_id} stopped: {exc}", err=True)
            raise SystemExit(1) from None
    click.echo(_summary_table(ctx.store, config.campaign_id))


# What `envsched run` loads: the benchmarks shipped with the project (synthetic is for scale tests).
DEFAULT_SOURCES = ("bfcl_v3_multi_turn", "tau_bench_retail", "tau_bench_airline", "acebench_agent")

SUMMARY_COLUMNS = {
    "schedule/mean_variance": "mean_sel_var",
    "schedule/envs_per_batch": "envs",
    "schedule/tools_per_batch": "tools",
    "rollout/reward_mean": "mean_reward",
    "rollout/zero_variance_groups": "zero_var_groups",
    "eval/heldout_score": "heldout_score",
}


def _summary_table(store, campaign_id: str) -> str:
    metrics = store.step_metrics(campaign_id)
    shown = metrics[[c for c in SUMMARY_COLUMNS if c in metrics.columns]].rename(columns=SUMMARY_COLUMNS)
    return f"\nPer step ({campaign_id}):\n{shown.round(4).to_string()}\n"


def _print_next_steps() -> None:
    click.echo("Next: `make ui` opens Dagster at http://127.0.0.1:3000 ; query the warehouse with e.g.")
    click.echo('  .venv/bin/envsched sql "SELECT * FROM campaign_steps ORDER BY campaign_id, step"')
    click.echo('  .venv/bin/envsched sql "SELECT * FROM environment_summary ORDER BY tasks DESC LIMIT 10"')


@main.command()
@click.option("--steps", default=5, show_default=True, help="Steps of the demo campaign.")
@click.option("--source", "sources", multiple=True, help="Sources to load (default: the shipped benchmarks).")
def run(steps: int, sources: tuple[str, ...]) -> None:
    """The main job on embedded defaults: load the benchmark catalogues, build the graph, run a short
    campaign on BFCL-v3 multi-turn with the simulated engine."""
    from datetime import UTC, datetime

    from pipelines.campaign import CampaignConfig
    from pipelines.driver import prepare_catalog

    sources = sources or DEFAULT_SOURCES
    click.echo(f"loading sources {', '.join(sources)} and building the task graph ...")
    prepare_catalog(_driver_context(), list(sources))
    config = CampaignConfig(campaign_id=f"bfcl-demo-{datetime.now(UTC):%Y%m%d-%H%M%S}", steps=steps)
    _run_campaign(config)
    summary = _driver_context().store.query("SELECT * FROM source_summary ORDER BY source")
    click.echo(f"Catalogue:\n{summary.to_string(index=False)}\n")
    _print_next_steps()


@main.group()
def campaign() -> None:
    """Training campaigns."""


@campaign.command("run")
@click.option("--steps", type=int, required=True)
@click.option(
    "--campaign-id", default=None, help="Default: <scheduler>-<engine>-<timestamp>; an existing id resumes."
)
@click.option(
    "--scheduler",
    default="envsched",
    show_default=True,
    type=click.Choice(["envsched", "random", "dapo", "dapo-1x", "greso", "mopps", "dps"]),
)
@click.option("--engine", default="simulated", show_default=True, type=click.Choice(list(ENGINES)))
@click.option("--model", default=None, help="Local model folder for the hf / vllm engines.")
@click.option(
    "--engine-option",
    "engine_options",
    multiple=True,
    help="Engine option key=value (repeatable), e.g. executor=process, workers=2, max_new_tokens=64.",
)
@click.option("--source", "sources", multiple=True, default=("bfcl_v3_multi_turn",), show_default=True)
@click.option("--split", "splits", multiple=True, help="Task splits in the pool (default: all).")
@click.option(
    "--heldout-split", "heldout_splits", multiple=True, help="Splits held out whole for evaluation."
)
@click.option(
    "--heldout-fraction",
    default=0.2,
    show_default=True,
    help="Share of the other tasks held out for evaluation (by a hash of the task id).",
)
@click.option(
    "--eval-every", default=5, show_default=True, help="Evaluate on held-out tasks every N steps (0 = never)."
)
@click.option("--batch-size", default=64, show_default=True)
@click.option("--group-size", default=8, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--set", "overrides", multiple=True, help="Scheduler config field=value (repeatable), e.g. rho=1.0."
)
def campaign_run(
    steps,
    campaign_id,
    scheduler,
    engine,
    model,
    sources,
    splits,
    heldout_splits,
    heldout_fraction,
    eval_every,
    engine_options,
    batch_size,
    group_size,
    seed,
    overrides,
):
    """Run (or resume) a campaign headless through Dagster; prints a per-step summary."""
    from datetime import UTC, datetime

    from pipelines.campaign import CampaignConfig

    config = CampaignConfig(
        campaign_id=campaign_id or f"{scheduler}-{engine}-{datetime.now(UTC):%Y%m%d-%H%M%S}",
        sources=list(sources),
        splits=list(splits),
        heldout_splits=list(heldout_splits),
        heldout_fraction=heldout_fraction,
        eval_every=eval_every,
        scheduler=scheduler,
        scheduler_config=_parse_options(overrides),
        batch_size=batch_size,
        group_size=group_size,
        engine=engine,
        engine_options={**_parse_options(engine_options), **({"model": model} if model else {})},
        steps=steps,
        seed=seed,
    )
    _run_campaign(config)
    _print_next_steps()


@campaign.command("resume")
@click.argument("campaign_id")
@click.option(
    "--force",
    is_flag=True,
    help="Resume a campaign that failed (after removing the stray or bad landing file that stopped it).",
)
def campaign_resume(campaign_id: str, force: bool) -> None:
    """Resume a campaign from where it stopped, with its stored config."""
    from pipelines.campaign import CampaignConfig
    from warehouse.store import Warehouse

    store = Warehouse(_paths().warehouse)
    config = CampaignConfig.from_dict(store.campaign(campaign_id)["config"])
    _run_campaign(config, force=force)


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
    """Run one read-only query (SELECT, or EXPLAIN of one) against the warehouse: no writes, no
    file access (COPY, EXPORT, ATTACH, read_csv and the like are refused), settings locked."""
    import pandas as pd

    from warehouse.store import Warehouse

    with pd.option_context("display.max_rows", 200, "display.max_columns", 50, "display.width", 200):
        click.echo(Warehouse(_paths().warehouse).safe_query(query).to_string(index=False))


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


if __name__ == "__main__":
    main()
