"""Calls held back: what `observe(rollouts, more=True)` keeps until a step's last call (EnvSched and the baselines).

A trainer that hands over each group as it finishes passes ``more=True`` on all but the last call. Each call is
checked when it comes (bad input is refused then) and kept here; the scheduler then folds them in as one call:
their rollouts concatenated in delivery order and reduced again, so every model's update is a single call's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd


class HeldCalls:
    """Calls held back, each as (rollouts, what the scheduler reduced them to when they came)."""

    def __init__(self) -> None:
        self.calls: list[tuple[pd.DataFrame, Any]] = []

    def __bool__(self) -> bool:
        return bool(self.calls)

    def hold(self, rollouts: pd.DataFrame, reduced: Any) -> None:
        self.calls.append((rollouts, reduced))

    def drop(self) -> None:
        """Forget them (a state loaded over them replaces what they would have changed)."""
        self.calls = []

    def take(self, merge: Callable[[pd.DataFrame, list], Any]) -> tuple[pd.DataFrame, Any] | None:
        """Empty the hold and return its calls as one (rollouts, reduced): the only call as it was, or the rollouts
        concatenated and ``merge(those rollouts, each call's reduced)``; None when nothing is held."""
        if not self.calls:
            return None
        calls, self.calls = self.calls, []
        if len(calls) == 1:
            return calls[0]
        rollouts = pd.concat([part for part, _ in calls], ignore_index=True)
        return rollouts, merge(rollouts, [reduced for _, reduced in calls])
