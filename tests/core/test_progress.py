import copy

import numpy as np
import pandas as pd
from task_frames import group, make_tasks

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.progress import N_CLASSES, LearningProgress, length_class


def feed(progress: LearningProgress, gains: dict[int, float], steps: int, seed=0):
    """Every task revisited every step; each group has variance 0.1, and its mean is the task's true success,
    which rises by gains[class] * 0.1 per visit, plus noise of sd 0.1."""
    rng = np.random.default_rng(seed)
    rows = np.arange(len(progress.cls))
    rate = np.array([gains[c] for c in progress.cls])
    for step in range(steps):
        progress.update(
            rows, 0.3 + 0.1 * rate * step + rng.normal(0, 0.1, len(rows)), np.full(len(rows), 0.1)
        )


def classes(gold_calls: list[int], per_class: int = 20) -> np.ndarray:
    return np.repeat(np.asarray(gold_calls, dtype=float), per_class)


def test_length_class_is_twice_log2_of_one_plus_gold_calls():
    calls = np.array([0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 1e6])
    assert length_class(calls).tolist() == [0, 2, 3, 4, 4, 5, 5, 6, 6, 7, 11]


def test_learning_progress_downweights_a_length_class_whose_success_never_moves():
    progress = LearningProgress(classes([1, 3, 7]), 60, group_size=8)  # classes 2, 4 and 6
    feed(progress, {2: 0.2, 4: 0.1, 6: 0.0}, steps=10)
    factor = progress.class_factors()
    assert factor[6] < 0.3 < factor[4] < 1.5 < factor[2]
    assert progress.factor()[:20].tolist() == [factor[2]] * 20


def test_learning_progress_is_one_when_classes_improve_alike_or_not_at_all():
    for gains in ({2: 0.2, 4: 0.2, 6: 0.2}, {2: 0.0, 4: 0.0, 6: 0.0}, {2: -0.1, 4: -0.2, 6: -0.3}):
        progress = LearningProgress(classes([1, 3, 7]), 60, group_size=8)
        feed(progress, gains, steps=10)
        assert progress.class_factors().tolist() == [1.0] * N_CLASSES, gains
    progress = LearningProgress(None, 40, group_size=8)  # no gold-call counts: one class
    feed(progress, {0: 0.2}, steps=10)
    assert progress.factor().tolist() == [1.0] * 40


def test_learning_progress_is_one_before_any_revisit():
    progress = LearningProgress(classes([1, 3, 7]), 60, group_size=8)
    progress.update(np.arange(60), np.full(60, 0.5), np.full(60, 0.1))
    assert progress.factor().tolist() == [1.0] * 60


def test_learning_progress_scheduler_stops_exploiting_mixed_tasks_that_never_improve():
    frame = make_tasks(n_envs=3, per_env=6)
    frame["gold_calls"] = (
        [1] * 6 + [3] * 6 + [8] * 6
    )  # env0's tasks take one call, env1's three, env2's eight
    catalog = TaskCatalog.from_frame(frame)
    # long tasks swing between 3 and 5 of 8 (the most variance) and never improve; shorter ones climb
    passes = {f"e0-t{j}": (lambda s, j=j: min(s + j % 2, 7)) for j in range(6)}
    passes |= {f"e1-t{j}": (lambda s, j=j: min(1 + (s + j % 2) // 2, 7)) for j in range(6)}
    passes |= {f"e2-t{j}": (lambda s, j=j: 3 + 2 * ((s + j) % 2)) for j in range(6)}
    picks = {}
    for on in (True, False):
        cfg = SchedulerConfig(
            batch_size=2,
            rho=0.0,
            eta=0.0,
            adaptive_rho=False,
            env_quota_min=2,
            learning_progress=on,
            global_trend=False,  # the trend would extrapolate env1's climb too; this isolates the progress factor
            blind_env_prior=0.0,  # env2 never moving is what that rule reads too
        )
        sched = EnvSched(catalog, cfg, seed=0)
        for step in range(1, 8):
            frames = [group(t, step, [1] * passes[t](step) + [0] * (8 - passes[t](step))) for t in passes]
            sched.observe(pd.concat(frames, ignore_index=True))
        picks[on] = {t[:2] for t in sched.select(8)["task_id"]}
    assert picks == {True: {"e0"}, False: {"e2"}}  # without it, the higher predicted variance


def test_learning_progress_state_round_trips_exactly():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=3, per_env=6))
    cfg = SchedulerConfig(batch_size=6, learning_progress=True)
    original = EnvSched(catalog, cfg, seed=0)
    rng = np.random.default_rng(0)
    for step in range(1, 4):
        batch = original.select(step)
        original.observe(
            pd.concat([group(t, step, rng.integers(0, 2, 8).tolist()) for t in batch["task_id"]])
        )
    resumed = EnvSched(catalog, cfg, seed=5)
    resumed.load_state_dict(copy.deepcopy(original.state_dict()))
    assert np.array_equal(resumed.progress.trained, original.progress.trained)
    pd.testing.assert_frame_equal(original.select(4), resumed.select(4))


def test_coverage_beats_exploit_skips_tasks_predicted_dead():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=3, per_env=6))
    roles = {}
    for on in (True, False):
        cfg = SchedulerConfig(
            batch_size=6, rho=0.5, adaptive_rho=False, env_quota_fraction=1.0, coverage_beats_exploit=on
        )
        sched = EnvSched(catalog, cfg, seed=0)
        for step in range(1, 5):  # env0 passes 1 in 8, env1 and env2 always fail
            frames = [group(f"e0-t{j}", step, [1] + [0] * 7) for j in range(6)]
            frames += [group(f"e{e}-t{j}", step, [0] * 8) for e in (1, 2) for j in range(6)]
            sched.observe(pd.concat(frames, ignore_index=True))
        batch = sched.select(5)
        assert len(batch) == 6 and batch["task_id"].is_unique
        roles[on] = batch.groupby("role")["env_id"].agg(set).to_dict()
    assert set().union(*roles[True].values()) == {"env0"}
    assert roles[False]["coverage"] & {"env1", "env2"}  # the new-environment bonus takes dead ones


def test_coverage_beats_exploit_hands_unneeded_coverage_slots_to_exploitation():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=6))
    cfg = SchedulerConfig(
        batch_size=4, rho=0.5, adaptive_rho=False, env_quota_fraction=1.0, coverage_beats_exploit=True
    )
    sched = EnvSched(catalog, cfg, seed=0)
    for step in range(1, 8):  # everything seen often: e0-t0..t2 mixed, the rest all pass
        frames = [group(t, step, [1, 0] * 4 if t < "e0-t3" else [1] * 8) for t in catalog.task_ids]
        sched.observe(pd.concat(frames, ignore_index=True))
    batch = sched.select(8)  # 2 exploitation slots, but only one more task beats the second of them
    assert {"e0-t0", "e0-t1", "e0-t2"} <= set(batch["task_id"]) and len(batch) == 4
    assert (batch["role"] == "exploit").all()
