"""TaskLearnability: does a task's success move when it is trained on, as the other tasks' does?

A group's reward spread teaches the policy only if the spread comes from what the policy does. A verifier that
flips a coin, a nondeterministic environment, or a task whose one fatal mistake the policy cannot learn gives
groups that look maximally informative to a variance ranker, and it re-picks them every step (the `flaky`
regime of `envsched_core.worlds`; ACEBench's trap tasks, docs/scheduler.md). Such a task's success stays where
it was however often it is trained; a learnable task's moves.

Per task i seen at least three times: d_i = latest group mean - second group mean, V_i = the summed variance of
its groups from the second to the one before the latest (what it was trained on in between). The first visit
is only counted: a scheduler revisits a task because its first group looked informative, so that group is a
biased draw (the winner's curse; on the flaky worlds it made the pooled rate negative for 25 steps). The pooled
rate R = sum_i d_i / sum_i V_i over these tasks says how much success a unit of trained variance buys here;
task i's expected progress is e_i = R V_i. Its own ratio d_i / e_i has sampling variance s_i^2 / e_i^2,
s_i^2 = (v_base + v_last) / G (two group means), and a prior N(1, prior_sd^2): the posterior mean
    lambda_i = (1 / prior_sd^2 + d_i e_i / s_i^2) / (1 / prior_sd^2 + e_i^2 / s_i^2)
stays near 1 until a task has been trained on enough to show that it does not move, and falls toward 0 for one
that never does. The factor is min(max(lambda_i, FLOOR), 1): progress beyond the pooled rate earns nothing, and
a task is never ruled out for good. Exactly 1 everywhere while R <= 0 or fewer than MIN_TASKS tasks qualify.
"""

from __future__ import annotations

import numpy as np

MIN_TASKS = 5  # tasks with a baseline and a later visit needed before the pooled rate means anything
FLOOR = 0.05  # smallest factor: a task that stopped moving still ranks among its kind
STATE_KEYS = ("base_mean", "base_var", "last_mean", "last_var", "trained", "visits")


class TaskLearnability:
    """Per-task progress against the pooled progress per unit of trained variance; ``factor()`` in [FLOOR, 1]."""

    def __init__(self, n_tasks: int, group_size: int, prior_sd: float):
        self.group_size, self.prior_sd = group_size, float(prior_sd)
        self.base_mean = np.full(n_tasks, np.nan)
        self.base_var = np.zeros(n_tasks)
        self.last_mean = np.full(n_tasks, np.nan)
        self.last_var = np.zeros(n_tasks)
        self.trained = np.zeros(n_tasks)  # V_i: variance of the groups from the baseline to before the latest
        self.visits = np.zeros(n_tasks, np.int64)
        self._factor: np.ndarray | None = None

    def update(self, rows: np.ndarray, mean: np.ndarray, variance: np.ndarray) -> None:
        """Fold one step's groups (unique task rows) in."""
        self.visits[rows] += 1
        base, later = self.visits[rows] == 2, self.visits[rows] > 2
        self.trained[rows[later]] += self.last_var[rows[later]]
        self.base_mean[rows[base]] = mean[base]
        self.base_var[rows[base]] = variance[base]
        self.last_mean[rows] = mean
        self.last_var[rows] = variance
        self._factor = None

    def pooled_rate(self) -> float:
        """R: success gained per unit of trained variance (NaN while fewer than MIN_TASKS tasks qualify)."""
        again = self.trained > 0
        if again.sum() < MIN_TASKS:
            return float("nan")
        return float((self.last_mean - self.base_mean)[again].sum() / self.trained[again].sum())

    def factor(self) -> np.ndarray:
        """Per task: the shrunk ratio of its progress to the pooled rate's, in [FLOOR, 1] (1 = no evidence)."""
        if self._factor is not None:
            return self._factor
        out = np.ones(len(self.trained))
        rate = self.pooled_rate()
        if rate > 0:
            again = np.flatnonzero(self.trained > 0)
            d = (self.last_mean - self.base_mean)[again]
            e = rate * self.trained[again]
            s2 = np.maximum(self.base_var[again] + self.last_var[again], 1e-3) / self.group_size
            prior = 1.0 / self.prior_sd**2
            out[again] = np.clip((prior + d * e / s2) / (prior + e * e / s2), FLOOR, 1.0)
        self._factor = out
        return out

    def state_dict(self) -> dict:
        return {key: getattr(self, key).copy() for key in STATE_KEYS}

    def load_state_dict(self, state: dict) -> None:
        for key in STATE_KEYS:
            setattr(self, key, np.array(state[key], copy=True))
        self._factor = None
