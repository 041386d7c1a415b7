"""Training stage: roll out the scheduled batch with the campaign's engine, update the policy,
checkpoint, and hand the results to the pipeline as a landing file."""

import dagster as dg

from assets.campaign import campaigns
from assets.catalog import WAREHOUSE_POOL
from assets.observability import progress_text
from pipelines import scheduler_cache
from pipelines.campaign import campaign_heldout_tasks
from pipelines.campaign_status import campaign_status, load_campaign, tag_run
from pipelines.mlflow_resource import MLflowResource
from pipelines.pool_slot import pool_slot
from pipelines.refill import roll_out_and_train
from pipelines.resources import PathsResource, WarehouseResource
from pipelines.run_log import progress_to_run_log
from training.checkpoints import checkpoint_dir, save_checkpoint
from training.engines import make_engine
from warehouse.landing import step_path, write_step_file


# Not in the `warehouse` pool: the rollouts and the update run outside it; the writes take a slot.
@dg.asset(group_name="training", partitions_def=campaigns)
def training_step(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    paths: PathsResource,
    mlflow: MLflowResource,
):
    """One training step on the latest scheduled batch (it reads `batches`; the loop back to
    `scheduled_batch` closes through the landing sensor, so the asset graph stays acyclic)."""
    store, home = warehouse.warehouse(), paths.paths()
    cfg = load_campaign(context, store)
    campaign_id = cfg.campaign_id
    progress = store.progress(campaign_id)
    step = progress["scheduled"]
    if step == 0 or progress["loaded"] >= step:
        raise dg.Failure(
            description=f"campaign '{campaign_id}': no scheduled batch waiting for rollouts "
            f"(scheduled {step}, loaded {progress['loaded']})"
        )
    tag_run(context, campaign_id, step)
    landing = step_path(home.landing, campaign_id, step)
    if landing.exists() or landing.is_symlink():
        if not landing.is_file() or landing.is_symlink():  # a stray entry would block the step forever
            raise dg.Failure(
                description=f"{landing}: occupied by something that is not a landing file (a directory, "
                "FIFO or symlink); remove it and resume the campaign"
            )
        return dg.MaterializeResult(
            metadata={"step": step, "landing_file": str(landing), "note": "already written"}
        )
    with campaign_status(store, campaign_id, f"training_step of step {step}", mlflow):
        return _train(context, store, home, mlflow, cfg, step, landing)


def _previous_checkpoint(store, home, cfg, step: int):
    """The checkpoint the policy continues from: this campaign's previous step, or at step 1 of a
    continuing campaign the last checkpoint of the campaign it continues; None for a fresh start."""
    if step > 1:
        previous = checkpoint_dir(home.checkpoints, cfg.campaign_id, step - 1)
    elif cfg.continue_from:
        last = store.last_checkpoint(cfg.continue_from)
        if last is None:
            raise dg.Failure(description=f"continue_from '{cfg.continue_from}' has no checkpoint")
        previous = checkpoint_dir(home.checkpoints, cfg.continue_from, last[0])
    else:
        return None
    if not previous.exists():
        raise dg.Failure(description=f"campaign '{cfg.campaign_id}': checkpoint {previous} is missing")
    return previous


def _train(context, store, home, mlflow, cfg, step: int, landing) -> dg.MaterializeResult:
    campaign_id = cfg.campaign_id
    engine = make_engine(
        cfg.engine,
        scheduler_cache.tasks(store, cfg),
        cfg.group_size,
        cfg.seed,
        cfg.engine_options,
        heldout=campaign_heldout_tasks(store, cfg),
        eval_every=cfg.eval_every,
    )
    try:
        previous = _previous_checkpoint(store, home, cfg, step)
        if previous is not None:
            engine.load(previous)
        writing = lambda: pool_slot(context, WAREHOUSE_POOL, "training_step")  # noqa: E731
        with progress_to_run_log(context):  # DAPO / GRESO restore their scheduler for the refills
            batch, rows, metrics = roll_out_and_train(store, cfg, engine, step, writing)
        checkpoint = save_checkpoint(engine, home.checkpoints, campaign_id, step, keep=cfg.keep_checkpoints)
    finally:
        engine.close()
    # MLflow before the landing file: the file triggers ingestion, so a failed log fails the step first.
    # `metrics` holds rollout/..., train/... and, on evaluation steps, eval/heldout_score.
    links = mlflow.tracker().log_training_step(
        campaign_id,
        step,
        metrics,
        batch,
        checkpoint.as_uri(),
        params=cfg.to_dict(),
        dagster_run_id=context.run.run_id,
        batch_source=str(store.path),
    )
    with writing():
        store.record_checkpoint(campaign_id, step, checkpoint.as_uri(), metrics, links["mlflow_run_id"])
    write_step_file(home.landing, rows.assign(campaign_id=campaign_id), campaign_id, step)
    return dg.MaterializeResult(
        metadata={
            "step": step,
            "progress": progress_text(step, cfg.steps),
            "policy_from": str(previous) if previous is not None else "initial policy",
            "landing_file": str(landing),
            "checkpoint": checkpoint.as_uri(),
            "mlflow_run_id": links["mlflow_run_id"],
            "mlflow_run_url": dg.MetadataValue.url(links["mlflow_run_url"]),
            **metrics,
        }
    )
