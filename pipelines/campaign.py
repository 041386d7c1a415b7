"""A campaign's configuration, and the scheduler it describes, rebuilt from the warehouse.

A campaign = which tasks (sources, splits), which scheduler (EnvSched or a baseline, with config
overrides), batch and group size, rollout engine, number of steps and seed. It is stored as JSON in
``campaigns`` and is a Dagster dynamic partition; steps are rows, not partitions.
"""

from __future__ import annotations

import hashlib
import pickle
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.baselines import (
    DAPO1xDynamicSampling,
    DAPODynamicSampling,
    DPSScheduler,
    GRESOScheduler,
    MoPPSScheduler,
    RandomScheduler,
)
from training.engines.base import ENGINES
from warehouse.store import Warehouse

SCHEDULERS = {
    "envsched": EnvSched,
    "random": RandomScheduler,
    "dapo": DAPODynamicSampling,
    "dapo-1x": DAPO1xDynamicSampling,
    "greso": GRESOScheduler,
    "mopps": MoPPSScheduler,
    "dps": DPSScheduler,
}
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # fullmatch: `$` would accept a trailing newline


@dataclass
class CampaignConfig:
    """Everything that defines a campaign; stored as JSON in ``campaigns.config``."""

    campaign_id: str
    """Name of the campaign (letters, digits, ``_.-``); also its Dagster partition key."""
    sources: list[str] = field(default_factory=lambda: ["bfcl_v3_multi_turn"])
    """Environment sources whose tasks form the training pool."""
    splits: list[str] = field(default_factory=list)
    """Task splits in the training pool; empty = every split (held-out tasks are always excluded)."""
    heldout_splits: list[str] = field(default_factory=list)
    """Task splits held out whole for evaluation (e.g. tau-bench retail's ``test``, BFCL's ``long_context``)."""
    heldout_fraction: float = 0.2
    """Share of the other tasks held out by a hash of their task id (seed-independent, so every
    campaign over the same catalogue evaluates on the same tasks); 0 = none."""
    eval_every: int = 5
    """Evaluate the policy on the held-out tasks every this many steps (and at step 1); 0 = never."""
    scheduler: str = "envsched"
    """``envsched`` or a baseline: random, dapo, dapo-1x, greso, mopps, dps."""
    scheduler_config: dict[str, Any] = field(default_factory=dict)
    """Overrides of SchedulerConfig fields (or the baseline's hyper-parameters), e.g. {"rho": 1.0}."""
    batch_size: int = 64
    """B: tasks per step."""
    group_size: int = 8
    """G: rollouts per task."""
    engine: str = "simulated"
    """Rollout engine: ``simulated`` (the envsched_core simulator over the real catalogue, CPU, seconds),
    ``skill`` (the skill policy acting in the real environments, real verifiers, CPU), ``hf`` (a causal
    LM with transformers ``generate`` in the real environments, GRPO update; CPU or GPU) or ``vllm``
    (the same with vLLM sampling on a GPU)."""
    engine_options: dict[str, Any] = field(default_factory=dict)
    """Options of the engine's constructor (e.g. a model path)."""
    steps: int = 20
    """Steps to run."""
    keep_checkpoints: int = 0
    """Checkpoint folders kept per campaign (newest first); 0 keeps all."""
    seed: int = 0
    """Seed of the scheduler and the engine."""

    def __post_init__(self) -> None:
        if not _ID.fullmatch(self.campaign_id):
            raise ValueError(f"campaign_id {self.campaign_id!r}: use 1-64 letters, digits, '_', '.', '-'")
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler {self.scheduler!r} unknown; choose from {sorted(SCHEDULERS)}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine {self.engine!r} unknown; choose from {list(ENGINES)}")
        if self.batch_size < 1 or self.group_size < 2:
            raise ValueError("batch_size must be >= 1 and group_size >= 2 (a group of 1 has no variance)")
        if self.steps < 1:
            raise ValueError("steps must be >= 1")
        if not 0.0 <= self.heldout_fraction < 1.0:
            raise ValueError(f"heldout_fraction must be in [0, 1), got {self.heldout_fraction}")
        if set(self.splits) & set(self.heldout_splits):
            raise ValueError(
                f"split(s) {sorted(set(self.splits) & set(self.heldout_splits))} are both trained on and "
                "held out; remove them from `splits` or from `heldout_splits`"
            )
        if self.eval_every < 0:
            raise ValueError("eval_every must be >= 0 (0 = never evaluate)")
        if self.scheduler == "envsched":
            known = {f.name for f in fields(SchedulerConfig)}
            unknown = set(self.scheduler_config) - known
            if unknown:
                raise ValueError(f"scheduler_config has unknown SchedulerConfig field(s) {sorted(unknown)}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CampaignConfig:
        data = dict(data)
        # Campaigns stored before held-out splits existed trained on their whole pool: keep it so.
        data.setdefault("heldout_fraction", 0.0)
        return cls(**data)

    def scheduler_settings(self) -> Any:
        """The config object the scheduler takes (baselines read the fields they know)."""
        if self.scheduler == "envsched":
            return SchedulerConfig(
                batch_size=self.batch_size, group_size=self.group_size, **self.scheduler_config
            )
        settings = SchedulerConfig(batch_size=self.batch_size, group_size=self.group_size)
        for name, value in self.scheduler_config.items():
            setattr(settings, name, value)
        return settings


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


def build_scheduler(store: Warehouse, config: CampaignConfig) -> tuple[Any, TaskCatalog]:
    """A fresh scheduler over the campaign's pool, on the graph stored in the warehouse."""
    catalog = campaign_catalog(store, config)
    cls = SCHEDULERS[config.scheduler]
    if cls is EnvSched:
        within = store.query("SELECT src, dst, similarity FROM edges_within")
        cross = store.query("SELECT src, dst, similarity FROM edges_cross WHERE campaign_id = ''")
        pool = set(catalog.task_ids)
        within = within[within.src.isin(pool) & within.dst.isin(pool)]
        cross = cross[cross.src.isin(pool) & cross.dst.isin(pool)]
        scheduler = EnvSched(
            catalog, config.scheduler_settings(), seed=config.seed, within_edges=within, cross_edges=cross
        )
    else:
        scheduler = cls(catalog, config.scheduler_settings(), seed=config.seed)
    return scheduler, catalog


def restore_scheduler(
    store: Warehouse, config: CampaignConfig, step: int, phase: str
) -> tuple[Any, TaskCatalog]:
    """The scheduler exactly as it was after ``phase`` of ``step`` (step 0: freshly built)."""
    scheduler, catalog = build_scheduler(store, config)
    if step > 0:
        blob = store.scheduler_state(config.campaign_id, step, phase)
        if blob is None:
            raise RuntimeError(
                f"campaign '{config.campaign_id}': no saved scheduler state for step {step} ({phase})"
            )
        scheduler.load_state_dict(pickle.loads(blob))
    return scheduler, catalog


def dump_state(scheduler: Any) -> bytes:
    return pickle.dumps(scheduler.state_dict(), protocol=pickle.HIGHEST_PROTOCOL)
