"""A re-delivered step is observed once (``EnvSched.observe`` through ``DeliveredGroups``)."""

import copy

import numpy as np
import pandas as pd
import pytest
from task_frames import group, rollouts_for

from envsched_core import EnvSched, SchedulerConfig
from envsched_core.delivered import DeliveredGroups

CFG = SchedulerConfig(batch_size=16)


def steps(sched, success, first, last, again=()):
    """Select and observe steps first..last; after step s in ``again``, re-deliver ``again[s](rollouts)``."""
    again = dict(again)
    for step in range(first, last + 1):
        rollouts = rollouts_for(sched.select(step), step, success)
        sched.observe(rollouts)
        if step in again:
            sched.observe(again[step](rollouts))


def assert_same(a, b, step):
    pd.testing.assert_frame_equal(a.predict(), b.predict())
    pd.testing.assert_frame_equal(a.select(step), b.select(step))


@pytest.mark.parametrize(
    "redeliver",
    [
        lambda r: r,  # the whole step again
        lambda r: r.iloc[::-1],  # again, in another order
        lambda r: r[r["task_id"].isin(r["task_id"].unique()[:3])],  # three of its groups again
    ],
)
def test_a_redelivered_step_changes_nothing(catalog, success, redeliver):
    once, twice = EnvSched(catalog, CFG, seed=0), EnvSched(catalog, CFG, seed=0)
    steps(once, success, 1, 3)
    steps(twice, success, 1, 3, again={2: redeliver, 3: redeliver})
    assert_same(once, twice, 4)


def test_a_redelivery_beside_new_groups_observes_the_new_ones(catalog, success):
    """An at-least-once queue that resends step 1 with step 2 in one frame."""
    once, together = EnvSched(catalog, CFG, seed=0), EnvSched(catalog, CFG, seed=0)
    for sched in (once, together):
        first = rollouts_for(sched.select(1), 1, success)
        sched.observe(first)
        second = rollouts_for(sched.select(2), 2, success)
        sched.observe(second if sched is once else pd.concat([first, second], ignore_index=True))
    assert_same(once, together, 3)


def test_a_step_split_over_deliveries_by_task_is_not_a_redelivery(catalog, success):
    """Disjoint groups of one step in two calls (a trainer's ranks) are new groups: the second call counts."""
    sched = EnvSched(catalog, CFG, seed=0)
    rollouts = rollouts_for(sched.select(1), 1, success)
    first = rollouts["task_id"].isin(rollouts["task_id"].unique()[:5])
    sched.observe(rollouts[first])
    before = sched.predict()
    sched.observe(rollouts[~first])
    assert not before.equals(sched.predict())
    rows = sched.state_dict()["delivered"]["rows"]
    assert sorted(sched.catalog.task_ids[rows]) == sorted(rollouts["task_id"].unique())


@pytest.mark.parametrize("order", [1, -1])
def test_a_step_handed_over_group_by_group_folds_in_as_one_delivery(catalog, success, order):
    """A trainer that hands over each group as it finishes (``more=True``): the groups are folded in once, when the
    scheduler is next asked for a batch, exactly as one delivery of the step; a group sent twice is dropped and a
    clash refused meanwhile, the groups held so far kept."""
    whole, streamed = EnvSched(catalog, CFG, seed=0), EnvSched(catalog, CFG, seed=0)
    steps(whole, success, 1, 2)
    steps(streamed, success, 1, 2)
    batch = whole.select(3)
    pd.testing.assert_frame_equal(streamed.select(3), batch)
    rollouts = rollouts_for(batch, 3, success)
    whole.observe(rollouts)
    tasks = rollouts["task_id"].unique()[::order]
    fits = streamed.outcome.n_fits
    for i, task in enumerate(tasks):
        streamed.observe(rollouts[rollouts["task_id"] == task], more=True)
        if i == 1:  # the first group again: dropped
            streamed.observe(rollouts[rollouts["task_id"] == tasks[0]], more=True)
        if i == 2:  # the first group with other rewards: refused, nothing held is lost
            first = rollouts.loc[rollouts["task_id"] == tasks[0], "reward"].mean()
            other = group(tasks[0], 3, [1.0] * 8 if first < 1 else [0.0] * 8)
            with pytest.raises(ValueError, match=f"step 3, task '{tasks[0]}' was observed already"):
                streamed.observe(other, more=True)
    assert streamed.outcome.n_fits == fits  # nothing folded yet: the shared models refit once, below
    assert_same(whole, streamed, 4)
    assert streamed.outcome.n_fits == whole.outcome.n_fits


