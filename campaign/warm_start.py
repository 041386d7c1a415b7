"""Warm start of a continuing campaign's scheduler from its template's rollout history.

The template's earlier campaigns are laid end to end on one timeline, oldest first (each of their
steps is one step of the timeline), so a visit's age is the number of steps between it and the new
campaign's step 1. EnvSched's own-history statistics are then exactly what they would be had the
new campaign's steps followed the old ones: visit weights decayed by gamma per step of age
(DESIGN.md "Own history"), discounted means unchanged. Baselines keep their own statistics: they
observe the history step by step, oldest first, under their own update (and forgetting) rule.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from envsched_core import TaskCatalog, TaskStats


def timeline(history: pd.DataFrame, catalog: TaskCatalog) -> pd.DataFrame:
    """Rollouts (task_id, step, reward) of ``history`` (campaign_id, step, task_id, reward, oldest
    campaign first) re-stepped 0..H-1 along the template's timeline; tasks no longer in the pool dropped."""
    if history.empty:
        return pd.DataFrame(columns=["task_id", "step", "reward"])
    keys = history[["campaign_id", "step"]].drop_duplicates()
    position = pd.Series(np.arange(len(keys)), index=pd.MultiIndex.from_frame(keys))
    steps = position.reindex(pd.MultiIndex.from_frame(history[["campaign_id", "step"]])).to_numpy()
    out = pd.DataFrame(
        {"task_id": history["task_id"].astype(str), "step": steps, "reward": history["reward"]}
    )
    return out[out["task_id"].isin(set(catalog.task_ids))].reset_index(drop=True)


def warm_stats(
    rollouts: pd.DataFrame, catalog: TaskCatalog, gamma: float, prior_variance: float
) -> TaskStats:
    """TaskStats over ``rollouts`` (a ``timeline``), re-based so its newest step is step 0: the new
    campaign's step 1 sees the newest history at age 1, older history older."""
    stats = TaskStats(len(catalog), gamma=gamma, prior_variance=prior_variance)
    if rollouts.empty:
        return stats
    stats = TaskStats.from_rollouts(rollouts, catalog, gamma=gamma, prior_variance=prior_variance)
    newest = int(rollouts["step"].max())
    seen = stats.observed
    stats.n[seen] *= gamma ** (newest - stats.last_step[seen])  # n is stored as of last_step
    stats.last_step[seen] = 0
    decay = gamma ** (newest - stats.v0_step)
    stats.v0_sum, stats.v0_weight, stats.v0_step = stats.v0_sum * decay, stats.v0_weight * decay, 0
    return stats


def replay(scheduler, rollouts: pd.DataFrame) -> None:
    """Feed a baseline the history one timeline step at a time, oldest first, all as step 0."""
    for _, part in rollouts.groupby("step", sort=True):
        scheduler.observe(part.assign(step=0))
