"""Headless campaign driver: runs a campaign step by step through Dagster's own execution.

Every piece runs as a Dagster run on the persistent instance (so it shows in the UI later), and
the step loop closes exactly as in production: the training run writes a landing file, the landing
sensor is evaluated through Dagster's sensor API, and each run request it returns is executed as an
`ingest_rollouts` run. Where the campaign stands is read from the warehouse, so running the same
command again after a crash resumes at the step where it stopped.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import dagster as dg

from pipelines.campaign import CampaignConfig
from pipelines.crash_safety import describe_waits, free_dead_runs
from warehouse.store import Warehouse

_WAIT_POLL_S = 2.0


class CampaignFailed(RuntimeError):
    """A run of the campaign failed, or a landing file was quarantined; the message says why."""


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class DriverContext:
    defs: dg.Definitions
    instance: dg.DagsterInstance
    store: Warehouse
    notify: Callable[[str], None] = field(default=_to_stderr)
    """Where the driver says what it is waiting for or recovered from (one line each)."""


def recover(ctx: DriverContext) -> None:
    """Runs a killed process left behind: mark them failed and free their pool slots (see crash_safety)."""
    for line in free_dead_runs(ctx.instance):
        ctx.notify(line)


def _watch_pool(ctx: DriverContext, done: threading.Event) -> None:
    """While a run executes: say once which run holds the slot it waits for, and free it if that
    run's process is gone (killed while we wait)."""
    said = set()
    while not done.wait(_WAIT_POLL_S):
        try:
            recover(ctx)
            for line in describe_waits(ctx.instance):
                if line not in said:
                    said.add(line)
                    ctx.notify(f"waiting: {line}")
        except Exception as exc:  # the watcher must never break the run it watches
            ctx.notify(f"pool watcher: {type(exc).__name__}: {exc}")


def error_line(error) -> str:
    """The innermost cause of a Dagster error in one line: ``WarehouseLockedError: ... PID 123``, not
    Dagster's "Error occurred while executing op" wrapper; a dg.Failure's description as it is."""
    while error.cause is not None:
        error = error.cause
    message = " ".join(error.message.strip().split())
    head, sep, rest = message.partition(": ")
    if sep and error.cls_name and head.split(".")[-1] == error.cls_name:
        message = rest if error.cls_name == "Failure" else f"{error.cls_name}: {rest}"
    return message


def _execute(
    ctx: DriverContext,
    job_name: str,
    partition_key: str | None = None,
    run_config: dict | None = None,
    tags: dict[str, str] | None = None,
) -> None:
    done = threading.Event()
    watcher = threading.Thread(target=_watch_pool, args=(ctx, done), daemon=True)
    watcher.start()
    try:
        result = ctx.defs.resolve_job_def(job_name).execute_in_process(
            instance=ctx.instance,
            partition_key=partition_key,
            run_config={**(run_config or {}), "loggers": {"console": {"config": {"log_level": "WARNING"}}}},
            tags=tags,
            raise_on_error=False,
        )
    finally:
        done.set()
        watcher.join()
    if not result.success:
        failures = [
            error_line(e.step_failure_data.error)
            for e in result.all_events
            if e.is_step_failure and e.step_failure_data.error
        ]
        failed_checks = [e.check_name for e in result.get_asset_check_evaluations() if not e.passed]
        detail = "; ".join(failures) or (
            f"failed checks {failed_checks}" if failed_checks else "see the run in the UI"
        )
        raise CampaignFailed(f"{job_name} run {result.run_id} failed: {detail}")


def prepare_catalog(ctx: DriverContext, sources: list[str]) -> None:
    """Load sources that are not in the warehouse yet, embed what changed, build the graphs if missing."""
    have = set()
    if ctx.store.path.exists():
        have = set(ctx.store.query("SELECT DISTINCT source FROM tasks WHERE active")["source"])
    if set(sources) - have:
        _execute(
            ctx,
            "refresh_catalog",
            run_config={"ops": {"environment_catalog": {"config": {"sources": sorted(have | set(sources))}}}},
        )
    stale = ctx.store.embedding_status()
    stale = stale[stale.embedded_hash != stale.text_hash]
    edges = ctx.store.scalar("SELECT count(*) FROM edges_within")
    if len(stale) or not edges:
        _execute(ctx, "build_graph")


