"""DAPO dynamic sampling — Yu et al., "DAPO: An Open-Source LLM Reinforcement Learning System at
Scale", arXiv 2503.14476, §3.2 "Dynamic Sampling" (verl-recipe `dapo/dapo_ray_trainer.py`,
`algorithm.filter_groups`).

Rule: over-sample prompts, roll out G responses each, drop every group whose filter metric has zero
standard deviation (all rewards equal), and keep generating further prompt batches until B groups
with non-zero variance are collected or `max_num_gen_batches` generation batches were spent. The
filtering happens *after* rollout, so every rollout of a dropped group is a cost that is counted.

Two settings (report both when claiming fewer rollouts than dynamic sampling):
- `DAPODynamicSampling` — the DAPO recipe (verl-recipe `dapo/run_dapo_qwen2.5_32b*.sh`): generation batch
  3 x train batch (`gen_prompt_bsz = train_prompt_bsz * 3`), `max_num_gen_batches = 10`.
- `DAPO1xDynamicSampling` (`dapo-1x`) — DS as the MoPPS and DPS papers run it as a baseline
  (`recipe/*/scripts/math/math_verl_*_dapo.sh` in thu-rllab/MoPPS and maoyixiu/DPS): generation batch
  1 x train batch, `max_num_gen_batches = 4`.
Prompts come from a shuffled dataloader.

Filter metric: the variance of the graded reward (`filter_groups.metric=score`, as in the MoPPS / DPS
DS baselines). The DAPO recipe filters on `acc`; with its math reward acc and score move together, so
for binary rewards the two are the same rule (a judgement call for graded rewards: a group of unequal
partial credits has a GRPO signal and is kept).

How a step runs here (`envsched_core.dynamic_sampling.roll_out_step` and the simulator follow it):
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

from ._base import BaselineScheduler, EpochSampler, GroupStats, param


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


DAPO_1X = {"gen_batch_ratio": 1.0, "max_num_gen_batches": 4}
"""The DS baseline of the MoPPS / DPS math scripts: `gen_prompt_bsz = train_prompt_bsz * 1`, cap 4."""


@dataclass
class DAPO1xConfig(DAPOConfig):
    """`DAPOConfig` with the `dapo-1x` defaults (1x generation batch, cap 4)."""

    gen_batch_ratio: float = DAPO_1X["gen_batch_ratio"]
    max_num_gen_batches: int = DAPO_1X["max_num_gen_batches"]


class DAPODynamicSampling(BaselineScheduler):
    """Stateless over-sampling with post-rollout zero-variance filtering (DAPO §3.2, recipe: 3x, cap 10)."""

    _state_fields = ("step", "num_gen_batches", "num_informative", "rolled")
    dynamic_sampling = True
    defaults: dict[str, float] = {}
    """Defaults this setting changes from `DAPOConfig`, for configs without the field (e.g. the
    pipeline's `SchedulerConfig`); a config that has the field wins."""

    def __init__(self, catalog: Any, config: Any, seed: int = 0):
        super().__init__(catalog, config, seed)
        d = {**vars(DAPOConfig()), **self.defaults}
        ratio = float(param(config, "gen_batch_ratio", d["gen_batch_ratio"]))
        self.gen_batch_size = max(self.batch_size, int(np.ceil(ratio * self.batch_size)))
        self.max_num_gen_batches = int(param(config, "max_num_gen_batches", d["max_num_gen_batches"]))
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

    def _begin_step(self, step: int) -> None:
        self.step, self.num_gen_batches, self.num_informative = int(step), 0, 0
        self.rolled[:] = False

    def _select(self, step: int) -> pd.DataFrame:
        self._begin_step(step)
        idx = self._generate()
        roles = np.where(np.arange(len(idx)) < self.batch_size, "coverage", "oversample")
        return self._frame(idx, roles)

    def _resume_step(self, step: int, task_ids) -> None:
        """Take up ``step``, whose first generation batch (``task_ids``) was chosen before this scheduler was
        rebuilt from its history (a refreshed pool, an upgrade), so that its refills follow the rule; a no-op
        for the step this scheduler selected itself."""
        if int(step) == self.step:
            return
        self._begin_step(step)
        self.rolled[self._rows(task_ids)] = True
        self.num_gen_batches = 1

    def _refill(self, step: int) -> pd.DataFrame:
        """The next generation batch while fewer than B informative groups were collected this step
        and fewer than `max_num_gen_batches` batches were generated (veRL's `num_gen_batches` check)."""
        capped = 0 < self.max_num_gen_batches <= self.num_gen_batches
        if int(step) != self.step or self.num_informative >= self.batch_size or capped:
            return self._empty()
        return self._frame(self._generate(), "oversample")

    def _update(self, stats: GroupStats) -> None:
        # Only the count of informative (std > 0) groups matters to the rule.
        self.num_informative += int((stats.var > 0).sum())


class DAPO1xDynamicSampling(DAPODynamicSampling):
    """`dapo-1x`: dynamic sampling as the MoPPS / DPS papers' baseline (1x generation batch, cap 4;
    configure it with `DAPO1xConfig` or a config without those fields)."""

    defaults = DAPO_1X
