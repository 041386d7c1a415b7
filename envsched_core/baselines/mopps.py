"""MoPPS — Model Predictive Prompt Selection, "Can Prompt Difficulty be Online Predicted for
Accelerating RL Finetuning of Reasoning Models?", arXiv 2507.04632, §3 (Bayesian risk-predictive
framework; code thu-rllab/MoPPS).

State: a Beta(alpha, beta) posterior over each prompt's success rate, prior (alpha0, beta0) = (1, 1).
Update (§3.2) after a prompt's G rollouts with success rate s:
    alpha <- lambda * alpha + (1 - lambda) * alpha0 + s * G
    beta  <- lambda * beta  + (1 - lambda) * beta0  + (1 - s) * G          (default lambda = 1)
Selection (§3.3): draw a candidate pool of `ts_ratio` x B prompts from the dataloader (scripts: 16),
Thompson-sample a success rate per candidate, take the B closest to 0.5, i.e. the top B by
-(sample - 0.5)^2 (`tasksampler.bandit_sample_strategy: topk`). No extra rollouts.

Success rate s: the group's binary accuracy, the share of rollouts with reward >= 1
(`tasksampler.bandit_metric: acc` in `recipe/ours/config/our_trainer.yaml`; `recipe/ours/our_ray_trainer.py`
converts each reward with `acc >= 1`), so partial credit counts as a failure; `metric="score"` (the
reference's other option) uses the mean graded reward. Defaults: `ts_ratio` 16 from the math
scripts (`recipe/ours/scripts/math/math_verl_*_topk*.sh`; countdown / geo3k use 8 with lambda 0.5),
lambda = `bandit_decay_ratio` 1.0 (the config default the math scripts keep), prior (1, 1) as in the
`_noinit` scripts (`bandit_init=False`), target 0.5 (`bandit_target_mean`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._base import BaselineScheduler, EpochSampler, GroupStats, param, signal_metric


@dataclass
class MoPPSConfig:
    batch_size: int = 64
    """B: prompts per step."""
    group_size: int = 8
    """G: rollouts per prompt."""
    ts_ratio: int = 16
    """Candidate pool size / B (MoPPS scripts: 16)."""
    decay: float = 1.0
    """lambda: weight kept on the old posterior each update (paper default 1 = no forgetting)."""
    alpha0: float = 1.0
    beta0: float = 1.0
    target: float = 0.5
    """Success rate the acquisition -(sample - target)^2 aims at."""
    metric: str = "acc"
    """Group success signal: ``acc`` (share of rollouts with reward >= 1, the reference default) or
    ``score`` (mean graded reward)."""


class MoPPSScheduler(BaselineScheduler):
    """Thompson sampling on per-prompt Beta posteriors, picking success rates nearest 0.5."""

    _state_fields = ("alpha", "beta")

    def __init__(self, catalog: Any, config: Any, seed: int = 0):
        super().__init__(catalog, config, seed)
        d = MoPPSConfig()
        self.ts_ratio = float(param(config, "ts_ratio", d.ts_ratio))
        self.decay = float(param(config, "decay", d.decay))
        self.alpha0 = float(param(config, "alpha0", d.alpha0))
        self.beta0 = float(param(config, "beta0", d.beta0))
        self.target = float(param(config, "target", d.target))
        self.metric = signal_metric(config)
        self.sampler = EpochSampler(self.n_tasks, self.rng)
        self.alpha = np.full(self.n_tasks, self.alpha0)
        self.beta = np.full(self.n_tasks, self.beta0)

    def _select(self, step: int) -> pd.DataFrame:
        pool = self.sampler.take(int(min(self.n_tasks, np.ceil(self.ts_ratio * self.batch_size))), self.rng)
        theta = self.rng.beta(self.alpha[pool], self.beta[pool])  # Thompson sample per candidate
        score = -((theta - self.target) ** 2)
        top = np.argsort(-score, kind="stable")[: self.batch_size]
        return self._frame(pool[top], "exploit", predicted=theta[top] * (1.0 - theta[top]))

    def _update(self, stats: GroupStats) -> None:
        i, s, g = stats.idx, stats.success(self.metric), stats.count
        self.alpha[i] = self.decay * self.alpha[i] + (1 - self.decay) * self.alpha0 + s * g
        self.beta[i] = self.decay * self.beta[i] + (1 - self.decay) * self.beta0 + (1 - s) * g
