"""Crash safety of the Dagster concurrency pool: a killed run must not hold its slot forever.

A run killed with ``kill -9`` (or by the OOM killer) inside a pooled step never releases its slot of
the `warehouse` pool (limit 1), and Dagster has no process left to notice, so every later run waits
for it forever. Every process that executes steps records its pid in the run's engine events
("Executing steps in process (pid: N)", "Started process for run (pid: N)"); a run is alive while
one of those processes is. ``free_dead_runs`` runs on start of the driver, every writing ``envsched``
command and every tick of the landing sensor: runs left STARTED whose processes are all gone are
marked failed, and their slots, and slots still held by runs that already finished, are freed.
``describe_waits`` names the run that holds the slot a waiting step needs.

Runs are assumed to execute on this machine (one data folder, one Dagster instance); a pid is only
trusted if that process started before the run recorded it, so a reused pid is not taken for alive.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from dagster._core.storage.dagster_run import FINISHED_STATUSES  # not re-exported by `dagster`

IN_PROGRESS = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


def process_alive(pid: int, recorded_at: float | None = None) -> bool:
    """True if ``pid`` runs (not a zombie) and, when /proc says, started before ``recorded_at``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, another user's
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return True  # no /proc: the signal check is all there is
    if fields[0] in ("Z", "X"):
        return False
    if recorded_at is not None:
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime")
        )
        started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
        if started > recorded_at + 2.0:  # a newer process reusing the number
            return False
    return True


def run_pids(instance: dg.DagsterInstance, run_id: str) -> list[tuple[int, float]]:
    """(pid, when recorded) of every process that reported executing this run."""
    found = []
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        data = record.dagster_event.engine_event_data if record.dagster_event else None
        pid = (data.metadata or {}).get("pid") if data else None
        if pid is not None:
            try:
                found.append((int(getattr(pid, "value", pid)), record.timestamp))
            except (TypeError, ValueError):
                continue
    return found


def run_is_alive(instance: dg.DagsterInstance, run_id: str) -> bool | None:
    """True/False from the recorded pids; None when the run recorded none (cannot tell)."""
    pids = run_pids(instance, run_id)
    if not pids:
        return None
    return any(process_alive(pid, at) for pid, at in pids)


def _pool_run_ids(instance: dg.DagsterInstance) -> dict[str, list[str]]:
    """run id -> pools in which it holds a slot or has a pending step."""
    storage = instance.event_log_storage
    holders: dict[str, list[str]] = {}
    keys = storage.get_concurrency_keys()
    for key, info in storage.get_concurrency_infos(list(keys)).items():
        for slot in info.claimed_slots:
            holders.setdefault(slot.run_id, []).append(key)
        for pending in info.pending_steps:
            holders.setdefault(pending.run_id, []).append(key)
    return holders


def free_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark runs whose processes are gone failed and free their pool slots; one line per action."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    lines = []
    in_pool = _pool_run_ids(instance)
    for record in instance.get_run_records(dg.RunsFilter(statuses=IN_PROGRESS)):
        run = record.dagster_run
        if run_is_alive(instance, run.run_id) is not False:
            continue
        message = (
            f"run {run.run_id} ({run.job_name}) was left {run.status.value} by a process that no longer "
            "exists (killed?); marked failed and its concurrency slots freed"
        )
        instance.report_run_failed(run, message=message)
        storage.free_concurrency_slots_for_run(run.run_id)
        in_pool.pop(run.run_id, None)
        lines.append(message)
    if in_pool:
        for record in instance.get_run_records(
            dg.RunsFilter(run_ids=list(in_pool), statuses=FINISHED_STATUSES)
        ):
            run = record.dagster_run
            storage.free_concurrency_slots_for_run(run.run_id)
            lines.append(
                f"freed the slots in pool(s) {sorted(set(in_pool[run.run_id]))} still held by run "
                f"{run.run_id} ({run.job_name}, {run.status.value})"
            )
    return lines


def describe_waits(instance: dg.DagsterInstance) -> list[str]:
    """For each step waiting on a pool slot: which run holds the slot, with its pids and liveness."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    lines = []
    keys = storage.get_concurrency_keys()
    for key, info in storage.get_concurrency_infos(list(keys)).items():
        waiting = [p for p in info.pending_steps if p.assigned_timestamp is None]
        if not waiting or not info.claimed_slots:
            continue
        holders = []
        for slot in info.claimed_slots:
            run = instance.get_run_by_id(slot.run_id)
            pids = sorted({pid for pid, _ in run_pids(instance, slot.run_id)})
            alive = run_is_alive(instance, slot.run_id)
            state = "alive" if alive else "gone" if alive is False else "unknown"
            holders.append(
                f"run {slot.run_id} ({run.job_name if run else '?'}, step {slot.step_key}, "
                f"pid {', '.join(map(str, pids)) or '?'} {state})"
            )
        for pending in waiting:
            lines.append(
                f"run {pending.run_id} step {pending.step_key} waits for a slot of pool '{key}' "
                f"(limit {info.limit}), held by {'; '.join(holders)}"
            )
    return lines
