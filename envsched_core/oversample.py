"""Over-sampled first rounds (`SchedulerConfig.oversample_factor`): the extra tasks of one generation pass.

A GRPO group whose rewards are all equal adds no gradient. Refill rounds (`refill.py`) make up the shortfall
after seeing a round's rewards, which costs a second generation pass before the update. An over-sampled first
round makes it up in the same pass: with h the share of groups that have come back informative, a first round
of B + k tasks yields about B informative groups when k = B (1 - h) / h. The trainer keeps the first B
informative groups, as with DAPO's over-sampling. Nothing needs the step's own rewards first, so it also runs
when rewards are observed late (an asynchronous trainer).

This module keeps h and sizes k; `EnvSched.select` picks the k tasks (exploitation's next best).
"""

from __future__ import annotations

import math

import numpy as np

SHARE_WEIGHT = 0.3
"""Weight of the latest step in h, a running average: the share moves as the policy learns and the
scheduler's picks change, and one step of B groups is a noisy reading of it."""
SHARE_FLOOR = 0.3
"""h is read as at least this when sizing k, so a few bad steps cannot ask for an unbounded batch."""


class InformativeShare:
    """h, the running share of first-round groups that came back informative, and the k it asks for."""

    def __init__(self) -> None:
        self.share = 0.0  # meaningful once a step was counted (not NaN: states compare equal)
        self.step = -1  # the last step whose first round was counted; -1: none yet

    def observed(self, step: int, variance: np.ndarray) -> None:
        """The groups of ``step`` came back (the trainer's reward variance of each). Only the first observation
        of a step counts: later ones are its refill rounds, which are picked to fill its shortfall."""
        if int(step) <= self.step or len(variance) == 0:
            return
        latest = float(np.mean(np.asarray(variance) > 0))
        w = SHARE_WEIGHT
        self.share = latest if self.step < 0 else (1 - w) * self.share + w * latest
        self.step = int(step)

    def extra(self, batch_size: int, factor: float) -> int:
        """k for a first round of ``batch_size`` tasks: ceil(factor x B (1 - h) / h), at most B; 0 before any
        step was observed or when ``factor`` is 0."""
        if factor <= 0 or self.step < 0:
            return 0
        share = max(self.share, SHARE_FLOOR)
        # less a hair, so that rounding error on an exact multiple does not add a task
        return min(batch_size, math.ceil(factor * batch_size * (1 - share) / share - 1e-9))

    def state_dict(self) -> dict:
        return {"share": self.share, "step": self.step}

    def load_state_dict(self, state: dict) -> None:
        self.share, self.step = float(state["share"]), int(state["step"])
