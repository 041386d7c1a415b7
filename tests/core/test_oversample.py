"""Over-sampled first rounds (`SchedulerConfig.oversample_factor`): one generation pass of B + k tasks, k sized by
the running share of groups that came back informative."""

import copy
import math

import numpy as np
import pandas as pd
import pytest
from task_frames import rollouts_for

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.oversample import InformativeShare
from envsched_core.simulator import SimConfig, Simulator, run_campaign

B = 16


def test_the_share_is_a_running_average_of_first_rounds_and_sizes_k_by_hand():
    share = InformativeShare()
    assert share.extra(20, 1.0) == 0  # nothing observed: no over-sampling
    share.observed(1, np.array([0.1, 0.0, 0.0, 0.2]))
    assert share.share == 0.5
    assert share.extra(20, 1.0) == 20  # ceil(20 x 0.5 / 0.5)
    assert share.extra(20, 0.0) == 0  # off
    share.observed(1, np.zeros(8))  # a refill round of step 1: picked to fill its shortfall, not counted
    share.observed(2, np.full(4, 0.1))  # every group informative
    assert share.share == pytest.approx(0.7 * 0.5 + 0.3 * 1.0)
    assert share.extra(20, 1.0) == math.ceil(20 * 0.35 / 0.65)  # 11
    share.observed(1, np.zeros(8))  # a step older than the last one counted (observed late): ignored
    assert share.share == pytest.approx(0.65)

    poor = InformativeShare()
    poor.observed(3, np.array([0.1] + [0.0] * 9))  # h = 0.1, read as the floor 0.3
    assert poor.extra(20, 0.2) == math.ceil(0.2 * 20 * 0.7 / 0.3)  # 10, not 0.2 x 20 x 9 = 36
    assert poor.extra(20, 1.0) == 20  # at most B


def test_an_over_sampled_round_appends_the_next_best_tasks_under_the_quota(catalog, success):
    sched = EnvSched(catalog, SchedulerConfig(batch_size=B, oversample_factor=1.0), seed=0)
    first = sched.select(1)
    assert len(first) == B and "oversample" not in set(first["role"])  # nothing observed yet
    rollouts = rollouts_for(first, 1, success)
    sched.observe(rollouts)
    h = float((rollouts.groupby("task_id")["reward"].var(ddof=0) > 0).mean())
    assert 0 < h < 1

    batch = sched.select(2)
    primary, extra = batch[batch["role"] != "oversample"], batch[batch["role"] == "oversample"]
    assert len(primary) == B
    assert len(extra) == min(B, math.ceil(B * (1 - max(h, 0.3)) / max(h, 0.3)))
    assert batch.index[batch["role"] == "oversample"].min() == B  # after the batch: trained only if needed
    assert not batch["task_id"].duplicated().any()
    assert batch["env_id"].value_counts().max() <= sched.env_quota  # the quota counts all B + k
    # the extra tasks are what the scheduler predicts most informative among those it did not pick
    predicted = sched.predict(2).set_index("task_id")["predicted_variance"]
    assert predicted[extra["task_id"]].mean() > predicted.drop(batch["task_id"]).mean()

    plain = EnvSched(catalog, SchedulerConfig(batch_size=B), seed=0)  # the default: off
    plain.observe(rollouts)
    assert len(plain.select(2)) == B


def test_the_share_round_trips_and_a_restored_scheduler_selects_the_same_batch(catalog, success):
    cfg = SchedulerConfig(batch_size=B, oversample_factor=1.5)
    original = EnvSched(catalog, cfg, seed=0)
    for step in (1, 2, 3):
        original.observe(rollouts_for(original.select(step), step, success))
    state = copy.deepcopy(original.state_dict())
    resumed = EnvSched(catalog, cfg, seed=7)
    resumed.load_state_dict(state)
    assert resumed.share.share == original.share.share and resumed.share.step == 3
    pd.testing.assert_frame_equal(resumed.select(4), original.select(4))

    older = {k: v for k, v in state.items() if k != "share"}  # saved before the field existed
    before = EnvSched(catalog, cfg, seed=7)
    before.load_state_dict(older)
    assert before.share.step == -1 and before.share.extra(B, 1.5) == 0


def test_over_sampling_trains_on_b_groups_and_counts_every_rollout_also_with_late_rewards():
    sim = Simulator(SimConfig(n_envs=12, tasks_per_env=20, heldout_per_env=2, d0=1.5), seed=0)
    catalog = TaskCatalog.from_frame(sim.catalog_frame())
    G = sim.config.group_size
    for lag in (0, 1):
        one = run_campaign(
            EnvSched(catalog, SchedulerConfig(batch_size=B), seed=0), sim.reset(0), 8, observe_lag=lag
        )
        sched = EnvSched(catalog, SchedulerConfig(batch_size=B, oversample_factor=1.0), seed=0)
        over = run_campaign(sched, sim.reset(0), 8, observe_lag=lag)
        assert (one["rollouts"] == B * G).all()
        assert (over["trained_groups"] <= B).all()
        assert (over["rollouts"] > B * G).any()  # the extra tasks are rolled out and counted as spent
        assert over["trained_groups"].sum() > one["trained_groups"].sum()


def test_oversample_factor_must_be_non_negative():
    with pytest.raises(ValueError, match="oversample_factor=-1"):
        SchedulerConfig(oversample_factor=-1)
