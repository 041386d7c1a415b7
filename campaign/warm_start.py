"""Warm start of a continuing campaign's scheduler from its template's rollout history.

The template's earlier campaigns are laid end to end on one timeline, oldest first (each of their
steps is one step of the timeline), so a visit's age is the number of steps between it and the new
campaign's step 1. EnvSched folds that timeline in with ``EnvSched.warm_start``: every model it keeps
(outcome model, dispersion, learnability, statistics, cross edges) is then exactly what it would be had
the new campaign's steps followed the old ones. Baselines keep their own statistics: they observe the
history step by step, oldest first, under their own update (and forgetting) rule
(``envsched_core.schedulers.fold_history`` does either).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from envsched_core import TaskCatalog


def timeline(history: pd.DataFrame, catalog: TaskCatalog) -> pd.DataFrame:
    """Rollouts (task_id, step, reward) of ``history`` (campaign_id, step, task_id, reward, oldest
    campaign first) re-stepped 1..H along the template's timeline (the steps a first campaign of H steps
    has; so the last state of the campaign before holds the same clock); tasks no longer in the pool dropped."""
    if history.empty:
        return pd.DataFrame(columns=["task_id", "step", "reward"])
    keys = history[["campaign_id", "step"]].drop_duplicates()
    position = pd.Series(np.arange(1, len(keys) + 1), index=pd.MultiIndex.from_frame(keys))
    steps = position.reindex(pd.MultiIndex.from_frame(history[["campaign_id", "step"]])).to_numpy()
    out = pd.DataFrame(
        {"task_id": history["task_id"].astype(str), "step": steps, "reward": history["reward"]}
    )
    return out[out["task_id"].isin(set(catalog.task_ids))].reset_index(drop=True)
