"""Behaviour of the five baseline schedulers on small hand-made cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envsched_core.baselines import (
    DAPO1xConfig,
    DAPO1xDynamicSampling,
    DAPOConfig,
    DAPODynamicSampling,
    DPSConfig,
    DPSScheduler,
    GRESOConfig,
    GRESOScheduler,
    MoPPSConfig,
    MoPPSScheduler,
    RandomScheduler,
)
from envsched_core.schedulers import fold_history
from envsched_core.simulator import SimConfig, Simulator, run_campaign
from envsched_core.state_fit import StateMismatch

ALL = [
    RandomScheduler,
    DAPODynamicSampling,
    DAPO1xDynamicSampling,
    GRESOScheduler,
    MoPPSScheduler,
    DPSScheduler,
]
CONFIGS = {
    RandomScheduler: DAPOConfig,
    DAPODynamicSampling: DAPOConfig,
    DAPO1xDynamicSampling: DAPO1xConfig,
    GRESOScheduler: GRESOConfig,
    MoPPSScheduler: MoPPSConfig,
    DPSScheduler: DPSConfig,
}


def tasks(n: int, envs: int = 2) -> pd.DataFrame:
    return pd.DataFrame(
        {"task_id": [f"t{i}" for i in range(n)], "env_id": [f"e{i % envs}" for i in range(n)]}
    )


def rollouts(rewards: dict[str, list[float]], step: int = 1) -> pd.DataFrame:
    rows = [(t, step, r) for t, rs in rewards.items() for r in rs]
    return pd.DataFrame(rows, columns=["task_id", "step", "reward"])


def small_sim() -> Simulator:
    return Simulator(SimConfig(n_envs=6, tasks_per_env=20, heldout_per_env=2), seed=3)


def rounds(sched, step: int, rewards_of, first: pd.DataFrame | None = None) -> list[pd.DataFrame]:
    """Run one step's rounds by hand: select (or take ``first`` as the first round), then refill until
    empty; ``rewards_of(task_id)``."""
    frames = [sched.select(step) if first is None else first]
    while True:
        sched.observe(rollouts({t: rewards_of(t) for t in frames[-1]["task_id"]}, step=step))
        extra = sched.refill(step)
        if extra.empty:
            return frames
        frames.append(extra)


def test_random_scheduler_returns_b_distinct_tasks():
    sched = RandomScheduler(tasks(50), DAPOConfig(batch_size=20), seed=1)
    for step in range(1, 6):
        batch = sched.select(step)
        assert len(batch) == 20 and batch["task_id"].is_unique
        assert set(batch["role"]) == {"coverage"}
        assert list(batch.columns[:4]) == ["task_id", "env_id", "role", "predicted_variance"]


def test_mopps_picks_task_nearest_half():
    sched = MoPPSScheduler(tasks(3), MoPPSConfig(batch_size=1), seed=0)
    sched.alpha[:] = [2000.0, 500.0, 1.0]  # posteriors centred near 1, 0.5 and 0
    sched.beta[:] = [1.0, 500.0, 2000.0]
    for step in range(1, 5):
        assert sched.select(step)["task_id"].tolist() == ["t1"]


def test_mopps_success_rate_is_the_share_of_perfect_rollouts():
    # Graded rewards: 2 of 8 rollouts are perfect, so s = 2/8 although the mean reward is 3.25/8.
    graded = {"t0": [1, 1, 0.75, 0.5, 0, 0, 0, 0]}
    acc = MoPPSScheduler(tasks(3), MoPPSConfig(batch_size=1), seed=0)
    acc.observe(rollouts(graded))
    assert (acc.alpha[0], acc.beta[0]) == pytest.approx((1 + 2, 1 + 6))
    score = MoPPSScheduler(tasks(3), MoPPSConfig(batch_size=1, metric="score"), seed=0)
    score.observe(rollouts(graded))
    assert (score.alpha[0], score.beta[0]) == pytest.approx((1 + 3.25, 1 + 4.75))


def test_mopps_and_dps_reject_unknown_metric():
    for cls, config in ((MoPPSScheduler, MoPPSConfig), (DPSScheduler, DPSConfig)):
        with pytest.raises(ValueError, match="metric must be one of"):
            cls(tasks(3), config(batch_size=1, metric="mean"), seed=0)


def test_mopps_beta_update_adds_successes_and_failures():
    sched = MoPPSScheduler(tasks(3), MoPPSConfig(batch_size=1, decay=0.5), seed=0)
    sched.observe(rollouts({"t0": [1, 1, 1, 1, 1, 1, 0, 0]}))
    # lambda * 1 + (1 - lambda) * 1 + s * G with s = 6/8, G = 8
    assert sched.alpha[0] == pytest.approx(7.0) and sched.beta[0] == pytest.approx(3.0)
    sched.observe(rollouts({"t0": [1, 0, 0, 0, 0, 0, 0, 0]}, step=2))
    assert sched.alpha[0] == pytest.approx(0.5 * 7 + 0.5 * 1 + 1)
    assert sched.beta[0] == pytest.approx(0.5 * 3 + 0.5 * 1 + 7)
    assert sched.alpha[1] == 1.0 and sched.beta[1] == 1.0  # untouched prompts keep the prior


def test_greso_skips_long_zero_variance_streak():
    sched = GRESOScheduler(tasks(40), GRESOConfig(batch_size=4), seed=0)
    for step in range(30):  # t0 fails every time: a 30-long hard streak
        sched.observe(rollouts({"t0": [0.0] * 8}, step=step))
    p = sched.skip_probability(np.array([0, 1]))
    assert p[0] == pytest.approx(1 - max(0.5**30, 0.01)) and p[1] == 0.0
    picked = sum("t0" in set(sched.select(s)["task_id"]) for s in range(100, 400))
    assert picked < 30  # without skipping t0 would appear in ~ 6/40 of 300 steps = 45


def test_greso_mid_range_group_resets_both_streaks():
    sched = GRESOScheduler(tasks(4), GRESOConfig(batch_size=1), seed=0)
    sched.p_easy, sched.p_hard = 0.9, 0.2  # each streak type uses its own p
    t0 = np.array([0])
    for step in (1, 2):
        sched.observe(rollouts({"t0": [1.0] * 8}, step=step))  # easy twice
    assert sched.skip_probability(t0)[0] == pytest.approx(1 - 0.9**2)
    sched.observe(rollouts({"t0": [0.5] * 8}, step=3))  # all equal but mid-range: resets both
    assert (sched.easy_streak[0], sched.hard_streak[0], sched.skip_probability(t0)[0]) == (0, 0, 0.0)
    for step in (4, 5, 6):
        sched.observe(rollouts({"t0": [0.0] * 8}, step=step))  # hard three times
    assert (sched.easy_streak[0], sched.hard_streak[0]) == (0, 3)
    assert sched.skip_probability(t0)[0] == pytest.approx(1 - max(0.2**3, 0.01))
    sched.observe(rollouts({"t0": [1.0] * 8}, step=7))  # an easy group ends the hard streak
    assert (sched.easy_streak[0], sched.hard_streak[0]) == (1, 0)


def test_greso_streaks_follow_the_group_mean_even_with_graded_variance():
    # Mean 0.03 <= 0.11: the reference's trace of group means counts it hard although its rewards differ.
    sched = GRESOScheduler(tasks(4), GRESOConfig(batch_size=1), seed=0)
    sched.observe(rollouts({"t0": [0.25] + [0.0] * 7, "t1": [1.0] * 7 + [0.75]}))
    assert sched.hard_streak[0] == 1 and sched.easy_streak[0] == 0
    assert sched.easy_streak[1] == 0 and sched.hard_streak[1] == 0  # mean 0.969 < 0.98: mid-range


def test_greso_last_round_when_estimate_is_at_most_one_and_a_half_b():
    sched = GRESOScheduler(tasks(200), GRESOConfig(batch_size=8), seed=0)
    first = sched.select(1)
    assert len(first) == 12 and (first["role"] == "exploit").sum() == 8
    ids = first["task_id"].tolist()
    # 6 informative, 6 zero-variance: est = int((8 - 6) / (1 - 0.5) * 1.25) = 5 <= 12, the last round
    sched.observe(rollouts({t: ([0.0, 1.0] * 4 if i < 6 else [0.5] * 8) for i, t in enumerate(ids)}))
    last = sched.refill(1)
    assert len(last) == 5 and set(last["role"]) == {"oversample"}
    sched.observe(rollouts({t: [0.5] * 8 for t in last["task_id"]}))  # still short of B: train on 6
    assert sched.refill(1).empty


def test_greso_refill_rounds_are_clamped_between_the_floor_and_one_and_a_half_b():
    mixed, flat = [0.0, 1.0] * 4, [0.5] * 8
    for floor_ratio, expected_last in ((0.25, 2), (0.5, 4)):
        sched = GRESOScheduler(tasks(200), GRESOConfig(batch_size=8, min_sampling_ratio=floor_ratio), seed=0)
        ids = sched.select(1)["task_id"].tolist()
        # 1 informative of 12: est = int(7 / (1/12) * 1.25) = 105 > 12: a full round, not the last
        sched.observe(rollouts({t: mixed if i == 0 else flat for i, t in enumerate(ids)}))
        second = sched.refill(1)
        assert len(second) == 12 and not sched.last_round
        # 6 of 12 informative: est = int(1 / 0.5 * 1.25) = 2, raised to the floor ceil(ratio x B)
        sched.observe(rollouts({t: mixed if i < 6 else flat for i, t in enumerate(second["task_id"])}))
        assert sched.num_informative == 7 and len(sched.refill(1)) == expected_last and sched.last_round


def test_greso_has_no_round_cap():
    # Every group all-equal mid-range (no streak types, so nothing is skipped): zvr = 1 each round,
    # full 12-prompt rounds until the 200-task pool is used up: 17 rounds, beyond DAPO's cap of 10.
    sched = GRESOScheduler(tasks(200), GRESOConfig(batch_size=8), seed=0)
    frames = rounds(sched, 1, lambda t: [0.5] * 8)
    every = pd.concat(frames)
    assert len(frames) == 17 and len(every) == 200 and every["task_id"].is_unique


def test_greso_p_adapts_only_after_the_first_pass_and_at_target_skips_more():
    config = GRESOConfig(batch_size=4, sampling_ratio=1.0, target_zero_variance=0.75)  # easy 1/4, hard 1/2
    sched = GRESOScheduler(tasks(4), config, seed=0)
    tally = {"t0": [1.0] * 8, "t1": [0.0] * 8, "t2": [0.0] * 8, "t3": [0, 1] * 4}  # exactly at both targets
    sched.select(1)  # the first pass over the 4 tasks
    sched.observe(rollouts({t: [0, 1] * 4 for t in tally}))
    sched.select(2)  # step 1 ended in epoch 0: no adaptation
    assert (sched.p_easy, sched.p_hard) == (0.5, 0.5)
    sched.observe(rollouts(tally, step=2))  # step 2 drew from the second pass (epoch 1)
    sched.select(3)
    assert (sched.p_easy, sched.p_hard) == pytest.approx((0.49, 0.49))  # ratio >= target: skip more


def test_greso_rebuilt_from_its_rollouts_keeps_the_adapted_p_and_the_streaks():
    """A pool refresh or a continued campaign rebuilds GRESO from the rollouts (fold_history): p_easy / p_hard
    adapt between the folded steps as they did live, and the next select adapts on the last one."""
    rng = np.random.default_rng(4)
    level = {f"t{i}": rng.choice([0.0, 0.05, 0.5, 1.0]) for i in range(30)}  # mostly zero-variance groups

    def rewards_of(task_id):
        return list((rng.random(8) < level[task_id]).astype(float))

    config = GRESOConfig(batch_size=4)
    live = GRESOScheduler(tasks(30), config, seed=0)
    history = []
    for step in range(1, 25):
        frame = live.select(step)
        while not frame.empty:  # the step's rounds, each observed before the next refill
            history.append(rollouts({t: rewards_of(t) for t in frame["task_id"]}, step=step))
            live.observe(history[-1])
            frame = live.refill(step)
    assert live.p_hard != config.p_init  # the run adapted p (its last step's tally is still pending)
    rebuilt = GRESOScheduler(tasks(30), config, seed=9)
    fold_history(rebuilt, pd.concat(history, ignore_index=True))
    for name in ("p_easy", "p_hard", "easy_streak", "hard_streak", "n_groups", "n_easy", "n_hard", "step"):
        assert np.array_equal(getattr(rebuilt, name), getattr(live, name)), name
    live.select(25)
    rebuilt.select(25)
    assert (rebuilt.p_easy, rebuilt.p_hard) == (live.p_easy, live.p_hard) != (config.p_init,) * 2


def test_dps_hmm_update_matches_hand_computation():
    sched = DPSScheduler(tasks(3), DPSConfig(batch_size=1, decay=0.7), seed=0)
    sched.observe(rollouts({"t0": [1, 0, 0, 0, 1, 0, 0, 0], "t1": [0.0] * 8}))
    # t0 mixed from a uniform prior: soft count 1/3 on row "mixed"; alpha row 2 = 0.7 + 0.3 + 1/3.
    expected_alpha = np.ones((3, 3))
    expected_alpha[1, :] = 4.0 / 3.0
    np.testing.assert_allclose(sched.alpha[0], expected_alpha)
    # pi = P_hat @ e_mixed = column 2 of alpha / its sum = (1, 4/3, 1) / (10/3)
    np.testing.assert_allclose(sched.pi[0], [0.3, 0.4, 0.3])
    np.testing.assert_allclose(sched.pi[1], [0.4, 0.3, 0.3])
    # Next step only t1 is rolled out: t0 decays toward the prior and propagates its belief.
    sched.observe(rollouts({"t1": [0.0] * 8}, step=2))
    alpha0 = 0.7 * expected_alpha + 0.3
    p_hat = alpha0 / alpha0.sum(axis=0, keepdims=True)
    np.testing.assert_allclose(sched.alpha[0], alpha0)
    np.testing.assert_allclose(sched.pi[0], p_hat @ np.array([0.3, 0.4, 0.3]))
    np.testing.assert_allclose(sched.pi_prev[0], [0.3, 0.4, 0.3])


def test_dps_observed_state_comes_from_binary_accuracy():
    sched = DPSScheduler(tasks(3), DPSConfig(batch_size=1), seed=0)
    # t0: graded, one perfect rollout -> accuracy 1/8 -> mixed; t1: partial credits, none perfect ->
    # accuracy 0 -> all-fail (its mean is 0.5); t2: all perfect -> all-pass.
    sched.observe(rollouts({"t0": [1.0] + [0.5] * 7, "t1": [0.25, 0.75] * 4, "t2": [1.0] * 8}))
    np.testing.assert_allclose(sched.pi[0], [0.3, 0.4, 0.3])  # P_hat @ e_mixed
    np.testing.assert_allclose(sched.pi[1], [0.4, 0.3, 0.3])  # P_hat @ e_fail
    np.testing.assert_allclose(sched.pi[2], [0.3, 0.3, 0.4])  # P_hat @ e_pass
    score = DPSScheduler(tasks(3), DPSConfig(batch_size=1, metric="score"), seed=0)
    score.observe(rollouts({"t1": [0.25, 0.75] * 4}))  # mean 0.5: mixed on the graded score
    np.testing.assert_allclose(score.pi[1], [0.3, 0.4, 0.3])


def test_dps_selects_highest_p_mixed():
    sched = DPSScheduler(tasks(4), DPSConfig(batch_size=1), seed=0)
    sched.observe(
        rollouts({"t0": [0.0] * 8, "t1": [1.0] * 8, "t2": [0, 1, 0, 1, 0, 1, 0, 1], "t3": [1.0] * 8})
    )
    batch = sched.select(2)
    assert batch["task_id"].tolist() == ["t2"]
    assert batch["p_mixed"].iloc[0] == pytest.approx(0.4)


def test_dapo_counts_oversample_and_stops_at_max_num_gen_batches():
    sched = DAPODynamicSampling(tasks(200), DAPOConfig(batch_size=4, max_num_gen_batches=3), seed=0)
    frames = [sched.select(1)]
    assert len(frames[0]) == 12 and (frames[0]["role"] == "oversample").sum() == 8
    sched.observe(rollouts({t: [0.0] * 8 for t in frames[0]["task_id"]}))
    while not (extra := sched.refill(1)).empty:
        assert set(extra["role"]) == {"oversample"}
        frames.append(extra)
        sched.observe(rollouts({t: [0.0] * 8 for t in extra["task_id"]}))
    every = pd.concat(frames)
    assert len(frames) == 3 and len(every) == 36 and every["task_id"].is_unique


def test_dapo_1x_generates_b_per_round_and_stops_after_four_rounds():
    sched = DAPO1xDynamicSampling(tasks(200), DAPO1xConfig(batch_size=4), seed=0)
    frames = rounds(sched, 1, lambda t: [0.0] * 8)
    assert [len(f) for f in frames] == [4, 4, 4, 4] and set(frames[0]["role"]) == {"coverage"}
    recipe = DAPODynamicSampling(tasks(200), DAPOConfig(batch_size=4), seed=0)
    assert [len(f) for f in rounds(recipe, 1, lambda t: [0.0] * 8)] == [12] * 10


def test_dapo_1x_defaults_apply_to_a_config_without_the_fields():
    from envsched_core import SchedulerConfig

    sched = DAPO1xDynamicSampling(tasks(200), SchedulerConfig(batch_size=4, group_size=8), seed=0)
    assert [len(f) for f in rounds(sched, 1, lambda t: [0.0] * 8)] == [4, 4, 4, 4]


def test_dapo_stops_once_b_informative_groups_are_collected():
    sched = DAPODynamicSampling(tasks(200), DAPOConfig(batch_size=4), seed=0)
    batch = sched.select(1)
    sched.observe(rollouts({t: [0.0, 1.0] * 4 for t in batch["task_id"][:4]}))
    assert sched.refill(1).empty


def test_run_campaign_counts_dapo_oversample_rollouts():
    sim = small_sim()
    sched = DAPODynamicSampling(sim.catalog_frame(), DAPOConfig(batch_size=8), seed=0)
    metrics = run_campaign(sched, sim, 3)
    assert (metrics["rollouts"] >= 3 * 8 * 8).all()  # a whole 3B generation batch every step
    assert (metrics["trained_groups"] <= 8).all()


@pytest.mark.parametrize("cls", [DAPODynamicSampling, GRESOScheduler], ids=lambda c: c.__name__)
def test_run_campaign_metrics_describe_the_trained_groups_of_dynamic_sampling(cls):
    sim = small_sim()
    sched = cls(sim.catalog_frame(), CONFIGS[cls](batch_size=8), seed=0)
    metrics = run_campaign(sched, sim, 5)
    # DS trains only on informative groups: none of the trained groups is zero-variance, although the
    # first round had zero-variance groups (early training: most groups all fail).
    assert (metrics["zero_var_groups"] == 0).all() and (metrics["mean_var"] > 0).all()
    assert (metrics["rollouts"] > 8 * 8).all()


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_baseline_state_dict_round_trip_gives_identical_next_batch(cls):
    sim = small_sim()
    frame = sim.catalog_frame()
    config = CONFIGS[cls](batch_size=8)
    sched = cls(frame, config, seed=5)
    run_campaign(sched, sim, 4)
    state = sched.state_dict()
    first = sched.select(5)
    other = cls(frame, config, seed=99)
    other.load_state_dict(state)
    pd.testing.assert_frame_equal(first, other.select(5))
    roll = sim.rollout(first, 5)
    sched.observe(roll)
    other.observe(roll)
    pd.testing.assert_frame_equal(sched.refill(5), other.refill(5))


def _same_state(a: dict, b: dict) -> bool:
    try:
        np.testing.assert_equal(a, b)  # nested dicts of arrays and scalars
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_baseline_folds_a_step_handed_over_group_by_group_as_one_call(cls):
    """``observe(group, more=True)`` for all but the last group: the state and next batch of one call. Without it
    DPS counts each call as a step (every task it has seen moves one step along per fold)."""
    sim = small_sim()
    frame = sim.catalog_frame()
    config = CONFIGS[cls](batch_size=8)
    whole, streamed, plain = (cls(frame, config, seed=5) for _ in range(3))
    for sched in (whole, streamed, plain):
        run_campaign(sched, small_sim(), 3)
    batch = whole.select(4)
    for sched in (streamed, plain):
        pd.testing.assert_frame_equal(sched.select(4), batch)
    roll = sim.rollout(batch, 4)
    whole.observe(roll)
    groups = [part for _, part in roll.groupby("task_id", sort=False)][::-1]
    for i, part in enumerate(groups):
        streamed.observe(part, more=i < len(groups) - 1)
        plain.observe(part)
    assert _same_state(streamed.state_dict(), whole.state_dict())
    pd.testing.assert_frame_equal(streamed.select(5), whole.select(5))
    if cls is DPSScheduler:
        assert not _same_state(plain.state_dict(), whole.state_dict())


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
@pytest.mark.parametrize("mismatch", ["another catalogue of the same size", "a field added since"])
def test_baseline_refuses_a_state_that_does_not_fit_before_restoring_anything(cls, mismatch):
    """StateMismatch (a campaign then rebuilds from its rollouts): a same-size catalogue with other ids, whose
    rows would shift, or a state saved before one of the baseline's fields existed."""
    frame = small_sim().catalog_frame()
    config = CONFIGS[cls](batch_size=8)
    sched = cls(frame, config, seed=5)
    run_campaign(sched, small_sim(), 2)
    state, message = sched.state_dict(), "another catalogue"
    if mismatch == "a field added since":
        field = (*sched._state_fields, "rng")[0]  # the random scheduler keeps only its RNG
        state, message = {k: v for k, v in state.items() if k != field}, f"missing key.*{field}"
    else:
        frame = frame.assign(task_id=frame["task_id"] + "-v2")
    other, control = cls(frame, config, seed=5), cls(frame, config, seed=5)
    with pytest.raises(StateMismatch, match=message):
        other.load_state_dict(state)
    pd.testing.assert_frame_equal(other.select(1), control.select(1))  # nothing was loaded


