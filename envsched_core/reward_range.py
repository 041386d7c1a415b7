"""Reward ranges (`SchedulerConfig.reward_floor`, `reward_ceiling`): an environment whose rewards do not span [0, 1].

Some environments give credit for a failed but well-formed attempt (a format reward added to the verifier's, a
minimum partial credit), so their rewards live in [floor, 1]. Others pay a full pass less than 1 (a cost, step or
length penalty every successful trajectory pays, as efficiency-shaped rewards do), so theirs live in [0, ceiling].
GRPO normalises each group's advantages, so a group teaches the same on any scale; the reward's variance does not
stay the same (it shrinks by (ceiling - floor)^2), and no reward of a capped environment is ever a full pass. Read as
they come, EnvSched under-valued such environments: in the `floor` stress worlds (half the environments with floor
0.2) they got 8-18% of its picks instead of about half; in the `ceiling` worlds (half the environments paying a full
pass 0.8) 9% (docs/scheduler.md, "Rewards with a floor", "Rewards with a ceiling").

An environment's floor f is the lowest reward it has returned, once a whole group scored exactly that (at least two
rollouts, every one at f < 1: an all-fail group); until then it is 0. Its ceiling c is the highest reward it has
returned, once that reward is at least `LOWEST_CEILING`, below 1, has come back in `TWO_VALUED_PASSES` rollouts, and
no reward strictly between the environment's lowest and highest has come back: a pass/fail verifier whose pass pays
c; until then, or once a third value or a 1 is seen, it is 1. Every reward of it is read as (r - f) / (c - f): the
floor becomes 0 and the ceiling a full pass. Where a 0 and a 1 have been seen (every environment of the other worlds,
after its first failures and passes) nothing changes, and a graded environment whose first groups happened to score
above 0 (a mixed group of 1 and 0.5) is not read on another scale, since no whole group sat at its lowest reward.

Why the ceiling asks for two values only, and at least 0.6: a graded environment early on often returns only 0 and
its easiest credit, 1 / K, and a whole group can sit at that credit (one check every rollout passes). Read as a
ceiling, 1 / K would multiply the environment's variance by K^2 until a higher reward came back; on the tuning
worlds that rule (a whole group at the highest reward, or two values at any level) cost 5.0 steps in `graded`
(docs/scheduler.md, "Rewards with a ceiling"). A graded environment whose full pass is capped is not told apart
from an uncapped one whose best so far is partial credit, and is read as it comes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .stats import CORRECT_REWARD, FLOAT_NOISE

SAME = 1e-9  # a group's mean reward and its rollouts' differ by float rounding only
TWO_VALUED_PASSES = 2  # rollouts at an environment's highest reward that show it pays two values only
LOWEST_CEILING = 0.6  # a full pass paid less than this is not told apart from a partial credit of 1 / K


class RewardRange:
    """Per environment: the lowest and highest rewards returned (+inf / -inf before any), the lowest at which a
    whole group sat, how many rollouts scored the highest, and whether a reward between the two has come back.
    ``floor`` / ``ceiling`` False: every floor 0 / every ceiling 1."""

    def __init__(self, n_envs: int, floor: bool = True, ceiling: bool = True):
        self.lowest = np.full(n_envs, np.inf)
        self.lowest_group = np.full(n_envs, np.inf)
        self.highest = np.full(n_envs, -np.inf)
        self.at_highest = np.zeros(n_envs)  # rollouts that scored the highest reward
        # a reward strictly between the lowest and the highest seen
        self.between = np.zeros(n_envs, dtype=bool)
        self.read_floor, self.read_ceiling = bool(floor), bool(ceiling)

    def update(
        self, env: np.ndarray, reward: np.ndarray, groups: pd.DataFrame, group_env: np.ndarray
    ) -> None:
        """Rollouts of environments ``env`` returned ``reward``; ``groups`` are their groups (`group_outcomes`:
        mean, variance, size), of environments ``group_env``. Their all-fail groups (at least two rollouts, all
        equal, below a full pass) are the ones that can confirm a floor."""
        mean = groups["mean"].to_numpy()
        failed = (groups["variance"].to_numpy() < FLOAT_NOISE) & (groups["size"].to_numpy() >= 2)
        failed &= mean < CORRECT_REWARD
        low, high = self.lowest.copy(), self.highest.copy()
        np.minimum.at(self.lowest, env, reward)
        np.minimum.at(self.lowest_group, group_env[failed], mean[failed])
        np.maximum.at(self.highest, env, reward)
        lo, hi = self.lowest, self.highest
        self.at_highest[hi > high + SAME] = 0.0  # a new highest reward: count again
        np.add.at(self.at_highest, env, np.abs(reward - hi[env]) <= SAME)
        # a value strictly inside: a new reward, or an old bound the new rewards moved past
        inside = (reward > lo[env] + SAME) & (reward < hi[env] - SAME)
        self.between[env[inside]] = True
        seen = np.isfinite(low)
        self.between |= seen & (
            ((low > lo + SAME) & (low < hi - SAME)) | ((high > lo + SAME) & (high < hi - SAME))
        )

    @property
    def floor(self) -> np.ndarray:
        """(n_envs,) each environment's floor: its lowest reward where a whole group sat at it, else 0."""
        if not self.read_floor:
            return np.zeros_like(self.lowest)
        confirmed = (self.lowest_group <= self.lowest + SAME) & (self.lowest < CORRECT_REWARD)
        return np.where(confirmed, self.lowest, 0.0)

    @property
    def ceiling(self) -> np.ndarray:
        """(n_envs,) each environment's ceiling: its highest reward where it pays two values only (see the module),
        else 1."""
        if not self.read_ceiling:
            return np.ones_like(self.highest)
        two_valued = (
            ~self.between & (self.at_highest >= TWO_VALUED_PASSES) & (self.highest > self.lowest + SAME)
        )
        confirmed = two_valued & (self.highest >= LOWEST_CEILING) & (self.highest < CORRECT_REWARD)
        return np.where(confirmed, self.highest, CORRECT_REWARD)

    def may_be_pass(self, env: np.ndarray, reward: np.ndarray) -> np.ndarray:
        """Mask of rewards at their environment's highest that could still prove a capped pass (at least 0.6, below
        1, no third value yet, the ceiling not yet confirmed): not evidence of partial credit yet."""
        if not self.read_ceiling:
            return np.zeros(len(reward), dtype=bool)
        high = self.highest[env]
        open_ = (
            ~self.between[env] & (high >= LOWEST_CEILING) & (high < CORRECT_REWARD) & (self.ceiling[env] >= 1)
        )
        return open_ & (np.abs(reward - high) <= SAME)

    def rescale(self, env: np.ndarray, reward: np.ndarray) -> np.ndarray:
        """``reward`` read between its environment's floor and ceiling: (r - f) / (c - f); a full pass stays one."""
        floor, ceiling = self.floor[env], self.ceiling[env]
        inside = np.clip((reward - floor) / (ceiling - floor), 0.0, 1.0)
        return np.where(reward < CORRECT_REWARD, inside, reward)

    def state_dict(self) -> dict:
        return {
            "lowest": self.lowest.copy(),
            "lowest_group": self.lowest_group.copy(),
            "highest": self.highest.copy(),
            "at_highest": self.at_highest.copy(),
            "between": self.between.copy(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.lowest = np.array(state["lowest"], dtype=float, copy=True)
        self.lowest_group = np.array(state["lowest_group"], dtype=float, copy=True)
        # absent: saved before ceilings were read; none seen yet
        unseen = np.full_like(self.lowest, -np.inf)
        self.highest = np.array(state.get("highest", unseen), dtype=float, copy=True)
        self.at_highest = np.array(
            state.get("at_highest", np.zeros_like(self.lowest)), dtype=float, copy=True
        )
        self.between = np.array(state.get("between", np.zeros(len(self.lowest), bool)), dtype=bool, copy=True)
