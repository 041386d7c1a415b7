"""Hand a campaign to the running UI (`envsched ui` / `dagster dev`): its daemon then runs it.

The `start_campaign` run is submitted through the webserver's GraphQL API, so it is queued, launched
by the daemon from the code location, and shows in the job's Runs tab like a Launchpad run.
"""

from __future__ import annotations

import os
import time
from urllib.parse import urlparse

import dagster as dg

from campaign.config import CampaignConfig
from pipelines.campaign_status import CAMPAIGN_TAG, STEP_TAG
from pipelines.paths import Paths
from pipelines.start_campaign import run_config_for

HEARTBEAT_FRESH_S = 60.0
DEFAULT_UI_URL = "http://127.0.0.1:3000"
QUEUED_GRACE_S = 60.0
"""How long a submitted run may wait queued before the CLI checks that a daemon is there to launch it."""
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


class UINotRunning(RuntimeError):
    """No webserver answers at the URL."""


class RunFailed(RuntimeError):
    """A submitted run ended without success; the message says why in one line."""


def running_ui_url(paths: Paths) -> str:
    """Where the running UI is: ENVSCHED_UI_URL, else the URL `envsched ui` recorded in the data folder
    (so `envsched ui --port 3310` needs no flag on later commands), else the default port."""
    recorded = paths.ui_url.read_text().strip() if paths.ui_url.exists() else ""
    return os.environ.get("ENVSCHED_UI_URL") or recorded or DEFAULT_UI_URL


def daemon_running(instance: dg.DagsterInstance | None = None) -> bool:
    """True when a Dagster daemon is ticking sensors on this instance (its heartbeat is fresh)."""
    instance = instance or dg.DagsterInstance.get()
    heartbeat = instance.get_daemon_heartbeats().get("SENSOR")
    return heartbeat is not None and time.time() - heartbeat.timestamp < HEARTBEAT_FRESH_S


def _client(ui_url: str):
    from dagster_graphql import DagsterGraphQLClient

    url = urlparse(ui_url)
    return DagsterGraphQLClient(
        url.hostname or "127.0.0.1", port_number=url.port, use_https=url.scheme == "https", timeout=30
    )


def submit_start(config: CampaignConfig, ui_url: str, resume_failed: bool = False) -> str:
    """Submit `start_campaign` for ``config`` to the UI at ``ui_url``; returns the run id at once.
    ``resume_failed`` resumes the campaign if it failed (`envsched campaign resume --force`)."""
    import requests
    from dagster_graphql import DagsterGraphQLClientError

    try:
        return _client(ui_url).submit_job_execution(
            "start_campaign",
            run_config=run_config_for(config, resume_failed),
            tags={CAMPAIGN_TAG: config.campaign_id, STEP_TAG: "0"},
        )
    except (requests.exceptions.ConnectionError, DagsterGraphQLClientError) as exc:
        if "Connection" in type(exc).__name__ or "connect" in str(exc).lower():
            raise UINotRunning(
                f"no Dagster UI at {ui_url}: start it with `make ui` (or `envsched ui`), pass the URL of the one "
                "running with --ui-url, or run the campaign here with `envsched campaign run`"
            ) from None
        raise


def wait_for_run(run_id: str, ui_url: str, poll_s: float = 1.0) -> None:
    """Block until the UI at ``ui_url`` reports the run ended; raise RunFailed with its cause unless it
    succeeded. Until its `start_campaign` run has ended, a campaign's row shows what it was before (or
    nothing): a relaunch refused, or a resume not yet applied, must not read as the campaign's outcome."""
    client, submitted = _client(ui_url), time.monotonic()
    while (status := client.get_run_status(run_id)) not in FINISHED:
        queued_s = time.monotonic() - submitted if status == dg.DagsterRunStatus.QUEUED else 0.0
        if queued_s > QUEUED_GRACE_S and not daemon_running():  # only the daemon dequeues runs
            raise RunFailed(
                f"start_campaign run {run_id} is still queued and no Dagster daemon runs on this data folder "
                "to launch it: start the UI with `make ui` (it runs the daemon)"
            )
        time.sleep(poll_s)
    if status != dg.DagsterRunStatus.SUCCESS:
        ended = "failed" if status == dg.DagsterRunStatus.FAILURE else "was canceled"
        raise RunFailed(f"start_campaign run {run_id} {ended}: {failure_line(run_id, ui_url)}")


def failure_line(run_id: str, ui_url: str) -> str:
    """Why a finished run failed, in one line: its failed steps' causes, else the run's failure message
    (read from this data folder's instance, the UI's own)."""
    from pipelines.driver import step_failure_lines

    instance = dg.DagsterInstance.get()
    steps = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    causes = step_failure_lines(e.dagster_event for e in steps if e.dagster_event)
    if not causes:
        ended = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
        causes = [" ".join(e.message.split()) for e in ended if e.message]
    return "; ".join(causes) or f"see {ui_url}/runs/{run_id}"
