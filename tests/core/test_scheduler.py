import copy

import numpy as np
import pandas as pd
import pytest
from task_frames import group, make_tasks, rollouts_for

from envsched_core import (
    EnvSched,
    SchedulerConfig,
    StateMismatch,
    TaskCatalog,
    build_cross_edges,
    build_within_edges,
)
from envsched_core.graph import cross_signature, propagation_matrix, rank_cross_edges, rows_to_rerank
from envsched_core.scheduler import filling_quota


@pytest.fixture(scope="module")
def success(catalog):
    """A fixed success probability per task: a quarter of them mixed, the rest mostly fail."""
    rng = np.random.default_rng(1)
    p = np.where(rng.random(len(catalog)) < 0.25, rng.uniform(0.3, 0.7, len(catalog)), 0.02)
    return dict(zip(catalog.task_ids, p, strict=True))


def run(sched, success, steps, first=1):
    batches = []
    for step in range(first, first + steps):
        batch = sched.select(step)
        sched.observe(rollouts_for(batch, step, success))
        batches.append(batch)
    return batches


def test_scheduler_cold_start_is_all_coverage(catalog):
    batch = EnvSched(catalog, SchedulerConfig(batch_size=16), seed=0).select(1)
    assert len(batch) == 16 and set(batch["role"]) == {"coverage"}
    assert list(batch.columns) == ["task_id", "env_id", "role", "predicted_variance"]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"batch_size": 8, "k_within": 2, "k_cross": 2},
        {"rho": 1.0},  # coverage-only ablation
        {"use_cross_edges": False},  # within-only ablation
        {"use_within_edges": False, "eta": 0.0},  # cross-only ablation
    ],
)
def test_scheduler_quota_and_no_duplicates_always_hold(catalog, success, seed, changes):
    cfg = SchedulerConfig(**{"batch_size": 16, **changes})
    sched = EnvSched(catalog, cfg, seed=seed)
    for step, batch in enumerate(run(sched, success, 6), start=1):
        assert len(batch) == cfg.batch_size
        assert not batch["task_id"].duplicated().any()
        assert batch["env_id"].value_counts().max() <= cfg.env_quota
        n_exploit = (batch["role"] == "exploit").sum()
        most = round((1 - min(cfg.rho_min, cfg.rho)) * cfg.batch_size) if cfg.adaptive_rho else cfg.n_exploit
        # coverage_beats_exploit: coverage slots no task is worth go to exploitation (rho_t bounds coverage only)
        most = cfg.batch_size if cfg.coverage_beats_exploit else most
        assert n_exploit == 0 if step == 1 else cfg.n_exploit <= n_exploit <= most  # adaptive rho


@pytest.mark.parametrize(
    "sizes, batch_size, quota",
    [
        ([200, 200, 200], 32, 11),  # 11 + 11 + 10 = 32: three environments fill 32 no more unevenly than that
        ([2, 100, 100], 32, 15),  # the small one gives its 2, the others 15 each
        ([5], 32, 5),  # fewer tasks than B: every task
        ([24] * 60, 32, 1),  # plenty of environments: the configured quota binds, not this one
        ([1] * 10 + [3], 12, 2),  # ten singletons give 10, the last environment 2
    ],
)
def test_filling_quota_is_the_most_even_spread_that_fills_the_batch(sizes, batch_size, quota):
    assert filling_quota(np.array(sizes), batch_size) == quota


@pytest.mark.parametrize(
    "n_envs, per_env, batch_size, expected_quota",
    [(1, 60, 16, 16), (3, 40, 32, 11), (2, 30, 16, 8), (10, 12, 16, 4)],
)
def test_scheduler_fills_the_batch_from_few_environments(n_envs, per_env, batch_size, expected_quota):
    """Under the configured quota (4 at B = 16, 7 at 32) one to three environments could not fill a batch;
    the quota rises just enough to, and stays as configured where the catalogue has room."""
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=n_envs, per_env=per_env))
    success = {t: 0.5 if i % 3 == 0 else 0.0 for i, t in enumerate(catalog.task_ids)}
    sched = EnvSched(catalog, SchedulerConfig(batch_size=batch_size), seed=0)
    assert sched.env_quota == expected_quota
    for step, batch in enumerate(run(sched, success, 4), start=1):
        assert len(batch) == batch_size and not batch["task_id"].duplicated().any()
        assert batch["env_id"].value_counts().max() <= expected_quota
        assert step == 1 or (batch["role"] == "exploit").any()


