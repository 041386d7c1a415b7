"""DAPO dynamic sampling — Yu et al., "DAPO: An Open-Source LLM Reinforcement Learning System at
Scale", arXiv 2503.14476, §3.2 "Dynamic Sampling" (veRL recipe `algorithm.filter_groups`).

Rule: over-sample prompts, roll out G responses each, drop every group whose metric (accuracy) has
zero standard deviation (all 0 or all 1), and keep generating further prompt batches until B groups
with non-zero variance are collected or `max_num_gen_batches` generation batches were spent. The
filtering happens *after* rollout, so every rollout of a dropped group is a cost that is counted.

Defaults follow the DAPO recipe scripts: generation batch = 3 x train batch (`gen_prompt_bsz =
train_prompt_bsz * 3`), `max_num_gen_batches = 10`. Prompts come from a shuffled dataloader.

How a step runs here (the `run_campaign` loop in `envsched_core.simulator` follows it):
`select(step)` returns the first generation batch (first B rows role 'coverage', the rest
'oversample'); after `observe`, `refill(step)` returns the next generation batch (all 'oversample')
while fewer than B informative groups were seen this step and the cap is not reached, else an
empty frame. The trainer keeps the first B informative groups. Deviation: where veRL raises once the
cap is hit, we train on whatever informative groups were collected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._base import BaselineScheduler, DynamicSamplingRefill, EpochSampler, GroupStats, param


@dataclass
class DAPOConfig:
    batch_size: int = 64
    """B: informative groups wanted per training step (`train_prompt_bsz`)."""
    group_size: int = 8
    """G: rollouts per prompt (`n_resp_per_prompt`)."""
    gen_batch_ratio: float = 3.0
    """Prompts per generation batch / B (DAPO recipe: gen_prompt_bsz = 3 x train_prompt_bsz)."""
    max_num_gen_batches: int = 10
    """Cap on generation batches per step (DAPO recipe default); <= 0 means no cap."""


class DAPODynamicSampling(DynamicSamplingRefill, BaselineScheduler):
    """Stateless over-sampling with post-rollout zero-variance filtering (DAPO §3.2)."""

    _state_fields = ("step", "num_gen_batches", "num_informative", "rolled")

    def __init__(self, catalog: Any, config: Any, seed: int = 0):
        super().__init__(catalog, config, seed)
        self.gen_batch_size = max(
            self.batch_size, int(np.ceil(param(config, "gen_batch_ratio", 3.0) * self.batch_size))
        )
        self.max_num_gen_batches = int(param(config, "max_num_gen_batches", 10))
        self.sampler = EpochSampler(self.n_tasks, self.rng)
        self.step = -1
        self.num_gen_batches = 0
        self.num_informative = 0
        self.rolled = np.zeros(self.n_tasks, dtype=bool)  # tasks already generated this step

    def _generate(self) -> np.ndarray:
        idx = self.sampler.take(self.gen_batch_size, self.rng, exclude=self.rolled)
        self.rolled[idx] = True
        self.num_gen_batches += 1
        return idx

    def select(self, step: int) -> pd.DataFrame:
        self.step, self.num_gen_batches, self.num_informative = int(step), 0, 0
        self.rolled[:] = False
        idx = self._generate()
        roles = np.where(np.arange(len(idx)) < self.batch_size, "coverage", "oversample")
        return self._frame(idx, roles)

    def _update(self, stats: GroupStats) -> None:
        # Only the count of informative (std > 0) groups matters to the rule.
        self.num_informative += int((stats.var > 0).sum())
