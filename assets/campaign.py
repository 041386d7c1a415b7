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
from assets.observability import batch_preview, progress_text, step_metrics_metadata
from envsched_core import TaskStats, batch_metrics
from pipelines import scheduler_cache
from pipelines.batch_contract import check_batch
from pipelines.campaign import dump_state
from pipelines.campaign_status import (
    PARTITIONS,
    campaign_status,
    complete_campaign,
    end_mlflow_run,
    fail_campaign,
    load_campaign,
    tag_run,
)
from pipelines.mlflow_resource import MLflowResource
from pipelines.pool_slot import pool_slot
from pipelines.refill import cross_edge_update, observed_scheduler, prepare_scheduler
from pipelines.resources import PathsResource, WarehouseResource
from warehouse.ingest import IngestRefused, Quarantined, ingest_file

campaigns = dg.DynamicPartitionsDefinition(name=PARTITIONS)


class RolloutFileConfig(dg.Config):
    """The landing file to ingest (the sensor fills this in): absolute, or relative to the data folder."""

    path: str


@dg.asset(group_name="campaign", partitions_def=campaigns, deps=["training_step"], pool=WAREHOUSE_POOL)
def rollouts(
    context: dg.AssetExecutionContext,
    config: RolloutFileConfig,
    warehouse: WarehouseResource,
    paths: PathsResource,
    mlflow: MLflowResource,
):
    """One step's rollout results, validated against the landing contract and loaded exactly once."""
    with warehouse.session() as store:  # one connection for the asset (it holds the pool slot)
        return _ingest(context, config, store, paths, mlflow)


def _ingest(context, config: RolloutFileConfig, store, paths: PathsResource, mlflow: MLflowResource):
    cfg = load_campaign(context, store)
    try:
        # The ledger decides whether a refused or quarantined file stops the campaign (a stray file
        # does not); any other error fails it here.
        with campaign_status(store, cfg.campaign_id, "rollouts", mlflow, (Quarantined, IngestRefused)):
            done = ingest_file(store, paths.paths().landing, config.path, context.partition_key)
    except Quarantined as exc:
        if exc.campaign_failed:
            end_mlflow_run(mlflow, cfg.campaign_id, "FAILED")
        raise dg.Failure(description=str(exc)) from None
    except IngestRefused as exc:
        raise dg.Failure(description=str(exc)) from None
    tag_run(context, cfg.campaign_id, done.step)
    return dg.MaterializeResult(
        metadata={
            "path": done.relpath,
            "step": done.step,
            "progress": progress_text(done.step, cfg.steps),
            "inserted": done.inserted,
            "duplicate": done.duplicate,
        }
    )


@dg.asset(group_name="campaign", partitions_def=campaigns, deps=[rollouts], pool=WAREHOUSE_POOL)
def task_stats(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    """Discounted per-task visit weight, mean variance and mean reward over the campaign so far."""
    with warehouse.session() as store:
        cfg = load_campaign(context, store)
        step = store.progress(cfg.campaign_id)["loaded"]
        with campaign_status(store, cfg.campaign_id, f"task_stats of step {step}"):
            rows, folded = _refresh_task_stats(store, cfg, step)
    return dg.MaterializeResult(metadata={"step": step, "tasks_observed": rows, "folded": folded})


def _refresh_task_stats(store, cfg, step: int) -> tuple[int, int | str]:
    """Fold the new step into the stored statistics (the whole history only when a step is missing);
    returns (rows, tasks folded)."""
    catalog = scheduler_cache.catalog(store, cfg)
    pool = set(catalog.task_ids)  # tasks retired by a refresh since are dropped, added ones start unseen
    stored = store.task_stats(cfg.campaign_id)
    stored_step = int(stored["step"].max()) if len(stored) else 0
    if stored_step == step and step > 0:
        return len(stored), 0  # a re-run of the same step: already folded
    if stored_step == step - 1 and stored["task_id"].isin(pool).all():
        stats = TaskStats.from_frame(stored, catalog, gamma=cfg.gamma)
        new = store.rollouts(cfg.campaign_id, step)
        touched = stats.fold(new.loc[new["task_id"].isin(pool), ["task_id", "step", "reward"]], catalog)
        return store.fold_task_stats(cfg.campaign_id, step, stats.to_frame(catalog, touched)), len(touched)
    history = store.rollouts(cfg.campaign_id)
    history = history.loc[history["task_id"].isin(pool), ["task_id", "step", "reward"]]
    stats = TaskStats.from_rollouts(history, catalog, gamma=cfg.gamma)
    return store.replace_task_stats(cfg.campaign_id, step, stats.to_frame(catalog)), "full history"


# Not in the `warehouse` pool as a whole: restoring the scheduler (a cold build; after a catalogue refresh, a
# replay of the campaign's history) runs first, holding no slot and no connection; the rest holds a slot.
@dg.asset(
    group_name="campaign", partitions_def=campaigns, deps=[rollouts, "within_env_edges", "cross_env_edges"]
)
def variance_predictions(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, mlflow: MLflowResource
):
    """Fold the latest step's rollouts into the scheduler; predict every task's reward variance."""
    prepare_scheduler(context, warehouse.warehouse(), "loaded")
    with pool_slot(context, WAREHOUSE_POOL, "variance_predictions"), warehouse.session() as store:
        cfg = load_campaign(context, store)
        step = store.progress(cfg.campaign_id)["loaded"]
        if step == 0:
            return dg.MaterializeResult(metadata={"step": 0, "note": "no rollouts yet"})
        with campaign_status(store, cfg.campaign_id, f"variance_predictions of step {step}", mlflow):
            return _observe(context, store, mlflow, cfg, step)


def _observe(context, store, mlflow: MLflowResource, cfg, step: int) -> dg.MaterializeResult:
    campaign_id = cfg.campaign_id
    step_rollouts = store.rollouts(campaign_id, step)
    scheduler, catalog, cross_before = observed_scheduler(store, cfg, step, step_rollouts)
    predictions = (
        scheduler.predict().rename(
            columns={"own": "own_estimate", "within": "within_estimate", "cross": "cross_estimate"}
        )
        if hasattr(scheduler, "predict")
        else None
    )
    cross, cross_removed = cross_edge_update(store, campaign_id, catalog, cross_before, scheduler)
    pool = set(catalog.task_ids)  # a task retired since its batch was scheduled was not rolled out
    batch = store.batch(campaign_id, step)
    trained = step_rollouts[step_rollouts["task_id"].isin(pool)]
    metrics = batch_metrics(batch[batch["task_id"].isin(pool)], trained, catalog)
    version = f"{campaign_id}-step{step}-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    rows = store.save_observation(
        campaign_id,
        step,
        dump_state(scheduler),
        predictions if predictions is not None else pd.DataFrame(),
        cross if cross is not None else pd.DataFrame(),
        version,
        metrics,
        cross_removed,
    )
    scheduler_cache.keep(store, cfg, scheduler, step, "observed")
    # The batch metrics go to the campaign's MLflow run too, under the same names as in step_metrics.
    tracker = mlflow.tracker()
    run = tracker.start_campaign(campaign_id, params=cfg.to_dict(), dagster_run_id=context.run.run_id)
    tracker.log_step(
        run.run_id, step, {k: v for k, v in metrics.items() if not math.isnan(v)}, context.run.run_id
    )
    return dg.MaterializeResult(
        metadata={
            "step": step,
            "progress": progress_text(step, cfg.steps),
            "predictions": rows,
            "mean_predicted_variance": float(predictions["predicted_variance"].mean()) if rows else math.nan,
            **{name: float(value) for name, value in metrics.items()},
            **step_metrics_metadata(store.step_metrics(campaign_id), campaign_id),
        }
    )