def _state_arrays(sched) -> dict:
    return {k: v for k, v in sched.state_dict().items() if k != "rng"}


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "bad, message",
    [
        (rollouts({"nope": [0.0] * 8}), "unknown task_id"),
        (rollouts({"t1": [0.0] * 7 + [1.5]}), "not in \\[0, 1\\]"),
        (rollouts({"t1": [0.0] * 8}).drop(columns="reward"), "missing column"),
        (rollouts({"t1": [0.0] * 7 + [float("nan")]}), "not in \\[0, 1\\]"),
    ],
    ids=["unknown-id", "reward-above-1", "missing-column", "nan-reward"],
)
def test_baseline_rejects_bad_rollouts_without_state_change(cls, bad, message):
    sched = cls(tasks(40), CONFIGS[cls](batch_size=4), seed=0)
    sched.select(1)
    sched.observe(rollouts({"t0": [0, 1] * 4, "t2": [0.0] * 8}))
    before = _state_arrays(sched)
    # A valid group first, so a half-applied update would show (not for the missing column itself).
    mixed = pd.concat([rollouts({"t3": [1.0] * 8}), bad]) if "reward" in bad.columns else bad
    with pytest.raises(ValueError, match=message):
        sched.observe(mixed)
    after = _state_arrays(sched)
    assert before.keys() == after.keys()
    for key in before:
        np.testing.assert_equal(after[key], before[key])


