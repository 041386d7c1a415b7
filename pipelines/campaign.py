"""A campaign's task pool and scheduler, rebuilt from the warehouse (the config is ``campaign.config``)."""

from __future__ import annotations

import hashlib
import logging

import numpy as np
import pandas as pd

from campaign import warm_start
from campaign.config import CampaignConfig
from envsched_core import EnvSched, StateMismatch, TaskCatalog
from envsched_core.schedulers import Scheduler, fold_history, graph_overrides, scheduler_spec
from warehouse.store import SchedulerState, Warehouse

__all__ = [
    "CampaignConfig",
    "build_scheduler",
    "campaign_heldout_tasks",
    "campaign_tasks",
    "restore_scheduler",
]

# A rebuild is worth a line on the terminal (the CLI prints this logger) and in the run's event log
# (`pipelines.run_log`).
log = logging.getLogger("envsched.progress")


def heldout_by_hash(task_ids: pd.Series, fraction: float) -> np.ndarray:
    """True for the tasks a ``fraction`` hash rule holds out: blake2b(task_id) mod 10,000 < 10,000 x
    fraction. Depends on the id only (not on the seed, the pool or the order)."""
    buckets = np.array(
        [
            int.from_bytes(hashlib.blake2b(str(t).encode(), digest_size=8).digest(), "little") % 10_000
            for t in task_ids
        ],
        dtype=np.int64,
    )
    return buckets < round(fraction * 10_000)


def _is_heldout(frame: pd.DataFrame, config: CampaignConfig) -> np.ndarray:
    whole = frame["split"].isin(config.heldout_splits).to_numpy()
    return whole | heldout_by_hash(frame["task_id"], config.heldout_fraction)


def campaign_heldout_tasks(store: Warehouse, config: CampaignConfig) -> pd.DataFrame:
    """The held-out tasks (task_id, env_id, source, split): every task of ``heldout_splits`` plus the
    hash-selected ``heldout_fraction`` of the training splits. Never in the training pool."""
    frame = store.query(
        "SELECT task_id, env_id, source, split FROM tasks WHERE active AND list_contains(?, source) "
        "AND (len(?) = 0 OR list_contains(?, split) OR list_contains(?, split)) ORDER BY task_id",
        [config.sources, config.splits, config.splits, config.heldout_splits],
    )
    return frame[_is_heldout(frame, config)].reset_index(drop=True)


def campaign_tasks(store: Warehouse, config: CampaignConfig) -> pd.DataFrame:
    """The training pool with embeddings, in a stable order (the scheduler's row order); held-out
    tasks (``campaign_heldout_tasks``) are excluded."""
    frame = store.query(
        "SELECT t.task_id, t.env_id, t.source, t.split, t.text, t.tools, t.tool_effects, t.state_fields, "
        "t.turns, t.gold_calls, t.verifier, e.embedding FROM tasks t JOIN task_embeddings e USING (task_id) "
        "WHERE t.active AND list_contains(?, t.source) AND (len(?) = 0 OR list_contains(?, t.split)) "
        "ORDER BY t.task_id",
        [config.sources, config.splits, config.splits],
    )
    frame = frame[~_is_heldout(frame, config)].reset_index(drop=True)
    if frame.empty:
        raise ValueError(
            f"campaign '{config.campaign_id}': no embedded tasks for sources {config.sources} and splits "
            f"{config.splits or 'all'}; materialise environment_catalog and task_embeddings first"
        )
    frame["embedding"] = [np.asarray(e, dtype=np.float32) for e in frame["embedding"]]
    return frame


def campaign_catalog(store: Warehouse, config: CampaignConfig) -> TaskCatalog:
    return TaskCatalog.from_frame(campaign_tasks(store, config))


def build_scheduler(
    store: Warehouse, config: CampaignConfig, warm: bool = False, catalog: TaskCatalog | None = None
) -> tuple[Scheduler, TaskCatalog]:
    """A fresh scheduler over the campaign's pool, on the graph stored in the warehouse, or on its own
    graph when its config changes a graph field (the stored graph is built with the defaults).
    ``warm``: a continuing campaign's scheduler starts from its template's history (``campaign.warm_start``)."""
    catalog = catalog if catalog is not None else campaign_catalog(store, config)  # given: already built
    history = _warm_history(store, config, catalog) if warm and config.continue_from else None
    spec = scheduler_spec(config.scheduler)
    if spec.cls is EnvSched:
        own_within, own_cross = graph_overrides(config.scheduler, config.scheduler_config)
        pool = set(catalog.task_ids)
        within = cross = None
        if not own_within:
            within = store.query("SELECT src, dst, similarity FROM edges_within")
            within = within[within.src.isin(pool) & within.dst.isin(pool)]
        if not own_cross:
            cross = store.query("SELECT src, dst, similarity FROM edges_cross WHERE campaign_id = ''")
            cross = cross[cross.src.isin(pool) & cross.dst.isin(pool)]
        scheduler = EnvSched(
            catalog, config.scheduler_settings(), seed=config.seed, within_edges=within, cross_edges=cross
        )
        if history is not None:
            _warm_envsched(scheduler, store, config, history)
    else:
        scheduler = spec.cls(catalog, config.scheduler_settings(), seed=config.seed)
        if history is not None:
            fold_history(scheduler, history)
    return scheduler, catalog


