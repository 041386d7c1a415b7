"""Reward ranges (`SchedulerConfig.reward_floor`, `reward_ceiling`): an environment that credits a failed attempt is
read as one that scores it 0, once a whole group sat at its lowest reward; a pass/fail environment that pays a pass
less than 1 is read as one that pays 1, once two passes came back and no third value."""

import copy

import numpy as np
import pandas as pd
import pytest
from task_frames import make_tasks, rollouts_for

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.reward_range import RewardRange


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
    floors = RewardRange(3)
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
    restored = RewardRange(3)
    restored.load_state_dict(copy.deepcopy(floors.state_dict()))
    np.testing.assert_array_equal(restored.floor, floors.floor)


def test_a_ceiling_counts_for_an_environment_that_pays_two_values_only():
    ranges = RewardRange(6)
    # env 0: fail / pass at 0.8, two passes; env 1: 0 and 0.25 only (a graded start: 1 / K, below 0.6);
    # env 2: 0, 0.8 and 0.4 (a third value: partial credit); env 3: 0 and 1; env 4: one pass at 0.8 only;
    # env 5: a 0.2 floor and passes at 0.8 (a format reward and a step penalty)
    rewards = {0: [0, 0.8, 0.8, 0], 1: [0, 0.25, 0.25, 0], 2: [0, 0.8, 0.4, 0.8], 3: [0, 1, 1, 0]}
    rewards |= {4: [0, 0, 0.8, 0], 5: [0.2, 0.2, 0.8, 0.8]}
    env = np.repeat(list(rewards), 4)
    groups = [r[:2] for r in rewards.values()] + [r[2:] for r in rewards.values()]
    update(ranges, env, np.concatenate(list(rewards.values())), list(rewards) * 2, groups)
    np.testing.assert_allclose(ranges.ceiling, [0.8, 1, 1, 1, 1, 0.8])
    np.testing.assert_allclose(ranges.floor, [0, 0, 0, 0, 0, 0.2])
    np.testing.assert_allclose(
        ranges.rescale(np.array([0, 0, 1, 5, 5]), np.array([0.8, 0.0, 0.25, 0.2, 0.8])), [1, 0, 0.25, 0, 1]
    )
    # a lone pass at 0.8 (env 4) may still prove a capped pass, so it is not read as partial credit yet
    np.testing.assert_array_equal(
        ranges.may_be_pass(np.array([4, 4, 0, 1, 2]), np.array([0.8, 0.0, 0.8, 0.25, 0.8])),
        [True, False, False, False, False],
    )
    # env 0 then returns a 1: its 0.8 was partial credit after all, and the ceiling is 1 again
    update(ranges, [0, 0], [1.0, 0.8], [0], [[1.0, 0.8]])
    assert ranges.ceiling[0] == 1.0
    restored = RewardRange(6)
    restored.load_state_dict(copy.deepcopy(ranges.state_dict()))
    np.testing.assert_array_equal(restored.ceiling, ranges.ceiling)
    # a state saved before ceilings were read: floors kept, no ceiling until rewards come back
    old = RewardRange(6)
    old.load_state_dict({k: ranges.state_dict()[k] for k in ("lowest", "lowest_group")})
    np.testing.assert_array_equal(old.floor, ranges.floor)
    assert (old.ceiling == 1).all()
    assert (RewardRange(6, ceiling=False).ceiling == 1).all()


@pytest.fixture(scope="module")
def catalog():
    return TaskCatalog.from_frame(make_tasks(n_envs=10, per_env=12))


def step_rollouts(sched, catalog, step, success, first=np.zeros):
    """The step's batch and its rewards; the rollouts of the first task of each environment in the batch get
    ``first(n)`` (default: every one fails)."""
    batch = sched.select(step)
    rollouts = rollouts_for(batch, step, success)
    env = dict(zip(catalog.task_ids, catalog.env, strict=True))
    chosen = batch.assign(env=batch["task_id"].map(env)).drop_duplicates("env")["task_id"]
    mine = rollouts["task_id"].isin(chosen).to_numpy()
    rollouts.loc[mine, "reward"] = first(mine.sum())
    return batch, rollouts


RANGES = {
    # a format reward of 0.2; the first task of each environment fails every rollout, a whole group at the floor
    "floor": ("reward_floor", lambda r: 0.2 + 0.8 * r, np.zeros),
    # every pass pays 0.8; the first task of each environment passes every other rollout: a 0 and two passes
    "ceiling": ("reward_ceiling", lambda r: 0.8 * r, lambda n: np.arange(n) % 2),
}


@pytest.mark.parametrize("on", [True, False])
@pytest.mark.parametrize("kind", sorted(RANGES))
def test_envsched_reads_rescaled_rewards_as_the_plain_ones_and_off_it_does_not(catalog, kind, on):
    field, rescaled, first = RANGES[kind]
    success = {t: 0.2 + 0.6 * (i % 4) / 3 for i, t in enumerate(catalog.task_ids)}
    cfg = SchedulerConfig(batch_size=16, **{field: on})
    plain, other = EnvSched(catalog, cfg, seed=2), EnvSched(catalog, cfg, seed=2)
    same = []
    for step in range(1, 7):
        batch, rollouts = step_rollouts(plain, catalog, step, success, first)
        same.append(batch.equals(other.select(step)))
        plain.observe(rollouts)
        other.observe(rollouts.assign(reward=rescaled(rollouts["reward"])))
    assert all(same) == on
    if on:
        np.testing.assert_allclose(other.stats.mu, plain.stats.mu)
        pd.testing.assert_frame_equal(other.predict(7), plain.predict(7))
        state = copy.deepcopy(other.state_dict())
        resumed = EnvSched(catalog, cfg, seed=99)
        resumed.load_state_dict(state)
        np.testing.assert_array_equal(resumed.reward_range.floor, other.reward_range.floor)
        np.testing.assert_array_equal(resumed.reward_range.ceiling, other.reward_range.ceiling)
        pd.testing.assert_frame_equal(resumed.select(7), other.select(7))


def test_a_state_saved_before_ceilings_resumes_with_them_off_and_its_floors_kept(catalog):
    success = {t: 0.2 + 0.6 * (i % 4) / 3 for i, t in enumerate(catalog.task_ids)}
    cfg = SchedulerConfig(batch_size=16, reward_ceiling=False)
    original = EnvSched(catalog, cfg, seed=2)
    for step in (1, 2):
        _, rollouts = step_rollouts(original, catalog, step, success)
        original.observe(rollouts.assign(reward=0.2 + 0.8 * rollouts["reward"]))
    # as an older version wrote it: no reward_ceiling field, the floors under their own key
    state = copy.deepcopy(original.state_dict())
    del state["config"]["reward_ceiling"]
    floors = state.pop("reward_range")
    state["reward_floors"] = {k: floors[k] for k in ("lowest", "lowest_group")}
    with pytest.raises(ValueError, match="reward_ceiling"):
        EnvSched(catalog, SchedulerConfig(batch_size=16), seed=0).load_state_dict(state)
    resumed = EnvSched(catalog, cfg, seed=99)
    resumed.load_state_dict(state)
    np.testing.assert_array_equal(resumed.reward_range.floor, original.reward_range.floor)
    assert (resumed.reward_range.floor > 0).any()
    pd.testing.assert_frame_equal(resumed.select(3), original.select(3))
