"""The ``envsched`` command line.

envsched run                          materialise the catalogue on embedded defaults, print a summary
envsched envs list                    registered environment sources
envsched envs verify-gold --source S  replay every gold solution, print ``passed N/M``
envsched sql "SELECT ..."             query the warehouse (read-only, no file access)
envsched campaign resume ID [--force] resume a campaign (--force: one that failed, after fixing the cause)
envsched campaign run|start|status    run a campaign here / submit it to the running UI / where it stands

Errors are one line on stderr; the traceback goes to ``<data folder>/envsched.log``.
envsched ui                           start the Dagster web UI on localhost
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import sys
import traceback
from datetime import UTC, datetime

import click

from campaign.registry import ENGINES, SCHEDULERS
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


def _parse_source_options(options: tuple[str, ...], sources: tuple[str, ...]) -> dict[str, dict]:
    """``synthetic.envs=500`` -> {"synthetic": {"envs": 500}}; values are JSON when they parse as JSON. The
    key is what follows the last dot before ``=``, so a source named by module path takes options too
    (``my_pkg.envs:MySource.data_dir=/data``)."""
    parsed: dict[str, dict] = {}
    for option in options:
        target, sep, value = option.partition("=")
        name, dot, key = target.rpartition(".")
        if not dot or not sep or not name or not key:
            raise click.BadParameter(f"{option!r}: expected SOURCE.KEY=VALUE", param_hint="--source-option")
        if sources and name not in sources:
            raise click.BadParameter(
                f"{option!r}: source {name!r} is not among --source {list(sources)}",
                param_hint="--source-option",
            )
        try:
            parsed.setdefault(name, {})[key] = json.loads(value)
        except json.JSONDecodeError:
            parsed.setdefault(name, {})[key] = value
    return parsed


SOURCE_OPTION_HELP = (
    "A source's constructor option SOURCE.KEY=VALUE (repeatable), e.g. synthetic.envs=500 "
    "synthetic.tasks_per_env=200; the source is (re)loaded with it."
)


@click.group(cls=_OneLineErrors)
def main() -> None:
    """EnvSched: environment-aware task scheduling for agentic RL."""
    # Long stages (embedding, graph build) report progress on this logger; show it on the terminal.
    progress = logging.getLogger("envsched.progress")
    if not progress.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        progress.addHandler(handler)
        progress.setLevel(logging.INFO)
        progress.propagate = False


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


def _summary_table(store, campaign_id: str) -> str:
    from envsched_core.metric_names import SUMMARY

    metrics = store.step_metrics(campaign_id)
    if metrics.empty:
        return f"\nPer step ({campaign_id}): no step observed yet\n"
    shown = metrics[[c for c in SUMMARY if c in metrics.columns]].rename(columns=SUMMARY)
    return f"\nPer step ({campaign_id}):\n{shown.round(4).to_string()}\n"


def _print_next_steps() -> None:
    from pipelines.submit import daemon_running, running_ui_url

    where = (
        f"the UI at {running_ui_url(_paths())} shows"
        if daemon_running()
        else "`make ui` opens Dagster at http://127.0.0.1:3000 with"
    )
    click.echo(f"Next: {where} the runs; query the warehouse with e.g.")
    click.echo('  .venv/bin/envsched sql "SELECT * FROM campaign_steps ORDER BY campaign_id, step"')
    click.echo('  .venv/bin/envsched sql "SELECT * FROM environment_summary ORDER BY tasks DESC LIMIT 10"')


@main.command()
@click.option("--steps", default=5, show_default=True, help="Steps of the demo campaign.")
@click.option("--source", "sources", multiple=True, help="Sources to load (default: the shipped benchmarks).")
@click.option("--source-option", "source_options", multiple=True, help=SOURCE_OPTION_HELP)
@click.option("--batch-size", default=64, show_default=True)
def run(steps: int, sources: tuple[str, ...], source_options: tuple[str, ...], batch_size: int) -> None:
    """The main job on embedded defaults: load the benchmark catalogues, build the graph, run a short
    campaign with the simulated engine (on BFCL-v3 multi-turn, or on the --source sources given)."""
    from datetime import UTC, datetime

    from pipelines.campaign import CampaignConfig
    from pipelines.driver import prepare_catalog

    options = _parse_source_options(source_options, sources)
    campaign_sources = list(sources) or ["bfcl_v3_multi_turn"]
    sources = sources or DEFAULT_SOURCES
    click.echo(f"loading sources {', '.join(sources)} and building the task graph ...")
    prepare_catalog(_driver_context(), list(sources), options)
    prefix = "bfcl-demo" if campaign_sources == ["bfcl_v3_multi_turn"] else "demo"
    config = CampaignConfig(
        campaign_id=f"{prefix}-{datetime.now(UTC):%Y%m%d-%H%M%S}",
        sources=campaign_sources,
        steps=steps,
        batch_size=batch_size,
    )
    _run_here_or_on_ui(config)
    summary = _driver_context().store.query("SELECT * FROM source_summary ORDER BY source")
    click.echo(f"Catalogue:\n{summary.to_string(index=False)}\n")
    _print_next_steps()


@main.group()
def campaign() -> None:
    """Training campaigns."""


def _campaign_options(command):
    """The options `campaign run` and `campaign start` share (the fields of CampaignConfig)."""
    options = [
        click.option("--steps", type=int, required=True),
        click.option(
            "--campaign-id",
            default=None,
            help="Default: <scheduler>-<engine>-<timestamp>; an existing id resumes.",
        ),
        click.option(
            "--scheduler", default="envsched", show_default=True, type=click.Choice(sorted(SCHEDULERS))
        ),
        click.option("--engine", default="simulated", show_default=True, type=click.Choice(list(ENGINES))),
        click.option("--model", default=None, help="Local model folder for the hf / vllm engines."),
        click.option(
            "--engine-option",
            "engine_options",
            multiple=True,
            help="Engine option key=value (repeatable), e.g. executor=process, workers=2, max_new_tokens=64.",
        ),
        click.option(
            "--source", "sources", multiple=True, default=("bfcl_v3_multi_turn",), show_default=True
        ),
        click.option("--source-option", "source_options", multiple=True, help=SOURCE_OPTION_HELP),
        click.option("--split", "splits", multiple=True, help="Task splits in the pool (default: all)."),
        click.option(
            "--heldout-split", "heldout_splits", multiple=True, help="Splits held out whole for evaluation."
        ),
        click.option(
            "--heldout-fraction",
            default=0.2,
            show_default=True,
            help="Share of the other tasks held out for evaluation (by a hash of the task id).",
        ),
        click.option(
            "--eval-every",
            default=5,
            show_default=True,
            help="Evaluate on held-out tasks every N steps (0 = never).",
        ),
        click.option("--batch-size", default=64, show_default=True),
        click.option("--group-size", default=8, show_default=True),
        click.option("--seed", default=0, show_default=True),
        click.option(
            "--set",
            "overrides",
            multiple=True,
            help="Scheduler config field=value (repeatable), e.g. rho=1.0.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _campaign_config(options: dict):
    """The CampaignConfig the shared options describe; a bad field is a one-line usage error."""
    from datetime import UTC, datetime

    from campaign.config import CampaignConfig

    scheduler, engine, model = options["scheduler"], options["engine"], options["model"]
    try:
        return CampaignConfig(
            campaign_id=options["campaign_id"] or f"{scheduler}-{engine}-{datetime.now(UTC):%Y%m%d-%H%M%S}",
            sources=list(options["sources"]),
            splits=list(options["splits"]),
            heldout_splits=list(options["heldout_splits"]),
            heldout_fraction=options["heldout_fraction"],
            eval_every=options["eval_every"],
            scheduler=scheduler,
            scheduler_config=_parse_options(options["overrides"]),
            batch_size=options["batch_size"],
            group_size=options["group_size"],
            engine=engine,
            engine_options={
                **_parse_options(options["engine_options"]),
                **({"model": model} if model else {}),
            },
            steps=options["steps"],
            seed=options["seed"],
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


UI_URL_DEFAULT = (
    "default: ENVSCHED_UI_URL, else the URL the last `envsched ui` on this data folder recorded, else "
    "http://127.0.0.1:3000"
)


@campaign.command("run")
@_campaign_options
@click.option(
    "--ui-url",
    default=None,
    help="Submit to this running `envsched ui` and wait (default: in this process, unless the instance's "
    "daemon is running, then to the running UI; " + UI_URL_DEFAULT + ").",
)
def campaign_run(ui_url, **options):
    """Start (or resume) a campaign and wait until it completes: through the running UI's daemon when
    there is one, else in this process through the same runs and sensors; prints a per-step summary."""
    config = _campaign_config(options)
    _load_with_source_options(options)
    _run_here_or_on_ui(config, ui_url)
    _print_next_steps()


def _run_here_or_on_ui(config, ui_url: str | None = None, force: bool = False) -> None:
    """Run the campaign through the running UI's daemon when there is one (or ``ui_url`` is given), else
    in this process: never both, or the two would advance the same campaign."""
    from pipelines.submit import daemon_running, running_ui_url
    from warehouse.store import Warehouse

    paths = _paths()
    if not (ui_url or daemon_running()):
        _run_campaign(config, force=force)
        return
    _submit_and_wait(config, ui_url or running_ui_url(paths), resume_failed=force)
    click.echo(_summary_table(Warehouse(paths.warehouse), config.campaign_id))


def _load_with_source_options(options: dict) -> None:
    """``--source-option``: (re)load those sources with them (and embed / rebuild what changed) first."""
    source_options = _parse_source_options(options["source_options"], options["sources"])
    if source_options:
        from pipelines.driver import prepare_catalog

        prepare_catalog(_driver_context(), list(options["sources"]), source_options)


def _submit_and_wait(config, ui_url: str, resume_failed: bool = False) -> None:
    """Submit `start_campaign` to the UI, wait until its run has registered (or refused) the campaign,
    then follow the campaign to its end."""
    from pipelines.submit import RunFailed, submit_start, wait_for_run
    from warehouse.store import Warehouse

    campaign_id = config.campaign_id
    run_id = submit_start(config, ui_url, resume_failed)
    click.echo(f"campaign {campaign_id}: start_campaign run {run_id} submitted to {ui_url}; waiting")
    try:
        wait_for_run(run_id, ui_url)
    except RunFailed as exc:
        click.echo(f"campaign {campaign_id} not started: {exc}", err=True)
        raise SystemExit(1) from None
    paths = _paths()
    store = Warehouse(paths.warehouse)
    if not store.path.exists() or store.campaign_overview(campaign_id).empty:
        click.echo(
            f"campaign {campaign_id} started, but the UI at {ui_url} keeps it in another data folder than this "
            f"one ({paths.home}): follow it in the UI, or set ENVSCHED_HOME to the UI's folder",
            err=True,
        )
        raise SystemExit(1)
    _follow_on_ui(store, campaign_id)


def _follow_on_ui(store, campaign_id: str) -> None:
    """Print the campaign's status and step as the daemon advances it; exit 1 when it fails, when the
    daemon stops retrying a step, or when no daemon runs any more (the UI was stopped)."""
    import time

    from pipelines.driver import failed_earlier

    shown = None
    for tick in itertools.count():
        row = store.campaign_overview(campaign_id).iloc[0]
        line = f"  {row['status']}: step {row['step']}/{row['steps']}"
        if line != shown:
            click.echo(line)
            shown = line
        if row["status"] == "failed":
            why = row["status_reason"]
            click.echo(
                failed_earlier(campaign_id, why) if tick == 0 else f"campaign {campaign_id} failed: {why}",
                err=True,
            )
            raise SystemExit(1)
        if row["status"] == "completed":
            return
        stuck = _why_stuck(store, campaign_id, line) if tick % 5 == 4 else None  # every 10 s
        if stuck:
            click.echo(stuck, err=True)
            raise SystemExit(1)
        time.sleep(2)


def _why_stuck(store, campaign_id: str, where: str) -> str | None:
    """Why nothing advances the campaign any more: the daemon stopped (the UI was closed), or it gave up
    retrying a step (it retries a failed step a few times, then waits for you); None while it runs."""
    from pipelines.submit import daemon_running

    if not daemon_running():
        return (
            f"campaign {campaign_id} ({where.strip()}): no Dagster daemon runs on this data folder any more "
            f"(the UI stopped?); start `make ui` again and it carries on, or continue it here with "
            f"`envsched campaign resume {campaign_id}`"
        )
    return _stalled(store).get(campaign_id)


def _stalled(store) -> dict[str, str]:
    """By campaign, why the daemon no longer advances it: a step whose runs failed more often than the
    campaign sensor retries them (``campaign_sensor.attempt``)."""
    import dagster as dg

    from pipelines.campaign_sensor import campaign_requests

    with store.session(read_only=True):
        return campaign_requests(store, _paths().landing, dg.DagsterInstance.get())[1]


@campaign.command("start")
@_campaign_options
@click.option("--ui-url", default=None, help=f"The running `envsched ui` ({UI_URL_DEFAULT}).")
def campaign_start(ui_url, **options):
    """Submit a `start_campaign` run to the running UI and return at once; its daemon runs the campaign
    to the end (follow it with `envsched campaign status ID` or in the UI)."""
    from pipelines.submit import daemon_running, running_ui_url, submit_start

    config = _campaign_config(options)
    _load_with_source_options(options)
    paths = _paths()
    ui_url = ui_url or running_ui_url(paths)
    run_id = submit_start(config, ui_url)
    click.echo(f"campaign {config.campaign_id}: start_campaign run {run_id} submitted to {ui_url}")
    click.echo(f"follow it: envsched campaign status {config.campaign_id}   or   {ui_url}/runs/{run_id}")
    if not daemon_running():  # e.g. the UI was started from another folder: `var` is relative to it
        click.echo(
            f"warning: no Dagster daemon runs on this data folder ({paths.home}): the UI at {ui_url} serves "
            "another one (set ENVSCHED_HOME to the UI's), or runs without its daemon and the run waits queued",
            err=True,
        )


@campaign.command("status")
@click.argument("campaign_id", required=False)
def campaign_status_command(campaign_id):
    """Every campaign's status and step x/N; with an ID, also its per-step metrics."""
    import pandas as pd

    from warehouse.store import Warehouse

    store = Warehouse(_paths().warehouse)
    if not store.path.exists():
        raise click.UsageError(f"no warehouse at {store.path}; start a campaign first")
    overview = store.campaign_overview(campaign_id)
    if overview.empty:
        raise click.UsageError(
            f"unknown campaign '{campaign_id}'; `envsched campaign status` lists them"
            if campaign_id
            else "no campaigns yet; start one with `envsched campaign start --steps N` (UI running)"
        )
    overview["progress"] = [f"{s}/{n}" for s, n in zip(overview["step"], overview["steps"], strict=True)]
    shown = overview[
        ["campaign_id", "scheduler", "status", "progress", "template", "status_reason", "updated_at"]
    ]
    with pd.option_context("display.max_colwidth", 80, "display.width", 200):
        click.echo(shown.fillna("").to_string(index=False))
    for waiting, why in _stalled(store).items():
        if waiting in set(overview["campaign_id"]):
            click.echo(f"waiting: {why}")
    if campaign_id:
        click.echo(_summary_table(store, campaign_id))


