"""Ingest one landing file: validate, load exactly once, or quarantine with the reason.

Every way a file can be wrong ends in one of three outcomes, never in a half-load or a raw exception:
loaded (or recognised as already loaded), quarantined with a reason (moved to
``landing/_quarantine/<its own campaign>/``, recorded in ``ingested_files``), or refused without
touching anything (a run launched for the wrong partition, a path that is not a step file). A lock held
by another process stays a retryable ``WarehouseLockedError``.

Only a bad file for the step its campaign is waiting for fails the campaign; a stray file for a
past step (a conflicting re-delivery) or a future one is quarantined and the campaign goes on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from warehouse.landing import ContractError, LandingFile, NotALandingFile, parse_location, read_and_validate
from warehouse.store import ConflictingDelivery, Warehouse


class IngestRefused(ValueError):
    """The run cannot ingest this path (wrong partition, not a step file); nothing was changed."""


class Quarantined(ValueError):
    """The file broke the contract and was quarantined; ``campaign_failed`` says if it stopped the campaign."""

    def __init__(self, message: str, target: Path, campaign_failed: bool):
        super().__init__(message)
        self.target = target
        self.campaign_failed = campaign_failed


@dataclass(frozen=True)
class Ingested:
    relpath: str
    step: int
    inserted: int
    note: str = ""

    @property
    def duplicate(self) -> bool:
        return self.inserted == 0


def ingest_file(store: Warehouse, landing: Path, path: str, campaign_id: str) -> Ingested:
    """Ingest ``path`` (absolute, or relative to the data folder) for partition ``campaign_id``."""
    location = Path(path) if Path(path).is_absolute() else landing.parent / path
    try:
        landing_file = LandingFile.from_path(location)
    except NotALandingFile as exc:
        already = _already_loaded_without_file(store, location)
        if already is not None:
            return already
        raise IngestRefused(str(exc)) from None
    if landing_file.campaign_id != campaign_id:
        raise IngestRefused(
            f"{location}: the file belongs to campaign '{landing_file.campaign_id}', but the run is for "
            f"partition '{campaign_id}'; launch ingest_rollouts for partition '{landing_file.campaign_id}'"
        )
    relpath, step = landing_file.relpath, landing_file.step
    if store.is_ingested(relpath, landing_file.content_hash):
        return Ingested(relpath, step, 0, "already loaded")
    try:
        group_size = int(store.campaign(campaign_id)["config"]["group_size"])
    except KeyError:
        raise IngestRefused(f"{location}: campaign '{campaign_id}' is not registered") from None
    progress = store.progress(campaign_id)
    waiting = step == progress["scheduled"] and progress["loaded"] < step
    try:
        batch = store.batch(campaign_id, step)
        if batch.empty:
            raise ContractError(
                f"{location}: campaign '{campaign_id}' has no scheduled batch for step {step} "
                f"(it has scheduled {progress['scheduled']} steps)"
            )
        rows = read_and_validate(landing_file, set(batch["task_id"]), group_size)
        inserted = store.load_rollouts(relpath, landing_file.content_hash, campaign_id, step, rows)
    except (ContractError, ConflictingDelivery) as exc:
        target = quarantine(store, landing, landing_file, str(exc), fail_campaign=waiting)
        effect = (
            f"campaign '{campaign_id}' failed"
            if waiting
            else f"campaign '{campaign_id}' is unaffected (step {step} is not the step it waits for)"
        )
        raise Quarantined(f"quarantined to {target}: {exc}; {effect}", target, waiting) from None
    return Ingested(relpath, step, inserted, "" if inserted else "same rollouts as the loaded file")


def quarantine(
    store: Warehouse, landing: Path, landing_file: LandingFile, reason: str, fail_campaign: bool
) -> Path:
    """Record first, then move: if the move fails the file is still in landing and the next attempt
    records nothing new (same key) and moves it. The target is under the file's own campaign."""
    store.record_quarantine(
        landing_file.relpath,
        landing_file.content_hash,
        landing_file.campaign_id,
        landing_file.step,
        reason,
        fail_campaign=fail_campaign,
    )
    target = landing_file.quarantine_path(landing)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(landing_file.path, target)  # the entry itself; from_path refused symlinks on the way
    return target


def _already_loaded_without_file(store: Warehouse, location: Path) -> Ingested | None:
    """A step whose rows are loaded needs its landing file no more (resume of a refresh after a crash)."""
    if location.exists() or location.is_symlink():
        return None
    try:
        campaign_id, step = parse_location(location)
    except NotALandingFile:
        return None
    loaded = store.loaded_step_file(campaign_id, step) if store.path.exists() else None
    if loaded is None:
        return None
    return Ingested(loaded[0], step, 0, "already loaded (the landing file is gone)")
