"""Rollout engines: given a batch and a step, produce rollout results in the landing contract."""

from training.engines.base import RolloutEngine, make_engine

__all__ = ["RolloutEngine", "make_engine"]
