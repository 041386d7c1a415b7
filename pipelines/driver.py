"""Headless campaign driver: what the Dagster daemon does for a campaign, in this process.

The campaign starts with a `start_campaign` run, then the two sensors the daemon would tick (the
campaign sensor and the landing sensor) are evaluated through Dagster's sensor API and each run they
request is executed, until the assets mark the campaign completed or failed. So the runs, their
tags and the statuses are the same as under `dagster dev`, and every run is on the persistent
instance (the UI shows it later). Where the campaign stands is read from the warehouse, so running the
same command again after a crash resumes at the step where it stopped.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from campaign.config import CampaignConfig
from pipelines.campaign_status import CAMPAIGN_TAG, RUN_KEY_TAG, SENSOR_TAG, STEP_TAG
from pipelines.crash_safety import describe_waits, free_dead_runs
from pipelines.jobs import catalog_run_config
from pipelines.paths import Paths
from pipelines.start_campaign import run_config_for
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


def step_failure_lines(events) -> list[str]:
    """The cause of each failed step among ``events`` (DagsterEvents), one line each."""
    return [
        error_line(e.step_failure_data.error)
        for e in events
        if e.is_step_failure and e.step_failure_data.error
    ]


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
        failures = step_failure_lines(result.all_events)
        failed_checks = [e.check_name for e in result.get_asset_check_evaluations() if not e.passed]
        detail = "; ".join(failures) or (
            f"failed checks {failed_checks}" if failed_checks else "see the run in the UI"
        )
        raise CampaignFailed(f"{job_name} run {result.run_id} failed: {detail}")


def prepare_catalog(
    ctx: DriverContext, sources: list[str], source_options: dict[str, dict] | None = None
) -> None:
    """Load sources that are not in the warehouse yet (and those given ``source_options``: reloaded with
    them, an upsert by content hash), embed what changed, build the graphs if missing or stale."""
    have = set()
    if ctx.store.path.exists():
        have = set(ctx.store.query("SELECT DISTINCT source FROM tasks WHERE active")["source"])
    source_options = source_options or {}
    if set(sources) - have or source_options:
        _execute(
            ctx, "refresh_catalog", run_config=catalog_run_config(sorted(have | set(sources)), source_options)
        )
    stale = ctx.store.embedding_status()
    stale = stale[stale.embedded_hash != stale.text_hash]
    edges = ctx.store.scalar("SELECT count(*) FROM edges_within")
    if len(stale) or not edges or source_options:
        _execute(ctx, "build_graph")  # keeps graphs whose catalogue and embeddings did not change


def ingest_pending(
    ctx: DriverContext, cursor: str | None, campaign_id: str | None = None
) -> tuple[int, str | None]:
    """Evaluate the landing sensor once and execute each run it requests (only ``campaign_id``'s,
    when given: another campaign's files never fail this one); returns (runs, new cursor).

    A failed ingest raises CampaignFailed only if it failed the campaign; a stray file quarantined
    without stopping the campaign (a conflicting re-delivery, a future step) is reported and skipped."""
    requests, cursor = _evaluate(ctx, "landing_sensor", cursor)
    requests = [r for r in requests if campaign_id is None or r.partition_key == campaign_id]
    for request in requests:
        try:
            _execute(
                ctx,
                "ingest_rollouts",
                request.partition_key,
                request.run_config,
                sensor_run_tags(request, "landing_sensor"),
            )
        except CampaignFailed as exc:
            status = ctx.store.campaign(request.partition_key)
            if status["status"] == "failed":
                raise CampaignFailed(status["status_reason"] or str(exc)) from None
            progress = ctx.store.progress(request.partition_key)
            waiting = progress["loaded"] < progress["scheduled"]  # a completed campaign waits for no step
            if waiting and request.tags.get(STEP_TAG) == str(progress["scheduled"]):
                raise  # the step the campaign waits for failed (a crash, a lock): not a stray file to skip
            ctx.notify(f"skipped: {exc}")
    return len(requests), cursor


def sensor_run_tags(request: dg.RunRequest, sensor_name: str) -> dict[str, str]:
    """The tags the daemon gives a run it launched for ``request``: the request's, its run key, its sensor
    (the campaign sensor finds a step's earlier attempts by them)."""
    return {**request.tags, RUN_KEY_TAG: request.run_key, SENSOR_TAG: sensor_name}


def evaluate_sensor(ctx: DriverContext, sensor_name: str, cursor: str | None = None) -> Any:
    """One tick of sensor ``sensor_name`` over the context's instance and resources, as the daemon would
    evaluate it (what the sensor returns: a ``SensorResult``, or run requests)."""
    sensor = ctx.defs.resolve_sensor_def(sensor_name)
    context = dg.build_sensor_context(
        instance=ctx.instance, cursor=cursor, definitions=ctx.defs, resources=dict(ctx.defs.resources or {})
    )
    return sensor(context)  # Dagster's documented way to evaluate a sensor outside the daemon


def _evaluate(ctx: DriverContext, sensor_name: str, cursor: str | None = None) -> tuple[list, str | None]:
    result = evaluate_sensor(ctx, sensor_name, cursor)
    if isinstance(result, dg.SensorResult):
        return list(result.run_requests or []), result.cursor
    return [r for r in (result or []) if isinstance(r, dg.RunRequest)], cursor


def advance_once(ctx: DriverContext, campaign_id: str) -> int:
    """Evaluate the campaign sensor once and execute the request for ``campaign_id``; returns runs."""
    requests, _ = _evaluate(ctx, "campaign_sensor")
    mine = [r for r in requests if r.tags.get(CAMPAIGN_TAG) == campaign_id]
    for request in mine:
        _execute(
            ctx,
            request.job_name,
            request.partition_key,
            request.run_config,
            sensor_run_tags(request, "campaign_sensor"),
        )
    return len(mine)


def run_campaign(
    config: CampaignConfig,
    ctx: DriverContext,
    on_step: Callable[[int], None] | None = None,
    force: bool = False,
    source_options: dict[str, dict] | None = None,
) -> None:
    """Start (or resume) the campaign and advance it as the daemon would until it completes.
    ``force`` resumes a campaign that failed (once its cause, e.g. a stray landing file, is removed);
    ``source_options`` (re)load its sources with those constructor options first."""
    recover(ctx)
    if source_options:
        prepare_catalog(ctx, config.sources, source_options)
    campaign_id = config.campaign_id
    if ctx.store.path.exists() and not ctx.store.campaign_overview(campaign_id).empty:
        status = ctx.store.campaign(campaign_id)
        if status["status"] == "failed":
            if not force:
                raise CampaignFailed(failed_earlier(campaign_id, status["status_reason"]))
            ctx.notify(f"campaign {campaign_id}: resuming after failure ({status['status_reason']})")
    # register_campaign sets a failed campaign running when told to, as a relaunch from the UI does
    _execute(ctx, "start_campaign", run_config=run_config_for(config, resume_failed=force))
    follow_campaign(ctx, campaign_id, config.steps, on_step)


def failed_earlier(campaign_id: str, reason: str) -> str:
    return (
        f"campaign '{campaign_id}' failed earlier: {reason}; after fixing the cause (e.g. removing a stray "
        f"file), run `envsched campaign resume {campaign_id} --force`"
    )


def follow_campaign(
    ctx: DriverContext, campaign_id: str, steps: int, on_step: Callable[[int], None] | None = None
) -> None:
    """Advance a registered campaign as the daemon would until the assets mark it completed."""
    cursor, reported = None, ctx.store.progress(campaign_id)["observed"]
    while True:
        status = ctx.store.campaign(campaign_id)
        if status["status"] == "completed":
            return
        if status["status"] == "failed":
            raise CampaignFailed(status["status_reason"])
        try:
            runs, cursor = ingest_pending(ctx, cursor, campaign_id)
            runs += advance_once(ctx, campaign_id)
        except CampaignFailed:
            status = ctx.store.campaign(campaign_id)
            if status["status"] == "failed":  # the asset said why: report that, not the run's traceback
                raise CampaignFailed(status["status_reason"]) from None
            raise
        observed = ctx.store.progress(campaign_id)["observed"]
        if on_step:
            for step in range(reported + 1, min(observed, steps) + 1):
                on_step(step)
        reported = max(reported, observed)
        if runs == 0 and ctx.store.campaign(campaign_id)["status"] not in ("completed", "failed"):
            landing = Paths.from_env().landing
            raise CampaignFailed(f"campaign '{campaign_id}': no run to request (landing folder {landing})")
