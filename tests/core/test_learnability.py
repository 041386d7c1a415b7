import copy

import numpy as np
import pandas as pd
from task_frames import group, make_tasks, rollouts_for

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.learnability import FLOOR, TaskLearnability


def feed(model: TaskLearnability, gain: np.ndarray, steps: int, seed=0, first=None):
    """Every task visited every step with group variance 0.2; task i's success rises by gain[i] per visit,
    observed with noise of sd 0.05. ``first``: the first visit's means (default: on the trend)."""
    rng = np.random.default_rng(seed)
    rows = np.arange(len(gain))
    for step in range(steps):
        mean = 0.2 + gain * step + rng.normal(0, 0.05, len(rows))
        if step == 0 and first is not None:
            mean = first
        model.update(rows, mean, np.full(len(rows), 0.2))


def test_learnability_downweights_tasks_whose_success_never_moves_and_keeps_the_others():
    model = TaskLearnability(20, group_size=8, prior_sd=1.0)
    gain = np.r_[np.full(15, 0.04), np.zeros(5)]  # tasks 15-19 are coin flips
    feed(model, gain, steps=12)
    factor = model.factor()
    assert factor[:15].mean() > 0.9 and np.all(factor[:15] > 0.6)
    assert np.all(factor[15:] < 0.4) and np.all(factor >= FLOOR)


def test_learnability_ignores_the_first_visit_that_made_a_task_look_worth_revisiting():
    model = TaskLearnability(20, group_size=8, prior_sd=1.0)
    gain = np.full(20, 0.04)
    first = np.r_[np.full(10, 0.7), np.full(10, 0.2)]  # half of them were lucky the first time
    feed(model, gain, steps=12, first=first)
    factor = model.factor()  # measured from the first visit, the lucky ones would look stuck (factor FLOOR)
    assert factor[:10].mean() > 0.8 and np.all(factor > 0.5)


def test_learnability_is_one_without_learning_to_compare_against():
    for gain in (np.zeros(20), np.full(20, -0.02)):
        model = TaskLearnability(20, group_size=8, prior_sd=1.0)
        feed(model, gain, steps=12)
        assert model.factor().tolist() == [1.0] * 20
    model = TaskLearnability(20, group_size=8, prior_sd=1.0)
    feed(model, np.full(20, 0.04), steps=2)  # two visits each: a baseline, nothing after it yet
    assert np.isnan(model.pooled_rate()) and model.factor().tolist() == [1.0] * 20


def test_learnability_scheduler_stops_exploiting_a_mixed_task_that_never_improves():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=6))
    # e1-t0 swings between 4 and 5 of 8 (the most variance) and never improves; e0's tasks climb from 0 to 2 of 8
    passes = {f"e0-t{j}": (lambda s, j=j: min((s + j) // 5, 2)) for j in range(6)}
    passes |= {f"e1-t{j}": (lambda s, j=j: 0) for j in range(1, 6)}
    passes["e1-t0"] = lambda s: 4 + s % 2
    picked = {}
    for sd in (1.0, 0.0):
        cfg = SchedulerConfig(
            batch_size=1, rho=0.0, eta=0.0, adaptive_rho=False, learnability_prior_sd=sd, transfer_weight=0.0
        )
        sched = EnvSched(catalog, cfg, seed=0)
        for step in range(1, 16):
            frames = [group(t, step, [1] * passes[t](step) + [0] * (8 - passes[t](step))) for t in passes]
            sched.observe(pd.concat(frames, ignore_index=True))
        picked[sd] = sched.select(16)["task_id"].iloc[0]
    assert picked[0.0] == "e1-t0" and picked[1.0].startswith("e0")


def test_learnability_state_round_trips_exactly():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=3, per_env=6))
    cfg = SchedulerConfig(batch_size=6, learnability_prior_sd=1.0)
    original = EnvSched(catalog, cfg, seed=0)
    for step in range(1, 6):
        original.observe(rollouts_for(original.select(step), step))
    resumed = EnvSched(catalog, cfg, seed=5)
    resumed.load_state_dict(copy.deepcopy(original.state_dict()))
    np.testing.assert_array_equal(resumed.learnability.factor(), original.learnability.factor())
    pd.testing.assert_frame_equal(original.select(6), resumed.select(6))
