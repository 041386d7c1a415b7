"""Training stage: roll out the scheduled batch with the campaign's engine, update the policy,
checkpoint, and hand the results to the pipeline as a landing file."""

import dagster as dg

from assets.campaign import campaign_config, campaigns
from assets.catalog import WAREHOUSE_POOL
from pipelines.campaign import campaign_heldout_tasks, campaign_tasks
from pipelines.resources import PathsResource, WarehouseResource
from training.checkpoints import checkpoint_dir, save_checkpoint
from training.engines import make_engine
from warehouse.landing import step_path, write_step_file


@dg.asset(group_name="training", partitions_def=campaigns, pool=WAREHOUSE_POOL)
def training_step(context: dg.AssetExecutionContext, warehouse: WarehouseResource, paths: PathsResource):
    """One training step on the latest scheduled batch (it reads `batches`; the loop back to
    `scheduled_batch` closes through the landing sensor, so the asset graph stays acyclic)."""
    store, home = warehouse.warehouse(), paths.paths()
    campaign_id = context.partition_key
    cfg = campaign_config(store, campaign_id)
    progress = store.progress(campaign_id)
    step = progress["scheduled"]
    if step == 0 or progress["loaded"] >= step:
        raise dg.Failure(
            description=f"campaign '{campaign_id}': no scheduled batch waiting for rollouts "
            f"(scheduled {step}, loaded {progress['loaded']})"
        )
    landing = step_path(home.landing, campaign_id, step)
    if landing.exists():
        return dg.MaterializeResult(
            metadata={"step": step, "landing_file": str(landing), "note": "already written"}
        )
    engine = make_engine(
        cfg.engine,
        campaign_tasks(store, cfg),
        cfg.group_size,
        cfg.seed,
        cfg.engine_options,
        heldout=campaign_heldout_tasks(store, cfg),
        eval_every=cfg.eval_every,
    )
    try:
        if step > 1:
            previous = checkpoint_dir(home.checkpoints, campaign_id, step - 1)
            if not previous.exists():
                raise dg.Failure(
                    description=f"campaign '{campaign_id}': checkpoint of step {step - 1} missing: {previous}"
                )
            engine.load(previous)
        rows, metrics = engine.run_step(store.batch(campaign_id, step), step)
        checkpoint = save_checkpoint(engine, home.checkpoints, campaign_id, step)
    finally:
        engine.close()
    # MLflow hook: `metrics` (rollout/..., train/..., eval/... incl. eval/heldout_score on evaluation
    # steps) is what goes to MLflow here, next to the step_metrics rows written below.
    store.record_checkpoint(campaign_id, step, checkpoint.as_uri(), metrics)
    write_step_file(home.landing, rows.assign(campaign_id=campaign_id), campaign_id, step)
    return dg.MaterializeResult(
        metadata={"step": step, "landing_file": str(landing), "checkpoint": checkpoint.as_uri(), **metrics}
    )
