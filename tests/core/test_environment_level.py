import numpy as np
import pytest
from task_frames import make_tasks
from task_frames import observe_groups as observe

from envsched_core import SchedulerConfig, TaskCatalog
from envsched_core.environment_level import EnvironmentLevel
from envsched_core.outcome import OutcomeModel, sigmoid


@pytest.fixture(scope="module")
def catalog():
    return TaskCatalog.from_frame(make_tasks(n_envs=4, per_env=12))


def config(level: bool, **overrides) -> SchedulerConfig:
    base = dict(use_within_edges=False, use_cross_edges=False, rho=1.0, environment_level=level)
    return SchedulerConfig(**{**base, **overrides})


def campaign(catalog, cfg: SchedulerConfig) -> OutcomeModel:
    """Environments 0 and 1 pass half their rollouts; environment 2 fails every rollout; 3 is never visited.
    Tasks 0-5 of each visited environment are observed (one group a step), 6-11 never."""
    m = OutcomeModel(catalog, cfg, None, None)
    rows = np.array([e * 12 + j for e in range(3) for j in range(6)])
    for step in range(1, 5):
        observe(m, rows, step, np.where(catalog.env[rows] == 2, 0, 4))
    return m


def test_many_all_fail_groups_make_an_environments_unseen_tasks_out_of_reach(catalog):
    unseen_failing, unseen_mixed = 2 * 12 + 8, 0 * 12 + 8
    with_level, without = campaign(catalog, config(True)), campaign(catalog, config(False))
    out, base = with_level.predict(5), without.predict(5)
    # twenty-four all-fail groups in one environment: its unseen tasks are far lower and surer with the level
    assert out.z[unseen_failing] < base.z[unseen_failing] - 1.0
    assert out.v_hat[unseen_failing] < 0.5 * base.v_hat[unseen_failing]
    assert sigmoid(out.z[unseen_failing]) < 0.05
    # and the level does not spill into an environment whose groups were mixed
    assert abs(sigmoid(out.z[unseen_mixed]) - 0.5) < 0.15
    assert out.v_hat[unseen_mixed] > 5 * out.v_hat[unseen_failing]


def test_a_tasks_own_groups_are_left_out_of_its_environment_level():
    env = np.zeros(3, dtype=np.int64)
    level = EnvironmentLevel(env, 1, prior_sd=2.0)
    rows = np.array([0, 0, 0, 0])  # task 0's four all-fail groups; tasks 1 and 2 never visited
    ones = np.ones(4)
    level.refresh(rows, ones, np.zeros(4), 8 * ones, np.zeros(4), tau=0.5, fit=False)
    mean, var = level.prior(np.array([0, 1, 2]))
    assert mean[1] == mean[2] < -2.0  # the unseen tasks: the environment fails
    assert mean[0] == pytest.approx(0.0, abs=1e-6)  # task 0 itself: only the prior, its groups count once
    assert var[0] == pytest.approx(4.0, rel=0.05) and var[1] < var[0]


@pytest.mark.parametrize("environments_differ", [True, False])
def test_the_level_prior_sd_is_fitted_to_how_much_environments_differ(catalog, environments_differ):
    cfg = config(True, prior_fit_min_visits=8)
    m = OutcomeModel(catalog, cfg, None, None)
    rng = np.random.default_rng(0)
    for step in range(1, 7):
        rows = rng.choice(len(catalog), size=16, replace=False)
        if environments_differ:  # environments 0 and 2 always pass, 1 and 3 always fail
            successes = np.where(catalog.env[rows] % 2 == 0, 8, 0)
        else:  # every task passes half its rollouts whatever its environment
            successes = rng.binomial(8, 0.5, size=len(rows))
        observe(m, rows, step, successes)
    if environments_differ:
        assert m.level.tau_env > 2 * cfg.environment_prior_sd
    else:
        assert m.level.tau_env < 0.5 * cfg.environment_prior_sd


def test_state_round_trips_exactly_and_older_states_load(catalog):
    cfg = config(True, prior_fit_min_visits=8)
    m = campaign(catalog, cfg)
    state = m.state_dict()
    restored = OutcomeModel(catalog, cfg, None, None)
    restored.load_state_dict(state)
    a, b = m.predict(5), restored.predict(5)
    np.testing.assert_array_equal(a.z, b.z)
    np.testing.assert_array_equal(a.sd, b.sd)
    observe(m, [30], 5, [0])
    observe(restored, [30], 5, [0])
    np.testing.assert_array_equal(m.predict(6).v_hat, restored.predict(6).v_hat)
    # a state saved before the level existed: no level_* keys, first visits with 7 fields
    assert all(isinstance(v, np.ndarray | int | float) for v in state.values())  # plain arrays / scalars
    old = {k: v for k, v in state.items() if not k.startswith("level_")}
    old["first_visits"] = state["first_visits"][:, :7]
    older = OutcomeModel(catalog, cfg, None, None)
    older.load_state_dict(old)
    assert older.first_visits.shape == state["first_visits"].shape
    assert np.isfinite(older.predict(5).z).all()
