"""Refill rounds (`SchedulerConfig.refill_rounds`): EnvSched rolls out more predicted-informative tasks while a
step has fewer than B informative groups."""

import copy
import math

import pandas as pd
from task_frames import rollouts_for

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.dynamic_sampling import rollout_rounds, scheduler_refill
from envsched_core.simulator import SimConfig, Simulator, run_campaign

B = 16


def informative(rollouts: pd.DataFrame) -> set[str]:
    variance = rollouts.groupby("task_id")["reward"].var(ddof=0)
    return set(variance.index[variance > 0])


def warmed(catalog, success, rounds: int, steps: int = 3) -> EnvSched:
    """A scheduler that has run ``steps`` steps of one round each (so it has predictions to refill from)."""
    sched = EnvSched(catalog, SchedulerConfig(batch_size=B, refill_rounds=rounds), seed=0)
    for step in range(1, steps + 1):
        sched.observe(rollouts_for(sched.select(step), step, success))
    return sched


def test_refill_rolls_out_new_tasks_for_the_missing_informative_groups_under_the_quota(catalog, success):
    sched = warmed(catalog, success, rounds=2)
    batch = sched.select(4)
    first = rollouts_for(batch, 4, success)
    sched.observe(first)
    kept = informative(first)
    assert len(kept) < B  # the world leaves the first round short

    extra = sched.refill(4)
    assert len(extra) == min(B, math.ceil(1.25 * (B - len(kept))))
    assert set(extra["role"]) == {"oversample"}
    assert not set(extra["task_id"]) & set(batch["task_id"])  # never a task of this step again
    assert not extra["task_id"].duplicated().any()
    # a zero-variance group frees its environment's slot: informative groups + refills stay under the quota
    envs = pd.concat([batch[batch["task_id"].isin(kept)]["env_id"], extra["env_id"]])
    assert envs.value_counts().max() <= sched.env_quota
    # the refills are what the scheduler predicts most informative among the tasks it did not roll out
    predicted = sched.predict(4).set_index("task_id")["predicted_variance"]
    assert predicted[extra["task_id"]].mean() > predicted.drop(batch["task_id"]).mean()


def test_refill_stops_at_b_informative_groups_at_its_round_cap_and_when_off(catalog, success):
    off = warmed(catalog, success, rounds=0)
    off.observe(rollouts_for(off.select(4), 4, success))
    assert off.refill(4).empty  # the default: one round per step

    capped = warmed(catalog, success, rounds=1)
    capped.observe(rollouts_for(capped.select(4), 4, success))
    extra = capped.refill(4)
    assert not extra.empty
    capped.observe(rollouts_for(extra, 4, success))
    assert capped.refill(4).empty  # one round allowed, however short the step still is
    assert capped.refill(3).empty  # not the step being rolled out

    everyone = dict.fromkeys(catalog.task_ids, 0.5)  # every group informative: nothing to refill
    full = warmed(catalog, everyone, rounds=3)
    full.observe(rollouts_for(full.select(4), 4, everyone, seed=2))
    assert full.refill(4).empty


def test_refill_state_round_trips_mid_step_and_a_restored_scheduler_takes_the_step_up(catalog, success):
    cfg = SchedulerConfig(batch_size=B, refill_rounds=3)
    original = warmed(catalog, success, rounds=3)
    batch = original.select(4)
    selected = copy.deepcopy(original.state_dict())  # what the pipeline saves after selecting step 4
    first = rollouts_for(batch, 4, success)
    original.observe(first)
    observed = copy.deepcopy(original.state_dict())
    expected = original.refill(4)

    resumed = EnvSched(catalog, cfg, seed=99)
    resumed.load_state_dict(observed)
    pd.testing.assert_frame_equal(resumed.refill(4), expected)

    # restored as it was after selecting, then handed the step's first round (a rebuilt scheduler's path)
    restored = EnvSched(catalog, cfg, seed=99)
    restored.load_state_dict(selected)
    restored.resume_step(4, batch["task_id"])  # its own step: nothing to take up
    restored.observe(first)
    pd.testing.assert_frame_equal(restored.refill(4), expected)

    rebuilt = warmed(catalog, success, rounds=3)  # never selected step 4
    rebuilt.resume_step(4, batch["task_id"])
    rebuilt.observe(first)
    taken_up = rebuilt.refill(4)
    assert not taken_up.empty and not set(taken_up["task_id"]) & set(batch["task_id"])


def test_refill_rounds_train_on_b_informative_groups_in_the_simulator():
    sim = Simulator(SimConfig(n_envs=12, tasks_per_env=20, heldout_per_env=2, d0=1.5), seed=0)
    catalog = TaskCatalog.from_frame(sim.catalog_frame())
    runs = {}
    for rounds in (0, 3):
        sched = EnvSched(catalog, SchedulerConfig(batch_size=B, refill_rounds=rounds), seed=0)
        runs[rounds] = run_campaign(sched, sim.reset(0), 8)
    one, refilled = runs[0], runs[3]
    assert (one["rollouts"] == B * sim.config.group_size).all()
    assert refilled["trained_groups"].sum() > one["trained_groups"].sum()
    assert (refilled["rollouts"] >= B * sim.config.group_size).all()
    assert (refilled["rollouts"] > B * sim.config.group_size).any()  # refill rounds are counted as spent


def test_refill_runs_through_the_shared_round_loop(catalog, success):
    sched = warmed(catalog, success, rounds=3)
    every, results = rollout_rounds(
        sched.select(4), lambda frame: rollouts_for(frame, 4, success), scheduler_refill(sched, 4)
    )
    assert len(results) >= 2 and not every["task_id"].duplicated().any()
    kept = set().union(*(informative(r) for r in results))
    assert len(kept) >= B or len(results) == 4  # B informative groups, or every round used
