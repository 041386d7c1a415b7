"""Check correlation (`SchedulerConfig.full_pass_by_correlation`): the full-pass blend applies as much as a graded
verifier's checks move together within a rollout."""

import copy

import numpy as np
import pandas as pd
import pytest
from task_frames import make_tasks

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.check_correlation import PRIOR_GROUPS, RHO_PRIOR, CheckCorrelation, reward_grid
from envsched_core.stats import group_outcomes


def test_a_rewards_grid_is_the_least_denominator_it_sits_on():
    reward = np.array([0.0, 1.0, 0.25, 0.5, 1 / 3, 0.2, 1 / 7, 0.75, 0.123])
    np.testing.assert_array_equal(reward_grid(reward), [1, 1, 4, 2, 3, 5, 7, 4, 0])


def observe(checks, task_rewards: dict[int, list[list[float]]], task_env: np.ndarray) -> None:
    """Fold groups (task row -> its groups' rewards, one step each) into ``checks``."""
    idx, step, reward = [], [], []
    for task, groups in task_rewards.items():
        for s, rewards in enumerate(groups):
            idx += [task] * len(rewards)
            step += [s] * len(rewards)
            reward += rewards
    idx, reward = np.array(idx), np.array(reward, dtype=float)
    groups = group_outcomes(pd.DataFrame({"step": step, "reward": reward}), idx)
    checks.update(idx, reward, groups, task_env[groups["idx"].to_numpy()])


def test_correlation_by_hand():
    checks = CheckCorrelation(n_tasks=3, n_envs=3)
    # task 0 (env 0): halves, a sequence-like group; task 1 (env 1): quarters around the mean; task 2 (env 2) binary
    observe(checks, {0: [[0, 0.5, 1, 1]], 1: [[0.25, 0.5, 0.5, 0.75]], 2: [[0, 1, 0, 1]]}, np.arange(3))
    np.testing.assert_array_equal(checks.grid, [2, 4, 1])  # binary rewards sit on a grid of 1: not counted
    # env 0: m = 0.625, unbiased v = 0.6875 / 3; K v - m (1 - m) = 0.458333 - 0.234375; (K - 1) m (1 - m) = 0.234375
    # env 1: m = 0.5, v = 0.125 / 3; 4 v - 0.25 = -0.083333; 3 x 0.25 = 0.75
    np.testing.assert_allclose(checks.num, [0.2239583333, -0.0833333333, 0.0])
    np.testing.assert_allclose(checks.den, [0.234375, 0.75, 0.0])
    unit = PRIOR_GROUPS * (0.984375 / 2)  # two counted groups
    pooled = (0.140625 + unit * RHO_PRIOR) / (0.984375 + unit)
    expected = (checks.num + unit * pooled) / (checks.den + unit)
    np.testing.assert_allclose(checks.correlation(), expected)
    assert checks.correlation()[2] == pytest.approx(pooled)  # no graded group: the pooled correlation


def sequential(rng, q: float, n: int, size: int) -> list[float]:
    """Rewards of ``size`` rollouts that pass calls in order, each with chance q, and score the share passed before
    the first failure (BFCL's turns, ACEBench's milestones)."""
    passed = np.minimum(rng.geometric(1 - q, size) - 1, n)
    return list(passed / n)


def test_independent_checks_read_near_zero_and_a_sequence_near_one_and_keep_the_blend():
    rng = np.random.default_rng(0)
    checks = CheckCorrelation(n_tasks=40, n_envs=2)
    env = np.repeat([0, 1], 20)
    groups = {}
    for task in range(20):  # env 0: four independent checks (unit tests passed out of 4)
        groups[task] = [list(rng.binomial(4, p, 8) / 4) for p in rng.uniform(0.2, 0.8, 3)]
    for task in range(20, 40):  # env 1: progress along a sequence of four calls
        groups[task] = [sequential(rng, q, 4, 8) for q in rng.uniform(0.5, 0.95, 3)]
    observe(checks, groups, env)
    rho = checks.correlation()
    assert abs(rho[0]) < 0.05 and rho[1] > 0.3
    weight = checks.weight(0.5)
    assert weight[0] < 0.2 and weight[1] == 0.5
    restored = CheckCorrelation(40, 2)
    restored.load_state_dict(copy.deepcopy(checks.state_dict()))
    np.testing.assert_array_equal(restored.weight(0.5), weight)


def test_continuous_rewards_leave_the_grid_for_good():
    checks = CheckCorrelation(n_tasks=1, n_envs=1)
    observe(checks, {0: [[0.25, 0.5, 0.123, 1.0]]}, np.zeros(1, dtype=int))
    observe(checks, {0: [[0.25, 0.5, 0.75, 1.0]]}, np.zeros(1, dtype=int))
    assert checks.grid[0] == 0 and checks.groups[0] == 0


@pytest.fixture(scope="module")
def catalog():
    return TaskCatalog.from_frame(make_tasks(n_envs=4, per_env=12))


def graded_steps(sched, steps: int, seed: int = 0) -> None:
    """Steps of select -> observe where every task's verifier is four independent checks."""
    rng = np.random.default_rng(seed)
    for step in range(1, steps + 1):
        ids = sched.select(step)["task_id"].to_numpy()
        reward = rng.binomial(4, 0.6, (len(ids), 8)) / 4
        sched.observe(pd.DataFrame({"task_id": np.repeat(ids, 8), "step": step, "reward": reward.ravel()}))


def test_envsched_reads_independent_checks_by_their_partial_credit_and_resumes_exactly(catalog):
    on = EnvSched(catalog, SchedulerConfig(batch_size=8, full_pass_by_correlation=True), seed=1)
    off = EnvSched(catalog, SchedulerConfig(batch_size=8, full_pass_by_correlation=False), seed=1)
    graded_steps(on, 12)
    graded_steps(off, 12)
    assert (on.checks.weight(0.5) < 0.25).all() and off.checks is None
    seen = on.stats.n > 0
    # the blend counts a full pass (1.0) at 1 and three of four checks at 0.375; read by partial credit, 0.6 a check
    assert abs(on.stats.mu[seen].mean() - 0.6) < abs(off.stats.mu[off.stats.n > 0].mean() - 0.6)
    resumed = EnvSched(catalog, SchedulerConfig(batch_size=8, full_pass_by_correlation=True), seed=7)
    resumed.load_state_dict(copy.deepcopy(on.state_dict()))
    np.testing.assert_array_equal(resumed.checks.weight(0.5), on.checks.weight(0.5))
    pd.testing.assert_frame_equal(resumed.select(13), on.select(13))