def test_scheduler_takes_every_task_of_a_catalogue_smaller_than_the_batch():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=5))
    sched = EnvSched(catalog, SchedulerConfig(batch_size=16, k_within=2, k_cross=2), seed=0)
    for step, batch in enumerate(run(sched, 0.5, 3), start=1):
        assert sorted(batch["task_id"]) == sorted(catalog.task_ids), step


def two_large_and_forty_small_environments() -> TaskCatalog:
    """2 environments x 300 tasks (ids e0-.., e1-..) and 40 environments of one task each (ids se..)."""
    big = make_tasks(n_envs=2, per_env=300)
    small = make_tasks(n_envs=40, per_env=1, seed=1).assign(
        task_id=lambda f: "s" + f["task_id"], env_id=lambda f: "small-" + f["env_id"]
    )
    return TaskCatalog.from_frame(pd.concat([big, small], ignore_index=True))


def test_scheduler_fills_the_batch_when_two_environments_hold_most_candidates():
    """Coverage ranks a pruned pool (the top 4 * pool scores, each environment capped at its quota). When two large
    environments hold nearly all of those scores, the pool must still reach past them to fill the batch."""
    catalog = two_large_and_forty_small_environments()
    cfg = SchedulerConfig(batch_size=32, pool_factor=1)
    sched = EnvSched(catalog, cfg, seed=0)
    for step, batch in enumerate(run(sched, {t: 0.5 for t in catalog.task_ids}, 3), start=1):
        assert len(batch) == 32 and not batch["task_id"].duplicated().any(), step
        assert batch["env_id"].value_counts().max() <= cfg.env_quota == 7


def test_scheduler_exploitation_fills_its_slots_when_two_environments_hold_every_high_score():
    """Exploitation's pool is cut the same way; when the best-predicted tasks all sit in two large environments,
    it reaches past their quota to its next-best tasks elsewhere instead of leaving its slots to coverage."""
    catalog = two_large_and_forty_small_environments()
    sched = EnvSched(catalog, SchedulerConfig(batch_size=32, pool_factor=1, rho=0.0, rho_min=0.0), seed=0)
    sched.select(1)
    mixed = {t: 0.5 if t.startswith("e") else 0.0 for t in catalog.task_ids}
    sched.observe(rollouts_for(catalog.tasks, 1, mixed))  # every task seen: all are exploitation candidates
    batch = sched.select(2)
    assert len(batch) == 32 and (batch["role"] == "exploit").all()  # 14 from the two large ones, 18 elsewhere
    assert batch["env_id"].value_counts().max() <= 7


def test_scheduler_exploits_tasks_seen_with_variance(catalog, success):
    sched = EnvSched(catalog, SchedulerConfig(batch_size=16), seed=0)
    first = sched.select(1)
    mixed = first.loc[[success[t] > 0.1 for t in first["task_id"]], "task_id"]
    sched.observe(rollouts_for(first, 1, {t: (0.5 if t in set(mixed) else 0.0) for t in first["task_id"]}))
    exploit = sched.select(2).query("role == 'exploit'")
    assert len(set(mixed) & set(exploit["task_id"])) >= 0.6 * len(mixed)  # most are picked again
    predicted = sched.predict().set_index("task_id")["predicted_variance"]
    zero = [t for t in first["task_id"] if t not in set(mixed)]
    assert predicted[list(mixed)].min() > predicted[zero].max()  # seen with variance beats seen without


def test_scheduler_coverage_spreads_over_environments(catalog):
    batch = EnvSched(catalog, SchedulerConfig(batch_size=10), seed=0).select(1)
    assert batch["env_id"].nunique() == 10  # the new-environment bonus puts one task in each


