"""GRESO — "Act Only When It Pays: Efficient Reinforcement Learning for LLM Reasoning via Selective
Rollouts", arXiv 2506.02177, §4 (Algorithm 1, "pre-rollout filtering"), as in its code
(Infini-AI-Lab/GRESO: `verl/trainer/ttis/presampling_selector.py`, `filter_examples_all_probabilistic`;
the step loop in `verl/trainer/ppo/ray_trainer.py`; defaults from `train-scripts/math_qwen_7b_dm_greso.sh`).

Skip rule (pre-rollout). Every prompt keeps the trace of its group mean rewards, one per rollout. Two
streaks are read from its end:
- easy z_e: the latest consecutive groups with mean >= 0.98;
- hard z_h: the latest consecutive groups with mean <= 0.11 (so 0 unless the last one was hard).
A group in between resets both. A prompt with z_e > 0 is skipped with probability
1 - max(p_easy^z_e, 0.01), one with z_h > 0 with 1 - max(p_hard^z_h, 0.01); others are always kept.
Skipped prompts cost nothing and are not drawn again this step.

Adaptation of p (end of each training step, only after the first pass over the data, `epoch > 0`):
with the step's share of all-correct groups (easy) and all-wrong groups (hard) over every group rolled
out that step, p_easy moves -0.01 when its share is >= target/3 and +0.01 otherwise; p_hard the same
against 2 x target/3; target zero-variance share 0.25; clipped to [0.05, 0.95]; both start at 0.5.

Refill (dynamic sampling, `ttis.type=dynamic_sampling`; sampling batch 384 for train batch 256): the
first round rolls out 1.5 B surviving prompts. After each round, with `kept` informative groups so far
(reward std > 0) and zvr the round's share of zero-variance groups, while kept < B:
est = int((B - kept) / (1 - zvr) x 1.25); the next round rolls out clamp(est, B/4, 1.5 B) survivors
(the reference's floor is 64 prompts at B = 256), and when est <= 1.5 B that round is the last: the
step trains on the first B informative groups collected, or all of them if fewer. No round cap.
Every rollout counts as spent.

Judgement calls for graded rewards (the reference's math rewards are 1 / 0.1 / 0, so its mean
thresholds mean "all correct" and "none correct"): the streaks are kept on the literal group mean, as
in the code, so a graded group with mean <= 0.11 extends the hard streak even when its rewards differ;
the easy / hard shares that drive p count zero-variance groups with mean >= 0.98 / <= 0.11 (the code
counts groups whose rewards are all 1 / all 0.1). When a round is all zero-variance (zvr = 1, where
the reference would divide by zero) the next round is a full 1.5 B one and not the last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._base import BaselineScheduler, EpochSampler, GroupStats, param


@dataclass
class GRESOConfig:
    batch_size: int = 64
    """B: informative groups per training step (script: `real_train_batch_size` 256)."""
    group_size: int = 8
    """G: rollouts per prompt (script: 8)."""
    sampling_ratio: float = 1.5
    """Prompts rolled out in a full round / B (script: `sampling_batch_size` 384 / 256)."""
    min_sampling_ratio: float = 0.25
    """Smallest refill round / B (trainer: at least 64 prompts, at B = 256)."""
    estimate_margin: float = 1.25
    """Safety factor of the refill estimate (trainer: x 1.25)."""
    p_init: float = 0.5
    """Initial p_easy and p_hard (script: `p_easy`, `p_hard`)."""
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


class GRESOScheduler(BaselineScheduler):
    """Probabilistic pre-rollout skipping of prompts with easy / hard streaks, on adaptive dynamic sampling."""

    _state_fields = (
        "easy_streak",
        "hard_streak",
        "p_easy",
        "p_hard",
        "step",
        "step_epoch",
        "num_informative",
        "last_round",
        "round_groups",
        "round_zero",
        "rolled",
        "n_groups",
        "n_easy",
        "n_hard",
    )
    dynamic_sampling = True

    def __init__(self, catalog: Any, config: Any, seed: int = 0):
        super().__init__(catalog, config, seed)
        d = GRESOConfig()
        b = self.batch_size
        self.sampling_batch = max(1, int(np.ceil(param(config, "sampling_ratio", d.sampling_ratio) * b)))
        self.min_round = max(1, int(np.ceil(param(config, "min_sampling_ratio", d.min_sampling_ratio) * b)))
        self.estimate_margin = float(param(config, "estimate_margin", d.estimate_margin))
        self.delta_p = float(param(config, "delta_p", d.delta_p))
        tzv = float(param(config, "target_zero_variance", d.target_zero_variance))
        self.target_easy, self.target_hard = tzv / 3.0, tzv * 2.0 / 3.0
        self.p_min = float(param(config, "p_min", d.p_min))
        self.p_max = float(param(config, "p_max", d.p_max))
        self.min_explore = float(param(config, "min_explore", d.min_explore))
        self.easy_threshold = float(param(config, "easy_threshold", d.easy_threshold))
        self.hard_threshold = float(param(config, "hard_threshold", d.hard_threshold))
        self.sampler = EpochSampler(self.n_tasks, self.rng)
        p0 = float(param(config, "p_init", d.p_init))
        self.p_easy, self.p_hard = p0, p0
        self.easy_streak = np.zeros(self.n_tasks, dtype=np.int64)
        self.hard_streak = np.zeros(self.n_tasks, dtype=np.int64)
        self.step, self.step_epoch, self.num_informative, self.last_round = -1, 0, 0, False
        self.round_groups, self.round_zero = 0, 0  # the latest round's groups and zero-variance ones
        self.rolled = np.zeros(self.n_tasks, dtype=bool)
        self.n_groups, self.n_easy, self.n_hard = 0, 0, 0  # this step's tally for the p adaptation

    def skip_probability(self, idx: np.ndarray) -> np.ndarray:
        """1 - max(p^z, 0.01) with the prompt's current streak type (0 without a streak)."""
        easy, hard = self.easy_streak[idx], self.hard_streak[idx]
        keep_easy = np.maximum(self.p_easy**easy, self.min_explore)
        keep_hard = np.maximum(self.p_hard**hard, self.min_explore)
        return 1.0 - np.where(easy > 0, keep_easy, np.where(hard > 0, keep_hard, 1.0))

    def _adapt_p(self) -> None:
        """End-of-step move of p_easy / p_hard toward the target shares (`>=`: at target, skip more)."""
        if self.n_groups == 0:
            return
        easy_ratio, hard_ratio = self.n_easy / self.n_groups, self.n_hard / self.n_groups
        self.p_easy += -self.delta_p if easy_ratio >= self.target_easy else self.delta_p
        self.p_hard += -self.delta_p if hard_ratio >= self.target_hard else self.delta_p
        self.p_easy = float(np.clip(self.p_easy, self.p_min, self.p_max))
        self.p_hard = float(np.clip(self.p_hard, self.p_min, self.p_max))

    def _generate(self, size: int) -> np.ndarray:
        """Draw prompts, skip pre-rollout, until `size` survivors (or the pool is used up this step)."""
        kept: list[np.ndarray] = []
        n_kept = 0
        while n_kept < size and not self.rolled.all():
            cand = self.sampler.take(size - n_kept, self.rng, exclude=self.rolled)
            self.rolled[cand] = True  # a skipped prompt is not redrawn this step either
            survive = cand[self.rng.random(len(cand)) >= self.skip_probability(cand)]
            kept.append(survive)
            n_kept += len(survive)
        self.step_epoch = self.sampler.epoch
        self.round_groups, self.round_zero = 0, 0
        return np.concatenate(kept) if kept else np.empty(0, dtype=np.int64)

    def _begin_step(self, step: int) -> None:
        if self.step >= 0 and self.step_epoch > 0:  # the previous step ended after the first pass
            self._adapt_p()
        self.step, self.num_informative, self.last_round = int(step), 0, False
        self.n_groups, self.n_easy, self.n_hard = 0, 0, 0
        self.rolled[:] = False

    def _select(self, step: int) -> pd.DataFrame:
        self._begin_step(step)
        idx = self._generate(self.sampling_batch)
        roles = np.where(np.arange(len(idx)) < self.batch_size, "exploit", "oversample")
        return self._frame(idx, roles)

    def _resume_step(self, step: int, task_ids) -> None:
        """Take up ``step``, whose first round (``task_ids``) was chosen before this scheduler was rebuilt from
        its history (a refreshed pool, an upgrade), so that its refills follow the rule; a no-op for the step
        this scheduler selected itself."""
        if int(step) == self.step:
            return
        self._begin_step(step)
        self.rolled[self._rows(task_ids)] = True
        self.step_epoch, self.round_groups, self.round_zero = self.sampler.epoch, 0, 0

    def fold(self, history: pd.DataFrame) -> None:
        """Earlier rollouts (task_id, step, reward; a rebuilt pool, a continued campaign) as if this scheduler had
        run their steps: each step's groups are tallied apart and p_easy / p_hard adapt between steps, as in
        ``select``, once the data were passed over (a task rolled out again, or more groups than tasks; a
        skipped prompt leaves no row, so this may see the pass a little late). Without it p restarted at p_init."""
        seen = np.zeros(self.n_tasks, dtype=bool)
        groups = 0
        for step, part in history.groupby("step", sort=True):
            rows = self._rows(part["task_id"].unique())
            groups += len(rows)
            if seen[rows].any() or groups > self.n_tasks:
                self.sampler.epoch = max(self.sampler.epoch, 1)
            seen[rows] = True
            self._begin_step(int(step))
            self.step_epoch = self.sampler.epoch
            self.observe(part)

    def refill_size(self) -> int:
        """Survivors the next round rolls out, 0 when the step is complete; marks the last round."""
        if self.num_informative >= self.batch_size or self.last_round or self.round_groups == 0:
            return 0
        zvr = self.round_zero / self.round_groups
        remainder = self.batch_size - self.num_informative
        est = int(remainder / (1.0 - zvr) * self.estimate_margin) if zvr < 1.0 else self.sampling_batch + 1
        self.last_round = est <= self.sampling_batch
        return max(min(est, self.sampling_batch), self.min_round)

    def _refill(self, step: int) -> pd.DataFrame:
        """The next round (all 'oversample') while the adaptive rule asks for one, else empty."""
        if int(step) != self.step:
            return self._empty()
        size = self.refill_size()
        return self._frame(self._generate(size), "oversample") if size else self._empty()

    def _update(self, stats: GroupStats) -> None:
        zero = stats.var == 0
        high = stats.mean >= self.easy_threshold
        low = stats.mean <= self.hard_threshold
        self.n_groups += len(stats.idx)
        self.n_easy += int((zero & high).sum())
        self.n_hard += int((zero & low).sum())
        self.round_groups += len(stats.idx)
        self.round_zero += int(zero.sum())
        self.num_informative += int((~zero).sum())
        idx = stats.idx
        self.easy_streak[idx] = np.where(high, self.easy_streak[idx] + 1, 0)
        self.hard_streak[idx] = np.where(low, self.hard_streak[idx] + 1, 0)
