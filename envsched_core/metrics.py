"""Batch metrics (EnvSched, Yang et al., 2026, "Metrics per batch"), named as in MLflow and step_metrics.

Definitions (a task's realised variance is the population variance of its G rewards in ``rollouts``):
- ``schedule/mean_variance``, ``schedule/median_variance``: over the selected tasks (role != 'oversample').
- ``schedule/median_reward``: median over the selected tasks of each task's mean reward.
- ``schedule/envs_per_batch``: distinct environments among the selected tasks.
- ``schedule/tools_per_batch``: distinct tools in the ``tools_used`` column of the batch's rollouts when present,
  else the union of the catalogue tools of the selected tasks.
- ``schedule/exploit_hit_rate``: share of exploit picks whose realised variance is > 0 and at least the 75th
  percentile (top quartile) of the candidate pool's variances ("the pool's top quartile"). The pool's variances
  are ``reference_variance`` when given (e.g. the simulator's exact per-task variances); else the realised
  variances of the batch's coverage picks, which are drawn from the pool without regard to predicted variance
  and so stand in for a pool sample (at least ``MIN_POOL_SAMPLE`` of them); else, with too few coverage picks,
  the realised variances of all selected tasks. (The batch itself is not the pool: with the exploit picks in
  their own reference, at most a quarter of the batch can clear the cut, so the rate could never exceed
  B / (4 * exploit picks), e.g. 0.36 at B = 64, rho = 0.3.) NaN when the batch has no exploit picks.
- ``schedule/rollouts_spent``: rollout rows of every batch task, including over-sampled ones.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .catalog import TaskCatalog

MEAN_VARIANCE = "schedule/mean_variance"
MEDIAN_VARIANCE = "schedule/median_variance"
MEDIAN_REWARD = "schedule/median_reward"
ENVS_PER_BATCH = "schedule/envs_per_batch"
TOOLS_PER_BATCH = "schedule/tools_per_batch"
EXPLOIT_HIT_RATE = "schedule/exploit_hit_rate"
ROLLOUTS_SPENT = "schedule/rollouts_spent"
TOP_QUARTILE = 75.0
MIN_POOL_SAMPLE = 4  # coverage picks needed to use them as the pool sample of the hit-rate cut


def group_variance(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Per task_id: realised (population) variance and mean of its rewards."""
    groups = rollouts.groupby("task_id", sort=False)["reward"]
    return pd.DataFrame({"variance": groups.var(ddof=0), "mean": groups.mean()})


def batch_metrics(
    batch: pd.DataFrame, rollouts: pd.DataFrame, catalog: TaskCatalog, reference_variance=None
) -> dict[str, float]:
    """Metrics of one step's batch (task_id, env_id, role) given its rollouts (task_id, reward[, tools_used])."""
    for name, frame, columns in (
        ("batch", batch, ("task_id", "env_id", "role")),
        ("rollouts", rollouts, ("task_id", "reward")),
    ):
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ValueError(f"batch_metrics: {name} is missing column(s) {missing}.")
    rollouts = rollouts[rollouts["task_id"].isin(batch["task_id"])]
    selected = batch[batch["role"] != "oversample"]
    per_task = group_variance(rollouts).reindex(selected["task_id"])
    variance = per_task["variance"].to_numpy(dtype=float)
    variance = variance[~np.isnan(variance)]

    if "tools_used" in rollouts.columns:
        used = rollouts["tools_used"].dropna()
        tools = {t for cell in used for t in (cell if not isinstance(cell, str) else [cell])}
    else:
        rows = catalog.indices_of(selected["task_id"].to_numpy(dtype=object), what="batch task_id")
        tools = set(np.flatnonzero(np.asarray(catalog.tools[rows].sum(axis=0)).ravel() > 0))

    exploit = batch.loc[batch["role"] == "exploit", "task_id"]
    if len(exploit) == 0 or len(variance) == 0:
        hit_rate = float("nan")
    else:
        realised_all = group_variance(rollouts)["variance"]
        if reference_variance is not None:
            reference = np.asarray(reference_variance, dtype=float)
        else:
            coverage = batch.loc[batch["role"] == "coverage", "task_id"]
            sample = realised_all.reindex(coverage).dropna().to_numpy(dtype=float)
            reference = sample if len(sample) >= MIN_POOL_SAMPLE else variance
        threshold = np.percentile(reference, TOP_QUARTILE)
        realised = realised_all.reindex(exploit).fillna(0.0).to_numpy()
        hit_rate = float(np.mean((realised > 0) & (realised >= threshold)))

    return {
        MEAN_VARIANCE: float(np.mean(variance)) if len(variance) else float("nan"),
        MEDIAN_VARIANCE: float(np.median(variance)) if len(variance) else float("nan"),
        MEDIAN_REWARD: float(per_task["mean"].median()) if len(per_task) else float("nan"),
        ENVS_PER_BATCH: float(selected["env_id"].nunique()),
        TOOLS_PER_BATCH: float(len(tools)),
        EXPLOIT_HIT_RATE: hit_rate,
        ROLLOUTS_SPENT: float(len(rollouts)),
    }