def test_scheduler_state_dict_round_trip_gives_identical_next_batches(catalog, success):
    cfg = SchedulerConfig(batch_size=16, refit_min_pairs=20, refit_window=50)
    original = EnvSched(catalog, cfg, seed=3)
    run(original, success, 3)
    state = copy.deepcopy(original.state_dict())
    resumed = EnvSched(catalog, cfg, seed=99)  # a different seed: everything must come from the state
    resumed.load_state_dict(state)
    for step in (4, 5):
        a, b = original.select(step), resumed.select(step)
        pd.testing.assert_frame_equal(a, b)
        original.observe(rollouts_for(a, step, success))
        resumed.observe(rollouts_for(b, step, success))
    pd.testing.assert_frame_equal(original.predict(), resumed.predict())


@pytest.mark.parametrize(("saved", "weight"), [({"observe_accuracy": True}, 1.0), ({}, 0.0)])
def test_scheduler_resumes_a_state_saved_before_full_pass_weight_at_the_weight_it_ran(
    catalog, success, saved, weight
):
    original = EnvSched(catalog, SchedulerConfig(batch_size=16, full_pass_weight=weight), seed=3)
    run(original, success, 2)
    state = copy.deepcopy(original.state_dict())
    del state["config"]["full_pass_weight"]
    state["config"].update(saved)  # as an older version wrote it
    resumed = EnvSched(catalog, SchedulerConfig(batch_size=16, full_pass_weight=weight), seed=99)
    resumed.load_state_dict(state)
    pd.testing.assert_frame_equal(original.select(3), resumed.select(3))
    with pytest.raises(ValueError, match="full_pass_weight"):  # it ran at another weight than the default
        EnvSched(catalog, SchedulerConfig(batch_size=16), seed=0).load_state_dict(state)


def test_scheduler_cross_refresh_of_changed_rows_equals_a_full_re_rank():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=20, per_env=20))
    success = dict.fromkeys(catalog.task_ids, 0.4)
    cfg = SchedulerConfig(batch_size=4, k_cross=2)
    sched = EnvSched(catalog, cfg, seed=0)
    partial, previous = False, None
    for step in range(1, 6):
        if step == 4:  # a resumed scheduler re-ranks only changed rows too
            state, sched = sched.state_dict(), EnvSched(catalog, cfg, seed=1)
            sched.load_state_dict(state)
        sched.observe(rollouts_for(sched.select(step), step, success))
        signature = cross_signature(catalog, cfg, sched.stats)
        if previous is not None and previous.shape == signature.shape:  # the steps re-ranked only some rows
            partial |= 0 < len(rows_to_rerank(sched.cross_candidates, previous, signature)) < len(catalog)
        previous = signature
        full = rank_cross_edges(sched.cross_candidates, signature, cfg.k_cross)
        for spliced, rebuilt in zip(sched.cross_edges, full, strict=True):
            np.testing.assert_array_equal(spliced, rebuilt)
        W = propagation_matrix(*full, len(catalog), cfg.temperature)
        for key in ("indptr", "indices", "data"):  # same layout, so the same sums in every mat-vec
            np.testing.assert_array_equal(getattr(sched.predictor.W_cross, key), getattr(W, key))
        assert sched.outcome.W_cross is sched.predictor.W_cross
    assert partial


def test_warm_start_continues_the_history_exactly_as_the_scheduler_that_ran_it(catalog, success):
    """A fresh scheduler warm-started on a run's rollouts predicts, observes and resumes as that run did."""
    cfg = SchedulerConfig(batch_size=16, cross_refresh_every=2)
    original = EnvSched(catalog, cfg, seed=3)
    batches = run(original, success, 5)  # steps 1..5
    history = pd.concat([rollouts_for(b, t, success) for t, b in enumerate(batches, start=1)])
    warm = EnvSched(catalog, cfg, seed=3)
    warm.warm_start(history.sample(frac=1.0, random_state=0))  # any row order: replayed oldest step first
    assert warm.step_offset == 5
    # this campaign's step s is the original's step 5 + s, before and after one more observed step
    pd.testing.assert_frame_equal(warm.predict(1), original.predict(6))
    cold = EnvSched(catalog, cfg, seed=3)
    assert not np.allclose(warm.predict(1)["predicted_variance"], cold.predict(1)["predicted_variance"])
    batch = warm.select(1)
    assert (batch["role"] == "exploit").any()  # a cold step 1 is all coverage
    rewards = rollouts_for(batch, 1, success)
    warm.observe(rewards)
    original.observe(rewards.assign(step=6))
    pd.testing.assert_frame_equal(warm.predict(2), original.predict(7))
    for a, b in zip(warm.cross_edges, original.cross_edges, strict=True):
        np.testing.assert_array_equal(a, b)
    resumed = EnvSched(catalog, cfg, seed=99)  # the clock is part of the state
    resumed.load_state_dict(copy.deepcopy(warm.state_dict()))
    pd.testing.assert_frame_equal(resumed.select(2), warm.select(2))


