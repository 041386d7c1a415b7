"""The rollout-engine interface the training step drives.

An engine rolls out G samples for every task of a batch, trains its policy on the results, and
saves / restores everything it needs to continue bit-for-bit (policy, optimiser, RNG) in a
checkpoint folder.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ENGINES = ("simulated", "skill", "hf", "vllm")
Refill = Callable[[pd.DataFrame], pd.DataFrame]
"""Dynamic sampling: called with the landing rows of each round, returns the next round's tasks
(task_id, env_id, role), an empty frame when the step is complete."""


def by_name(names, saved_names, saved_values, default) -> np.ndarray:
    """One value per entry of ``names``: the saved value of the same name, else ``default`` (an array over
    ``names``). How a checkpoint written over other parameters (a pool or sources changed since) loads."""
    out = np.array(default, dtype=np.float64, copy=True)
    position = pd.Index(saved_names).get_indexer(list(names))
    known = position >= 0
    out[known] = np.asarray(saved_values, dtype=np.float64)[position[known]]
    return out


class RolloutEngine(ABC):
    name: str

    @abstractmethod
    def run_step(
        self, batch: pd.DataFrame, step: int, refill: Refill | None = None
    ) -> tuple[pd.DataFrame, dict[str, float]]:
        """Roll out ``batch`` (task_id, env_id, role), update the policy; returns the landing rows
        (every column of the landing contract but campaign_id) and namespaced step metrics
        (``rollout/...``, ``train/...``, ``eval/...``). With ``refill``, the rounds it asks for are rolled
        out too (`envsched_core.dynamic_sampling.rollout_rounds`) before the one update, which trains
        on the first B informative groups of all rounds (B = the batch's non-'oversample' rows); the
        landing rows cover every round."""

    @abstractmethod
    def save(self, directory: Path) -> None:
        """Write the engine's full state (policy, optimiser, RNG) into ``directory``."""

    @abstractmethod
    def load(self, directory: Path) -> None:
        """Restore the state ``save`` wrote."""

    def close(self) -> None:
        """Release what the engine holds outside this process (worker pools, Ray connections)."""
        return None  # nothing to release by default


def make_engine(
    name: str,
    tasks: pd.DataFrame,
    group_size: int,
    seed: int,
    options: dict[str, Any] | None = None,
    heldout: pd.DataFrame | None = None,
    eval_every: int = 0,
) -> RolloutEngine:
    """The engine called ``name`` over the campaign's task pool (``tasks``: the warehouse rows).

    ``heldout``: the campaign's held-out tasks (never trained on); engines that evaluate do so every
    ``eval_every`` steps (0: never)."""
    options = dict(options or {})
    if name == "simulated":
        from training.engines.simulated import SimulatedEngine

        return SimulatedEngine(tasks, group_size=group_size, seed=seed, **options)
    if name == "skill":
        from training.engines.skill import SkillEngine

        return SkillEngine(
            tasks, group_size=group_size, seed=seed, heldout=heldout, eval_every=eval_every, **options
        )
    if name == "hf":
        from training.engines.hf import HFEngine

        return HFEngine(tasks, group_size=group_size, seed=seed, **options)
    if name == "vllm":
        from training.engines.vllm import VLLMEngine

        return VLLMEngine(tasks, group_size=group_size, seed=seed, **options)
    raise ValueError(f"unknown rollout engine {name!r}; available: {list(ENGINES)}")
