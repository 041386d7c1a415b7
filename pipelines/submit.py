"""Hand a campaign to the running UI (`envsched ui` / `dagster dev`): its daemon then runs it.

The `start_campaign` run is submitted through the webserver's GraphQL API, so it is queued, launched
by the daemon from the code location, and shows in the job's Runs tab like a Launchpad run.
"""

from __future__ import annotations

import time
from urllib.parse import urlparse

import dagster as dg

from campaign.config import CampaignConfig
from pipelines.campaign_status import CAMPAIGN_TAG, STEP_TAG
from pipelines.start_campaign import run_config_for

HEARTBEAT_FRESH_S = 60.0


class UINotRunning(RuntimeError):
    """No webserver answers at the URL."""


def daemon_running(instance: dg.DagsterInstance | None = None) -> bool:
    """True when a Dagster daemon is ticking sensors on this instance (its heartbeat is fresh)."""
    instance = instance or dg.DagsterInstance.get()
    heartbeat = instance.get_daemon_heartbeats().get("SENSOR")
    return heartbeat is not None and time.time() - heartbeat.timestamp < HEARTBEAT_FRESH_S


def submit_start(config: CampaignConfig, ui_url: str) -> str:
    """Submit `start_campaign` for ``config`` to the UI at ``ui_url``; returns the run id at once."""
    import requests
    from dagster_graphql import DagsterGraphQLClient, DagsterGraphQLClientError

    url = urlparse(ui_url)
    client = DagsterGraphQLClient(
        url.hostname or "127.0.0.1", port_number=url.port, use_https=url.scheme == "https", timeout=30
    )
    try:
        return client.submit_job_execution(
            "start_campaign",
            run_config=run_config_for(config),
            tags={CAMPAIGN_TAG: config.campaign_id, STEP_TAG: "0"},
        )
    except (requests.exceptions.ConnectionError, DagsterGraphQLClientError) as exc:
        if "Connection" in type(exc).__name__ or "connect" in str(exc).lower():
            raise UINotRunning(
                f"no Dagster UI at {ui_url}: start it with `make ui` (or `envsched ui`), or run the campaign "
                "here with `envsched campaign run`"
            ) from None
        raise