def test_start_next_campaign_from_a_last_state_equals_a_warm_start_from_its_rollouts(catalog, success):
    cfg = SchedulerConfig(batch_size=16)
    first = EnvSched(catalog, cfg, seed=3)
    batches = run(first, success, 4)
    history = pd.concat([rollouts_for(b, t, success) for t, b in enumerate(batches, start=1)])
    chained = EnvSched(catalog, cfg, seed=3)
    chained.load_state_dict(copy.deepcopy(first.state_dict()))
    chained.start_next_campaign()
    replayed = EnvSched(catalog, cfg, seed=3)
    replayed.warm_start(history)
    assert chained.step_offset == replayed.step_offset == 4
    for step in (1, 2):  # the same batches (the RNG restarted from the seed), the same predictions after
        a, b = chained.select(step), replayed.select(step)
        pd.testing.assert_frame_equal(a, b)
        chained.observe(rollouts_for(a, step, success))
        replayed.observe(rollouts_for(b, step, success))
    pd.testing.assert_frame_equal(chained.predict(), replayed.predict())


def test_warm_start_with_the_campaigns_own_offset_rebuilds_it_mid_way(catalog, success):
    """A continuing campaign rebuilt after 3 of its steps (its pool refreshed): the history it continued plus
    its own steps on its clock, replayed with its own offset, give the scheduler that ran them."""
    cfg = SchedulerConfig(batch_size=16)
    earlier = EnvSched(catalog, cfg, seed=3)
    before = pd.concat([rollouts_for(b, t, success) for t, b in enumerate(run(earlier, success, 4), start=1)])
    running = EnvSched(catalog, cfg, seed=3)
    running.warm_start(before)
    own = pd.concat([rollouts_for(b, t, success) for t, b in enumerate(run(running, success, 3), start=1)])
    rebuilt = EnvSched(catalog, cfg, seed=3)
    rebuilt.warm_start(pd.concat([before, own.assign(step=own["step"] + 4)]), step_offset=4)
    assert (
        rebuilt.step_offset == running.step_offset == 4 and rebuilt.current_step == running.current_step == 7
    )
    pd.testing.assert_frame_equal(rebuilt.predict(4), running.predict(4))
    rewards = rollouts_for(running.select(4), 4, success)
    rebuilt.observe(rewards)
    running.observe(rewards)
    pd.testing.assert_frame_equal(rebuilt.predict(5), running.predict(5))


def test_scheduler_refuses_a_state_of_another_catalogue_of_the_same_size(catalog, success):
    cfg = SchedulerConfig(batch_size=16)
    original = EnvSched(catalog, cfg, seed=0)
    run(original, success, 1)
    frame = make_tasks(n_envs=10, per_env=12)
    renamed = TaskCatalog.from_frame(frame.assign(task_id=frame["task_id"].str.replace("t1", "u1")))
    other = EnvSched(renamed, cfg, seed=0)
    before = copy.deepcopy(other.state_dict())
    with pytest.raises(ValueError, match="state is for another catalogue .*warm_start from its rollouts"):
        other.load_state_dict(copy.deepcopy(original.state_dict()))
    pd.testing.assert_frame_equal(other.predict(), EnvSched(renamed, cfg, seed=0).predict())
    assert other.state_dict()["current_step"] == before["current_step"] == 0


def _earlier_release(state: dict) -> dict:
    return {**state, "version": state["version"] - 1}


def _other_default(state: dict) -> dict:  # saved when a field's default was another value
    return {**state, "config": {**state["config"], "rho": state["config"]["rho"] / 2}}


def _other_features(state: dict) -> dict:  # a catalogue re-embedded at another dimension
    return {**state, "outcome": {**state["outcome"], "w": state["outcome"]["w"][:-3]}}


