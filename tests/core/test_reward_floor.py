"""Reward floors (`SchedulerConfig.reward_floor`): an environment that credits a failed attempt is read as one
that scores it 0, once a whole group sat at its lowest reward."""

import copy

import numpy as np
import pandas as pd
import pytest
from task_frames import make_tasks, rollouts_for

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.reward_floor import RewardFloors


def update(floors, env, reward, group_env, group_rewards):
    """Fold rollouts and their groups (each given by its rewards) into ``floors``."""
    groups = pd.DataFrame(
        {
            "mean": [np.mean(r) for r in group_rewards],
            "variance": [np.var(r) for r in group_rewards],
            "size": [len(r) for r in group_rewards],
        }
    )
    floors.update(np.array(env), np.array(reward), groups, np.array(group_env, dtype=np.int64))


def test_a_floor_counts_once_a_whole_group_sat_at_the_lowest_reward():
    floors = RewardFloors(3)
    # env 0: a mixed group of 1 and 0.5 (a graded environment's good start): no floor
    update(floors, [0] * 4, [1.0, 1.0, 0.5, 0.5], [0], [[1.0, 1.0, 0.5, 0.5]])
    # env 1: an all-fail group at 0.2; env 2: one at 0 (any ordinary environment)
    update(floors, [1, 1, 2, 2], [0.2, 0.2, 0.0, 0.0], [1, 2], [[0.2, 0.2], [0.0, 0.0]])
    np.testing.assert_allclose(floors.floor, [0.0, 0.2, 0.0])
    env = np.array([1, 1, 1, 0])
    np.testing.assert_allclose(floors.rescale(env, np.array([0.2, 0.6, 1.0, 0.5])), [0.0, 0.5, 1.0, 0.5])
    # a lower reward in env 1 without a whole group at it: the floor is no longer confirmed
    update(floors, [1], [0.1], [1], [[0.1]])
    assert floors.floor[1] == 0.0
    restored = RewardFloors(3)
    restored.load_state_dict(copy.deepcopy(floors.state_dict()))
    np.testing.assert_array_equal(restored.floor, floors.floor)


@pytest.fixture(scope="module")
def catalog():
    return TaskCatalog.from_frame(make_tasks(n_envs=10, per_env=12))


def step_rollouts(sched, catalog, step, success):
    """The step's batch and its rewards, the first task of each environment in the batch failing every rollout."""
    batch = sched.select(step)
    rollouts = rollouts_for(batch, step, success)
    env = dict(zip(catalog.task_ids, catalog.env, strict=True))
    first = batch.assign(env=batch["task_id"].map(env)).drop_duplicates("env")["task_id"]
    rollouts.loc[rollouts["task_id"].isin(first), "reward"] = 0.0
    return batch, rollouts


@pytest.mark.parametrize("on", [True, False])
def test_envsched_reads_floored_rewards_as_the_plain_ones_and_off_it_does_not(catalog, on):
    success = {t: 0.2 + 0.6 * (i % 4) / 3 for i, t in enumerate(catalog.task_ids)}
    cfg = SchedulerConfig(batch_size=16, reward_floor=on)
    plain, floored = EnvSched(catalog, cfg, seed=2), EnvSched(catalog, cfg, seed=2)
    same = []
    for step in range(1, 7):
        batch, rollouts = step_rollouts(plain, catalog, step, success)
        same.append(batch.equals(floored.select(step)))
        plain.observe(rollouts)
        floored.observe(rollouts.assign(reward=0.2 + 0.8 * rollouts["reward"]))  # a format reward of 0.2
    assert all(same) == on
    if on:
        np.testing.assert_allclose(floored.stats.mu, plain.stats.mu)
        pd.testing.assert_frame_equal(floored.predict(7), plain.predict(7))
        state = copy.deepcopy(floored.state_dict())
        resumed = EnvSched(catalog, cfg, seed=99)
        resumed.load_state_dict(state)
        np.testing.assert_array_equal(resumed.floors.floor, floored.floors.floor)
        pd.testing.assert_frame_equal(resumed.select(7), floored.select(7))
