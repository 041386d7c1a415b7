"""The code location: assets, checks, jobs, sensors, schedules and resources. Only assembles; logic
lives elsewhere.

Every asset that writes the warehouse runs in the concurrency pool `warehouse` (limit 1, set in the
instance's dagster.yaml), because DuckDB allows one writing process per file; `training_step`,
`variance_predictions` and `scheduled_batch`, whose long work (rollouts; a cold scheduler build or a
history replay) needs no lock, take a slot only after it (`pool_slot`). Every job runs its steps
in the run's own process: the pool serialises the writers anyway, and a subprocess per asset cost
seconds of start-up each. Every process that loads these definitions keeps the Dagster instance's
SQLite files open between operations (``pipelines/instance_sqlite.py``: no checkpoint per event).
"""

import dagster as dg

from assets.campaign import rollouts, scheduled_batch, task_stats, variance_predictions
from assets.catalog import catalog_checks, environment_catalog
from assets.graph import cross_env_edges, graph_checks, task_embeddings, within_env_edges
from assets.training import training_step
from pipelines import instance_sqlite
from pipelines.campaign_sensor import campaign_sensor
from pipelines.jobs import build_graph, ingest_rollouts, plan_step, refresh_catalog, train_step
from pipelines.mlflow_resource import MLflowResource
from pipelines.resources import PathsResource, WarehouseResource
from pipelines.schedules import template_schedules
from pipelines.sensors import landing_sensor
from pipelines.start_campaign import start_campaign

instance_sqlite.install()

defs = dg.Definitions(
    assets=[
        environment_catalog,
        task_embeddings,
        within_env_edges,
        cross_env_edges,
        training_step,
        rollouts,
        task_stats,
        variance_predictions,
        scheduled_batch,
    ],
    asset_checks=[*catalog_checks, *graph_checks],
    jobs=[start_campaign, refresh_catalog, build_graph, plan_step, train_step, ingest_rollouts],
    sensors=[landing_sensor, campaign_sensor],
    schedules=template_schedules(),
    resources={"warehouse": WarehouseResource(), "paths": PathsResource(), "mlflow": MLflowResource()},
    executor=dg.in_process_executor,
)
