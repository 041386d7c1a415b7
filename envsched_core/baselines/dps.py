"""DPS — Dynamics-Predictive Sampling, arXiv 2603.10887 (ICLR 2026), §3 (code maoyixiu/DPS,
`recipe/dps/task_sampler.py`); the reference paper's "DPS" baseline.

State per prompt: a 3-state hidden Markov model over its group outcome — state 1 all rollouts fail
(s = 0), state 2 mixed, state 3 all pass (s = 1) — with a belief pi (prior uniform), the previous
posterior pi_prev, and a 3x3 matrix of Dirichlet transition counts alpha (prior alpha0 = 1).
Expected transitions P_hat = alpha normalised per column (P_hat[i, j] = P(next i | now j)).

Update when a prompt is rolled out (observation is exact, so the posterior is one-hot e_obs):
    soft = outer(e_obs, pi_prev) * P_hat;  soft /= soft.sum()
    alpha <- lambda * alpha + (1 - lambda) * alpha0 + soft
    pi_prev <- e_obs;  pi <- P_hat(alpha) @ e_obs
Prompts not rolled out this step: alpha <- lambda * alpha + (1 - lambda) * alpha0 (no soft count),
pi_prev <- pi, pi <- P_hat @ pi.
Selection: from a dataloader candidate pool of 32 x B, the top B by pi[state 2] (P(mixed)).
Defaults from the math scripts (`recipe/dps/scripts/math/math_verl_*_dps.sh`): lambda
(`tasksampler.hmm_transition_decay_ratio`) = 0.7, alpha0 (`hmm_prior_alpha`) = 1, uniform prior pi
(`hmm_prior_pi`), `candidate_ratio` = 32, top-k (`hmm_sample_strategy`). No extra rollouts.

Observed state: from the group's binary accuracy s = share of rollouts with reward >= 1
(`tasksampler.metric: acc` in `recipe/dps/config/our_trainer.yaml`; `our_ray_trainer.py` turns each
reward into `acc >= 1` before `train_task_sampler` averages it), so a graded group with one perfect
rollout is *mixed* and a group of partial credits with none perfect is *all-fail*. `metric="score"`
(the reference's other option) uses the mean graded reward instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._base import BaselineScheduler, EpochSampler, GroupStats, param, signal_metric

ALL_FAIL, MIXED, ALL_PASS = 0, 1, 2  # zero-based indices of the paper's states 1, 2, 3


@dataclass
class DPSConfig:
    batch_size: int = 64
    """B: prompts per step (paper: 256)."""
    group_size: int = 8
    """G: rollouts per prompt (paper: 8)."""
    candidate_ratio: float = 32.0
    """Candidate pool / B (math scripts: 32)."""
    decay: float = 0.7
    """lambda: `hmm_transition_decay_ratio` in the scripts."""
    alpha0: float = 1.0
    """Dirichlet prior count of every transition."""
    metric: str = "acc"
    """Group success signal: ``acc`` (share of rollouts with reward >= 1, the reference default) or
    ``score`` (mean graded reward)."""


def hmm_state(success_rate: np.ndarray) -> np.ndarray:
    """Observed HMM state from a group's success rate: 0 -> all-fail, 1 -> all-pass, else mixed."""
    return np.where(success_rate <= 0.0, ALL_FAIL, np.where(success_rate >= 1.0, ALL_PASS, MIXED))


def expected_transitions(alpha: np.ndarray) -> np.ndarray:
    """P_hat: Dirichlet counts normalised over the *next* state (axis -2), shape (..., 3, 3)."""
    return alpha / alpha.sum(axis=-2, keepdims=True)


class DPSScheduler(BaselineScheduler):
    """Per-prompt 3-state HMM; picks the prompts most likely to be in the mixed state next."""

    _state_fields = ("alpha", "pi", "pi_prev", "touched")

    def __init__(self, catalog: Any, config: Any, seed: int = 0):
        super().__init__(catalog, config, seed)
        d = DPSConfig()
        self.candidate_ratio = float(param(config, "candidate_ratio", d.candidate_ratio))
        self.decay = float(param(config, "decay", d.decay))
        self.alpha0 = float(param(config, "alpha0", d.alpha0))
        self.metric = signal_metric(config)
        self.sampler = EpochSampler(self.n_tasks, self.rng)
        self.alpha = np.full((self.n_tasks, 3, 3), self.alpha0)  # (N, next, now)
        self.pi = np.full((self.n_tasks, 3), 1.0 / 3.0)  # (N, 3) prior of next state
        self.pi_prev = self.pi.copy()  # (N, 3) last posterior
        self.touched = np.zeros(self.n_tasks, dtype=bool)  # ever rolled out

    def _select(self, step: int) -> pd.DataFrame:
        pool = self.sampler.take(
            int(min(self.n_tasks, np.ceil(self.candidate_ratio * self.batch_size))), self.rng
        )
        p_mixed = self.pi[pool, MIXED]
        top = np.argsort(-p_mixed, kind="stable")[: self.batch_size]
        return self._frame(pool[top], "exploit", p_mixed=p_mixed[top])

    def _update(self, stats: GroupStats) -> None:
        i = stats.idx
        post = np.eye(3)[hmm_state(stats.success(self.metric))]  # (n, 3) one-hot
        p_hat = expected_transitions(self.alpha[i])  # (n, 3, 3)
        soft = post[:, :, None] * self.pi_prev[i][:, None, :] * p_hat  # outer(post, prev) * P_hat
        soft /= soft.sum(axis=(1, 2), keepdims=True)
        alpha_new = self.decay * self.alpha[i] + (1 - self.decay) * self.alpha0 + soft
        # Prompts not rolled out: decay toward the prior and propagate the belief one step.
        # Untouched prompts still hold the prior, which this map leaves unchanged, so skip them.
        rest = self.touched.copy()
        rest[i] = False
        r = np.flatnonzero(rest)
        if len(r):
            self.alpha[r] = self.decay * self.alpha[r] + (1 - self.decay) * self.alpha0
            self.pi_prev[r] = self.pi[r]
            self.pi[r] = np.einsum("nij,nj->ni", expected_transitions(self.alpha[r]), self.pi[r])
        self.alpha[i] = alpha_new
        self.pi_prev[i] = post
        self.pi[i] = np.einsum("nij,nj->ni", expected_transitions(alpha_new), post)
        self.touched[i] = True