@pytest.mark.parametrize(
    "saved_by, message",
    [
        (_earlier_release, "state version"),
        (_other_default, r"different config \(fields \['rho'\]\)"),
        (_other_features, "weights, this catalogue"),
    ],
)
def test_scheduler_refuses_a_state_that_does_not_fit_before_restoring_anything(
    catalog, success, saved_by, message
):
    """StateMismatch (a campaign then rebuilds from its rollouts) is raised before any field is restored."""
    cfg = SchedulerConfig(batch_size=16)
    original = EnvSched(catalog, cfg, seed=0)
    run(original, success, 2)
    fresh = EnvSched(catalog, cfg, seed=0)
    with pytest.raises(StateMismatch, match=message):
        fresh.load_state_dict(saved_by(copy.deepcopy(original.state_dict())))
    assert fresh.current_step == 0 and not fresh.stats.any_observed
    pd.testing.assert_frame_equal(fresh.select(1), EnvSched(catalog, cfg, seed=0).select(1))
    fresh.load_state_dict(original.state_dict())  # the state as saved still loads
    pd.testing.assert_frame_equal(fresh.predict(3), original.predict(3))


def test_warm_start_refuses_a_used_scheduler_and_bad_history_without_changing_state(catalog, success):
    cfg = SchedulerConfig(batch_size=16)
    used = EnvSched(catalog, cfg, seed=0)
    run(used, success, 1)
    with pytest.raises(ValueError, match="already selected or observed; use a fresh one"):
        used.warm_start(group("e1-t1", 0, [1, 0]))
    fresh, control = EnvSched(catalog, cfg, seed=0), EnvSched(catalog, cfg, seed=0)
    history = pd.concat([group("e1-t1", 0, [1, 0]), group("retired-task", 3, [0, 0])])  # the bad row is last
    with pytest.raises(ValueError, match="unknown.*retired-task"):
        fresh.warm_start(history)
    assert fresh.step_offset == 0 and not fresh.stats.any_observed
    pd.testing.assert_frame_equal(fresh.select(1), control.select(1))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (group("no-such-task", 2, [1, 0]), "unknown.*no-such-task"),
        (group("e0-t0", 2, [1, 1.5]), "reward must be in \\[0, 1\\].*1.5"),
        (group("e0-t0", 2, [1, float("nan")]), "reward must be in \\[0, 1\\]"),
        (group("e0-t0", 2, [1, 0]).drop(columns="step"), "missing column.*'step'"),
        (group("e0-t0", 2, [1, 0]).assign(step=-1), "step must be a non-negative integer"),
    ],
)
def test_scheduler_observe_bad_input_raises_and_changes_no_state(catalog, success, bad, message):
    cfg = SchedulerConfig(batch_size=16)
    sched, control = EnvSched(catalog, cfg, seed=0), EnvSched(catalog, cfg, seed=0)
    run(sched, success, 1)
    run(control, success, 1)
    mixed = pd.concat(
        [group("e1-t1", 2, [1, 0])[bad.columns], bad], ignore_index=True
    )  # no good row slips in
    with pytest.raises(ValueError, match=message):
        sched.observe(mixed)
    pd.testing.assert_frame_equal(sched.predict(), control.predict())
    pd.testing.assert_frame_equal(sched.select(2), control.select(2))


def test_scheduler_select_rejects_bad_step(catalog):
    with pytest.raises(ValueError, match="step must be a non-negative integer"):
        EnvSched(catalog, SchedulerConfig(batch_size=4), seed=0).select(-3)


