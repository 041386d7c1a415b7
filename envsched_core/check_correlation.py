"""CheckCorrelation (`SchedulerConfig.full_pass_by_correlation`): how much a graded verifier's partial checks move
together within one rollout, per environment, and the full-pass weight that follows from it.

A graded reward r = passed / K reads two kinds of verifier alike. Independent checks (unit tests passed out of K,
the simulator's graded worlds) measure the success rate K times per rollout, and the graded mean is the best
reading of it. Progress along a sequence (BFCL's turns before the first failing one, ACEBench's milestones) moves
its checks together: the partial credit says little beyond whether the rollout passed, and the full-pass blend of
`full_pass_weight` reads it better (docs/scheduler.md, "Full passes or partial credit"). One weight for both cost the
simulator's graded worlds 1-3 steps at random's step-60 score and 11 in `few-large` at step 120.

The within-rollout correlation rho of the checks says which kind a verifier is: a group's unbiased variance is
m (1 - m) (1 + (K - 1) rho) / K, so
    rho_e = sum over the environment's graded groups of (K v - m (1 - m)) / sum of (K - 1) m (1 - m),
K each task's reward grid (the least common multiple of the denominators its rewards have shown, at most MAX_K),
v a group's unbiased variance, m its mean; only groups of two or more rollouts with 0 < m < 1 on a grid of K >= 2
count. rho_e is shrunk to the pooled rho of every environment by PRIOR_GROUPS typical groups, and the pooled rho to
RHO_PRIOR by as many, so that an environment starts with the blend. The blend weight of environment e is
    full_pass_weight x min(1, max(rho_e, 0) / RHO_FULL).
Measured with EnvSched's own picks (seed 0, 20-40 steps, a throwaway script): the simulator's independent checks 0.01-0.02,
the latent worlds' correlated ones 0.03-0.10, tau-bench 0.14, BFCL 0.25, ACEBench 0.44, multi-step chains 0.59.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MAX_K = 12  # a reward grid finer than twelfths is read as continuous (a judge's score): not counted
RHO_FULL = 0.1  # the correlation from which the whole full-pass weight applies
RHO_PRIOR = 0.3  # the pooled correlation before any graded group: the blend on, as without this field
PRIOR_GROUPS = 5.0  # pseudo-groups behind each prior
GRID_TOLERANCE = 1e-6
STATE_KEYS = ("grid", "num", "den", "groups")


def reward_grid(reward: np.ndarray) -> np.ndarray:
    """Per reward, the least K in 1..MAX_K with K r an integer (1 for 0 and 1), 0 where there is none."""
    out = np.zeros(len(reward), dtype=np.int64)
    for k in range(MAX_K, 0, -1):  # descending, so the least K is written last
        on_grid = np.abs(reward * k - np.rint(reward * k)) < GRID_TOLERANCE
        out[on_grid] = k
    return out


class CheckCorrelation:
    """Per task its reward grid K; per environment the sums behind rho_e; ``weight`` gives the blend per env."""

    def __init__(self, n_tasks: int, n_envs: int):
        self.grid = np.ones(n_tasks, dtype=np.int64)  # 0: off the grid (continuous rewards)
        self.num = np.zeros(n_envs)
        self.den = np.zeros(n_envs)
        self.groups = np.zeros(n_envs)

    def update(
        self, idx: np.ndarray, reward: np.ndarray, groups: pd.DataFrame, group_env: np.ndarray
    ) -> None:
        """Rollouts of task rows ``idx`` returned ``reward``; ``groups`` are their groups (`group_outcomes`),
        of environments ``group_env``."""
        grid = reward_grid(reward)
        on = grid > 0
        np.lcm.at(self.grid, idx[on], grid[on])  # 0 (off the grid) stays 0
        self.grid[idx[~on]] = 0
        self.grid[idx[self.grid[idx] > MAX_K]] = 0
        k = self.grid[groups["idx"].to_numpy()]
        n, m = groups["size"].to_numpy(dtype=float), groups["mean"].to_numpy()
        counted = (k >= 2) & (n >= 2) & (m > 0) & (m < 1)
        k, n, m, env = k[counted], n[counted], m[counted], group_env[counted]
        v = groups["variance"].to_numpy()[counted] * n / (n - 1)
        np.add.at(self.num, env, k * v - m * (1 - m))
        np.add.at(self.den, env, (k - 1) * m * (1 - m))
        np.add.at(self.groups, env, 1.0)

    def correlation(self) -> np.ndarray:
        """(n_envs,) rho_e, shrunk to the pooled rho, which is shrunk to RHO_PRIOR."""
        n_groups = self.groups.sum()
        unit = PRIOR_GROUPS * (self.den.sum() / n_groups if n_groups > 0 else 1.0)  # typical groups' den
        pooled = (self.num.sum() + unit * RHO_PRIOR) / (self.den.sum() + unit)
        return (self.num + unit * pooled) / (self.den + unit)

    def weight(self, full_pass_weight: float) -> np.ndarray:
        """(n_envs,) the full-pass weight of each environment's blend."""
        return full_pass_weight * np.clip(self.correlation() / RHO_FULL, 0.0, 1.0)

    def state_dict(self) -> dict:
        return {key: getattr(self, key).copy() for key in STATE_KEYS}

    def load_state_dict(self, state: dict) -> None:
        for key in STATE_KEYS:
            setattr(self, key, np.array(state[key], copy=True))
