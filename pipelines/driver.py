"""Headless campaign driver: runs a campaign step by step through Dagster's own execution.

Every piece runs as a Dagster run on the persistent instance (so it shows in the UI later), and
the step loop closes exactly as in production: the training run writes a landing file, the landing
sensor is evaluated through Dagster's sensor API, and each run request it returns is executed as an
`ingest_rollouts` run. Where the campaign stands is read from the warehouse, so running the same
command again after a crash resumes at the step where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import dagster as dg

from pipelines.campaign import CampaignConfig
from warehouse.store import Warehouse


class CampaignFailed(RuntimeError):
    """A run of the campaign failed, or a landing file was quarantined; the message says why."""


@dataclass
class DriverContext:
    defs: dg.Definitions
    instance: dg.DagsterInstance
    store: Warehouse


def _execute(
    ctx: DriverContext,
    job_name: str,
    partition_key: str | None = None,
    run_config: dict | None = None,
    tags: dict[str, str] | None = None,
) -> None:
    result = ctx.defs.resolve_job_def(job_name).execute_in_process(
        instance=ctx.instance,
        partition_key=partition_key,
        run_config={**(run_config or {}), "loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        tags=tags,
        raise_on_error=False,
    )
    if not result.success:
        failures = [
            e.step_failure_data.error.message.strip()
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


def ingest_pending(ctx: DriverContext, cursor: str | None) -> tuple[int, str | None]:
    """Evaluate the landing sensor once and execute each run it requests; returns (runs, new cursor)."""
    sensor = ctx.defs.resolve_sensor_def("landing_sensor")
    context = dg.build_sensor_context(
        instance=ctx.instance, cursor=cursor, definitions=ctx.defs, resources=dict(ctx.defs.resources or {})
    )
    result = sensor(context)  # Dagster's documented way to evaluate a sensor outside the daemon
    for request in result.run_requests or []:
        _execute(
            ctx,
            "ingest_rollouts",
            request.partition_key,
            request.run_config,
            {**request.tags, "dagster/run_key": request.run_key, "dagster/sensor_name": sensor.name},
        )
    return len(result.run_requests or []), result.cursor


def run_campaign(
    config: CampaignConfig, ctx: DriverContext, on_step: Callable[[int], None] | None = None
) -> None:
    """Create (or resume) the campaign and run it until its last step is ingested."""
    prepare_catalog(ctx, config.sources)
    ctx.store.create_campaign(config.campaign_id, config.to_dict(), config.scheduler)
    ctx.instance.add_dynamic_partitions("campaigns", [config.campaign_id])
    if ctx.store.campaign(config.campaign_id)["status"] == "failed":
        raise CampaignFailed(
            f"campaign '{config.campaign_id}' failed earlier: "
            f"{ctx.store.campaign(config.campaign_id)['status_reason']}"
        )
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
            runs, cursor = ingest_pending(ctx, cursor)
            if runs == 0:
                _execute(ctx, "train_step", config.campaign_id)
                runs, cursor = ingest_pending(ctx, cursor)
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
    return ctx.store.scalar(
        "SELECT path FROM ingested_files WHERE campaign_id = ? AND step = ? AND status = 'loaded'",
        [campaign_id, step],
    )