def ingest_pending(
    ctx: DriverContext, cursor: str | None, campaign_id: str | None = None
) -> tuple[int, str | None]:
    """Evaluate the landing sensor once and execute each run it requests (only ``campaign_id``'s,
    when given: another campaign's files never fail this one); returns (runs, new cursor).

    A failed ingest raises CampaignFailed only if it failed the campaign; a stray file quarantined
    without stopping the campaign (a conflicting re-delivery, a future step) is reported and skipped."""
    sensor = ctx.defs.resolve_sensor_def("landing_sensor")
    context = dg.build_sensor_context(
        instance=ctx.instance, cursor=cursor, definitions=ctx.defs, resources=dict(ctx.defs.resources or {})
    )
    result = sensor(context)  # Dagster's documented way to evaluate a sensor outside the daemon
    requests = [r for r in result.run_requests or [] if campaign_id is None or r.partition_key == campaign_id]
    for request in requests:
        try:
            _execute(
                ctx,
                "ingest_rollouts",
                request.partition_key,
                request.run_config,
                {**request.tags, "dagster/run_key": request.run_key, "dagster/sensor_name": sensor.name},
            )
        except CampaignFailed as exc:
            status = ctx.store.campaign(request.partition_key)
            if status["status"] == "failed":
                raise CampaignFailed(status["status_reason"] or str(exc)) from None
            ctx.notify(f"skipped: {exc}")
    return len(requests), result.cursor


def run_campaign(
    config: CampaignConfig,
    ctx: DriverContext,
    on_step: Callable[[int], None] | None = None,
    force: bool = False,
) -> None:
    """Create (or resume) the campaign and run it until its last step is ingested. ``force`` resumes
    a campaign that failed (once its cause, e.g. a stray landing file, is removed)."""
    recover(ctx)
    prepare_catalog(ctx, config.sources)
    ctx.store.create_campaign(config.campaign_id, config.to_dict(), config.scheduler)
    ctx.instance.add_dynamic_partitions("campaigns", [config.campaign_id])
    status = ctx.store.campaign(config.campaign_id)
    if status["status"] == "failed":
        if not force:
            raise CampaignFailed(
                f"campaign '{config.campaign_id}' failed earlier: {status['status_reason']}; after fixing the "
                f"cause (e.g. removing a stray file), run `envsched campaign resume {config.campaign_id} --force`"
            )
        ctx.notify(f"campaign {config.campaign_id}: resuming after failure ({status['status_reason']})")
    ctx.store.set_campaign_status(config.campaign_id, "running")
    cursor = None  # the sensor also skips files the warehouse has already loaded
    while True:
        progress = ctx.store.progress(config.campaign_id)
        if progress["observed"] >= config.steps:
            break
        if progress["scheduled"] <= progress["observed"]:
            _execute(ctx, "plan_step", config.campaign_id)  # first batch, or a crash before scheduling
            continue
        if progress["loaded"] < progress["scheduled"]:
            runs, cursor = ingest_pending(ctx, cursor, config.campaign_id)
            if ctx.store.progress(config.campaign_id)["loaded"] < progress["scheduled"]:
                _execute(ctx, "train_step", config.campaign_id)
                runs, cursor = ingest_pending(ctx, cursor, config.campaign_id)
            if runs == 0:
                raise CampaignFailed(
                    f"step {progress['scheduled']}: the landing sensor found no file to ingest"
                )
            status = ctx.store.campaign(config.campaign_id)
            if status["status"] == "failed":
                raise CampaignFailed(status["status_reason"])
            if on_step:
                on_step(progress["scheduled"])
            continue
        # rollouts loaded but not yet observed (a crash inside ingestion): redo the refresh
        _execute(
            ctx,
            "ingest_rollouts",
            config.campaign_id,
            run_config={
                "ops": {
                    "rollouts": {
                        "config": {"path": _loaded_file(ctx, config.campaign_id, progress["loaded"])}
                    }
                }
            },
        )
    ctx.store.set_campaign_status(config.campaign_id, "completed")


def _loaded_file(ctx: DriverContext, campaign_id: str, step: int) -> str:
    """The loaded file of ``step``, relative to the data folder (it need not exist any more)."""
    return ctx.store.loaded_step_file(campaign_id, step)[0]
