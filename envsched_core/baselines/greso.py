"""GRESO — "Act Only When It Pays: Efficient Reinforcement Learning for LLM Reasoning via Selective
Rollouts", arXiv 2506.02177, §4 (Algorithm 1, "pre-rollout filtering"; code Infini-AI-Lab/GRESO).

Rule: a prompt whose most recent z observations were all zero-variance is skipped *before* rollout
with probability 1 - max(p^z, 0.01). The exploration probability p is p_easy when the prompt's
last zero-variance group was easy (mean reward >= 0.98) and p_hard when it was hard (mean
reward <= 0.11). After each step, p_easy / p_hard move by -/+ 0.01 toward a target zero-variance
ratio of 0.25 among the step's rolled-out groups (split 1/3 easy, 2/3 hard): above target -> lower
p (skip more), below -> raise p; clipped to [0.05, 0.95], both starting at 0.5.

GRESO sits on top of dynamic sampling (§4, scripts: sampling batch 384 for train batch 256, n = 8):
each generation round draws prompts from a shuffled dataloader, skips some pre-rollout, rolls out
1.5 x B survivors, and refills after rollout until B informative groups (cap
`max_num_gen_batches`, DAPO's default 10). Every rollout counts as spent; skipped prompts cost
nothing. A zero-variance group that is neither easy nor hard (graded rewards all equal, mid-range)
extends the streak and uses p_hard when its mean < 0.5, else p_easy (our choice; the paper's
rewards are binary).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._base import BaselineScheduler, DynamicSamplingRefill, EpochSampler, GroupStats, param


@dataclass
class GRESOConfig:
    batch_size: int = 64
    """B: informative groups per training step (paper: 256)."""
    group_size: int = 8
    """G: rollouts per prompt (paper: 8)."""
    sampling_ratio: float = 1.5
    """Prompts rolled out per generation round / B (paper: 384 / 256)."""
    p_init: float = 0.5
    """Initial p_easy and p_hard."""
    delta_p: float = 0.01
    """Step of the p adaptation."""
    target_zero_variance: float = 0.25
    """Target share of zero-variance groups per step, split 1/3 easy and 2/3 hard."""
    p_min: float = 0.05
    p_max: float = 0.95
    min_explore: float = 0.01
    """Floor of p^z: a prompt is never skipped with certainty."""
    easy_threshold: float = 0.98
    hard_threshold: float = 0.11
    max_num_gen_batches: int = 10


class GRESOScheduler(DynamicSamplingRefill, BaselineScheduler):
    """Probabilistic pre-rollout skipping of prompts with zero-variance streaks (GRESO §4)."""

    _state_fields = (
        "streak",
        "last_easy",
        "p_easy",
        "p_hard",
        "step",
        "num_gen_batches",
        "num_informative",
        "rolled",
        "n_groups",
        "n_easy",
        "n_hard",
    )

    def __init__(self, catalog: Any, config: Any, seed: int = 0):
        super().__init__(catalog, config, seed)
        d = GRESOConfig()
        self.sampling_batch = max(
            1, int(np.ceil(param(config, "sampling_ratio", d.sampling_ratio) * self.batch_size))
        )
        self.delta_p = float(param(config, "delta_p", d.delta_p))
        tzv = float(param(config, "target_zero_variance", d.target_zero_variance))
        self.target_easy, self.target_hard = tzv / 3.0, tzv * 2.0 / 3.0
        self.p_min, self.p_max = (
            float(param(config, "p_min", d.p_min)),
            float(param(config, "p_max", d.p_max)),
        )
        self.min_explore = float(param(config, "min_explore", d.min_explore))
        self.easy_threshold = float(param(config, "easy_threshold", d.easy_threshold))
        self.hard_threshold = float(param(config, "hard_threshold", d.hard_threshold))
        self.max_num_gen_batches = int(param(config, "max_num_gen_batches", d.max_num_gen_batches))
        self.sampler = EpochSampler(self.n_tasks, self.rng)
        p0 = float(param(config, "p_init", d.p_init))
        self.p_easy, self.p_hard = p0, p0
        self.streak = np.zeros(self.n_tasks, dtype=np.int64)  # z: recent consecutive zero-variance groups
        self.last_easy = np.zeros(self.n_tasks, dtype=bool)  # last zero-variance group was easy
        self.step, self.num_gen_batches, self.num_informative = -1, 0, 0
        self.rolled = np.zeros(self.n_tasks, dtype=bool)
        self.n_groups, self.n_easy, self.n_hard = 0, 0, 0  # this step's zero-variance tally

    def skip_probability(self, idx: np.ndarray) -> np.ndarray:
        """1 - max(p^z, 0.01) for the given task indices (0 for never-zero-variance prompts)."""
        p = np.where(self.last_easy[idx], self.p_easy, self.p_hard)
        return 1.0 - np.maximum(p ** self.streak[idx], self.min_explore)

    def _adapt_p(self) -> None:
        """End-of-step move of p_easy / p_hard toward the target zero-variance ratios."""
        if self.n_groups == 0:
            return
        easy_ratio, hard_ratio = self.n_easy / self.n_groups, self.n_hard / self.n_groups
        self.p_easy += -self.delta_p if easy_ratio > self.target_easy else self.delta_p
        self.p_hard += -self.delta_p if hard_ratio > self.target_hard else self.delta_p
        self.p_easy = float(np.clip(self.p_easy, self.p_min, self.p_max))
        self.p_hard = float(np.clip(self.p_hard, self.p_min, self.p_max))

    def _generate(self) -> np.ndarray:
        """Draw prompts, skip pre-rollout, until `sampling_batch` survivors (or one pass of the pool)."""
        kept: list[np.ndarray] = []
        n_kept, scanned = 0, 0
        while n_kept < self.sampling_batch and scanned < self.n_tasks and not self.rolled.all():
            cand = self.sampler.take(self.sampling_batch - n_kept, self.rng, exclude=self.rolled)
            scanned += len(cand)
            self.rolled[cand] = True  # a skipped prompt is not redrawn this step either
            survive = cand[self.rng.random(len(cand)) >= self.skip_probability(cand)]
            kept.append(survive)
            n_kept += len(survive)
        self.num_gen_batches += 1
        return np.concatenate(kept) if kept else np.empty(0, dtype=np.int64)

    def select(self, step: int) -> pd.DataFrame:
        if self.step >= 0:
            self._adapt_p()
        self.step, self.num_gen_batches, self.num_informative = int(step), 0, 0
        self.n_groups, self.n_easy, self.n_hard = 0, 0, 0
        self.rolled[:] = False
        idx = self._generate()
        roles = np.where(np.arange(len(idx)) < self.batch_size, "exploit", "oversample")
        return self._frame(idx, roles)

    def _update(self, stats: GroupStats) -> None:
        zero = stats.var == 0
        easy = zero & (stats.mean >= self.easy_threshold)
        hard = zero & (stats.mean <= self.hard_threshold)
        self.n_groups += len(stats.idx)
        self.n_easy += int(easy.sum())
        self.n_hard += int(hard.sum())
        self.num_informative += int((~zero).sum())
        idx = stats.idx
        self.streak[idx] = np.where(zero, self.streak[idx] + 1, 0)
        # Which p applies next time: the kind of the latest zero-variance group.
        self.last_easy[idx] = np.where(
            zero, np.where(easy | hard, easy, stats.mean >= 0.5), self.last_easy[idx]
        )
