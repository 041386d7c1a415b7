"""TaskStats: discounted own history per task (EnvSched, Yang et al., 2026, "Own history").

Per task i: visit weight n_i, discounted mean observed variance m_i, discounted mean reward mu_i,
trend (discounted mean change of the group mean reward between visits) and the last step seen.
Discount gamma per step of age is applied lazily: n_i is stored as of ``last_step`` and decayed on read,
so an update touches only the observed tasks.

A visit is one GRPO group: the G rewards of task i at step t; its observed variance is their
population variance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .catalog import TaskCatalog

ROLLOUT_COLUMNS = ("task_id", "step", "reward")
CORRECT_REWARD = 1.0
"""A rollout is *correct* when its reward is >= this: the binary accuracy of DPS / MoPPS (their code
converts every reward with ``acc >= 1``), so a graded reward counts as correct only at full credit."""
FLOAT_NOISE = 1e-12
"""A group variance below this is float rounding: the group's rewards are all equal."""


def validate_rollouts(rollouts: pd.DataFrame, catalog: TaskCatalog) -> np.ndarray:
    """Check a rollouts frame (task_id, step, reward); return its task row indices. Raises ValueError."""
    missing = [c for c in ROLLOUT_COLUMNS if c not in rollouts.columns]
    if missing:
        raise ValueError(f"rollouts: missing column(s) {missing}; required: {list(ROLLOUT_COLUMNS)}.")
    reward = pd.to_numeric(rollouts["reward"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(reward) | (reward < 0) | (reward > 1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"rollouts: reward must be in [0, 1]; row {row} (task_id="
            f"{rollouts['task_id'].iloc[row]!r}) has reward={rollouts['reward'].iloc[row]!r} "
            f"({int(bad.sum())} bad rows)."
        )
    step = pd.to_numeric(rollouts["step"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(step) | (step != np.round(step)) | (step < 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"rollouts: step must be a non-negative integer; row {row} has "
            f"step={rollouts['step'].iloc[row]!r}."
        )
    return catalog.indices_of(rollouts["task_id"].astype(str).to_numpy(dtype=object), what="rollouts task_id")


def group_outcomes(rollouts: pd.DataFrame, idx: np.ndarray) -> pd.DataFrame:
    """One row per (task, step) group, sorted by step then task index: idx, step, mean and population
    variance of its rewards, its binary accuracy (share of rollouts with reward >= ``CORRECT_REWARD``)
    and size. Numpy bincounts over the (step, task) key: this runs once per observe of every step."""
    reward = rollouts["reward"].to_numpy(dtype=float)
    step = rollouts["step"].to_numpy(dtype=np.int64)
    idx = np.asarray(idx, dtype=np.int64)
    width = int(idx.max()) + 1 if len(idx) else 1
    keys, inv = np.unique(step * width + idx, return_inverse=True)
    inv = inv.ravel()
    size = np.bincount(inv, minlength=len(keys)).astype(float)
    mean = np.bincount(inv, weights=reward, minlength=len(keys)) / size
    # population variance as the mean squared deviation (two passes: no cancellation error)
    variance = np.bincount(inv, weights=(reward - mean[inv]) ** 2, minlength=len(keys)) / size
    correct = np.bincount(inv, weights=(reward >= CORRECT_REWARD).astype(float), minlength=len(keys))
    return pd.DataFrame(
        {
            "step": keys // width,
            "idx": keys % width,
            "mean": mean,
            "accuracy": correct / size,
            "size": size.astype(np.int64),
            "variance": variance,
        }
    )


def group_summary(idx: np.ndarray, reward: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per distinct task row in ``idx`` (one step's rollouts): (rows, mean, population variance,
    accuracy, count), where accuracy is the share of rewards >= ``CORRECT_REWARD``. Bincounts, so a
    million rollouts stay cheap; variances below ``FLOAT_NOISE`` are float noise and become exactly 0 (an
    all-equal group must not look "mixed")."""
    rows, inv = np.unique(idx, return_inverse=True)
    count = np.bincount(inv).astype(float)
    mean = np.bincount(inv, weights=reward) / count
    var = np.maximum(np.bincount(inv, weights=reward * reward) / count - mean * mean, 0.0)
    var[var < FLOAT_NOISE] = 0.0
    accuracy = np.bincount(inv, weights=(reward >= CORRECT_REWARD).astype(float)) / count
    return rows, mean, var, accuracy, count


class TaskStats:
    """Discounted per-task statistics over N catalogue rows, updated one step's groups at a time."""

    def __init__(self, n_tasks: int, gamma: float = 0.8, prior_variance: float = 0.05):
        self.gamma = gamma
        self.prior_variance = prior_variance
        self.n = np.zeros(n_tasks)  # visit weight as of last_step
        self.m = np.zeros(n_tasks)  # discounted mean observed variance
        self.mu = np.zeros(n_tasks)  # discounted mean reward
        self.trend = np.zeros(n_tasks)  # discounted mean change of group mean reward between visits
        self.last_step = np.full(n_tasks, -1, dtype=np.int64)
        # v_0: discounted running mean of every observed group variance
        self.v0_sum = 0.0
        self.v0_weight = 0.0
        self.v0_step = -1

    def __len__(self) -> int:
        return len(self.n)

    @property
    def observed(self) -> np.ndarray:
        """Row indices of tasks seen at least once."""
        return np.flatnonzero(self.last_step >= 0)

    @property
    def any_observed(self) -> bool:
        return self.v0_step >= 0

    def n_at(self, step: int) -> np.ndarray:
        """Visit weights decayed to ``step``: n_i * gamma^(step - last_step_i); 0 for unseen tasks."""
        out = np.zeros_like(self.n)
        seen = self.observed
        age = np.maximum(step - self.last_step[seen], 0)
        out[seen] = self.n[seen] * self.gamma**age
        return out

    def v0(self) -> float:
        """Global prior v_0: running mean observed variance (prior_variance before any rollout)."""
        return self.v0_sum / self.v0_weight if self.v0_weight > 0 else self.prior_variance

    def update(self, idx: np.ndarray, step: int, variance: np.ndarray, mean: np.ndarray) -> None:
        """Fold one step's groups (unique task rows ``idx``) into the discounted statistics."""
        seen_before = self.last_step[idx] >= 0
        decay = np.where(seen_before, self.gamma ** np.maximum(step - self.last_step[idx], 0), 0.0)
        n_old = self.n[idx] * decay
        n_new = n_old + 1.0
        delta = np.where(seen_before, mean - self.mu[idx], 0.0)
        self.m[idx] = (n_old * self.m[idx] + variance) / n_new
        self.mu[idx] = (n_old * self.mu[idx] + mean) / n_new
        self.trend[idx] = np.where(seen_before, (n_old * self.trend[idx] + delta) / n_new, 0.0)
        self.n[idx] = n_new
        self.last_step[idx] = np.maximum(self.last_step[idx], step)
        age = max(step - self.v0_step, 0) if self.v0_step >= 0 else 0
        self.v0_sum = self.v0_sum * self.gamma**age + float(np.sum(variance))
        self.v0_weight = self.v0_weight * self.gamma**age + len(idx)
        self.v0_step = max(self.v0_step, step)

    def apply(self, groups: pd.DataFrame) -> None:
        """Fold the output of :func:`group_outcomes`, oldest step first."""
        for step, part in groups.groupby("step", sort=True):
            self.update(
                part["idx"].to_numpy(), int(step), part["variance"].to_numpy(), part["mean"].to_numpy()
            )

    @classmethod
    def from_rollouts(
        cls, rollouts: pd.DataFrame, catalog: TaskCatalog, gamma: float = 0.8, prior_variance: float = 0.05
    ) -> TaskStats:
        """Statistics from a whole rollouts history (task_id, step, reward)."""
        stats = cls(len(catalog), gamma=gamma, prior_variance=prior_variance)
        stats.apply(group_outcomes(rollouts, validate_rollouts(rollouts, catalog)))
        return stats

    @classmethod
    def from_frame(
        cls, frame: pd.DataFrame, catalog: TaskCatalog, gamma: float = 0.8, prior_variance: float = 0.05
    ) -> TaskStats:
        """Per-task statistics from a stored table (task_id, n, m, mu, trend, last_step), the inverse of
        :meth:`to_frame`. The global prior v_0 is not part of that table and starts empty."""
        stats = cls(len(catalog), gamma=gamma, prior_variance=prior_variance)
        if len(frame):
            rows = catalog.indices_of(
                frame["task_id"].astype(str).to_numpy(dtype=object), what="task_stats task_id"
            )
            for key in ("n", "m", "mu", "trend"):
                getattr(stats, key)[rows] = frame[key].to_numpy(dtype=float)
            stats.last_step[rows] = frame["last_step"].to_numpy(dtype=np.int64)
        return stats

    def fold(self, rollouts: pd.DataFrame, catalog: TaskCatalog) -> np.ndarray:
        """Fold new rollouts (task_id, step, reward) in, oldest step first; returns the rows they touched."""
        groups = group_outcomes(rollouts, validate_rollouts(rollouts, catalog))
        self.apply(groups)
        return np.unique(groups["idx"].to_numpy())

    def to_frame(self, catalog: TaskCatalog, rows: np.ndarray | None = None) -> pd.DataFrame:
        """Observed tasks (or the given ``rows``) as a table (task_id, n, m, mu, trend, last_step)."""
        seen = self.observed if rows is None else np.asarray(rows, dtype=np.int64)
        return pd.DataFrame(
            {
                "task_id": catalog.task_ids[seen],
                "n": self.n[seen],
                "m": self.m[seen],
                "mu": self.mu[seen],
                "trend": self.trend[seen],
                "last_step": self.last_step[seen],
            }
        )

    def state_dict(self) -> dict:
        return {
            "n": self.n.copy(),
            "m": self.m.copy(),
            "mu": self.mu.copy(),
            "trend": self.trend.copy(),
            "last_step": self.last_step.copy(),
            "v0_sum": self.v0_sum,
            "v0_weight": self.v0_weight,
            "v0_step": self.v0_step,
        }

    def load_state_dict(self, state: dict) -> None:
        if len(state["n"]) != len(self.n):
            raise ValueError(f"TaskStats: state has {len(state['n'])} tasks, this catalogue {len(self.n)}.")
        for key in ("n", "m", "mu", "trend", "last_step"):
            setattr(self, key, np.array(state[key], copy=True))
        self.v0_sum, self.v0_weight, self.v0_step = state["v0_sum"], state["v0_weight"], int(state["v0_step"])
