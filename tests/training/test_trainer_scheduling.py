"""StepBatches: the trainer-facing side of a scheduler (fixed-size batches, checked feedback)."""

import numpy as np
import pandas as pd
import pytest

from envsched_core import StateMismatch
from envsched_core.baselines import GRESOScheduler
from training.integrations.scheduling import StepBatches, make_scheduler, scheduler_batch_size

TASKS = pd.DataFrame(
    {
        "task_id": [f"t{i}" for i in range(12)],
        "env_id": [f"e{i % 4}" for i in range(12)],
        "text": [f"task {i} of environment {i % 4}" for i in range(12)],
        "tools": [[f"tool{i % 3}", f"tool{i % 5}"] for i in range(12)],
        "embedding": list(np.random.default_rng(0).normal(size=(12, 8))),  # EnvSched reads it, no model
    }
)
ROWS = {t: i for i, t in enumerate(TASKS["task_id"])}


def batches(name="random", prompts=4, group=2):
    return StepBatches(make_scheduler(name, TASKS, prompts, group, seed=1), ROWS, prompts)


def test_step_batches_hand_out_the_schedulers_batch_and_observe_it():
    b = batches()
    step, rows = b.next_batch()
    assert step == 1 and len(rows) == 4 and [TASKS.task_id[r] for r in rows] == b.batches[1]
    ids = [t for t in b.batches[1] for _ in range(2)]
    frame = b.observe(1, ids, [0.0, 1.0] * 4)
    assert frame["step"].eq(1).all() and b.pending_step is None
    assert b.metrics[1]["schedule/zero_variance_groups"] == 0.0
    assert b.metrics[1]["schedule/mean_reward_variance"] == pytest.approx(0.25)


@pytest.mark.parametrize(
    "ids, rewards, message",
    [
        (["t99"] * 8, [0.0] * 8, "not in its batch"),  # a task the step never handed out
        (None, [0.0] * 7, "8 task ids but 7 rewards"),  # one reward missing
        (None, [2.0] * 8, "outside reward_range=\\(0, 1\\)"),  # a reward the schedulers cannot take
    ],
)
def test_step_batches_reject_feedback_that_is_not_the_steps(ids, rewards, message):
    b = batches()
    b.next_batch()
    ids = ids or [t for t in b.batches[1] for _ in range(2)]
    with pytest.raises(ValueError, match=message):
        b.observe(1, ids, rewards)
    assert b.pending_step == 1  # nothing was observed: the step can still be fed correctly


def test_step_batches_read_a_reward_on_its_range_and_keep_its_metrics_in_its_units():
    unit, summed = (
        batches("envsched"),
        StepBatches(make_scheduler("envsched", TASKS, 4, 2, seed=1), ROWS, 4, (0, 2)),
    )
    rng = np.random.default_rng(3)
    for step in (1, 2, 3):
        assert unit.next_batch() == summed.next_batch()  # the same batches, reward on either scale
        ids = [t for t in unit.batches[step] for _ in range(2)]
        reward = rng.integers(0, 2, size=8).astype(float)
        unit.observe(step, ids, reward.tolist())
        summed.observe(step, ids, (2 * reward).tolist())  # two 0 / 1 rewards summed, both passing together
        pd.testing.assert_frame_equal(unit.rollouts[step], summed.rollouts[step])
        assert summed.metrics[step]["rollout/mean_reward"] == pytest.approx(2 * reward.mean())
    resumed = StepBatches(make_scheduler("envsched", TASKS, 4, 2, seed=5), ROWS, 4, (0, 2))
    resumed.load_state_dict(summed.state_dict())
    assert resumed.next_batch() == unit.next_batch()
    with pytest.raises(ValueError, match="lo < hi"):
        StepBatches(make_scheduler("random", TASKS, 4, 2), ROWS, 4, (1, 1))


def test_step_batches_observe_each_step_once_and_flag_stale_selection():
    b = batches()
    b.next_batch()
    b.next_batch()  # selected before step 1's rewards came back
    assert b.stale_steps == [2]
    ids = [t for t in b.batches[1] for _ in range(2)]
    b.observe(1, ids, [1.0] * 8)
    with pytest.raises(ValueError, match="never handed out"):
        b.observe(3, ids, [1.0] * 8)


