"""Batch metrics (EnvSched, Yang et al., 2026, "Metrics per batch"), named as in MLflow and step_metrics.

One definition for every scheduler and every caller (the pipeline's `variance_predictions`,
`simulator.run_campaign`, `bench/campaign_real.py`): the metrics describe the groups the policy was
*trained* on (`trained_groups`), not the first B rows the scheduler proposed.
- The trained groups: when the step over-sampled (the batch has 'oversample' rows: DAPO / GRESO dynamic
  sampling, EnvSched's refill rounds or over-sampled first round), the first B groups with reward
  variance > 0 in batch order (generation order), B = the batch's non-oversample rows, or all of them if
  fewer (the filter runs before the GRPO batch is formed); otherwise every group of the batch (a
  zero-variance group is in the GRPO batch, it only adds no gradient).
A group's realised variance is the population variance of its G rewards in ``rollouts``.
- ``schedule/mean_variance``, ``schedule/median_variance``: over the trained groups.
- ``schedule/median_reward``: median over the trained groups of each group's mean reward.
- ``schedule/zero_variance_groups``: trained groups whose rewards are all equal.
- ``schedule/trained_groups``: how many groups were trained on.
- ``schedule/envs_per_batch``: distinct environments among the trained groups.
- ``schedule/tools_per_batch``: distinct tools in the ``tools_used`` column of the trained groups'
  rollouts when present, else the union of the catalogue tools of the trained tasks.
- ``schedule/exploit_hit_rate``: share of the trained exploit picks whose realised variance is > 0 and at
  least the 75th percentile (top quartile) of the candidate pool's variances ("the pool's top
  quartile"). The pool's variances are ``reference_variance`` when given (e.g. the simulator's exact
  per-task variances); else the realised variances of the batch's coverage picks, which are drawn from
  the pool without regard to predicted variance and so stand in for a pool sample (at least
  ``MIN_POOL_SAMPLE`` of them); else, with too few coverage picks, the realised variances of the trained
  groups. (The batch itself is not the pool: with the exploit picks in their own reference, at most a
  quarter of the batch can clear the cut, so the rate could never exceed B / (4 * exploit picks), e.g.
  0.36 at B = 64, rho = 0.3.) NaN when no exploit pick was trained.
- ``schedule/rollouts_spent``: rollout rows of every batch task, including over-sampled ones.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .catalog import TaskCatalog
from .stats import group_summary

MEAN_VARIANCE = "schedule/mean_variance"
MEDIAN_VARIANCE = "schedule/median_variance"
MEDIAN_REWARD = "schedule/median_reward"
ZERO_VARIANCE_GROUPS = "schedule/zero_variance_groups"
TRAINED_GROUPS = "schedule/trained_groups"
ENVS_PER_BATCH = "schedule/envs_per_batch"
TOOLS_PER_BATCH = "schedule/tools_per_batch"
EXPLOIT_HIT_RATE = "schedule/exploit_hit_rate"
ROLLOUTS_SPENT = "schedule/rollouts_spent"
TOP_QUARTILE = 75.0
MIN_POOL_SAMPLE = 4  # coverage picks needed to use them as the pool sample of the hit-rate cut


def trained_groups(batch: pd.DataFrame, rollouts: pd.DataFrame) -> pd.DataFrame:
    """One row per batch task that was rolled out, in batch order: task_id, env_id, role, variance,
    mean, rollouts (rows), trained (see the module docstring for which groups are trained)."""
    for name, frame, columns in (
        ("batch", batch, ("task_id", "env_id", "role")),
        ("rollouts", rollouts, ("task_id", "reward")),
    ):
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ValueError(f"batch_metrics: {name} is missing column(s) {missing}.")
    order = pd.Index(batch["task_id"].astype(str))
    if not order.is_unique:
        raise ValueError("batch_metrics: the batch names a task twice.")
    pos = order.get_indexer(rollouts["task_id"].astype(str))
    inside = pos >= 0
    reward = rollouts["reward"].to_numpy(dtype=float)[inside]
    rows, mean, var, _, count = group_summary(pos[inside], reward)
    groups = batch.iloc[rows][["task_id", "env_id", "role"]].reset_index(drop=True)
    groups["variance"], groups["mean"], groups["rollouts"] = var, mean, count.astype(np.int64)
    if (batch["role"] == "oversample").any():
        b = int((batch["role"] != "oversample").sum())
        informative = groups["variance"].to_numpy() > 0
        groups["trained"] = informative & (np.cumsum(informative) <= b)
    else:
        groups["trained"] = True
    return groups


def batch_metrics(
    batch: pd.DataFrame,
    rollouts: pd.DataFrame,
    catalog: TaskCatalog,
    reference_variance=None,
    groups: pd.DataFrame | None = None,
) -> dict[str, float]:
    """Metrics of one step's trained groups, given the batch (task_id, env_id, role; every generation
    round in order) and its rollouts (task_id, reward[, tools_used]); see the module docstring.
    ``groups``: `trained_groups(batch, rollouts)` when the caller has it already."""
    groups = trained_groups(batch, rollouts) if groups is None else groups
    trained = groups[groups["trained"]]
    variance = trained["variance"].to_numpy(dtype=float)
    n = len(trained)

    if "tools_used" in rollouts.columns:
        used = rollouts.loc[rollouts["task_id"].astype(str).isin(trained["task_id"]), "tools_used"].dropna()
        tools = {t for cell in used for t in (cell if not isinstance(cell, str) else [cell])}
    else:
        rows = catalog.indices_of(trained["task_id"].to_numpy(dtype=object), what="batch task_id")
        tools = set(np.flatnonzero(np.asarray(catalog.tools[rows].sum(axis=0)).ravel() > 0))

    exploit = trained.loc[trained["role"] == "exploit", "variance"].to_numpy(dtype=float)
    if len(exploit) == 0:
        hit_rate = float("nan")
    else:
        if reference_variance is not None:
            reference = np.asarray(reference_variance, dtype=float)
        else:
            sample = groups.loc[groups["role"] == "coverage", "variance"].to_numpy(dtype=float)
            reference = sample if len(sample) >= MIN_POOL_SAMPLE else variance
        threshold = np.percentile(reference, TOP_QUARTILE)
        hit_rate = float(np.mean((exploit > 0) & (exploit >= threshold)))

    return {
        MEAN_VARIANCE: float(np.mean(variance)) if n else float("nan"),
        MEDIAN_VARIANCE: float(np.median(variance)) if n else float("nan"),
        MEDIAN_REWARD: float(trained["mean"].median()) if n else float("nan"),
        ZERO_VARIANCE_GROUPS: float((variance == 0).sum()),
        TRAINED_GROUPS: float(n),
        ENVS_PER_BATCH: float(trained["env_id"].nunique()),
        TOOLS_PER_BATCH: float(len(tools)),
        EXPLOIT_HIT_RATE: hit_rate,
        ROLLOUTS_SPENT: float(groups["rollouts"].sum()),
    }