def test_scheduler_from_precomputed_edges_matches_built_graph(catalog, success):
    cfg = SchedulerConfig(batch_size=16, cross_refresh_every=0)
    built = EnvSched(catalog, cfg, seed=0)
    loaded = EnvSched(
        catalog,
        cfg,
        seed=0,
        within_edges=build_within_edges(catalog, cfg),
        cross_edges=build_cross_edges(catalog, None, cfg),
    )
    for a, b in zip(run(built, success, 3), run(loaded, success, 3), strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_scheduler_predict_reports_every_task(catalog, success):
    sched = EnvSched(catalog, SchedulerConfig(batch_size=16), seed=0)
    seen = set(pd.concat(run(sched, success, 2))["task_id"])
    pred = sched.predict()
    assert list(pred.columns) == [
        "task_id", "predicted_variance", "uncertainty", "own", "within", "cross", "value", "moves"
    ]  # fmt: skip
    assert len(pred) == len(catalog) and pred["predicted_variance"].between(0, 0.25).all()
    assert pred["moves"].between(0, 1).all() and (pred["value"] >= 0).all()
    assert set(pred.loc[pred["own"].notna(), "task_id"]) == seen  # own history exactly for observed tasks


# Partial credit only (0.5 x 4, 0 x 4) and half full passes (1 x 4, 0.5 x 4), read at weight w as
# (1 - w) r + w [r >= 1]: w = 0 gives means 0.25 / 0.75, variances 0.0625 / 0.0625; w = 0.5 gives 0.125 / 0.625
# (rewards 0.25 / 0 and 1 / 0.25), variances 0.015625 / 0.140625; w = 1 gives 0 / 0.5, variances 0 / 0.25.
@pytest.mark.parametrize(
    "weight, partial_stats, passing_stats",
    [
        (0.0, (0.25, 0.0625), (0.75, 0.0625)),
        (0.5, (0.125, 0.015625), (0.625, 0.140625)),
        (1.0, (0, 0), (0.5, 0.25)),
    ],
)
def test_scheduler_reads_rewards_as_partial_credit_blended_with_the_full_pass(
    catalog, weight, partial_stats, passing_stats
):
    # the weight as given in every environment (full_pass_by_correlation scales it: test_check_correlation.py)
    config = SchedulerConfig(batch_size=16, full_pass_weight=weight, full_pass_by_correlation=False)
    sched = EnvSched(catalog, config, seed=0)
    partial, passing, binary = sched.select(1)["task_id"][:3]
    sched.observe(
        pd.concat(
            [
                group(partial, 1, [0.5] * 4 + [0.0] * 4),
                group(passing, 1, [1.0] * 4 + [0.5] * 4),
                group(binary, 1, [1.0] * 2 + [0.0] * 6),  # binary rewards read the same at every weight
            ]
        )
    )
    rows = catalog.indices_of(np.array([partial, passing, binary], dtype=object))
    observed = np.column_stack([sched.stats.mu[rows], sched.stats.m[rows]])
    np.testing.assert_allclose(observed, [partial_stats, passing_stats, (0.25, 0.1875)], atol=1e-12)


@pytest.mark.parametrize(("flag", "spread"), [(True, 0.0625), (False, 0.015625)])
def test_scheduler_dispersion_reads_the_training_rewards_spread(catalog, flag, spread):
    # half the rollouts reach half credit, none completes: the reward the trainer normalises spreads 0.0625
    # around 0.25; the blended reading (w = 0.5) reads 0.25 and 0, which spread a quarter as much
    sched = EnvSched(catalog, SchedulerConfig(batch_size=16, training_dispersion=flag), seed=0)
    task = sched.select(1)["task_id"].iloc[0]
    sched.observe(group(task, 1, [0.5] * 4 + [0.0] * 4))
    (row,) = catalog.indices_of(np.array([task], dtype=object))
    env = catalog.env[row]
    assert sched.outcome.disp_num[env] == pytest.approx(spread)
    assert sched.outcome.disp_den[env] == pytest.approx(0.125 * 0.875)  # the blended mean's, either way
    assert sched.dispersion.var_sum[row] == pytest.approx(spread)


def test_scheduler_resumes_a_state_saved_before_training_dispersion_without_it(catalog, success):
    original = EnvSched(catalog, SchedulerConfig(batch_size=16), seed=3)
    run(original, success, 2)
    state = copy.deepcopy(original.state_dict())
    del state["config"]["training_dispersion"]  # as an older version wrote it
    resumed = EnvSched(catalog, SchedulerConfig(batch_size=16), seed=99)
    resumed.load_state_dict(state)
    pd.testing.assert_frame_equal(original.select(3), resumed.select(3))
    with pytest.raises(ValueError, match="training_dispersion"):
        EnvSched(catalog, SchedulerConfig(batch_size=16, training_dispersion=True), seed=0).load_state_dict(
            state
        )
