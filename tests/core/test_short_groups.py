"""Short groups (`SchedulerConfig.short_group_prior`): a task whose groups come back with fewer than G rewards
is valued by what such a group can teach, and nothing changes where every group comes back whole."""

import copy

import numpy as np
import pandas as pd
import pytest
from task_frames import assert_resumes_exactly, make_tasks, run_steps

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.short_groups import ShortGroups


def test_the_factor_is_exactly_one_while_every_group_comes_back_whole():
    short = ShortGroups(4, group_size=8, prior=2.0)
    assert short.factor() == 1.0
    short.update(np.array([0, 1]), np.array([8, 8]))
    short.update(np.array([0]), np.array([9]))  # two groups of one task in a step count as at most G
    assert short.factor() == 1.0
    assert ShortGroups(2, group_size=1, prior=2.0).factor() == 1.0  # G = 1: no group has an advantage


def test_the_factor_weighs_a_task_by_its_expected_groups_n_minus_one_over_n():
    short = ShortGroups(3, group_size=8, prior=2.0)
    short.update(np.array([0, 1]), np.array([8, 2]))
    short.update(np.array([0]), np.array([8]))
    # came back: 18 of 24 rollouts (0.75). Task 0: (16 + 2 * 0.75) / (16 + 2) = 0.9722 of 8 = 7.778 rewards;
    # task 1: (2 + 1.5) / (8 + 2) = 0.35, 2.8 rewards; task 2, never observed: the population's 0.75, 6 rewards
    expected = [(6.7778 / 7.7778) / 0.875, (1.8 / 2.8) / 0.875, (5 / 6) / 0.875]
    np.testing.assert_allclose(short.factor(), expected, rtol=1e-4)


def test_state_keeps_only_the_observed_tasks_and_round_trips():
    short = ShortGroups(1000, group_size=8, prior=2.0)
    short.update(np.array([3, 9]), np.array([8, 1]))
    state = short.state_dict()
    assert state["rows"].tolist() == [3, 9]
    restored = ShortGroups(1000, group_size=8, prior=2.0)
    restored.load_state_dict(copy.deepcopy(state))
    np.testing.assert_array_equal(restored.factor(), short.factor())


@pytest.fixture(scope="module")
def catalog():
    return TaskCatalog.from_frame(make_tasks(n_envs=10, per_env=12))


def run(sched, success, steps, slow=frozenset(), first=1):
    """Steps of select -> observe; each ``slow`` task's group comes back with only its first 2 rewards."""

    def returned(rollouts):
        return ~rollouts["task_id"].isin(slow) | (rollouts.groupby("task_id").cumcount() < 2)

    return run_steps(sched, success, steps, first, returned)


def test_envsched_picks_tasks_whose_groups_come_back_short_less_than_with_the_rule_off(catalog):
    success = dict.fromkeys(catalog.task_ids, 0.5)
    slow = set(catalog.task_ids[::4])
    picks = {}
    for prior in (2.0, 0.0):
        sched = EnvSched(catalog, SchedulerConfig(batch_size=16, short_group_prior=prior), seed=0)
        batches = run(sched, success, 20, slow)
        picks[prior] = sum(int(b["task_id"].isin(slow).sum()) for b in batches[5:])
    assert picks[2.0] < 0.6 * picks[0.0]


def test_envsched_is_unchanged_where_every_group_comes_back_whole(catalog):
    success = {t: 0.2 + 0.6 * (i % 5) / 4 for i, t in enumerate(catalog.task_ids)}
    on, off = (
        EnvSched(catalog, SchedulerConfig(batch_size=16, short_group_prior=p), seed=1) for p in (2.0, 0.0)
    )
    for a, b in zip(run(on, success, 8), run(off, success, 8), strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_envsched_state_round_trip_resumes_exactly_and_an_older_state_loads(catalog):
    success = dict.fromkeys(catalog.task_ids, 0.4)
    slow = set(catalog.task_ids[::3])
    cfg = SchedulerConfig(batch_size=16)
    state = assert_resumes_exactly(
        lambda seed: EnvSched(catalog, cfg, seed=seed),
        lambda sched, steps, first: run(sched, success, steps, slow, first=first),
    )
    older = {k: v for k, v in state.items() if k != "short_groups"}  # saved before short groups were kept
    fresh = EnvSched(catalog, cfg, seed=3)
    fresh.load_state_dict(older)
    assert fresh.short.factor() == 1.0
