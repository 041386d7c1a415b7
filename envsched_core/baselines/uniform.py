"""Uniform random task selection — the "Random" baseline of the EnvSched paper (Yang et al., 2026, §5).

Rule: each step, B distinct tasks drawn uniformly without replacement from the training pool.
No state besides the RNG; no extra rollouts.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ._base import BaselineScheduler, GroupStats


class RandomScheduler(BaselineScheduler):
    """B distinct tasks uniformly at random per step; all rows have role 'coverage'."""

    def __init__(self, catalog: Any, config: Any, seed: int = 0):
        super().__init__(catalog, config, seed)

    def _select(self, step: int) -> pd.DataFrame:
        idx = self.rng.choice(self.n_tasks, size=self.batch_size, replace=False)
        return self._frame(idx, "coverage")

    def _update(self, stats: GroupStats) -> None:
        # Uniform sampling ignores rewards (input was still validated by observe()).
        return None
