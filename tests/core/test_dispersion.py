import numpy as np
import pandas as pd
from task_frames import group, make_tasks

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.dispersion import TaskDispersion


def test_task_dispersion_falls_for_a_task_whose_partial_credit_never_spreads():
    d = TaskDispersion(3, prior=4.0)
    for _ in range(12):  # task 0: 0.5 +- 0.5 (binary-like); task 1: always 0.25 exactly; task 2: all fail
        d.update(np.array([0, 1, 2]), np.array([0.5, 0.25, 0.0]), np.array([0.25, 0.0, 0.0]))
    factor = d.factor(np.ones(3))
    assert factor[0] == 1.0 and factor[2] == 1.0  # spreads like its environment / carries no ratio
    assert np.isclose(factor[1], 4.0 / (12 + 4.0))  # 1 / (1 + groups / prior)
    assert d.factor(np.full(3, 0.5))[0] == (12 * 0.25 / 0.5 + 4 * 0.25) / (12 * 0.25 + 4 * 0.25)


def test_task_dispersion_scheduler_stops_exploiting_a_constant_partial_credit():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=6))
    picks = {}
    for on in (True, False):
        cfg = SchedulerConfig(batch_size=1, rho=0.0, adaptive_rho=False, task_dispersion=on)
        sched = EnvSched(catalog, cfg, seed=0)
        for step in range(1, 10):  # e0-t0 scores 0.5 in every rollout; the others pass 1 of 8
            frames = [group(t, step, [0.5] * 8 if t == "e0-t0" else [1] + [0] * 7) for t in catalog.task_ids]
            sched.observe(pd.concat(frames, ignore_index=True))
        picks[on] = sched.select(10)["task_id"].iloc[0]
    assert picks[True] != "e0-t0" and picks[False] == "e0-t0"
