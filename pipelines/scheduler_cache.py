"""Per-process cache of a campaign's task pool, catalogue and scheduler, so a step does not rebuild them.

Every campaign asset needs the scheduler as it was after the last transition. Rebuilding it means
re-reading the pool from the warehouse, building the TaskCatalog, the propagation matrices and the
patterns, and then overwriting most of that with the saved state: seconds at 10^5 tasks, every asset,
every step. Here the objects stay in the process (the CLI driver runs every Dagster run in one process;
so does any in-process executor) and are reused while three things are unchanged:

* the pool fingerprint: which tasks, with which text and embedding (a DuckDB aggregate over the rows);
* the graph version: the stored within edges and global cross candidates;
* the state version: the manifest of the saved state the scheduler is at (it names its arrays by digest,
  so a state written by another process, or a re-run of a step, never matches a stale object).

A scheduler is taken out of the cache while an asset mutates it and put back only after its new state
is committed (:func:`keep`), so a failure in between leaves nothing stale behind.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from envsched_core import TaskCatalog
from pipelines.campaign import CampaignConfig, campaign_tasks, restore_scheduler
from warehouse.store import Warehouse

_POOL_SQL = (
    "SELECT count(*), coalesce(sum(hash(t.task_id, t.content_hash, e.text_hash, e.model_name, e.computed_at)), 0) "
    "FROM tasks t JOIN task_embeddings e USING (task_id) "
    "WHERE t.active AND list_contains(?, t.source) AND (len(?) = 0 OR list_contains(?, t.split))"
)
_GRAPH_SQL = (
    "SELECT (SELECT min(graph_version) || '/' || max(graph_version) || '/' || count(*) FROM edges_within), "
    "(SELECT min(graph_version) || '/' || max(graph_version) || '/' || count(*) FROM edges_cross "
    "WHERE campaign_id = '')"
)


@dataclass
class _Entry:
    key: tuple
    value: Any


_pools: dict[tuple, _Entry] = {}  # (warehouse, pool selection) -> (tasks frame, catalogue)
_schedulers: dict[tuple, _Entry] = {}  # (warehouse, campaign) -> scheduler


def _pool_selection(config: CampaignConfig) -> str:
    return json.dumps(
        [config.sources, config.splits, config.heldout_splits, config.heldout_fraction], sort_keys=True
    )


def _memoised(store: Warehouse, key: tuple, compute):
    """``compute()``, once per warehouse session (an asset's or a sensor tick's): each is a scan of the
    pool or the graph, tens of milliseconds at 10^5 tasks, asked for several times per asset."""
    memo = store.session_memo()
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def pool_fingerprint(store: Warehouse, config: CampaignConfig) -> str:
    def compute() -> str:
        count, total = store.query(_POOL_SQL, [config.sources, config.splits, config.splits]).iloc[0]
        return f"{count}:{total}"

    return _memoised(store, ("pool", _pool_selection(config)), compute)


def graph_version(store: Warehouse) -> str:
    def compute() -> str:
        within, cross = store.query(_GRAPH_SQL).iloc[0]
        return f"{within}|{cross}"

    return _memoised(store, ("graph",), compute)


def _pool(store: Warehouse, config: CampaignConfig) -> tuple[pd.DataFrame, TaskCatalog | None]:
    slot = (str(store.path), _pool_selection(config))
    key = pool_fingerprint(store, config)
    entry = _pools.get(slot)
    if entry is None or entry.key != key:
        _pools.pop(slot, None)  # drop the stale one before building the next (memory at 10^6 tasks)
        entry = _pools[slot] = _Entry(key, [campaign_tasks(store, config), None])
    return entry.value


def tasks(store: Warehouse, config: CampaignConfig) -> pd.DataFrame:
    """``campaign_tasks`` (the pool with embeddings), cached; a shallow copy, so callers may add columns."""
    return _pool(store, config)[0].copy(deep=False)


def catalog(store: Warehouse, config: CampaignConfig) -> TaskCatalog:
    """The campaign's TaskCatalog, built once per pool fingerprint."""
    entry = _pool(store, config)
    if entry[1] is None:
        entry[1] = TaskCatalog.from_frame(entry[0])
    return entry[1]


def _state_key(store: Warehouse, config: CampaignConfig, step: int, phase: str) -> tuple:
    manifest = store.scheduler_state_manifest(config.campaign_id, step, phase) if step > 0 else ""
    digest = hashlib.blake2b((manifest or "").encode(), digest_size=16).hexdigest()
    return (
        json.dumps(config.to_dict(), sort_keys=True, default=str),
        pool_fingerprint(store, config),
        graph_version(store),
        step,
        phase,
        digest,
    )


def restore(store: Warehouse, config: CampaignConfig, step: int, phase: str) -> tuple[Any, TaskCatalog]:
    """``restore_scheduler``, served from the cache when nothing changed. The scheduler returned is the
    caller's to mutate: it leaves the cache until :func:`keep` puts it back."""
    slot = (str(store.path), config.campaign_id)
    entry = _schedulers.pop(slot, None)
    key = _state_key(store, config, step, phase)
    if entry is not None and entry.key == key:
        return entry.value, catalog(store, config)
    return restore_scheduler(store, config, step, phase, catalog=catalog(store, config))


def cached(store: Warehouse, config: CampaignConfig, step: int, phase: str) -> bool:
    """Whether :func:`restore` of ``phase`` of ``step`` would be served from the cache."""
    entry = _schedulers.get((str(store.path), config.campaign_id))
    return entry is not None and entry.key == _state_key(store, config, step, phase)


def prepare(store: Warehouse, config: CampaignConfig, step: int, phase: str) -> None:
    """Restore ``phase`` of ``step`` into the cache: what an asset runs, when it is not :func:`cached`, before
    it takes the warehouse pool, so that a cold build or a history replay (``restore_scheduler``) holds no
    pool slot and no connection; the asset's own :func:`restore` then finds it."""
    scheduler, _ = restore_scheduler(store, config, step, phase, catalog=catalog(store, config))
    keep(store, config, scheduler, step, phase)


def keep(store: Warehouse, config: CampaignConfig, scheduler: Any, step: int, phase: str) -> None:
    """Cache ``scheduler`` as the state just committed for ``phase`` of ``step``."""
    _schedulers[(str(store.path), config.campaign_id)] = _Entry(
        _state_key(store, config, step, phase), scheduler
    )


def clear() -> None:
    """Forget everything (tests; a process that wants its memory back)."""
    _pools.clear()
    _schedulers.clear()
