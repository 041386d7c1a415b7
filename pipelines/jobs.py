"""Jobs users launch from the UI, the sensor, or the CLI."""

import dagster as dg


def catalog_run_config(sources, source_options: dict | None = None) -> dict:
    """The run config of `refresh_catalog` that loads ``sources`` (constructor options per source)."""
    config = {"sources": list(sources), "source_options": source_options or {}}
    return {"ops": {"environment_catalog": {"config": config}}}


refresh_catalog = dg.define_asset_job(
    "refresh_catalog",
    selection=dg.AssetSelection.groups("catalog"),
    description="Load every configured environment source into the catalogue tables.",
)

build_graph = dg.define_asset_job(
    "build_graph",
    selection=dg.AssetSelection.groups("graph"),
    description="Embed task text (only changed tasks) and rebuild the within- and cross-environment graphs.",
)

plan_step = dg.define_asset_job(
    "plan_step",
    selection=dg.AssetSelection.assets("scheduled_batch"),
    description="Schedule a campaign's next batch from its last observed state (starts a campaign).",
)

train_step = dg.define_asset_job(
    "train_step",
    selection=dg.AssetSelection.assets("training_step"),
    description="Roll out the latest scheduled batch and write its landing file.",
)

ingest_rollouts = dg.define_asset_job(
    "ingest_rollouts",
    selection=dg.AssetSelection.assets("rollouts", "task_stats", "variance_predictions", "scheduled_batch"),
    description="Validate and load one landing file, refresh statistics and predictions, schedule the next batch.",
)
