"""The contract a scheduled batch keeps before anything is trained on it: B distinct tasks (the whole pool when it
holds fewer), and for EnvSched at most its environment quota of one environment. `scheduled_batch` saves only a
batch that keeps it; its blocking check shows what broke it."""

from __future__ import annotations

from typing import Any

import pandas as pd

from envsched_core.dynamic_sampling import uses_dynamic_sampling


def batch_problem(
    primary: pd.DataFrame, quota: int, expected: int, dynamic_sampling: bool
) -> tuple[str, pd.DataFrame]:
    """What breaks the contract in a batch's primary (not oversample) rows, '' when nothing, and the rows at
    fault: other than ``expected`` tasks, a task twice, more than ``quota`` tasks of one environment. A
    dynamic-sampling peer (GRESO) skips tasks before rolling out: when its skips use the pool up its first
    round is short, and its refill rounds complete the step."""
    if len(primary) != expected and not (dynamic_sampling and len(primary) < expected):
        return f"{len(primary)} tasks where {expected} were due", primary
    copies = primary.groupby("task_id")["task_id"].transform("size")
    if (copies > 1).any():
        twice = primary[copies > 1]
        return f"task {twice['task_id'].iloc[0]!r} {int(copies.max())} times", twice
    per_env = primary.groupby("env_id")["task_id"].transform("size")
    if (per_env > quota).any():
        over = primary[per_env > quota]
        return f"{int(per_env.max())} tasks of environment {over['env_id'].iloc[0]!r} (quota {quota})", over
    return "", primary.iloc[:0]


def check_batch(batch: pd.DataFrame, scheduler: Any, expected: int) -> tuple[str, pd.DataFrame, int]:
    """(problem, rows at fault, environment quota) of the batch ``scheduler`` selected; the quota is EnvSched's
    for this catalogue (its config's, raised where few environments could not fill B), else none."""
    primary = batch[batch["role"] != "oversample"]
    quota = getattr(scheduler, "env_quota", None) or len(primary)
    return *batch_problem(primary, quota, expected, uses_dynamic_sampling(scheduler)), quota
