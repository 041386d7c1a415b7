"""Reward floors (`SchedulerConfig.reward_floor`): an environment whose failed rollouts score above 0.

Some environments give credit for a failed but well-formed attempt (a format reward added to the verifier's, a
minimum partial credit), so their rewards live in [floor, 1] while other environments' live in [0, 1]. GRPO
normalises each group's advantages, so a group teaches the same on either scale; the reward's variance does not
stay the same (it shrinks by (1 - floor)^2). Read as it comes, EnvSched under-valued such environments: in the
`floor` stress worlds (half the environments with floor 0.2) they got 8-18% of its picks instead of about half,
and it spread each batch over 16 environments instead of 22 (docs/scheduler.md, "Rewards with a floor").

An environment's floor f is the lowest reward it has returned, once a whole group scored exactly that (at least two
rollouts, every one at f < 1: an all-fail group); until then it is 0. Every reward of it is read as (r - f) / (1 - f):
the floor becomes 0 and a full pass stays 1. Where a 0 has been seen (every environment of the other worlds, after
its first failures) nothing changes, and a graded environment whose first groups happened to score above 0 (a
mixed group of 1 and 0.5) is not read on another scale, since no whole group sat at its lowest reward.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .stats import CORRECT_REWARD, FLOAT_NOISE

SAME = 1e-9  # a group's mean reward and its rollouts' differ by float rounding only


class RewardFloors:
    """Per environment: the lowest reward returned, and the lowest at which a whole group sat (inf before any)."""

    def __init__(self, n_envs: int):
        self.lowest = np.full(n_envs, np.inf)
        self.lowest_group = np.full(n_envs, np.inf)

    def update(
        self, env: np.ndarray, reward: np.ndarray, groups: pd.DataFrame, group_env: np.ndarray
    ) -> None:
        """Rollouts of environments ``env`` returned ``reward``; ``groups`` are their groups (`group_outcomes`:
        mean, variance, size), of environments ``group_env``. Its all-fail groups (at least two rollouts, all
        equal, below a full pass) are the ones that can confirm a floor."""
        flat = (
            (groups["variance"].to_numpy() < FLOAT_NOISE)
            & (groups["size"].to_numpy() >= 2)
            & (groups["mean"].to_numpy() < CORRECT_REWARD)
        )
        np.minimum.at(self.lowest, env, reward)
        np.minimum.at(self.lowest_group, group_env[flat], groups["mean"].to_numpy()[flat])

    @property
    def floor(self) -> np.ndarray:
        """(n_envs,) each environment's floor: its lowest reward where a whole group sat at it, else 0."""
        confirmed = (self.lowest_group <= self.lowest + SAME) & (self.lowest < CORRECT_REWARD)
        return np.where(confirmed, self.lowest, 0.0)

    def rescale(self, env: np.ndarray, reward: np.ndarray) -> np.ndarray:
        """``reward`` read above its environment's floor: (r - f) / (1 - f); a full pass stays a full pass."""
        floor = self.floor[env]
        return np.where(
            reward < CORRECT_REWARD, np.clip((reward - floor) / (CORRECT_REWARD - floor), 0.0, 1.0), reward
        )

    def state_dict(self) -> dict:
        return {"lowest": self.lowest.copy(), "lowest_group": self.lowest_group.copy()}

    def load_state_dict(self, state: dict) -> None:
        self.lowest = np.array(state["lowest"], dtype=float, copy=True)
        self.lowest_group = np.array(state["lowest_group"], dtype=float, copy=True)
