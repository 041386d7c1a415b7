import copy

import numpy as np
import pandas as pd
import pytest
from task_frames import group, make_tasks

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.reward_kind import ObservedRewardKind


def test_kinds_are_unseen_pass_fail_or_partial_credit_and_partial_credit_stays():
    kinds = ObservedRewardKind(4)
    kinds.update(np.array([0, 0, 1, 1, 2]), np.array([0.0, 1.0, 0.0, 0.5, 1.0]))
    np.testing.assert_array_equal(kinds.kinds(), [1, 2, 1, 0])
    kinds.update(np.array([1, 2]), np.array([1.0, 0.25]))  # env 1 passes now; env 2 gives partial credit
    np.testing.assert_array_equal(kinds.kinds(), [1, 2, 2, 0])
    restored = ObservedRewardKind(4)
    restored.load_state_dict(copy.deepcopy(kinds.state_dict()))
    np.testing.assert_array_equal(restored.kinds(), kinds.kinds())


def unlabelled_catalog() -> TaskCatalog:
    """5 environments x 6 tasks, no ``verifier`` or ``reward_kind`` column."""
    return TaskCatalog.from_frame(make_tasks(n_envs=5, per_env=6).drop(columns=["verifier"]))


def scheduler(catalog: TaskCatalog, **fields) -> EnvSched:
    cfg = SchedulerConfig(batch_size=4, **fields)
    return EnvSched(catalog, cfg, seed=0)


def observe_history(sched: EnvSched) -> None:
    """Env 0 pass/fail and env 1 four partial checks, 6 mixed groups a step for 10 steps; then one group each of
    env 2 (every rollout fails: 0), env 3 (seven 0 and one 0.25: partial credit); env 4 never rolled out."""
    rng = np.random.default_rng(2)
    for step in range(1, 11):
        binary = (rng.random((6, 8)) < 0.5).astype(float)
        graded = rng.binomial(4, 0.5, size=(6, 8)) / 4
        parts = [group(f"e0-t{j}", step, list(binary[j])) for j in range(6)]
        parts += [group(f"e1-t{j}", step, list(graded[j])) for j in range(6)]
        sched.observe(pd.concat(parts, ignore_index=True))
    sched.observe(pd.concat([group("e2-t0", 11, [0.0] * 8), group("e3-t0", 11, [0.0] * 7 + [0.25])]))


def test_an_unlabelled_catalogue_reads_each_environments_kind_from_its_rewards():
    catalog = unlabelled_catalog()
    assert catalog.verifier_kind is None
    read = scheduler(catalog)
    observe_history(read)
    np.testing.assert_array_equal(read.outcome.reward_kind.kinds(), [1, 2, 1, 2, 0])
    c = read.outcome.dispersion()
    assert c[0] > 0.8 and c[1] < 0.4  # each seen environment by its own groups
    # env 2 has no mixed group: it takes the ratio of the pass/fail environments, not the pooled one
    assert c[2] > 0.8 and c[2] > 2.5 * c[3]
    pooled = scheduler(catalog, dispersion_by_verifier=False)
    observe_history(pooled)
    p = pooled.outcome.dispersion()
    assert pooled.outcome.reward_kind is None
    assert p[2] == pytest.approx(p[4]) and p[3] < p[2] < c[2]  # pooled alike: mixing the two kinds
    assert c[4] == pytest.approx(p[4])  # an environment never rolled out is pooled over every kind, as before


def test_a_floor_is_not_partial_credit():
    sched = scheduler(unlabelled_catalog())
    # env 2 gives 0.2 for a failed attempt: an all-fail group at 0.2 shows the floor, then 0.2 reads as 0
    sched.observe(group("e2-t0", 1, [0.2] * 8))
    sched.observe(group("e2-t1", 2, [0.2] * 4 + [1.0] * 4))
    assert sched.outcome.reward_kind.kinds()[2] == 1


def test_a_pass_paid_below_1_is_not_partial_credit():
    sched = scheduler(unlabelled_catalog())
    # env 2 pays a pass 0.8: one pass may be a capped pass or partial credit, so it is not read as either yet
    sched.observe(group("e2-t0", 1, [0.0] * 7 + [0.8]))
    assert sched.outcome.reward_kind.kinds()[2] == 1
    sched.observe(group("e2-t1", 2, [0.0] * 6 + [0.8] * 2))  # a second pass, no third value: the ceiling
    assert sched.reward_range.ceiling[2] == pytest.approx(0.8) and sched.outcome.reward_kind.kinds()[2] == 1
    # env 3 returns 0.8 and 0.4: partial credit
    sched.observe(group("e3-t0", 3, [0.0] * 6 + [0.8, 0.4]))
    assert sched.outcome.reward_kind.kinds()[3] == 2


def test_a_labelled_catalogue_keeps_its_kinds_and_the_read_kinds_resume_exactly():
    labelled = EnvSched(
        TaskCatalog.from_frame(make_tasks(n_envs=5, per_env=6)), SchedulerConfig(batch_size=4)
    )
    assert labelled.outcome.reward_kind is None  # the catalogue says how each task is rewarded
    original = scheduler(unlabelled_catalog())
    observe_history(original)
    resumed = scheduler(unlabelled_catalog())
    resumed.load_state_dict(copy.deepcopy(original.state_dict()))
    np.testing.assert_array_equal(resumed.outcome.reward_kind.kinds(), original.outcome.reward_kind.kinds())
    np.testing.assert_array_equal(resumed.outcome.dispersion(), original.outcome.dispersion())
    pd.testing.assert_frame_equal(resumed.select(12), original.select(12))
