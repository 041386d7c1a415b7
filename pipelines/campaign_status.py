"""Where a campaign stands, as the assets see it: its config (or a Failure saying how to create it),
and its status (running while an asset works on it, failed with the reason, completed at the end),
with the campaign's MLflow run ended to match."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from campaign.config import CampaignConfig
from pipelines.mlflow_resource import MLflowResource
from warehouse.store import Warehouse

PARTITIONS = "campaigns"
CAMPAIGN_TAG = "envsched/campaign"
STEP_TAG = "envsched/step"
RUN_KEY_TAG = "dagster/run_key"  # what the daemon tags a sensor's run with (its request's run key)
SENSOR_TAG = "dagster/sensor_name"


def how_to_start(campaign_id: str) -> str:
    return (
        f"launch the `start_campaign` job with campaign_id: {campaign_id} (Launchpad), or run "
        f"`envsched campaign start --campaign-id {campaign_id} --steps N`"
    )


def load_campaign(context: dg.AssetExecutionContext, store: Warehouse) -> CampaignConfig:
    """The config of the partition's campaign. A partition without a campaign row (added by hand or
    mistyped) is removed and the run fails with how to create the campaign."""
    campaign_id = context.partition_key
    try:
        row = store.campaign(campaign_id)
    except KeyError:
        context.instance.delete_dynamic_partition(PARTITIONS, campaign_id)
        raise dg.Failure(
            description=f"unknown campaign '{campaign_id}' (partition removed): a partition alone is not a "
            f"campaign; {how_to_start(campaign_id)}"
        ) from None
    return CampaignConfig.from_dict(row["config"])


def end_mlflow_run(mlflow: MLflowResource | None, campaign_id: str, status: str) -> None:
    """End the campaign's MLflow run with ``status`` (FINISHED / FAILED), if it has one."""
    if mlflow is None:
        return
    tracker = mlflow.tracker()
    run_id = tracker.find_campaign(campaign_id)
    if run_id is not None:
        tracker.end_campaign(run_id, status)


@contextmanager
def campaign_status(
    store: Warehouse,
    campaign_id: str,
    what: str,
    mlflow: MLflowResource | None = None,
    passthrough: tuple[type[BaseException], ...] = (),
) -> Iterator[None]:
    """Mark the campaign running for the block; on an error mark it failed with ``what: reason``
    (and end its MLflow run FAILED), then re-raise. ``passthrough`` errors are re-raised untouched
    (their code decides about the campaign); a KeyboardInterrupt (a killed process) leaves the status
    as it was, so the campaign resumes."""
    if store.campaign(campaign_id)["status"] == "created":
        store.set_campaign_status(campaign_id, "running")
    try:
        yield
    except passthrough:
        raise
    except dg.Failure as exc:
        fail_campaign(store, campaign_id, f"{what}: {exc.description}", mlflow)
        raise
    except Exception as exc:
        fail_campaign(store, campaign_id, f"{what}: {type(exc).__name__}: {exc}", mlflow)
        raise


def fail_campaign(store: Warehouse, campaign_id: str, reason: str, mlflow: MLflowResource | None) -> None:
    """Mark the campaign failed with ``reason`` (its first line; an earlier reason is kept) and end its MLflow
    run FAILED: the campaign sensor stops advancing it."""
    if store.campaign(campaign_id)["status"] != "failed":  # keep the first reason (e.g. a quarantine)
        store.set_campaign_status(campaign_id, "failed", reason.splitlines()[0][:500])
    end_mlflow_run(mlflow, campaign_id, "FAILED")


def complete_campaign(store: Warehouse, campaign_id: str, mlflow: MLflowResource | None) -> None:
    if store.campaign(campaign_id)["status"] != "completed":
        store.set_campaign_status(campaign_id, "completed")
    end_mlflow_run(mlflow, campaign_id, "FINISHED")


def tag_run(context: dg.AssetExecutionContext | dg.OpExecutionContext, campaign_id: str, step: int) -> None:
    """Tag the run with its campaign and step (the UI filters runs by tag)."""
    tags = {CAMPAIGN_TAG: campaign_id, STEP_TAG: str(step)}
    if any(context.run.tags.get(k) != v for k, v in tags.items()):
        context.instance.add_run_tags(context.run.run_id, tags)
