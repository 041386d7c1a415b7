"""The landing sensor: each new step file launches `ingest_rollouts` for its campaign.

Cost per tick: one directory listing and one ``lstat`` per landing entry, no file reads. Only a file
whose fingerprint (size, mtime, inode) changed since the cursor saw it is hashed, and all of those
are checked against the ledger in one query, so the cost does not grow with the files already loaded.
Odd entries (a directory or FIFO named like a step file, a symlink, a misnamed folder) are skipped and
logged once. Files of an unregistered or failed campaign wait, logged once, until it is registered or
resumed. Each tick also fails runs a killed process left STARTED and frees their pool slots, and names
(once) the run holding the slot another run waits for (``pipelines/crash_safety.py``).
"""

from __future__ import annotations

import json

import dagster as dg

from pipelines.campaign_status import CAMPAIGN_TAG, STEP_TAG
from pipelines.jobs import ingest_rollouts
from pipelines.resources import PathsResource, WarehouseResource
from warehouse.landing import LandingFile, NotALandingFile, scan


@dg.sensor(job=ingest_rollouts, minimum_interval_seconds=5, default_status=dg.DefaultSensorStatus.RUNNING)
def landing_sensor(context: dg.SensorEvaluationContext, paths: PathsResource, warehouse: WarehouseResource):
    """Cursor: per file (path relative to the data folder) the fingerprint last handled, the files
    waiting for their campaign, and the bad entries already reported. Run key: path, content hash and
    mtime; the loader's ledger makes a second request for the same content harmless."""
    from pipelines.crash_safety import describe_waits, free_dead_runs

    for line in free_dead_runs(context.instance):
        context.log.warning(line)
    cursor = _load_cursor(context.cursor)
    waits = describe_waits(context.instance)
    for line in set(waits) - set(cursor["waits"]):  # a run waiting on the pool: who holds it, once
        context.log.warning(line)
    reported = cursor["bad"]
    entries, bad = scan(paths.paths().landing)
    for relpath, reason in bad.items():
        if reported.get(relpath) != reason:
            context.log.warning(f"{relpath}: skipped, {reason}")
    with warehouse.session(read_only=True) as store:  # one connection for the tick's reads
        return _requests(context, store, cursor, entries, bad, waits)


def _requests(context, store, cursor: dict, entries, bad: dict, waits: list[str]) -> dg.SensorResult:
    seen, waiting = cursor["seen"], cursor["waiting"]
    known = set(context.instance.get_dynamic_partitions("campaigns"))
    statuses = store.campaign_statuses()
    candidates: list[tuple[LandingFile, str]] = []
    for entry in entries:
        if seen.get(entry.relpath) == entry.fingerprint:
            continue
        held = waiting.get(entry.relpath)
        if held and held[0] == entry.fingerprint:
            landing_file = LandingFile(entry.path, entry.campaign_id, entry.step, held[1])
        else:
            try:
                landing_file = LandingFile.from_path(entry.path)
            except (NotALandingFile, OSError):
                continue  # replaced or removed since the scan; the next tick sees what is there
        candidates.append((landing_file, entry.fingerprint))
    loaded = store.loaded_files([(f.relpath, f.content_hash) for f, _ in candidates])
    requests, still_waiting = [], {}
    for landing_file, fingerprint in candidates:
        relpath = landing_file.relpath
        if (relpath, landing_file.content_hash) in loaded:
            seen[relpath] = fingerprint
            continue
        reason = _why_wait(landing_file.campaign_id, known, statuses)
        if reason:
            if (waiting.get(relpath) or [None, None, None])[2] != reason:
                context.log.warning(f"{relpath}: {reason}")
            still_waiting[relpath] = [fingerprint, landing_file.content_hash, reason]
            continue
        requests.append(
            dg.RunRequest(
                run_key=f"{landing_file.run_key}:{fingerprint.split(':')[1]}",
                partition_key=landing_file.campaign_id,
                run_config={"ops": {"rollouts": {"config": {"path": str(landing_file.path)}}}},
                tags={CAMPAIGN_TAG: landing_file.campaign_id, STEP_TAG: str(landing_file.step)},
            )
        )
        seen[relpath] = fingerprint
    present = {e.relpath for e in entries}
    new_cursor = {
        "seen": {p: f for p, f in seen.items() if p in present},
        "waiting": still_waiting,
        "bad": bad,
        "waits": waits,
    }
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(new_cursor))


def _why_wait(campaign_id: str, known: set[str], statuses: dict[str, str]) -> str | None:
    if campaign_id not in known or campaign_id not in statuses:
        return f"campaign '{campaign_id}' is not registered; the file waits until it is"
    if statuses[campaign_id] == "failed":
        return (
            f"campaign '{campaign_id}' has failed; the file waits until it is resumed "
            f"(`envsched campaign resume {campaign_id} --force`)"
        )
    return None


def _load_cursor(text: str | None) -> dict:
    cursor = json.loads(text) if text else {}
    if not isinstance(cursor, dict) or "seen" not in cursor:
        cursor = {}  # no cursor, or the format before relative paths: the ledger skips what is loaded
    return {key: cursor.get(key, [] if key == "waits" else {}) for key in ("seen", "waiting", "bad", "waits")}
