"""The rollout-engine interface the training step drives.

An engine rolls out G samples for every task of a batch, trains its policy on the results, and
can save / restore everything it needs to continue bit-for-bit (policy, optimiser, RNG).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import pandas as pd


class RolloutEngine(ABC):
    name: str

    @abstractmethod
    def run_step(self, batch: pd.DataFrame, step: int) -> tuple[pd.DataFrame, dict[str, float]]:
        """Roll out ``batch`` (task_id, env_id, role), update the policy; returns the landing rows
        (without campaign_id) and namespaced step metrics (``rollout/...``, ``train/...``)."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]: ...

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def make_engine(name: str, tasks: pd.DataFrame, group_size: int, seed: int, **options: Any) -> RolloutEngine:
    """The engine called ``name`` over the campaign's task pool."""
    if name == "simulated":
        from training.engines.simulated import SimulatedEngine

        return SimulatedEngine(tasks, group_size=group_size, seed=seed, **options)
    raise ValueError(f"unknown rollout engine {name!r}; available: ['simulated']")
