"""Refill rounds (`SchedulerConfig.refill_rounds`): what EnvSched keeps of the step being rolled out.

A GRPO group whose rewards are all equal adds no gradient. With refill rounds on, once a round's rewards are
observed and fewer than B of the step's groups were informative, EnvSched rolls out more of its best-predicted
tasks, as DAPO and GRESO do with unpredicted draws; the trainer keeps the first B informative groups. This
module holds the step's bookkeeping (which rows were rolled out, which came back informative, how many rounds
ran) and sizes the next round; `EnvSched.refill` picks its tasks.
"""

from __future__ import annotations

import math

import numpy as np

REFILL_MARGIN = 1.25
"""Tasks rolled out per missing informative group: GRESO's safety factor on its refill estimate (its trainer's
x 1.25); EnvSched's picks are predicted informative, so it does not also divide by the round's hit rate."""


class StepRounds:
    """The rounds of the step on the scheduler's clock: rows rolled out, rows observed informative, rounds."""

    def __init__(self) -> None:
        self.step = -1
        self.rows = np.zeros(0, np.int64)
        self.informative = np.zeros(0, np.int64)
        self.rounds = 0

    def start(self, step: int, rows: np.ndarray) -> None:
        """A new step whose first round is ``rows``."""
        self.step, self.rounds = int(step), 0
        self.rows = np.asarray(rows, dtype=np.int64).copy()
        self.informative = np.zeros(0, np.int64)

    def observed(self, step: int, rows: np.ndarray, variance: np.ndarray) -> None:
        """Groups of ``step`` came back (the trainer's reward variance of each); those of this step's rounds
        with variance > 0 count toward B."""
        if int(step) != self.step:
            return
        mine = np.isin(rows, self.rows) & (np.asarray(variance) > 0)
        self.informative = np.union1d(self.informative, np.asarray(rows, dtype=np.int64)[mine])

    def refill_size(self, step: int, batch_size: int, max_rounds: int) -> int:
        """Tasks the next round of ``step`` rolls out: ceil(1.25 x the shortfall of informative groups),
        at most B; 0 when the step has B informative groups, its rounds are used up, or it is not this step."""
        if int(step) != self.step or self.rounds >= max_rounds:
            return 0
        shortfall = batch_size - len(self.informative)
        return min(batch_size, math.ceil(REFILL_MARGIN * shortfall)) if shortfall > 0 else 0

    def add(self, rows: np.ndarray) -> None:
        """A refill round of ``rows`` was handed out."""
        self.rows = np.concatenate([self.rows, np.asarray(rows, dtype=np.int64)])
        self.rounds += 1

    def state_dict(self) -> dict:
        return {
            "step": self.step,
            "rows": self.rows.copy(),
            "informative": self.informative.copy(),
            "rounds": self.rounds,
        }

    def load_state_dict(self, state: dict) -> None:
        self.step, self.rounds = int(state["step"]), int(state["rounds"])
        self.rows = np.array(state["rows"], dtype=np.int64, copy=True)
        self.informative = np.array(state["informative"], dtype=np.int64, copy=True)
