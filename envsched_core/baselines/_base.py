"""Shared plumbing of the baseline schedulers: sizes, input checks, batch frames, resumable state.

Every baseline answers the same calls as `EnvSched` (`select(step)`, `observe(rollouts, more=False)`,
`state_dict()`, `load_state_dict(state)`), plus `refill(step)`, which only the dynamic-sampling
baselines (DAPO, GRESO) use to ask for more groups after seeing a step's rewards. A subclass implements
`_select`, `_update` and, if it refills, `_refill` and `_resume_step`; the public calls here fold the groups
`observe` holds first.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd

from ..catalog import ids_digest
from ..held import HeldCalls
from ..state_fit import StateMismatch, check_catalog
from ..stats import group_summary

BATCH_COLUMNS = ["task_id", "env_id", "role", "predicted_variance"]
ROLLOUT_COLUMNS = ("task_id", "step", "reward")


def batch_sizes(config: Any) -> tuple[int, int]:
    """(B, G) from any config carrying `batch_size` and `group_size` (SchedulerConfig or ours)."""
    try:
        b, g = int(config.batch_size), int(config.group_size)
    except AttributeError as exc:
        raise ValueError(
            f"config needs batch_size and group_size fields, got {type(config).__name__}"
        ) from exc
    if b < 1 or g < 1:
        raise ValueError(f"batch_size and group_size must be >= 1, got B={b}, G={g}")
    return b, g


def param(config: Any, name: str, default: Any) -> Any:
    """A baseline hyper-parameter: the config's field when it has one, else the paper's default."""
    return getattr(config, name, default)


def task_table(catalog: Any) -> tuple[np.ndarray, np.ndarray]:
    """(task_ids, env_ids) per task from a `TaskCatalog`, an object with `.tasks`, or a DataFrame."""
    tasks = catalog if isinstance(catalog, pd.DataFrame) else getattr(catalog, "tasks", None)
    if isinstance(tasks, pd.DataFrame):
        missing = {"task_id", "env_id"} - set(tasks.columns)
        if missing:
            raise ValueError(f"catalog tasks are missing column(s) {sorted(missing)}")
        return tasks["task_id"].astype(str).to_numpy(), tasks["env_id"].astype(str).to_numpy()
    if all(hasattr(catalog, a) for a in ("task_ids", "env", "env_ids")):  # envsched_core.TaskCatalog
        env_ids = np.asarray(catalog.env_ids, dtype=object)[np.asarray(catalog.env)]
        return np.asarray(catalog.task_ids).astype(str), env_ids.astype(str)
    raise ValueError("catalog must be a TaskCatalog, a DataFrame, or expose `.tasks` with task_id and env_id")


METRICS = ("acc", "score")


def signal_metric(config: Any) -> str:
    """Which per-group success signal DPS / MoPPS learn from: ``acc`` (default, as in their reference
    code: the share of rollouts with reward >= 1) or ``score`` (the mean graded reward)."""
    metric = str(param(config, "metric", "acc"))
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {list(METRICS)}, got {metric!r}")
    return metric


class GroupStats:
    """Per-task summary of one `observe` call: index, mean reward, population variance, count, and
    binary accuracy (share of rollouts with reward >= 1, `envsched_core.stats.CORRECT_REWARD`)."""

    def __init__(
        self, idx: np.ndarray, mean: np.ndarray, var: np.ndarray, count: np.ndarray, accuracy: np.ndarray
    ):
        self.idx, self.mean, self.var, self.count, self.accuracy = idx, mean, var, count, accuracy

    def success(self, metric: str) -> np.ndarray:
        """The per-group success rate s of ``metric``: accuracy for ``acc``, the mean for ``score``."""
        return self.accuracy if metric == "acc" else self.mean


class BaselineScheduler:
    """Base class: holds the task table, the RNG, and the checks every scheduler shares."""

    #: names of numpy-array / scalar attributes that make up the resumable state
    _state_fields: tuple[str, ...] = ()
    #: True when `refill(step)` may ask for more rounds after a step's rewards (DAPO, GRESO)
    dynamic_sampling = False

    def __init__(self, catalog: Any, config: Any, seed: int = 0):
        self.task_ids, self.env_ids = task_table(catalog)
        self.batch_size, self.group_size = batch_sizes(config)
        self.config = config
        if len(set(self.task_ids)) != len(self.task_ids):
            raise ValueError("the catalog has duplicate task_id values")
        self.n_tasks = len(self.task_ids)
        if self.n_tasks < self.batch_size:
            raise ValueError(f"catalog has {self.n_tasks} tasks, fewer than batch_size={self.batch_size}")
        self._index = pd.Index(self.task_ids)
        self._digest = ids_digest(self.task_ids)
        self.rng = np.random.default_rng(seed)
        self._held = HeldCalls()  # observe(more=True): checked, not folded; (rollouts, GroupStats) each

    # ---- batch frames -------------------------------------------------------------------------
    def _frame(
        self,
        idx: np.ndarray,
        roles: np.ndarray | str,
        predicted: np.ndarray | None = None,
        **extra: np.ndarray,
    ) -> pd.DataFrame:
        idx = np.asarray(idx, dtype=np.int64)
        pred = np.full(len(idx), np.nan) if predicted is None else np.asarray(predicted, dtype=float)
        out = pd.DataFrame(
            {
                "task_id": self.task_ids[idx],
                "env_id": self.env_ids[idx],
                "role": np.broadcast_to(np.asarray(roles, dtype=object), len(idx)).copy(),
                "predicted_variance": pred,
            }
        )
        for name, values in extra.items():
            out[name] = values
        return out

    def _empty(self) -> pd.DataFrame:
        return self._frame(np.empty(0, dtype=np.int64), "oversample")

    def select(self, step: int) -> pd.DataFrame:
        """The batch for ``step``."""
        self._fold_held()
        return self._select(step)

    def _select(self, step: int) -> pd.DataFrame:  # pragma: no cover - overridden
        raise NotImplementedError

    def refill(self, step: int) -> pd.DataFrame:
        """More tasks to roll out this step (dynamic sampling); empty when the step is complete."""
        self._fold_held()
        return self._refill(step)

    def _refill(self, step: int) -> pd.DataFrame:
        return self._empty()

    def resume_step(self, step: int, task_ids) -> None:
        """Take up ``step``, whose first round (``task_ids``) another instance selected, before refilling it
        (dynamic sampling: DAPO, GRESO); the others have nothing to take up."""
        self._fold_held()
        self._resume_step(step, task_ids)

    def _resume_step(self, step: int, task_ids) -> None:
        pass

    def _rows(self, task_ids) -> np.ndarray:
        """Catalogue rows of the given task ids that this scheduler knows."""
        rows = self._index.get_indexer(pd.Index(task_ids).astype(str))
        return rows[rows >= 0]

    # ---- observations -------------------------------------------------------------------------
    def _group_stats(self, rollouts: pd.DataFrame) -> GroupStats:
        """Check rollouts (raises ValueError, touching no state) and reduce them to per-task groups."""
        if not isinstance(rollouts, pd.DataFrame):
            raise ValueError("rollouts must be a pandas DataFrame")
        missing = [c for c in ROLLOUT_COLUMNS if c not in rollouts.columns]
        if missing:
            raise ValueError(f"rollouts is missing column(s) {missing}; expected {list(ROLLOUT_COLUMNS)}")
        reward = pd.to_numeric(rollouts["reward"], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(reward) | (reward < 0.0) | (reward > 1.0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"rollouts row {row}: reward {rollouts['reward'].iloc[row]!r} is not in [0, 1]")
        idx = self._index.get_indexer(rollouts["task_id"].astype(str))
        if (idx < 0).any():
            unknown = rollouts["task_id"].astype(str).to_numpy()[idx < 0][:5].tolist()
            raise ValueError(f"rollouts name unknown task_id(s) {unknown} (not in the catalog)")
        uniq, mean, var, accuracy, count = group_summary(idx, reward)
        return GroupStats(uniq, mean, var, count, accuracy)

    def observe(self, rollouts: pd.DataFrame, more: bool = False) -> None:
        """Fold rollouts (task_id, step, reward) in. ``more=True``: more groups of the step follow in later calls;
        these are checked now and folded in with them as one call, at the next call without it or before the
        next select, refill or state_dict. (DPS moves every task it has seen one step along per fold, so a step
        handed over in parts without it would count as several.)"""
        self._held.hold(rollouts, self._group_stats(rollouts))  # raises on bad input, touching no state
        if not more:
            self._fold_held()

    def _fold_held(self) -> None:
        # one call's groups: a task's rollouts from several calls make one group
        taken = self._held.take(lambda rollouts, _: self._group_stats(rollouts))
        if taken is not None and len(taken[1].idx):
            self._update(taken[1])

    def _update(self, stats: GroupStats) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    # ---- resume -------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        self._fold_held()  # a saved state never leaves held groups out
        state = {name: copy.deepcopy(getattr(self, name)) for name in self._state_fields}
        state["rng"] = copy.deepcopy(self.rng.bit_generator.state)
        state["n_tasks"] = self.n_tasks
        state["catalog_digest"] = self._digest
        if isinstance(getattr(self, "sampler", None), EpochSampler):
            state["sampler"] = self.sampler.state()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state saved by ``state_dict``. One that does not fit (saved by a release with other
        state fields, or over another catalogue) raises StateMismatch before anything is restored."""
        needed = set(self._state_fields) | {"rng", "n_tasks"}
        missing = needed - set(state)
        if missing:
            raise StateMismatch(f"{type(self).__name__}: state is missing key(s) {sorted(missing)}")
        check_catalog(type(self).__name__, state, self.n_tasks, self._digest)
        self._held.drop()  # they belong to the state being replaced
        for name in self._state_fields:
            setattr(self, name, copy.deepcopy(state[name]))
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])
        if "sampler" in state and isinstance(getattr(self, "sampler", None), EpochSampler):
            self.sampler.load(state["sampler"])