# Restores the scheduler before it takes the pool (see variance_predictions).
@dg.asset(
    group_name="campaign",
    partitions_def=campaigns,
    deps=[variance_predictions],
    check_specs=[
        dg.AssetCheckSpec(
            "check_batch_respects_quota",
            asset="scheduled_batch",
            blocking=True,
            description="B distinct tasks (a dynamic-sampling peer's first round may hold fewer); "
            "EnvSched batches keep the environment quota.",
        )
    ],
)
def scheduled_batch(context: dg.AssetExecutionContext, warehouse: WarehouseResource, mlflow: MLflowResource):
    """The next step's batch, chosen from the scheduler state after the last observed step."""
    prepare_scheduler(context, warehouse.warehouse(), "observed")
    with pool_slot(context, WAREHOUSE_POOL, "scheduled_batch"), warehouse.session() as store:
        yield from _schedule(context, store, mlflow)


def _schedule(context: dg.AssetExecutionContext, store, mlflow: MLflowResource):
    cfg = load_campaign(context, store)
    campaign_id = cfg.campaign_id
    observed = store.progress(campaign_id)["observed"]
    step = observed + 1
    tag_run(context, campaign_id, min(step, cfg.steps))
    if step > cfg.steps:
        complete_campaign(store, campaign_id, mlflow)
        yield dg.MaterializeResult(
            metadata={
                "step": observed,
                "progress": progress_text(observed, cfg.steps),
                "campaign_status": "completed",
                "note": f"campaign completed its {cfg.steps} steps",
            }
        )
        yield dg.AssetCheckResult(check_name="check_batch_respects_quota", passed=True)
        return
    with campaign_status(store, campaign_id, f"scheduled_batch of step {step}", mlflow):
        scheduler, catalog = scheduler_cache.restore(store, cfg, observed, "observed")
        batch = scheduler.select(step)
        problem, bad, quota = check_batch(batch, scheduler, min(cfg.batch_size, len(catalog)))
        if not problem:
            store.save_batch(campaign_id, step, batch, dump_state(scheduler))
            scheduler_cache.keep(store, cfg, scheduler, step, "selected")
        else:  # nothing trains on a batch that breaks the contract: the campaign stops, the batch unsaved
            reason = f"the {cfg.scheduler} batch breaks its contract ({problem}); nothing was saved"
            fail_campaign(store, campaign_id, f"scheduled_batch of step {step}: {reason}", mlflow)
    yield dg.MaterializeResult(
        metadata={
            "step": step,
            "progress": progress_text(step, cfg.steps),
            "tasks": len(batch),
            "environments": int(batch.loc[batch["role"] != "oversample", "env_id"].nunique()),
            "environment_quota": quota,
            "roles": batch["role"].value_counts().to_dict(),
            "batch_preview": batch_preview(batch),
        }
    )
    yield check_result(
        bad[["task_id", "env_id", "role"]],
        "quota or duplicate violations",
        check_name="check_batch_respects_quota",
        problem=problem,
    )
