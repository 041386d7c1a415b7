"""Silent selections (`SchedulerConfig.silence_backoff`): a task whose group never came back is not picked again
for a while, and a small catalogue still fills its batch."""

import copy

import numpy as np
import pytest
from task_frames import assert_resumes_exactly, make_tasks, run_steps

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.silence import SilentTasks


def test_a_selection_is_silent_only_once_a_later_steps_rewards_arrived_without_it():
    silent = SilentTasks(6, backoff=10)
    silent.selected(1, np.array([0, 1, 2]))
    silent.observed(1, np.array([0]))  # a first part of step 1: tasks 1 and 2 may still come
    silent.observed(1, np.array([1]))
    assert not silent.silences.any()
    silent.selected(2, np.array([3, 4]))
    silent.observed(2, np.array([3, 4]))  # step 2 is in and task 2 never answered step 1
    assert silent.silences.tolist() == [0, 0, 1, 0, 0, 0]


def test_a_second_silence_in_a_row_holds_a_task_back_doubling_and_any_reward_clears_it():
    silent = SilentTasks(3, backoff=10)
    silent.selected(1, np.array([0]))
    silent.observed(2, np.array([1]))
    assert not silent.blocked(3).any()  # one silence may be a transient timeout: a visit, nothing held back
    silent.selected(3, np.array([0]))
    silent.observed(4, np.array([1]))  # silent again at step 3: held back over steps 4-12
    assert silent.blocked(12)[0] and not silent.blocked(13)[0]
    silent.selected(13, np.array([0]))
    silent.observed(14, np.array([1]))  # a third time at step 13: held back for 20 steps from it
    assert silent.blocked(32)[0] and not silent.blocked(33)[0]
    silent.observed(13, np.array([0]))  # its step-13 group arrives late after all
    assert not silent.blocked(14).any() and silent.silences[0] == 0


def test_a_task_selected_again_before_its_answer_keeps_its_oldest_selection():
    silent = SilentTasks(2, backoff=5)
    silent.selected(1, np.array([0]))
    silent.selected(2, np.array([0]))  # picked again while step 1 is in flight (an asynchronous trainer)
    silent.observed(1, np.array([1]))
    silent.observed(2, np.array([0]))  # step 2's answer clears it: the task answers
    assert silent.silences[0] == 0 and silent.pending[0] == -1


def test_off_tracks_nothing():
    silent = SilentTasks(3, backoff=0)
    silent.selected(1, np.array([0, 1]))
    silent.observed(2, np.array([2]))
    assert not silent.blocked(3).any() and not silent.silences.any()


def test_state_keeps_only_the_tracked_tasks_and_round_trips():
    silent = SilentTasks(1000, backoff=10)
    silent.selected(1, np.array([5, 7]))
    silent.observed(2, np.array([9]))
    silent.selected(3, np.array([11]))
    state = silent.state_dict()
    assert state["rows"].tolist() == [5, 7, 11]
    restored = SilentTasks(1000, backoff=10)
    restored.load_state_dict(copy.deepcopy(state))
    for name in ("pending", "silences", "last_silent"):
        np.testing.assert_array_equal(getattr(restored, name), getattr(silent, name))
    assert restored.latest_observed == 2


@pytest.fixture(scope="module")
def catalog():
    return TaskCatalog.from_frame(make_tasks(n_envs=10, per_env=12))


def run(sched, success, steps, lost=frozenset(), first=1):
    """Steps of select -> observe, the groups of ``lost`` tasks dropped; the batches."""
    return run_steps(sched, success, steps, first, lambda rollouts: ~rollouts["task_id"].isin(lost))


def test_envsched_holds_back_tasks_that_never_answer_and_picks_them_less_than_with_the_rule_off(catalog):
    success = dict.fromkeys(catalog.task_ids, 0.5)
    lost = set(catalog.task_ids[::4])  # a quarter of the tasks never answer
    on, off = (EnvSched(catalog, SchedulerConfig(batch_size=16, silence_backoff=b), seed=0) for b in (6, 0))
    picks, held = {}, set()
    for name, sched in (("on", on), ("off", off)):
        picks[name] = 0
        for step in range(1, 21):
            held_back = set(catalog.task_ids[sched.silent.blocked(step)])
            batch = run(sched, success, 1, lost, first=step)[0]
            assert not held_back & set(batch["task_id"])  # a held-back task is never picked
            held |= held_back
            picks[name] += int(batch["task_id"].isin(lost).sum())
    rows = catalog.indices_of(np.array(sorted(lost)))
    assert (on.silent.silences[rows] >= 1).any() and not off.silent.silences.any()
    assert (on._predicted(21).n[rows] >= on.silent.silences[rows]).all()  # silent picks count as visits
    assert held and held <= lost  # only tasks that never answered were held back
    assert picks["on"] < picks["off"]


def test_a_small_catalogue_fills_its_batch_with_silent_tasks_when_nothing_else_is_left():
    small = TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=6))
    success = dict.fromkeys(small.task_ids, 0.5)
    sched = EnvSched(small, SchedulerConfig(batch_size=10, silence_backoff=30), seed=0)
    lost = set(small.task_ids[:6])
    for batch in run(sched, success, 4, lost):
        assert len(batch) == 10 and not batch["task_id"].duplicated().any()
    assert sched.silent.blocked(5).sum() >= 4  # the batch took blocked tasks, not fewer tasks


def test_envsched_state_round_trip_resumes_a_back_off_exactly(catalog):
    success = dict.fromkeys(catalog.task_ids, 0.4)
    cfg = SchedulerConfig(batch_size=16, silence_backoff=4)
    lost = set(catalog.task_ids[::5])
    state = assert_resumes_exactly(
        lambda seed: EnvSched(catalog, cfg, seed=seed),
        lambda sched, steps, first: run(sched, success, steps, lost, first=first),
    )
    older = {k: v for k, v in state.items() if k != "silence"}  # saved before silent selections were kept
    fresh = EnvSched(catalog, cfg, seed=3)
    fresh.load_state_dict(older)
    assert not fresh.silent.silences.any()
