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
|                                                     | (once that run failed: `ingest_rollouts`)   |
| rollouts loaded but not observed (a crash)          | `ingest_rollouts` of the loaded file again  |

Run keys name the campaign and step, so a request is launched once however often the tick repeats. The
daemon never launches a run key twice, so a run that failed without failing its campaign (its process was
killed, or the warehouse stayed locked longer than a writer waits) would stall the campaign for good: the
next request for that step carries `:retry<n>` after n such failures since the campaign last became running,
up to `MAX_RETRIES`; an ingestion the landing sensor launched is retried the same way. After that the tick
names the campaign and waits for `envsched campaign resume` or a `start_campaign` relaunch, which start the
count again.
"""

from __future__ import annotations

import json

import dagster as dg
import pandas as pd

from campaign.config import CampaignConfig
from pipelines.campaign_status import CAMPAIGN_TAG, RUN_KEY_TAG, STEP_TAG
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

MAX_RETRIES = 3
"""Attempts of one step's run a campaign retries after the first failed, per stint as `running`."""
FAILED = (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


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
        landed = step_path(landing, campaign_id, scheduled)
        if landed.exists():  # written: the landing sensor launched its ingestion; retried here if it failed
            return dg.RunRequest(
                job_name=ingest_rollouts.name,
                partition_key=campaign_id,
                run_key=f"{campaign_id}:ingest:{scheduled}",
                run_config={"ops": {"rollouts": {"config": {"path": str(landed)}}}},
                tags=_tags(campaign_id, scheduled),
            )
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


def attempt(
    instance: dg.DagsterInstance, request: dg.RunRequest, since: pd.Timestamp
) -> tuple[dg.RunRequest | None, str | None]:
    """``request`` as the next attempt of its step's run: its own key until a run of it failed, then the key
    with `:retry<n>` after n failed runs (a key the daemon has not launched yet). None with a note once more
    than MAX_RETRIES failed since ``since``, when the campaign last became running. An ingestion (run key
    `<campaign>:ingest:<step>`) is the landing sensor's to launch: requested here only after one failed."""
    campaign_id, step = request.tags[CAMPAIGN_TAG], request.tags[STEP_TAG]
    ingest = request.run_key.endswith(f":ingest:{step}")
    records = instance.get_run_records(
        dg.RunsFilter(job_name=request.job_name, tags={CAMPAIGN_TAG: campaign_id, STEP_TAG: step})
    )
    keys = (request.run_key, f"{request.run_key}:retry")
    runs = [r for r in records if ingest or r.dagster_run.tags.get(RUN_KEY_TAG, "").startswith(keys)]
    failed = [r for r in runs if r.dagster_run.status in FAILED]
    if ingest and (not failed or not all(r.dagster_run.is_finished for r in runs)):
        return None, None
    if not failed:
        return request, None
    started = (since.tz_localize("UTC") if since.tzinfo is None else since).timestamp()
    recent = [r for r in failed if (r.end_time or r.update_timestamp.timestamp()) > started]
    if len(recent) > MAX_RETRIES:
        latest = max(recent, key=lambda r: r.update_timestamp).dagster_run.run_id
        return None, (
            f"campaign '{campaign_id}': {request.job_name} of step {step} failed {len(recent)} times since the "
            f"campaign last started running (latest run {latest}); fix the cause, then `envsched campaign "
            f"resume {campaign_id} --force` or relaunch `start_campaign` with its id"
        )
    return request.with_replaced_attrs(run_key=f"{request.run_key}:retry{len(failed)}"), None


def campaign_requests(
    store: Warehouse, landing, instance: dg.DagsterInstance
) -> tuple[list[dg.RunRequest], dict[str, str]]:
    """One request per campaign that can move on now (catalogue work first: it blocks every campaign),
    and, by campaign, why one whose step failed more often than it is retried waits."""
    active = store.campaigns_in_progress()
    requests, notes = [], {}
    for _, row in active.iterrows():
        request = catalog_request(store, row["campaign_id"], list(row["config"].get("sources", [])))
        if request is not None:
            request, note = attempt(instance, request, row["updated_at"])
            return ([request] if request else []), ({row["campaign_id"]: note} if note else {})
    for _, row in active.iterrows():
        request = next_request(store, landing, row)
        if request is not None:
            request, note = attempt(instance, request, row["updated_at"])
            requests += [request] if request else []
            notes.update({row["campaign_id"]: note} if note else {})
    return requests, notes


@dg.sensor(
    jobs=[refresh_catalog, build_graph, plan_step, train_step, ingest_rollouts],
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def campaign_sensor(context: dg.SensorEvaluationContext, paths: PathsResource, warehouse: WarehouseResource):
    """Advance every created or running campaign by one run (see the module docstring)."""
    with warehouse.session(read_only=True) as store:  # one connection for the tick's reads
        requests, notes = campaign_requests(store, paths.paths().landing, context.instance)
    for note in set(notes.values()) - set(json.loads(context.cursor or "[]")):  # once each, not every tick
        context.log.warning(note)
    skip = None if requests else "; ".join(notes.values()) or "no campaign is waiting for a run"
    return dg.SensorResult(run_requests=requests, skip_reason=skip, cursor=json.dumps(sorted(notes.values())))