class EpochSampler:
    """A shuffled pass over the task pool, like a training dataloader (reshuffled every epoch).

    DAPO, GRESO, MoPPS and DPS all draw their (candidate) prompts from such a dataloader.
    State: the permutation, the cursor and the epoch (completed passes; GRESO adapts only once it is
    > 0), plain arrays/ints so `state_dict` can copy them.
    """

    def __init__(self, n: int, rng: np.random.Generator):
        self.n = n
        self.perm = rng.permutation(n)
        self.cursor = 0
        self.epoch = 0

    def take(self, k: int, rng: np.random.Generator, exclude: np.ndarray | None = None) -> np.ndarray:
        """Next k task indices, skipping `exclude` (a bool mask) so one step never repeats a task."""
        taken: list[np.ndarray] = []
        need = min(k, self.n - (0 if exclude is None else int(exclude.sum())))
        blocked = np.zeros(self.n, dtype=bool) if exclude is None else exclude.copy()
        while need > 0:
            if self.cursor >= self.n:
                self.perm = rng.permutation(self.n)
                self.cursor = 0
                self.epoch += 1
            chunk = self.perm[self.cursor : self.cursor + need]
            self.cursor += len(chunk)
            chunk = chunk[~blocked[chunk]]
            blocked[chunk] = True
            taken.append(chunk)
            need -= len(chunk)
        return np.concatenate(taken) if taken else np.empty(0, dtype=np.int64)

    def state(self) -> dict[str, Any]:
        return {"perm": self.perm.copy(), "cursor": self.cursor, "epoch": self.epoch}

    def load(self, state: dict[str, Any]) -> None:
        self.perm, self.cursor = np.asarray(state["perm"]).copy(), int(state["cursor"])
        self.epoch = int(state.get("epoch", 0))  # states saved before epochs were counted
