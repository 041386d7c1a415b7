import numpy as np
import pandas as pd
import pytest
from task_frames import group, make_tasks

from envsched_core import TaskCatalog, TaskStats
from envsched_core.stats import group_outcomes, group_summary, validate_rollouts


@pytest.fixture(scope="module")
def catalog():
    return TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=3))


def test_stats_group_variance_is_population_variance(catalog):
    rollouts = group("e0-t0", 1, [1, 0, 0, 0])
    groups = group_outcomes(rollouts, validate_rollouts(rollouts, catalog))
    assert groups["variance"].iloc[0] == pytest.approx(0.25 * 0.75)  # p(1 - p), not the sample variance
    assert groups["mean"].iloc[0] == pytest.approx(0.25)


def test_stats_group_accuracy_counts_only_full_credit(catalog):
    # Graded rewards: mean 0.5, one perfect rollout of four -> accuracy 0.25.
    rollouts = group("e0-t0", 1, [1.0, 0.5, 0.25, 0.25])
    groups = group_outcomes(rollouts, validate_rollouts(rollouts, catalog))
    assert groups["mean"].iloc[0] == pytest.approx(0.5) and groups["accuracy"].iloc[0] == 0.25
    rows, mean, var, accuracy, count = group_summary(np.array([3, 3, 1, 1]), np.array([0.75, 0.75, 1.0, 0.0]))
    assert rows.tolist() == [1, 3] and accuracy.tolist() == [0.5, 0.0] and count.tolist() == [2, 2]
    assert var.tolist() == [0.25, 0.0]  # an all-equal group is exactly 0, not float noise
    assert mean.tolist() == [0.5, 0.75]


def test_stats_discounts_visit_weight_by_gamma_per_step(catalog):
    stats = TaskStats.from_rollouts(group("e0-t0", 1, [1, 0]), catalog, gamma=0.8)
    n = stats.n_at(4)
    assert n[0] == pytest.approx(0.8**3) and n[1:].sum() == 0


def test_stats_discounted_mean_weights_recent_visits_more(catalog):
    rollouts = group("e0-t0", 1, [1, 0]).pipe(
        lambda a: a._append(group("e0-t0", 3, [1, 1]), ignore_index=True)
    )
    stats = TaskStats.from_rollouts(rollouts, catalog, gamma=0.5)
    # visit 1: variance 0.25, mean 0.5 with weight 0.5^2; visit 2: variance 0, mean 1 with weight 1
    assert stats.m[0] == pytest.approx(0.25 * 0.25 / 1.25)
    assert stats.mu[0] == pytest.approx((0.25 * 0.5 + 1.0) / 1.25)
    assert stats.trend[0] > 0  # the mean reward went up
    assert stats.last_step[0] == 3 and stats.n[0] == pytest.approx(1.25)


def test_stats_prior_is_running_mean_variance(catalog):
    stats = TaskStats(len(catalog), gamma=1.0, prior_variance=0.07)
    assert stats.v0() == 0.07
    stats.update(np.array([0, 1]), 1, np.array([0.25, 0.05]), np.array([0.5, 0.1]))
    assert stats.v0() == pytest.approx(0.15)


def test_stats_state_dict_round_trip(catalog):
    stats = TaskStats.from_rollouts(group("e1-t2", 2, [0, 1, 1]), catalog)
    copy = TaskStats(len(catalog))
    copy.load_state_dict(stats.state_dict())
    np.testing.assert_array_equal(copy.n_at(5), stats.n_at(5))
    assert copy.v0() == stats.v0() and list(copy.to_frame(catalog)["task_id"]) == ["e1-t2"]


def test_stats_fold_onto_stored_table_equals_recompute_from_whole_history():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=3, per_env=4))
    rng = np.random.default_rng(0)
    steps = []
    for step in range(1, 5):
        ids = rng.choice(catalog.task_ids, size=5, replace=False)
        steps.append(pd.concat([group(t, step, list(rng.integers(0, 2, 4))) for t in ids], ignore_index=True))
    stored = TaskStats(len(catalog), gamma=0.8).to_frame(catalog)
    for rollouts in steps:
        stats = TaskStats.from_frame(stored, catalog, gamma=0.8)
        touched = stats.fold(rollouts, catalog)
        changed = stats.to_frame(catalog, touched)
        stored = pd.concat([stored[~stored.task_id.isin(changed.task_id)], changed], ignore_index=True)
    full = TaskStats.from_rollouts(pd.concat(steps, ignore_index=True), catalog, gamma=0.8).to_frame(catalog)
    pd.testing.assert_frame_equal(
        stored.sort_values("task_id").reset_index(drop=True),
        full.sort_values("task_id").reset_index(drop=True),
    )


def test_stats_from_frame_names_unknown_task_ids(catalog):
    frame = pd.DataFrame(
        {"task_id": ["nope"], "n": [1.0], "m": [0.1], "mu": [0.5], "trend": [0.0], "last_step": [1]}
    )
    with pytest.raises(ValueError, match="task_stats task_id"):
        TaskStats.from_frame(frame, catalog)