@campaign.command("resume")
@click.argument("campaign_id")
@click.option(
    "--force",
    is_flag=True,
    help="Resume a campaign that failed (after removing the stray or bad landing file that stopped it).",
)
@click.option(
    "--ui-url",
    default=None,
    help="Resume it through this running `envsched ui` and wait (default: as `campaign run` decides).",
)
def campaign_resume(campaign_id: str, force: bool, ui_url: str | None) -> None:
    """Resume a campaign from where it stopped, with its stored config: through the running UI's daemon
    when there is one (never beside it: both would advance the campaign), else in this process."""
    from pipelines.campaign import CampaignConfig
    from warehouse.store import Warehouse

    config = CampaignConfig.from_dict(Warehouse(_paths().warehouse).campaign(campaign_id)["config"])
    _run_here_or_on_ui(config, ui_url, force)


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
    _paths().ui_url.write_text(f"http://127.0.0.1:{port}")  # where later commands submit campaigns
    # A process started in the background inherits SIGINT as ignored; reset both signals so
    # `dagster dev` (and its children) can be stopped normally.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    dagster = os.path.join(os.path.dirname(sys.executable), "dagster")
    os.execv(dagster, [dagster, "dev", "-m", "pipelines.definitions", "-h", "127.0.0.1", "-p", str(port)])


if __name__ == "__main__":
    main()