def test_groups_held_back_are_saved_folded_in_and_dropped_by_a_state_loaded_over_them(catalog, success):
    held, control = EnvSched(catalog, CFG, seed=0), EnvSched(catalog, CFG, seed=0)
    steps(held, success, 1, 1)
    steps(control, success, 1, 1)
    saved = copy.deepcopy(control.state_dict())  # after step 1
    rollouts = rollouts_for(held.select(2), 2, success)
    control.select(2)
    held.observe(rollouts, more=True)
    control.observe(rollouts)
    # state_dict folds what is held first: a saved state never leaves groups out
    np.testing.assert_array_equal(held.state_dict()["outcome"]["m"], control.state_dict()["outcome"]["m"])
    # a state loaded over held groups replaces them with everything else
    replaced, loaded = EnvSched(catalog, CFG, seed=0), EnvSched(catalog, CFG, seed=1)
    replaced.observe(rollouts, more=True)
    with pytest.raises(ValueError, match="already selected or observed"):
        replaced.warm_start(rollouts)  # holding groups counts as having observed
    replaced.load_state_dict(copy.deepcopy(saved))
    loaded.load_state_dict(copy.deepcopy(saved))
    pd.testing.assert_frame_equal(replaced.predict(), loaded.predict())


def test_a_group_delivered_again_with_other_rewards_is_refused_and_changes_nothing(catalog, success):
    sched, control = EnvSched(catalog, CFG, seed=0), EnvSched(catalog, CFG, seed=0)
    steps(sched, success, 1, 2)
    steps(control, success, 1, 2)
    seen = sched.state_dict()["delivered"]  # a group observed: its step, task and mean
    step, task = int(seen["step"][-1]), sched.catalog.task_ids[seen["rows"][-1]]
    other = group(task, step, [1.0] * 8 if seen["mean"][-1] < 1 else [0.0] * 8)
    fresh = group(
        sched.catalog.task_ids[0], 3, [1, 0]
    )  # a good group in the same frame is not observed either
    with pytest.raises(
        ValueError, match=rf"step {step}, task '{task}' was observed already with other rewards"
    ):
        sched.observe(pd.concat([fresh, other], ignore_index=True))
    assert_same(sched, control, 3)


def test_redeliveries_of_steps_before_a_save_are_still_dropped_after_loading_it(catalog, success):
    once, resumed = EnvSched(catalog, CFG, seed=0), EnvSched(catalog, CFG, seed=5)
    kept = {}
    steps(once, success, 1, 2, again={1: lambda r: kept.setdefault(1, r)})
    resumed.load_state_dict(copy.deepcopy(once.state_dict()))
    resumed.observe(kept[1])
    assert_same(once, resumed, 3)


def test_a_warm_started_clock_names_the_callers_step(catalog, success):
    history = pd.concat([group("e1-t1", 1, [1, 0]), group("e2-t2", 2, [0, 0])])
    sched = EnvSched(catalog, CFG, seed=0)
    sched.warm_start(history)  # this campaign's step s is step 2 + s of the scheduler's clock
    sched.observe(group("e1-t1", 1, [1, 1, 0]))
    sched.observe(group("e1-t1", 1, [1, 1, 0]))
    with pytest.raises(ValueError, match="step 1, task 'e1-t1' was observed already"):
        sched.observe(group("e1-t1", 1, [0, 0, 0]))


def test_state_round_trips_the_delivered_groups():
    empty = (
        DeliveredGroups()
    )  # a state saved before any step was observed (a pipeline saves one at selection)
    empty.load_state_dict(DeliveredGroups().state_dict())
    assert empty.steps == {}
    delivered = DeliveredGroups()
    delivered.record(
        np.array([3, 1, 3]),
        np.array([7, 2, 4]),
        np.array([8, 8, 6]),
        np.array([0.5, 0, 1]),
        np.array([0.25, 0, 0]),
    )
    delivered.record(np.array([3]), np.array([1]), np.array([8]), np.array([0.125]), np.array([0.11]))
    loaded = DeliveredGroups()
    loaded.load_state_dict(copy.deepcopy(delivered.state_dict()))
    assert sorted(loaded.steps) == [1, 3]
    for s in (1, 3):
        for a, b in zip(loaded.steps[s], delivered.steps[s], strict=True):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(loaded.steps[3][0], [1, 4, 7])  # sorted by task row for the look-up
    seen, clash = loaded.repeated(
        np.array([3, 3, 2]),
        np.array([4, 7, 4]),
        np.array([6, 8, 8]),
        np.array([1.0, 0.5, 1.0]),
        np.array([0.0, 0.3, 0.0]),
    )
    assert (
        seen.tolist() == [True, True, False] and clash == 1
    )  # step 3 task 7 came back with another variance
