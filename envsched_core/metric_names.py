"""Metric names in one place: the same strings go to MLflow, ``step_metrics``, the Dagster metadata,
the CLI summary and the benchmark tables. Namespaces: ``schedule/`` (the groups the step trained on,
defined once in ``metrics.py``: use those for anything compared across schedulers or loops),
``rollout/`` (what the engine saw, over every rollout), ``train/`` (the update), ``eval/`` (held-out
evaluation).
"""

from .metrics import (
    ENVS_PER_BATCH,
    EXPLOIT_HIT_RATE,
    MEAN_VARIANCE,
    MEDIAN_REWARD,
    MEDIAN_VARIANCE,
    ROLLOUTS_SPENT,
    TOOLS_PER_BATCH,
    TRAINED_GROUPS,
    ZERO_VARIANCE_GROUPS,
)

REWARD_MEAN = "rollout/reward_mean"
"""Mean reward over every rollout of the step (the engine's count)."""
ROLLOUT_COUNT = "rollout/count"
"""Rollouts of the step, over-sampled ones included (the engine's count)."""
HELDOUT_SCORE = "eval/heldout_score"
"""Mean reward (or expected success) on the campaign's held-out tasks after the update."""
POOL_SUCCESS = "eval/pool_success"
"""Simulated engine: mean success probability over the training pool (oracle)."""

# The per-step columns the CLI summary and the UI table show, with short headers.
SUMMARY = {
    MEAN_VARIANCE: "mean_sel_var",
    ENVS_PER_BATCH: "envs",
    TOOLS_PER_BATCH: "tools",
    REWARD_MEAN: "mean_reward",
    ZERO_VARIANCE_GROUPS: "zero_var_groups",
    EXPLOIT_HIT_RATE: "hit_rate",
    HELDOUT_SCORE: "heldout_score",
}

__all__ = [
    "ENVS_PER_BATCH",
    "EXPLOIT_HIT_RATE",
    "HELDOUT_SCORE",
    "MEAN_VARIANCE",
    "MEDIAN_REWARD",
    "MEDIAN_VARIANCE",
    "POOL_SUCCESS",
    "REWARD_MEAN",
    "ROLLOUTS_SPENT",
    "ROLLOUT_COUNT",
    "SUMMARY",
    "TOOLS_PER_BATCH",
    "TRAINED_GROUPS",
    "ZERO_VARIANCE_GROUPS",
]