def _warm_envsched(
    scheduler: EnvSched, store: Warehouse, config: CampaignConfig, history: pd.DataFrame
) -> None:
    """Start from the last state of the campaign continued when it has seen exactly ``history`` (its clock is
    at the timeline's last step) on this catalogue, config, seed and cross-edge candidates: what replaying the
    history builds, in O(1) rather than O(steps of history). Otherwise (the pool, config, seed or graph
    changed, a step left unobserved) replay the history with ``warm_start``."""
    previous = config.continue_from
    observed = store.progress(previous)["observed"]
    seeded_alike = store.campaign(previous)["config"].get("seed") == config.seed  # patterns are seeded
    state = store.scheduler_state(previous, observed, "observed") if observed and seeded_alike else None
    if (
        state is not None
        and state.get("current_step") == history["step"].max()
        and np.array_equal(state["cross_candidates"], scheduler.cross_candidates)  # build_graph re-ran
    ):
        try:
            scheduler.load_state_dict(state)
        except StateMismatch:  # another catalogue, config or release (checked before anything is restored)
            pass
        else:
            scheduler.start_next_campaign()
            return
    scheduler.warm_start(history)


def _warm_history(store: Warehouse, config: CampaignConfig, catalog: TaskCatalog) -> pd.DataFrame:
    """The rollouts a continuing campaign warm-starts from: its template's campaigns up to it, or
    (started by hand) the campaign it continues."""
    if config.template:
        history = store.template_history(config.template, config.campaign_id)
    else:
        history = store.rollouts(config.continue_from)[["campaign_id", "step", "task_id", "reward"]]
    return warm_start.timeline(history, catalog)


def restore_scheduler(
    store: Warehouse, config: CampaignConfig, step: int, phase: str, catalog: TaskCatalog | None = None
) -> tuple[Scheduler, TaskCatalog]:
    """The scheduler exactly as it was after ``phase`` of ``step`` (step 0: freshly built, warm-started
    when the campaign continues another). When the saved state does not fit (``StateMismatch``: the pool
    changed since, as after a ``refresh_catalog`` that retired or added tasks, or another release or feature
    set saved it), the scheduler is rebuilt from the campaign's history instead (``rebuilt_from_history``)."""
    if step == 0:
        return build_scheduler(store, config, warm=True, catalog=catalog)
    scheduler, catalog = build_scheduler(store, config, catalog=catalog)
    state = store.scheduler_state(config.campaign_id, step, phase)
    if state is None:
        raise RuntimeError(
            f"campaign '{config.campaign_id}': no saved scheduler state for step {step} ({phase})"
        )
    try:
        scheduler.load_state_dict(state)
        return scheduler, catalog
    except StateMismatch as exc:  # raised before anything was restored: the scheduler is still fresh
        log.warning(
            f"campaign '{config.campaign_id}', step {step} ({phase}): {exc} Rebuilt from its history."
        )
    observed = step - 1 if phase == "selected" else step  # 'refilled' has observed its step's rounds
    offset = int(state.get("step_offset", 0))
    return rebuilt_from_history(scheduler, catalog, store, config, observed, offset), catalog


def rebuilt_from_history(
    scheduler: Scheduler,
    catalog: TaskCatalog,
    store: Warehouse,
    config: CampaignConfig,
    observed: int,
    step_offset: int,
) -> Scheduler:
    """``scheduler`` (fresh, over the current pool ``catalog``) after the campaign's history through step
    ``observed``: what it continued first, then its own steps on its own clock (``step_offset``), rollouts
    of retired tasks dropped. The same ``warm_start`` a continuing campaign starts from, so added tasks are
    predicted from their neighbours and retired ones are never picked again."""
    earlier = _warm_history(store, config, catalog) if config.continue_from else None
    if not isinstance(scheduler, EnvSched):  # no clock of their own: the campaign's steps follow the history
        step_offset = int(earlier["step"].max()) if earlier is not None and len(earlier) else 0
    own = store.rollouts(config.campaign_id)
    own = own.loc[(own["step"] <= observed) & own["task_id"].isin(set(catalog.task_ids))]
    history = pd.concat(
        [earlier, own[["task_id", "step", "reward"]].assign(step=own["step"] + step_offset)],
        ignore_index=True,
    )
    fold_history(scheduler, history, step_offset)
    return scheduler


def dump_state(scheduler: Scheduler) -> SchedulerState:
    """The scheduler's state_dict, encoded once as typed arrays (what the warehouse stores)."""
    return SchedulerState.of(scheduler.state_dict())