def test_step_batches_drop_a_step_delivered_again_and_refuse_one_with_other_rewards():
    once, twice = batches("envsched"), batches("envsched")
    rewards = [0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    for b in (once, twice):
        b.next_batch()
        ids = [t for t in b.batches[1] for _ in range(2)]
        first = b.observe(1, ids, rewards)
    metrics = dict(twice.metrics[1])
    # the whole step again, in another row order, then one group of it: dropped, the first frame returned
    assert twice.observe(1, ids[::-1], rewards[::-1]) is first
    assert twice.observe(1, ids[2:4], rewards[2:4]) is first
    assert twice.metrics[1] == metrics
    with pytest.raises(ValueError, match=rf"^step 1 was already observed, and task '{ids[0]}' now has other"):
        twice.observe(1, ids, [1.0] * 8)
    with pytest.raises(ValueError, match="now has other rewards \\(1, mean 0; observed: 2"):
        twice.observe(1, ids[:1], rewards[:1])  # part of a group is not that group
    # the scheduler saw the step once: the same predictions and the same next batch as a single delivery
    pd.testing.assert_frame_equal(once.scheduler.predict(), twice.scheduler.predict())
    assert once.next_batch() == twice.next_batch()


def test_step_batches_resume_keeps_a_step_still_in_flight_open():
    b = batches()
    b.next_batch()
    b.next_batch()  # an asynchronous trainer: step 2 handed out, step 1 not observed yet
    ids = [t for t in b.batches[1] for _ in range(2)]
    b.observe(1, ids, [0.0, 1.0] * 4)
    resumed = batches()
    resumed.load_state_dict(b.state_dict())
    assert resumed.pending_step == 2 and resumed.observed_steps == {1}
    with pytest.raises(ValueError, match="already observed"):
        resumed.observe(1, ids, [1.0, 0.0, 1.0, 1.0] * 2)
    resumed.observe(2, [t for t in b.batches[2] for _ in range(2)], [1.0, 0.0] * 4)  # its rewards still land
    legacy = {k: v for k, v in b.state_dict().items() if k != "observed"}
    resumed.load_state_dict(legacy)
    assert resumed.observed_steps == {1, 2}  # an old state: every step handed out was observed


def test_step_batches_pad_a_short_batch_with_its_own_tasks():
    class Short:  # GRESO skipping most of a small pool can return fewer than P tasks
        def select(self, step):
            return pd.DataFrame({"task_id": ["t1", "t2", "t3"]})

    b = StepBatches(Short(), ROWS, 5)
    assert b.next_batch()[1] == [1, 2, 3, 1, 2]


def test_dynamic_sampling_baselines_fill_the_trainers_batch_with_their_first_generation_batch():
    assert scheduler_batch_size("dapo", 12) == 4  # DAPO: generation batch 3 x B
    assert scheduler_batch_size("greso", 12) == 8  # GRESO: 1.5 x B
    assert scheduler_batch_size("dapo", 12, {"gen_batch_ratio": 1.0}) == 12
    assert scheduler_batch_size("dapo-1x", 12) == 12  # the MoPPS / DPS papers' DS: 1x
    assert scheduler_batch_size("mopps", 12) == 12
    greso = make_scheduler("greso", TASKS, 6, 2)
    assert isinstance(greso, GRESOScheduler) and len(greso.select(1)) >= 6


@pytest.mark.parametrize("option", [{"refill_rounds": 2}, {"oversample_factor": 0.5}])
def test_envsched_options_a_fixed_generation_batch_cannot_run_are_refused_not_dropped(option):
    ((name, value),) = option.items()
    with pytest.raises(ValueError, match=rf"^scheduler option {name}={value} cannot run in a trainer \("):
        StepBatches(make_scheduler("envsched", TASKS, 4, 2, options=option), ROWS, 4)
    # Off (0) is accepted: that is the default.
    off = StepBatches(make_scheduler("envsched", TASKS, 4, 2, options={name: 0}), ROWS, 4)
    assert off.next_batch()[0] == 1


def _run(b: StepBatches, steps: int) -> None:
    for _ in range(steps):
        step, rows = b.next_batch()
        ids = [t for t in b.batches[step] for _ in range(2)]
        b.observe(step, ids, [float((hash(t) + step) % 3 == 0) for t in ids])


@pytest.mark.parametrize("name", ["envsched", "dps"])
def test_step_batches_rebuild_a_scheduler_whose_state_does_not_fit_from_the_rollouts_it_kept(name):
    """A trainer resumed after upgrading EnvSched (here: a state of another version or missing a field) or
    on a dataset that lost tasks: the scheduler is rebuilt from the rollouts of the steps observed."""
    b = batches(name)
    _run(b, 3)
    state = b.state_dict()
    if name == "envsched":
        state["scheduler"]["version"] -= 1
    else:
        del state["scheduler"]["alpha"]
    resumed = batches(name)
    with pytest.warns(UserWarning, match="Rebuilt from the rollouts of 3 observed step"):
        resumed.load_state_dict(state)
    assert resumed.step == 3 and resumed.observed_steps == {1, 2, 3} and sorted(resumed.rollouts) == [1, 2, 3]
    history = pd.concat(b.rollouts.values())
    reference = make_scheduler(name, TASKS, 4, 2, seed=1)
    if name == "envsched":
        reference.warm_start(history[["task_id", "step", "reward"]], step_offset=0)
    else:
        for _, part in history.groupby("step"):
            reference.observe(part)
    assert resumed.next_batch()[1] == [ROWS[t] for t in reference.select(4)["task_id"]]

    fewer = TASKS.iloc[2:]  # the dataset lost t0 and t1: their rollouts are dropped, the rest still count
    smaller = StepBatches(make_scheduler(name, fewer, 4, 2, seed=1), {t: ROWS[t] for t in fewer.task_id}, 4)
    with pytest.warns(UserWarning, match="another catalogue|tasks"):
        smaller.load_state_dict(b.state_dict())
    assert smaller.step == 3 and set(smaller.next_batch()[1]) <= set(range(2, 12))


def test_step_batches_without_kept_rollouts_still_refuse_a_state_that_does_not_fit():
    b = batches("envsched")
    _run(b, 2)
    state = {k: v for k, v in b.state_dict().items() if k != "rollouts"}  # saved before rollouts were kept
    state["scheduler"]["version"] -= 1
    with pytest.raises(StateMismatch, match="state version .*keeps no rollouts to rebuild"):
        batches("envsched").load_state_dict(state)


@pytest.mark.parametrize(("backoff", "held_back"), [(30, True), (0, False)])
def test_envsched_holds_back_a_task_whose_samples_the_trainer_keeps_dropping(backoff, held_back):
    scheduler = make_scheduler("envsched", TASKS, 4, 2, seed=1, options={"silence_backoff": backoff})
    b = StepBatches(scheduler, ROWS, 4)
    dropped, picked = None, []
    for _ in range(14):
        step, _ = b.next_batch()
        handed_out = b.batches[step]
        dropped = dropped or handed_out[0]  # the first task handed out never comes back (its samples dropped)
        picked.append(dropped in handed_out)
        kept = [t for t in handed_out if t != dropped]
        b.observe(step, [t for t in kept for _ in range(2)], [0.0, 1.0] * len(kept))  # the rest of the step
    # picked at least twice, its silence then known, it is not handed out again; with the rule off it is
    assert sum(picked[:6]) >= 2
    assert any(picked[6:]) != held_back


def test_envsched_hands_out_less_often_a_task_whose_groups_the_trainer_returns_short():
    short = set(TASKS["task_id"][:3])  # the trainer keeps one of these tasks' two samples
    picks = {}
    for prior in (2.0, 0.0):
        scheduler = make_scheduler("envsched", TASKS, 4, 2, seed=1, options={"short_group_prior": prior})
        b = StepBatches(scheduler, ROWS, 4)
        picks[prior] = 0
        for _ in range(20):
            step, _ = b.next_batch()
            tasks, rewards = [], []
            for t in b.batches[step]:
                # every task passes half the time: a whole group reads 0 and 1, a short one alternates
                group = [float(step % 2)] if t in short else [0.0, 1.0]
                tasks, rewards = tasks + [t] * len(group), rewards + group
                picks[prior] += t in short
            b.observe(step, tasks, rewards)
    assert picks[2.0] < 0.6 * picks[0.0]
