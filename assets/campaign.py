"""Campaign stage: ingest a step's rollouts, refresh statistics and predictions, schedule the next batch.

Every asset here is partitioned by campaign (a dynamic partition); the step each one works on is
read from the warehouse, so re-running any of them (a re-fired sensor, a crash and retry) redoes the
same step from the same saved scheduler state and writes the same rows.
"""

import math
from datetime import UTC, datetime

import dagster as dg
import pandas as pd

from assets.catalog import WAREHOUSE_POOL, check_result
from envsched_core import TaskStats, batch_metrics
from pipelines.campaign import CampaignConfig, campaign_catalog, dump_state, restore_scheduler
from pipelines.mlflow_resource import MLflowResource
from pipelines.refill import observed_scheduler
from pipelines.resources import PathsResource, WarehouseResource
from warehouse.ingest import IngestRefused, Quarantined, ingest_file

campaigns = dg.DynamicPartitionsDefinition(name="campaigns")


def campaign_config(store, campaign_id: str) -> CampaignConfig:
    return CampaignConfig.from_dict(store.campaign(campaign_id)["config"])


class RolloutFileConfig(dg.Config):
    """The landing file to ingest (the sensor fills this in): absolute, or relative to the data folder."""

    path: str


@dg.asset(group_name="campaign", partitions_def=campaigns, deps=["training_step"], pool=WAREHOUSE_POOL)
def rollouts(
    context: dg.AssetExecutionContext,
    config: RolloutFileConfig,
    warehouse: WarehouseResource,
    paths: PathsResource,
):
    """One step's rollout results, validated against the landing contract and loaded exactly once."""
    try:
        done = ingest_file(warehouse.warehouse(), paths.paths().landing, config.path, context.partition_key)
    except (Quarantined, IngestRefused) as exc:
        raise dg.Failure(description=str(exc)) from None
    return dg.MaterializeResult(
        metadata={
            "path": done.relpath,
            "step": done.step,
            "inserted": done.inserted,
            "duplicate": done.duplicate,
        }
    )


@dg.asset(group_name="campaign", partitions_def=campaigns, deps=[rollouts], pool=WAREHOUSE_POOL)
def task_stats(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    """Discounted per-task visit weight, mean variance and mean reward over the campaign so far."""
    store = warehouse.warehouse()
    cfg = campaign_config(store, context.partition_key)
    step = store.progress(context.partition_key)["loaded"]
    catalog = campaign_catalog(store, cfg)
    history = store.rollouts(context.partition_key)
    stats = TaskStats.from_rollouts(
        history[["task_id", "step", "reward"]], catalog, gamma=cfg.scheduler_settings().gamma
    )
    rows = store.replace_task_stats(context.partition_key, step, stats.to_frame(catalog))
    return dg.MaterializeResult(metadata={"step": step, "tasks_observed": rows})


@dg.asset(
    group_name="campaign",
    partitions_def=campaigns,
    deps=[rollouts, "within_env_edges", "cross_env_edges"],
    pool=WAREHOUSE_POOL,
)
def variance_predictions(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, mlflow: MLflowResource
):
    """Fold the latest step's rollouts into the scheduler; predict every task's reward variance."""
    store = warehouse.warehouse()
    campaign_id = context.partition_key
    cfg = campaign_config(store, campaign_id)
    step = store.progress(campaign_id)["loaded"]
    if step == 0:
        return dg.MaterializeResult(metadata={"step": 0, "note": "no rollouts yet"})
    step_rollouts = store.rollouts(campaign_id, step)
    scheduler, catalog = observed_scheduler(store, cfg, step, step_rollouts)
    predictions = (
        scheduler.predict().rename(
            columns={"own": "own_estimate", "within": "within_estimate", "cross": "cross_estimate"}
        )
        if hasattr(scheduler, "predict")
        else None
    )
    cross = scheduler.cross_edges_frame() if hasattr(scheduler, "cross_edges_frame") else None
    metrics = batch_metrics(store.batch(campaign_id, step), step_rollouts, catalog)
    version = f"{campaign_id}-step{step}-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    rows = store.save_observation(
        campaign_id,
        step,
        dump_state(scheduler),
        predictions if predictions is not None else pd.DataFrame(),
        cross if cross is not None else pd.DataFrame(),
        version,
        metrics,
    )
    # The batch metrics go to the campaign's MLflow run too, under the same names as in step_metrics.
    tracker = mlflow.tracker()
    run = tracker.start_campaign(campaign_id, params=cfg.to_dict(), dagster_run_id=context.run.run_id)
    tracker.log_step(
        run.run_id, step, {k: v for k, v in metrics.items() if not math.isnan(v)}, context.run.run_id
    )
    return dg.MaterializeResult(
        metadata={
            "step": step,
            "predictions": rows,
            "mean_predicted_variance": float(predictions["predicted_variance"].mean()) if rows else math.nan,
            **{name: float(value) for name, value in metrics.items()},
        }
    )


def env_quota(batch_size: int) -> int:
    """DESIGN.md: at most max(2, ceil(0.05 B)) tasks of one environment per batch."""
    return max(2, math.ceil(0.05 * batch_size))


@dg.asset(
    group_name="campaign",
    partitions_def=campaigns,
    deps=[variance_predictions],
    pool=WAREHOUSE_POOL,
    check_specs=[
        dg.AssetCheckSpec(
            "check_batch_respects_quota",
            asset="scheduled_batch",
            blocking=True,
            description="B distinct tasks; EnvSched batches keep the environment quota.",
        )
    ],
)
def scheduled_batch(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    """The next step's batch, chosen from the scheduler state after the last observed step."""
    store = warehouse.warehouse()
    campaign_id = context.partition_key
    cfg = campaign_config(store, campaign_id)
    observed = store.progress(campaign_id)["observed"]
    step = observed + 1
    if step > cfg.steps:
        yield dg.MaterializeResult(
            metadata={"step": observed, "note": f"campaign has run its {cfg.steps} steps"}
        )
        yield dg.AssetCheckResult(check_name="check_batch_respects_quota", passed=True)
        return
    scheduler, _ = restore_scheduler(store, cfg, observed, "observed")
    batch = scheduler.select(step)
    store.save_batch(campaign_id, step, batch, dump_state(scheduler))
    primary = batch[batch["role"] != "oversample"]
    problems = primary.assign(
        copies=primary.groupby("task_id")["task_id"].transform("size"),
        env_count=primary.groupby("env_id")["task_id"].transform("size"),
    )
    quota = env_quota(cfg.batch_size) if cfg.scheduler == "envsched" else len(primary)
    bad = problems[(problems.copies > 1) | (problems.env_count > quota)]
    if len(primary) != cfg.batch_size:
        bad = problems  # a short or long batch: every row is suspect
    yield dg.MaterializeResult(
        metadata={
            "step": step,
            "tasks": len(batch),
            "environments": int(primary["env_id"].nunique()),
            "roles": batch["role"].value_counts().to_dict(),
        }
    )
    yield check_result(
        bad[["task_id", "env_id", "role"]],
        "quota or duplicate violations",
        check_name="check_batch_respects_quota",
    )
