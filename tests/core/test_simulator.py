"""Behaviour of the benchmark simulator and its campaign loop."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from envsched_core.baselines import RandomScheduler
from envsched_core.baselines.dapo import DAPOConfig, DAPODynamicSampling
from envsched_core.simulator import SMALL, SimConfig, Simulator, run_campaign, steps_to_target

TINY = SimConfig(n_envs=8, tasks_per_env=25, heldout_per_env=4)


class Fixed:
    """A scheduler that always selects the same tasks (for controlled campaigns)."""

    def __init__(self, task_ids, env_ids):
        self.frame = pd.DataFrame(
            {"task_id": task_ids, "env_id": env_ids, "role": "exploit", "predicted_variance": np.nan}
        )

    def select(self, step):
        return self.frame.copy()

    def observe(self, rollouts):
        pass


def mixed_rollouts(task_id: str, g: int = 8) -> pd.DataFrame:
    return pd.DataFrame({"task_id": task_id, "step": 1, "reward": [0.0, 1.0] * (g // 2)})


def test_simulator_is_deterministic_per_seed():
    a, b, c = Simulator(TINY, seed=7), Simulator(TINY, seed=7), Simulator(TINY, seed=8)
    fa, fb = a.catalog_frame(), b.catalog_frame()
    pd.testing.assert_frame_equal(fa.drop(columns="embedding"), fb.drop(columns="embedding"))
    np.testing.assert_array_equal(np.stack(fa["embedding"]), np.stack(fb["embedding"]))
    config = type("C", (), {"batch_size": 16, "group_size": 8})()
    ma = run_campaign(RandomScheduler(fa, config, seed=1), a.reset(3), 6)
    mb = run_campaign(RandomScheduler(fb, config, seed=1), b.reset(3), 6)
    pd.testing.assert_frame_equal(ma, mb)
    assert not np.allclose(a.success_probability(), c.success_probability())


def test_simulator_uneven_environments_keep_the_total_and_every_held_out_set():
    sim = Simulator(replace(TINY, env_size_skew=1.5), seed=2)
    frame = sim.catalog_frame()
    sizes = frame.groupby("env_id").size()
    assert sizes.max() > 3 * TINY.tasks_per_env and sizes.min() >= 2  # one large environment, none empty
    assert abs(len(frame) - TINY.n_envs * TINY.tasks_per_env) <= TINY.n_envs  # about the same catalogue size
    assert frame["task_id"].is_unique and (frame["task_id"].str.split("-").str[0] == frame["env_id"]).all()
    heldout_env = sim._task_env[sim._heldout_rows]
    np.testing.assert_array_equal(np.bincount(heldout_env), np.full(TINY.n_envs, TINY.heldout_per_env))
    assert len(sim.success_probability()) == len(frame)
    assert not np.array_equal(
        sizes.to_numpy(),
        Simulator(replace(TINY, env_size_skew=1.5), seed=3)
        .catalog_frame()
        .groupby("env_id")
        .size()
        .to_numpy(),
    )  # drawn per world


def test_simulator_reset_restores_initial_policy():
    sim = Simulator(TINY, seed=1)
    start = sim.heldout_score()
    sim.train(mixed_rollouts(sim.task_ids[0]), max_groups=1)
    assert sim.heldout_score() != start
    assert sim.reset(0).heldout_score() == start


def test_simulator_policy_improves_only_from_mixed_groups():
    sim = Simulator(TINY, seed=2)
    tid = sim.task_ids[0]
    p0, h0 = sim.success_probability(), sim.heldout_score()
    for value in (0.0, 1.0):  # all-fail and all-pass groups carry no advantage signal
        flat = pd.DataFrame({"task_id": tid, "step": 1, "reward": [value] * 8})
        assert sim.train(flat, max_groups=1) == 0
        np.testing.assert_array_equal(sim.success_probability(), p0)
    assert sim.train(mixed_rollouts(tid), max_groups=1) == 1
    p1 = sim.success_probability()
    env = sim.catalog_frame()["env_id"].to_numpy()
    assert p1[0] > p0[0]
    assert (p1[env == env[0]] > p0[env == env[0]]).all()  # transfer within the environment
    assert sim.heldout_score() > h0  # and to held-out tasks


def test_simulator_trains_on_at_most_b_informative_groups():
    sim = Simulator(TINY, seed=2)
    roll = pd.concat([mixed_rollouts(t) for t in sim.task_ids[:5]], ignore_index=True)
    assert sim.train(roll, max_groups=3) == 3


def test_simulator_trains_a_short_group_on_the_rewards_that_came_back():
    def update(rows):  # the skill change one training step on these rollouts makes
        sim = Simulator(TINY, seed=2)
        theta = sim.theta.copy()
        trained = sim.train(pd.DataFrame(rows, columns=["task_id", "step", "reward"]), max_groups=2)
        return trained, sim.theta - theta

    a, b = Simulator(TINY, seed=2).task_ids[:2]
    full = [(a, 1, r) for r in [1.0, 0.0] * 4]
    trained, push = update(full)
    assert trained == 1 and np.abs(push).sum() > 0
    # two of the eight came back with the same spread: the same push; one alone has no advantage
    short_trained, short_push = update(full[:2])
    assert short_trained == 1
    np.testing.assert_allclose(short_push, push)
    assert update(full[:1])[0] == 0
    # a short group followed by another task's group: two groups; one task twice in a row: two groups of G
    assert update(full[:3] + [(b, 1, r) for r in [0.0, 1.0, 1.0]])[0] == 2
    assert update(full + full)[0] == 2


def test_simulator_starts_in_early_training_regime():
    sim = Simulator(SMALL, seed=0)
    p = sim.success_probability()
    all_fail = ((1 - p) ** 8).mean()
    all_pass = (p**8).mean()
    assert all_fail > 0.5  # most groups all-fail ...
    assert 1 - all_fail - all_pass > 0.15  # ... some are mixed
    assert all_pass < 0.05


def test_simulator_rollout_rewards_are_in_unit_interval_with_graded_and_binary_kinds():
    sim = Simulator(TINY, seed=4)
    frame = sim.catalog_frame()
    roll = sim.rollout(frame[["task_id", "env_id"]], step=1)
    assert len(roll) == len(frame) * 8 and roll["reward"].between(0, 1).all()
    graded = frame.loc[frame["verifier"] == "partial_checks", "task_id"]
    assert len(graded) and not np.isin(roll.loc[roll["task_id"].isin(graded), "reward"], [0, 1]).all()


def test_simulator_embeddings_are_closer_within_environment():
    frame = Simulator(TINY, seed=0).catalog_frame()
    emb = np.stack(frame["embedding"])
    cos = emb @ emb.T
    same = frame["env_id"].to_numpy()[:, None] == frame["env_id"].to_numpy()[None, :]
    np.fill_diagonal(same, False)
    other = ~same
    np.fill_diagonal(other, False)
    assert cos[same].mean() > cos[other].mean() + 0.2


def test_simulator_catalog_has_the_documented_columns():
    frame = Simulator(TINY, seed=0).catalog_frame()
    for column in (
        "task_id",
        "env_id",
        "text",
        "tools",
        "tool_effects",
        "state_fields",
        "turns",
        "gold_calls",
        "verifier",
        "embedding",
    ):
        assert column in frame.columns
    assert frame["task_id"].is_unique and frame["env_id"].nunique() == 8
    assert all(len(t) == len(e) for t, e in zip(frame["tools"], frame["tool_effects"], strict=True))


def test_simulator_rejects_unknown_task_id():
    sim = Simulator(TINY, seed=0)
    with pytest.raises(ValueError, match="unknown task_id"):
        sim.rollout(pd.DataFrame({"task_id": ["missing"]}), step=1)


def test_run_campaign_reports_hits_and_rollouts():
    sim = Simulator(TINY, seed=5)
    frame = sim.catalog_frame()
    expected = sim.expected_variance()
    top = np.argsort(-expected)[:10]
    sched = Fixed(frame["task_id"].to_numpy()[top], frame["env_id"].to_numpy()[top])
    metrics = run_campaign(sched, sim, 3)
    assert (metrics["rollouts"] == 80).all() and metrics["cum_rollouts"].tolist() == [80, 160, 240]
    assert metrics["hit_rate"].iloc[0] > 0.5  # top-variance picks mostly land in the top quartile
    assert metrics["envs"].iloc[0] == len(set(frame["env_id"].to_numpy()[top]))


class Recording(Fixed):
    """A fixed scheduler that records, at each select, the steps whose rewards it has observed."""

    def __init__(self, task_ids, env_ids):
        super().__init__(task_ids, env_ids)
        self.seen: list[int] = []
        self.seen_at_select: dict[int, list[int]] = {}

    def select(self, step):
        self.seen_at_select[step] = list(self.seen)
        return super().select(step)

    def observe(self, rollouts):
        self.seen += sorted(set(rollouts["step"]))


@pytest.mark.parametrize("lag", [0, 1, 3])
def test_run_campaign_with_observe_lag_selects_before_the_last_lag_steps_are_observed(lag):
    sim = Simulator(TINY, seed=5)
    frame = sim.catalog_frame().head(6)
    sched = Recording(frame["task_id"].to_numpy(), frame["env_id"].to_numpy())
    metrics = run_campaign(sched, sim, 6, observe_lag=lag)
    for step in range(1, 7):
        assert sched.seen_at_select[step] == list(range(1, max(step - lag, 1)))
    assert sched.seen == [1, 2, 3, 4, 5, 6]  # what was still in flight is observed at the end
    assert (metrics["rollouts"] == 48).all()


def test_run_campaign_observes_the_sync_warmup_steps_before_the_next_select():
    sim = Simulator(TINY, seed=5)
    frame = sim.catalog_frame().head(6)
    sched = Recording(frame["task_id"].to_numpy(), frame["env_id"].to_numpy())
    run_campaign(sched, sim, 8, observe_lag=2, sync_warmup=3)
    seen = {step: sched.seen_at_select[step] for step in range(1, 9)}
    # steps 1-3 observed at once; then step t sees steps <= max(3, t - 3)
    assert seen == {
        1: [],
        2: [1],
        3: [1, 2],
        4: [1, 2, 3],
        5: [1, 2, 3],
        6: [1, 2, 3],
        7: [1, 2, 3, 4],
        8: [1, 2, 3, 4, 5],
    }
    assert sched.seen == list(range(1, 9))


def test_run_campaign_rebuilds_its_scheduler_from_the_history_at_rebuild_at():
    sim = Simulator(TINY, seed=5)
    frame = sim.catalog_frame()
    first = Recording(frame["task_id"].to_numpy()[:6], frame["env_id"].to_numpy()[:6])
    later = Recording(frame["task_id"].to_numpy()[6:10], frame["env_id"].to_numpy()[6:10])
    given = []

    def rebuild(history):
        given.append(history)
        later.observe(history)
        return later

    metrics = run_campaign(first, sim, 6, observe_lag=1, rebuild_at=4, rebuild=rebuild)
    history = given[0]
    assert sorted(set(history["step"])) == [1, 2, 3] and list(history.columns) == [
        "task_id",
        "step",
        "reward",
    ]
    assert set(history["task_id"]) == set(frame["task_id"][:6]) and len(history) == 3 * 6 * TINY.group_size
    assert first.seen == [1, 2, 3]  # what was in flight at the rebuild was observed first
    assert later.seen_at_select == {4: [1, 2, 3], 5: [1, 2, 3], 6: [1, 2, 3, 4]}  # then lag 1 again
    assert list(metrics["rollouts"]) == [48] * 3 + [32] * 3  # the new scheduler's batches from step 4
    with pytest.raises(ValueError, match="go together"):
        run_campaign(first, sim, 2, rebuild_at=2)
    for outside in (1, 3):  # not after the first step, or past the last: refused, not silently skipped
        with pytest.raises(ValueError, match=f"rebuild_at={outside}"):
            run_campaign(first, sim, 2, rebuild_at=outside, rebuild=rebuild)


def test_run_campaign_refuses_observe_lag_for_dynamic_sampling():
    sim = Simulator(TINY, seed=5)
    sched = DAPODynamicSampling(sim.catalog_frame(), DAPOConfig(batch_size=8), seed=0)
    with pytest.raises(ValueError, match="observe_lag=1: DAPODynamicSampling refills"):
        run_campaign(sched, sim, 2, observe_lag=1)
    with pytest.raises(ValueError, match="observe_lag and sync_warmup must be >= 0, got -1 and 0"):
        run_campaign(Fixed(["a"], ["e"]), sim, 2, observe_lag=-1)


def test_steps_to_target_finds_first_crossing():
    metrics = pd.DataFrame({"step": [1, 2, 3], "heldout": [0.1, 0.3, 0.2], "cum_rollouts": [10, 20, 30]})
    assert steps_to_target(metrics, 0.25) == (2.0, 20.0)
    assert np.isnan(steps_to_target(metrics, 0.9)[0])


def test_a_world_config_without_tasks_or_spread_is_refused_by_name():
    for changes, reason in [
        ({"group_size": 1}, "group_size=1 must be >= 2"),
        ({"n_envs": 0}, "n_envs=0 must be >= 1"),
        ({"heldout_per_env": 0}, "heldout_per_env=0 must be >= 1"),
        ({"graded_share": 1.5}, "graded_share=1.5 must be in [0, 1]"),
        ({"lr": float("nan")}, "lr=nan must be >= 0"),
    ]:
        with pytest.raises(ValueError, match=re.escape(reason)):
            SimConfig(**changes)
    assert SimConfig(group_size=2, graded_share=1.0, lr=0.0).group_size == 2  # the edges are worlds
