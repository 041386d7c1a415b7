"""The campaign sensor: the daemon's step loop. Each tick looks at every created or running campaign
in the warehouse and requests the one run that moves it on:

| where the campaign stands                           | run requested                               |
|-----------------------------------------------------|---------------------------------------------|
| a source it names is not in the catalogue           | `refresh_catalog` with that source added    |
| tasks without embeddings, or no graph yet           | `build_graph`                               |
| no batch for the next step                          | `plan_step` (and, past the last step, the   |
|                                                     | run that marks the campaign completed)      |
| a batch waiting and no landing file for it          | `train_step`                                |
| a landing file waiting                              | nothing: the landing sensor ingests it      |
| rollouts loaded but not observed (a crash)          | `ingest_rollouts` of the loaded file again  |

Run keys name the campaign and step, so a request is launched once however often the tick repeats.
"""

from __future__ import annotations

import dagster as dg

from campaign.config import CampaignConfig
from pipelines.campaign_status import CAMPAIGN_TAG, STEP_TAG
from pipelines.jobs import (
    build_graph,
    catalog_run_config,
    ingest_rollouts,
    plan_step,
    refresh_catalog,
    train_step,
)
from pipelines.resources import PathsResource, WarehouseResource
from warehouse.landing import step_path
from warehouse.store import Warehouse


def _tags(campaign_id: str, step: int) -> dict[str, str]:
    return {CAMPAIGN_TAG: campaign_id, STEP_TAG: str(step)}


def catalog_request(store: Warehouse, campaign_id: str, sources: list[str]) -> dg.RunRequest | None:
    """A run that loads missing sources or builds missing embeddings / graphs; None when ready."""
    have, stale, edges = store.catalog_readiness()
    missing = sorted(set(sources) - have)
    if missing:
        config = catalog_run_config(sorted(have | set(missing)))
        return dg.RunRequest(
            job_name=refresh_catalog.name,
            run_key=f"{campaign_id}:catalog:{','.join(missing)}",
            run_config=config,
            tags=_tags(campaign_id, 0),
        )
    if stale or not edges:
        return dg.RunRequest(
            job_name=build_graph.name, run_key=f"{campaign_id}:graph:{stale}", tags=_tags(campaign_id, 0)
        )
    return None


def next_request(store: Warehouse, landing, row) -> dg.RunRequest | None:
    """The run that advances one campaign (a row of ``Warehouse.campaigns_in_progress``)."""
    config = CampaignConfig.from_dict(row["config"])
    campaign_id = config.campaign_id
    scheduled, loaded, observed = int(row["scheduled"]), int(row["loaded"]), int(row["observed"])
    if scheduled <= observed:  # the next batch (or, past the last step, the completion) is due
        step = observed + 1
        return dg.RunRequest(
            job_name=plan_step.name,
            partition_key=campaign_id,
            run_key=f"{campaign_id}:plan:{step}",
            tags=_tags(campaign_id, min(step, config.steps)),
        )
    if loaded < scheduled:
        if step_path(landing, campaign_id, scheduled).exists():
            return None  # written: the landing sensor launches its ingestion
        return dg.RunRequest(
            job_name=train_step.name,
            partition_key=campaign_id,
            run_key=f"{campaign_id}:train:{scheduled}",
            tags=_tags(campaign_id, scheduled),
        )
    path, _ = store.loaded_step_file(campaign_id, loaded)
    return dg.RunRequest(
        job_name=ingest_rollouts.name,
        partition_key=campaign_id,
        run_key=f"{campaign_id}:observe:{loaded}",
        run_config={"ops": {"rollouts": {"config": {"path": path}}}},
        tags=_tags(campaign_id, loaded),
    )


def campaign_requests(store: Warehouse, landing) -> list[dg.RunRequest]:
    """One request per campaign that can move on now (catalogue work first: it blocks every campaign)."""
    active = store.campaigns_in_progress()
    if active.empty:
        return []
    for _, row in active.iterrows():
        request = catalog_request(store, row["campaign_id"], list(row["config"].get("sources", [])))
        if request is not None:
            return [request]
    return [r for _, row in active.iterrows() if (r := next_request(store, landing, row)) is not None]


@dg.sensor(
    jobs=[refresh_catalog, build_graph, plan_step, train_step, ingest_rollouts],
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def campaign_sensor(context: dg.SensorEvaluationContext, paths: PathsResource, warehouse: WarehouseResource):
    """Advance every created or running campaign by one run (see the module docstring)."""
    with warehouse.session(read_only=True) as store:  # one connection for the tick's reads
        requests = campaign_requests(store, paths.paths().landing)
    if not requests:
        return dg.SkipReason("no campaign is waiting for a run")
    return requests
