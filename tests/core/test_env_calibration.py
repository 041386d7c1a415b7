"""Environment calibration (`SchedulerConfig.env_calibration`): an environment whose groups keep giving less
variance than the outcome model predicted for them is weighed down, by hand-computed factors; in a world where
most environments are out of reach EnvSched picks fewer of their tasks; the state resumes exactly."""

import copy
from dataclasses import replace

import numpy as np
import pytest
from task_frames import assert_resumes_exactly, make_tasks, run_steps

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.env_calibration import EnvironmentCalibration
from envsched_core.worlds import BASE, WorldSimulator


def test_the_factor_is_realised_over_predicted_variance_with_pseudo_groups_at_the_mean_prediction():
    cal = EnvironmentCalibration(3, prior=1.0, decay=0.5)
    assert cal.factor() == 1.0  # nothing predicted yet
    cal.update(np.array([0, 0, 1]), step=1, realised=np.array([0.0, 0.0, 0.2]), predicted=np.full(3, 0.1))
    # R = (0, 0.2, 0), P = (0.2, 0.1, 0), 3 groups: the pseudo-group is 1 x 0.3 / 3 = 0.1
    np.testing.assert_allclose(cal.factor(), [0.1 / 0.3, 0.3 / 0.2, 1.0])
    cal.update(np.array([2]), step=3, realised=np.array([0.1]), predicted=np.array([0.1]))
    # two steps later everything is kept at 0.25: R = (0, 0.05, 0.1), P = (0.05, 0.025, 0.1), groups 1.75
    np.testing.assert_allclose(cal.factor(), [0.1 / 0.15, 0.15 / 0.125, 1.0])


def test_state_round_trips():
    cal = EnvironmentCalibration(4, prior=4.0, decay=0.98)
    cal.update(np.array([1, 3]), step=2, realised=np.array([0.0, 0.1]), predicted=np.array([0.05, 0.05]))
    restored = EnvironmentCalibration(4, prior=4.0, decay=0.98)
    restored.load_state_dict(copy.deepcopy(cal.state_dict()))
    np.testing.assert_array_equal(restored.factor(), cal.factor())
    for tracker in (restored, cal):
        tracker.update(np.array([0]), step=5, realised=np.array([0.2]), predicted=np.array([0.1]))
    np.testing.assert_array_equal(restored.factor(), cal.factor())


def test_envsched_picks_fewer_tasks_of_environments_out_of_reach_than_with_the_rule_off():
    config = replace(BASE, n_envs=24, tasks_per_env=12, heldout_per_env=2)
    picks = {}
    for prior in (4.0, 0.0):
        sim = WorldSimulator(config, seed=0, settled_envs=0.9).reset(0)
        far = set(np.asarray(sim.task_ids)[sim.out_of_reach_tasks])  # a third of the catalogue
        sched = EnvSched(
            TaskCatalog.from_frame(sim.catalog_frame()),
            SchedulerConfig(batch_size=16, env_calibration=prior, blind_env_prior=0.0),  # this rule alone
            seed=0,
        )
        picks[prior] = 0
        for step in range(1, 26):
            batch = sched.select(step)
            rollouts = sim.rollout(batch, step)
            sched.observe(rollouts)
            sim.train(rollouts, len(batch))
            picks[prior] += int(batch["task_id"].isin(far).sum()) if step > 10 else 0
    assert picks[4.0] < 0.75 * picks[0.0]  # 23 against 44


@pytest.fixture(scope="module")
def catalog():
    return TaskCatalog.from_frame(make_tasks(n_envs=10, per_env=12))


def test_envsched_state_round_trip_resumes_exactly_and_an_older_state_loads(catalog):
    success = {t: (0.0 if t.startswith(("e1-", "e4-")) else 0.4) for t in catalog.task_ids}
    cfg = SchedulerConfig(batch_size=16, env_calibration=4.0)
    state = assert_resumes_exactly(
        lambda seed: EnvSched(catalog, cfg, seed=seed),
        lambda sched, steps, first: run_steps(sched, success, steps, first),
    )
    assert state["env_calibration"]["predicted"].sum() > 0
    older = {k: v for k, v in state.items() if k != "env_calibration"}  # saved before the tracker existed
    fresh = EnvSched(catalog, cfg, seed=3)
    fresh.load_state_dict(older)
    assert fresh.calibration.factor() == 1.0