def test_baseline_rejects_catalog_without_env_id():
    with pytest.raises(ValueError, match="env_id"):
        RandomScheduler(pd.DataFrame({"task_id": ["a", "b"]}), DAPOConfig(batch_size=1))


def test_baseline_accepts_envsched_task_catalog():
    catalog_module = pytest.importorskip("envsched_core.catalog")
    sim = small_sim()
    catalog = catalog_module.TaskCatalog.from_frame(sim.catalog_frame())
    batch = DPSScheduler(catalog, DPSConfig(batch_size=8), seed=0).select(1)
    assert batch["task_id"].is_unique and batch["env_id"].str.startswith("env").all()


@pytest.mark.parametrize("cls", [DAPODynamicSampling, DAPO1xDynamicSampling, GRESOScheduler])
def test_a_rebuilt_dynamic_sampling_scheduler_takes_up_the_step_it_did_not_select(cls):
    """A scheduler rebuilt between selecting a step and refilling it (a refreshed pool, an upgrade) refills
    that step as the one that selected it would: the same number of rounds, none repeating a task."""
    # every group zero-variance: refill until the rule stops
    failing = {f"t{i}": [0.0] * 8 for i in range(200)}
    config = CONFIGS[cls](batch_size=4)
    selected = cls(tasks(200), config, seed=0)
    reference = rounds(selected, 1, failing.get)

    rebuilt = cls(tasks(200), config, seed=1)  # fresh: it never selected step 1
    rebuilt.observe(rollouts({t: failing[t] for t in reference[0]["task_id"]}))
    assert rebuilt.refill(1).empty  # what the pipeline used to get: no refill at all
    rebuilt = cls(tasks(200), config, seed=1)
    rebuilt.resume_step(1, reference[0]["task_id"])
    frames = rounds(rebuilt, 1, failing.get, first=reference[0])
    assert [len(f) for f in frames] == [len(f) for f in reference]
    assert pd.concat(frames)["task_id"].is_unique
    selected.resume_step(1, reference[0]["task_id"])  # the scheduler that selected it: nothing to take up
    assert selected.refill(1).empty
