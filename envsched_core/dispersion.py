"""TaskDispersion: each task's own reward variance / mean(1 - mean) ratio, relative to its environment's.

The outcome model predicts a group's variance from the predicted success rate p as c_env p (1 - p): the
ratio c_env is pooled per environment, so that graded rewards count less variance than binary ones. A task
whose graded reward is the same partial credit in every rollout (ACEBench: a task scored 0.167 in each of its
55 groups, never any spread) then looks as mixed as its environment's others, and exploitation re-picked it
every other step. This keeps, per task, the sums over its groups of the realised variance and of
mean (1 - mean), and shrinks their ratio toward the environment's with ``prior`` pseudo-groups:

    r_i = (sum_g v_g + prior c_env q_i) / (sum_g m_g (1 - m_g) + prior q_i),   q_i = the task's mean m (1 - m),
    factor_i = r_i / c_env = (sum_g v_g / c_env + prior q_i) / (sum_g m_g (1 - m_g) + prior q_i).

factor_i is 1 for a task never seen with 0 < m < 1 and for one whose spread matches its environment's;
it falls as 1 / (1 + groups / prior) for a task that never spreads.
"""

from __future__ import annotations

import numpy as np


class TaskDispersion:
    """Per-task sums of realised variance and of mean (1 - mean) over its groups."""

    def __init__(self, n_tasks: int, prior: float):
        self.prior = prior
        self.var_sum = np.zeros(n_tasks)
        self.spread_sum = np.zeros(n_tasks)  # sum of m (1 - m)
        self.groups = np.zeros(n_tasks)  # groups with 0 < m < 1

    def update(self, rows: np.ndarray, mean: np.ndarray, variance: np.ndarray) -> None:
        """Fold one step's groups (unique task rows) in; all-fail / all-pass groups carry no ratio."""
        inside = (mean > 0) & (mean < 1)
        self.var_sum[rows[inside]] += variance[inside]
        self.spread_sum[rows[inside]] += mean[inside] * (1 - mean[inside])
        self.groups[rows[inside]] += 1

    def factor(self, env_ratio: np.ndarray) -> np.ndarray:
        """Per task: its shrunk ratio over its environment's (``env_ratio`` per task, > 0)."""
        q = np.divide(self.spread_sum, self.groups, out=np.zeros_like(self.spread_sum), where=self.groups > 0)
        den = self.spread_sum + self.prior * q
        num = self.var_sum / np.maximum(env_ratio, 1e-12) + self.prior * q
        return np.divide(num, den, out=np.ones_like(den), where=den > 0)

    def state_dict(self) -> dict:
        return {
            "var_sum": self.var_sum.copy(),
            "spread_sum": self.spread_sum.copy(),
            "groups": self.groups.copy(),
        }

    def load_state_dict(self, state: dict) -> None:
        for key in ("var_sum", "spread_sum", "groups"):
            setattr(self, key, np.array(state[key], copy=True))
