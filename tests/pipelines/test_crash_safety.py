"""Crash safety of the concurrency pool on a real Dagster instance (sqlite storage, pool limit 1):
a slot held by a run whose process is gone is freed, a live holder is kept and named to the waiter."""

import os
import subprocess
import sys

import dagster as dg
import pytest
from dagster._core.events import EngineEventData  # how executors record their pid

from pipelines.crash_safety import describe_waits, free_dead_runs, process_alive

POOL = "warehouse"


@pytest.fixture
def instance():
    with dg.instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 1}}}) as instance:
        instance.event_log_storage.set_concurrency_slots(POOL, 1)  # as the executor does on first use
        yield instance


def _started_run(instance, job_name: str, pid: int) -> dg.DagsterRun:
    run = instance.add_run(dg.DagsterRun(job_name=job_name, status=dg.DagsterRunStatus.STARTED))
    instance.report_engine_event(
        f"Executing steps in process (pid: {pid})", run, EngineEventData.in_process(pid)
    )
    return run


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_process_alive_tells_running_from_gone_and_reused_pids():
    assert process_alive(os.getpid())
    assert not process_alive(_dead_pid())
    assert not process_alive(os.getpid(), recorded_at=0.0)  # this process started after 1970: a reused pid


def test_free_dead_runs_frees_a_dead_holder_and_names_a_live_one(instance):
    storage = instance.event_log_storage
    dead = _started_run(instance, "ingest_rollouts", _dead_pid())
    waiter = _started_run(instance, "plan_step", os.getpid())
    assert storage.claim_concurrency_slot(POOL, dead.run_id, "task_stats").is_claimed
    assert not storage.claim_concurrency_slot(POOL, waiter.run_id, "scheduled_batch").is_claimed

    (line,) = describe_waits(instance)
    assert f"run {waiter.run_id} step scheduled_batch waits for a slot of pool 'warehouse'" in line
    assert f"held by run {dead.run_id} (ingest_rollouts, step task_stats" in line and "gone" in line

    (freed,) = free_dead_runs(instance)
    assert f"run {dead.run_id} (ingest_rollouts) was left STARTED" in freed
    assert instance.get_run_by_id(dead.run_id).status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(waiter.run_id).status == dg.DagsterRunStatus.STARTED  # alive: untouched
    assert storage.claim_concurrency_slot(POOL, waiter.run_id, "scheduled_batch").is_claimed
    assert free_dead_runs(instance) == []

    # A live holder is never freed, and the waiter is told who it is.
    other = _started_run(instance, "train_step", os.getpid())
    assert not storage.claim_concurrency_slot(POOL, other.run_id, "training_step").is_claimed
    assert free_dead_runs(instance) == []
    (line,) = describe_waits(instance)
    assert f"held by run {waiter.run_id} (plan_step, step scheduled_batch, pid {os.getpid()} alive)" in line


def test_free_dead_runs_frees_slots_left_by_a_finished_run(instance):
    storage = instance.event_log_storage
    run = _started_run(instance, "train_step", os.getpid())
    assert storage.claim_concurrency_slot(POOL, run.run_id, "training_step").is_claimed
    instance.report_run_failed(run, message="ended without releasing")
    (line,) = free_dead_runs(instance)
    assert "freed the slots in pool(s) ['warehouse'] still held by run" in line
    assert storage.get_concurrency_info(POOL).claimed_slots == []
