"""ObservedRewardKind: how each environment rewards, read from its rewards where the catalogue does not say.

An environment's dispersion ratio c_e (a group's variance per unit of mean (1 - mean)) is about 1 for a pass/fail
verifier and about 1/K for K independent partial checks, and an environment with few groups is shrunk to the
ratio of its verifier kind (`SchedulerConfig.dispersion_by_verifier`, `OutcomeModel.dispersion`). The kinds come
from the catalogue's ``verifier`` or ``reward_kind`` column. A catalogue with neither (only the required columns,
as a trainer's own task list often is) pooled every environment's ratio into one: in the paper regime of the
simulator with its catalogue cut to task_id, env_id, text and tools, that cost 3.8 steps to random's step-60
score (26.0 against 22.2; tuning worlds 0-4).

The rewards say it instead. Per environment, three kinds:
    0  not rolled out yet        (shrunk to the ratio pooled over every kind, as before)
    1  only 0 and 1 so far        (pass/fail)
    2  a reward strictly between  (partial credit)
Rewards are read after their floor (`reward_range.py`), so a format reward for a failed attempt is not partial
credit once the floor is known. A reading of partial credit stays: one is enough to show the verifier gives it.
"""

from __future__ import annotations

import numpy as np

from .stats import CORRECT_REWARD, FLOAT_NOISE


class ObservedRewardKind:
    """Per environment: rolled out or not, partial credit seen or not."""

    def __init__(self, n_envs: int):
        self.seen = np.zeros(n_envs, dtype=bool)
        self.partial = np.zeros(n_envs, dtype=bool)

    def update(self, env: np.ndarray, reward: np.ndarray) -> None:
        """Rollouts of environments ``env`` returned ``reward`` (in [0, 1], floors read away)."""
        self.seen[env] = True
        self.partial[env[(reward > FLOAT_NOISE) & (reward < CORRECT_REWARD - FLOAT_NOISE)]] = True

    def kinds(self) -> np.ndarray:
        """(n_envs,) 0 not rolled out, 1 only full passes and fails, 2 partial credit."""
        return self.seen.astype(np.int64) + self.partial

    def state_dict(self) -> dict:
        return {"seen": self.seen.copy(), "partial": self.partial.copy()}

    def load_state_dict(self, state: dict) -> None:
        self.seen = np.array(state["seen"], dtype=bool, copy=True)
        self.partial = np.array(state["partial"], dtype=bool, copy=True)
