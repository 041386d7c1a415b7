import copy

import numpy as np
import pandas as pd
import pytest
from task_frames import group, make_tasks, rollouts_for

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.solvability import TaskSolvability, log_all_zero


def test_log_all_zero_is_the_chance_of_g_failures_integrated_over_the_logit():
    z, trials = np.array([0.0, -2.0, 1.5]), np.array([8.0, 8.0, 4.0])
    exact = trials * np.log(1.0 / (1.0 + np.exp(z)))  # no uncertainty: (1 - sigmoid(z))^G
    np.testing.assert_allclose(log_all_zero(z, np.zeros(3), trials), exact, rtol=1e-12)
    # with sd 1 the expectation, by a fine grid over the normal density
    grid = np.linspace(-8, 8, 20001)
    density = np.exp(-0.5 * grid**2) / np.sqrt(2 * np.pi)
    for zi, gi in zip(z, trials, strict=True):
        expected = np.log(np.trapz((1.0 / (1.0 + np.exp(zi + grid))) ** gi * density, grid))
        assert log_all_zero(np.array([zi]), np.ones(1), np.array([gi]))[0] == pytest.approx(
            expected, abs=0.02
        )


def test_solvability_all_zero_groups_the_model_expected_to_pass_count_most_and_one_pass_clears_a_task():
    model = TaskSolvability(4, prior=0.05, decay=1.0)
    rows, eight = np.arange(4), np.full(4, 8.0)
    z = np.array([0.0, 0.0, -4.0, 0.0])  # tasks 0, 1, 3 were predicted mixed, task 2 almost surely failing
    model.update(rows, 1, np.array([0.0, 0.0, 0.0, 0.25]), z, np.zeros(4), eight)
    factor = model.factor(1)
    assert factor[3] == 1.0  # it scored: learnable
    assert (
        factor[0] == factor[1] < factor[2] < 1.0
    )  # nothing where nothing was expected, much where p was 1/2
    assert factor[0] < 0.5  # (1/2)^8 against a 5% prior
    model.update(np.array([3]), 2, np.zeros(1), np.zeros(1), np.zeros(1), np.full(1, 8.0))
    assert model.factor(2)[3] == 1.0  # cleared for good


def test_solvability_fits_the_share_of_tasks_that_never_pass_from_the_evidence():
    rows, eight = np.arange(100), np.full(100, 8.0)
    broken = np.zeros(100, dtype=bool)
    broken[:30] = True  # 30 never pass; the model expected each to pass about half the time, 3 visits each
    model = TaskSolvability(100, prior=0.05, decay=1.0)
    for step in range(1, 4):
        model.update(rows, step, np.where(broken, 0.0, 0.5), np.zeros(100), np.full(100, 0.5), eight)
    assert 0.2 < model.share < 0.35
    assert model.factor(3)[broken].max() < 0.01 and (model.factor(3)[~broken] == 1).all()
    quiet = TaskSolvability(100, prior=0.05, decay=1.0)  # all-zero where the model expected all-zero
    for step in range(1, 4):
        quiet.update(rows, step, np.zeros(100), np.full(100, -6.0), np.full(100, 0.5), eight)
    assert quiet.share < 0.1 and quiet.factor(3).min() > 0.9  # only the prior holds the share: no evidence


def test_solvability_forgets_old_evidence_as_the_residuals_do():
    model = TaskSolvability(1, prior=0.05, decay=0.9)
    model.update(np.zeros(1, np.int64), 1, np.zeros(1), np.zeros(1), np.zeros(1), np.full(1, 8.0))
    assert model.factor(1)[0] < model.factor(11)[0] < model.factor(60)[0] < 1.0


def test_solvability_scheduler_weighs_down_a_task_that_never_passes_while_its_environment_learns():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=6))
    # environment 0 learns: its tasks climb from 0 to 3 of 8 passes; e0-t0 never passes (a wrong gold answer)
    passes = {f"e0-t{j}": (lambda s, j=j: min((s + j) // 3, 3)) for j in range(6)}
    passes["e0-t0"] = lambda s: 0
    passes |= {f"e1-t{j}": (lambda s: 1) for j in range(6)}
    value = {}
    for prior in (0.0, 0.05):
        cfg = SchedulerConfig(batch_size=1, unsolvable_prior=prior)
        sched = EnvSched(catalog, cfg, seed=0)
        for step in range(1, 13):
            frames = [group(t, step, [1] * passes[t](step) + [0] * (8 - passes[t](step))) for t in passes]
            sched.observe(pd.concat(frames, ignore_index=True))
        value[prior] = sched._predicted(13).v_hat
    broken = catalog.indices_of(["e0-t0"])[0]
    factor = sched.solvability.factor(13)
    assert factor[broken] < 0.2 and np.delete(factor, broken).min() == 1.0  # every other task has passed
    np.testing.assert_allclose(value[0.05], value[0.0] * factor)  # exploitation's value, weighed by it


def test_solvability_state_round_trips_exactly():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=3, per_env=6))
    cfg = SchedulerConfig(batch_size=6, unsolvable_prior=0.05)
    original = EnvSched(catalog, cfg, seed=0)
    p = {t: (0.0 if t.endswith("t0") else 0.4) for t in catalog.task_ids}
    for step in range(1, 6):
        original.observe(rollouts_for(original.select(step), step, p=p))
    resumed = EnvSched(catalog, cfg, seed=5)
    resumed.load_state_dict(copy.deepcopy(original.state_dict()))
    np.testing.assert_array_equal(resumed.solvability.factor(6), original.solvability.factor(6))
    assert resumed.solvability.share == original.solvability.share
    pd.testing.assert_frame_equal(original.select(6), resumed.select(6))


def test_solvability_a_state_saved_before_it_existed_resumes_without_it():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=3, per_env=6))
    original = EnvSched(catalog, SchedulerConfig(batch_size=6, unsolvable_prior=0.0), seed=0)
    for step in range(1, 4):
        original.observe(rollouts_for(original.select(step), step, p=0.3))
    state = copy.deepcopy(original.state_dict())
    del state["config"]["unsolvable_prior"], state["solvability"]  # as an older version wrote it
    resumed = EnvSched(catalog, SchedulerConfig(batch_size=6, unsolvable_prior=0.0), seed=9)
    resumed.load_state_dict(state)
    pd.testing.assert_frame_equal(original.select(4), resumed.select(4))
    with pytest.raises(ValueError, match="unsolvable_prior"):  # it ran without the factor, not at the default
        EnvSched(catalog, SchedulerConfig(batch_size=6), seed=0).load_state_dict(state)
