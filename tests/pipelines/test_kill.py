"""A real `envsched campaign run` process killed with SIGKILL inside a pooled step: the resume frees the
slot the dead run held, finishes within a bound, and gives the tables of an uninterrupted campaign."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from pipelines.paths import Paths
from warehouse.store import Warehouse

REPO = Path(__file__).resolve().parents[2]
RESUME_BOUND_S = 300  # a resume of 2 steps takes well under a minute; without the fix it never ends
ARGS = ["campaign", "run", "--steps", "2", "--split", "base", "--batch-size", "8", "--group-size", "4"]
POOLED_INGEST_STEPS = {"rollouts", "task_stats", "variance_predictions", "scheduled_batch", "training_step"}


def _env(home: Paths) -> dict[str, str]:
    return {
        **os.environ,
        "ENVSCHED_HOME": str(home.home),
        "DAGSTER_HOME": str(home.dagster_home),
        "PYTHONPATH": str(REPO),
    }


def _cli(home: Paths, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args],
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=RESUME_BOUND_S,
    )


@pytest.mark.slow
def test_campaign_killed_inside_pooled_step_resumes_within_bound_with_identical_tables(
    tmp_path, prepared_warehouse, campaign_tables
):
    home = Paths(tmp_path / "home").ensure()  # dagster.yaml: pool `warehouse`, limit 1
    shutil.copy(prepared_warehouse, home.warehouse)
    killed = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", *ARGS, "--campaign-id", "killed"],
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    instance = dg.DagsterInstance.from_config(str(home.dagster_home))
    deadline, victim, seen = time.monotonic() + RESUME_BOUND_S, None, []
    try:
        while victim is None:  # kill as soon as a step of an ingest run holds the slot
            assert killed.poll() is None, f"the campaign ended before it could be killed; slots seen: {seen}"
            assert time.monotonic() < deadline
            for slot in instance.event_log_storage.get_concurrency_info("warehouse").claimed_slots:
                run = instance.get_run_by_id(slot.run_id)
                seen.append((run.job_name if run else None, slot.step_key))
                if slot.step_key in POOLED_INGEST_STEPS and run and run.job_name == "ingest_rollouts":
                    victim = slot
            time.sleep(0.01)
        os.kill(killed.pid, signal.SIGKILL)
    finally:
        killed.kill()
        killed.wait()
    held = instance.event_log_storage.get_concurrency_info("warehouse").claimed_slots
    assert [s.run_id for s in held] == [victim.run_id]  # what the kill leaves: a slot nobody will free

    resumed = _cli(home, *ARGS, "--campaign-id", "killed")  # subprocess.TimeoutExpired = a hang
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"run {victim.run_id} (ingest_rollouts) was left STARTED" in resumed.stderr
    assert instance.get_run_by_id(victim.run_id).status == dg.DagsterRunStatus.FAILURE
    assert _cli(home, *ARGS, "--campaign-id", "reference").returncode == 0
    store = Warehouse(home.warehouse)
    for got, want in zip(campaign_tables(store, "killed"), campaign_tables(store, "reference"), strict=True):
        assert len(got) and got.equals(want)
    assert store.campaign("killed")["status"] == "completed"
