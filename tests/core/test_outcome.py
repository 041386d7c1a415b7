import numpy as np
import pandas as pd
import pytest
from task_frames import group, make_tasks
from task_frames import observe_groups as observe

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.graph import propagation_matrix
from envsched_core.outcome import (
    ColumnIndex,
    OutcomeModel,
    _sum_over_nonzero_columns,
    expected_bernoulli_variance,
    sigmoid,
    task_features,
)
from envsched_core.scheduler import frontier_transfer_factor


def p_mixed(p: float, g: int = 8) -> float:
    """Probability that a group of g Bernoulli(p) rollouts is neither all-fail nor all-pass."""
    return 1.0 - p**g - (1.0 - p) ** g


def model(catalog: TaskCatalog, cfg: SchedulerConfig, edges=None) -> OutcomeModel:
    W = None
    if edges is not None:
        src, dst = np.array(edges).T
        W = propagation_matrix(src, dst, np.full(len(src), 0.9), len(catalog), cfg.temperature)
    return OutcomeModel(catalog, cfg, W, None)


@pytest.fixture(scope="module")
def catalog():
    return TaskCatalog.from_frame(make_tasks(n_envs=3, per_env=6))


def test_outcome_rising_success_moves_task_toward_mixed_then_all_pass(catalog):
    cfg = SchedulerConfig(use_within_edges=False, use_cross_edges=False, rho=1.0)
    m = model(catalog, cfg)
    others = np.arange(6, 18)  # the other environments keep failing, so the intercept stays low
    observe(m, others, 1, [0] * 12)
    observe(m, [0], 1, [0])
    p_fail = sigmoid(m.predict(2).z[0])
    for step in (2, 3):
        observe(m, [0], step, [4])
    p_mid = sigmoid(m.predict(4).z[0])
    for step in range(4, 12):
        observe(m, [0], step, [8])
    p_pass = sigmoid(m.predict(12).z[0])
    assert p_fail < 0.1 < p_mid < p_pass
    assert p_mixed(p_mid) > p_mixed(p_fail)  # all-fail -> mixed
    assert p_pass > 0.8 and p_mixed(p_pass) < p_mixed(p_mid)  # mixed -> all-pass


def test_outcome_propagation_moves_unseen_task_toward_neighbours_and_not_across(catalog):
    cfg = SchedulerConfig(use_cross_edges=False, use_global_model=False)
    # environment 0: task 0 passes, task 3 fails; W links 0-1 and 3-4; task 2 has no edge
    m = model(catalog, cfg, edges=[(0, 1), (1, 0), (3, 4), (4, 3)])
    for step in (1, 2):
        observe(m, [0, 3], step, [8, 0])
    out = m.predict(3)
    assert out.z[1] > out.z[2] > out.z[4]  # toward the passing and the failing neighbour respectively
    assert np.isnan(out.b_W[2]) and out.b_W[1] > 0 > out.b_W[4]
    assert out.sd[1] < out.sd[2]  # a neighbour's evidence also narrows the posterior


def test_outcome_global_model_transfers_a_tool_across_environments():
    rows = []
    for e in range(3):  # environments 0 and 1 observed, 2 never: each has an easy and a hard tool
        for j, tool in enumerate(["get_order", "delete_user"] * 3):
            rows.append(
                {"task_id": f"e{e}-t{j}", "env_id": f"env{e}", "text": "x", "tools": [f"env{e}.{tool}"]}
            )
    frame = pd.DataFrame(rows)
    frame["embedding"] = [np.eye(4)[e] for e in range(3) for _ in range(6)]
    catalog = TaskCatalog.from_frame(frame)
    m = model(
        catalog, SchedulerConfig(use_within_edges=False, use_cross_edges=False, rho=1.0, global_ridge=1.0)
    )
    seen = np.arange(12)
    easy = np.array([j % 2 == 0 for j in range(6)] * 2)
    for step in range(1, 5):
        observe(m, seen, step, np.where(easy, 7, 1))
    z = m.predict(5).z
    unseen_easy, unseen_hard = z[12:][0::2], z[12:][1::2]
    assert unseen_easy.min() > unseen_hard.max()  # "get_order" is easy everywhere, also where never tried
    assert task_features(catalog).shape == (18, 1 + 3 + 6 + 2)  # intercept, envs, tools, tool base names


def test_outcome_dispersion_learns_graded_rewards_are_less_variable(catalog):
    cfg = SchedulerConfig(use_within_edges=False, use_cross_edges=False, rho=1.0)
    m = model(catalog, cfg)
    rng = np.random.default_rng(0)
    for step in range(1, 30):  # env 0: binary; env 1: 4 partial checks (reward = Binomial(4, p) / 4)
        binary = (rng.random((6, 8)) < 0.5).astype(float)
        graded = rng.binomial(4, 0.5, size=(6, 8)) / 4
        for rows, r in ((np.arange(6), binary), (np.arange(6, 12), graded)):
            m.update(rows, step, r.mean(axis=1), r.var(axis=1), np.full(6, 8.0))
    c = m.dispersion()
    assert c[0] == pytest.approx(1.0, abs=0.05) and c[1] == pytest.approx(0.25, abs=0.05)
    v = m.predict(30).v_hat
    assert v[6:12].mean() < 0.5 * v[:6].mean()  # the same success rate, a quarter of the variance


def test_informed_coverage_prefers_underobserved_env_whose_neighbours_are_mixed():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=8))
    picks = {}
    for informed in (True, False):
        cfg = SchedulerConfig(batch_size=1, rho=1.0, adaptive_rho=False, informed_coverage=informed)
        counts = []
        for seed in range(6):
            sched = EnvSched(catalog, cfg, seed=seed)
            for step in (1, 2):  # one task per environment: env0's is mixed, env1's always fails
                sched.observe(pd.concat([group("e0-t0", step, [1, 0] * 4), group("e1-t0", step, [0] * 8)]))
            batch = sched.select(3)
            counts.append((batch["env_id"] == "env0").sum())
        picks[informed] = counts
    assert all(c == 1 for c in picks[True])  # the coverage pick goes where the neighbours are mixed
    assert 0 < sum(picks[False]) < 6  # under-observation alone sees two equal environments


def test_adaptive_rho_shrinks_coverage_as_predictions_get_confident():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=10, per_env=3))
    cfg = SchedulerConfig(batch_size=10, rho=0.5, rho_min=0.1)
    sched = EnvSched(catalog, cfg, seed=0)
    sched.observe(group("e0-t0", 1, [1, 0] * 4))
    early = (sched.select(2)["role"] == "exploit").sum()
    ids = catalog.task_ids
    for step in range(2, 12):  # every task seen every step: confident predictions
        sched.observe(pd.concat([group(t, step, [1, 0, 0, 0] * 2) for t in ids]))
    late = (sched.select(12)["role"] == "exploit").sum()
    assert cfg.n_exploit <= early < late <= round(0.9 * cfg.batch_size)


def test_outcome_state_dict_round_trips_exactly(catalog):
    cfg = SchedulerConfig(batch_size=6)
    a, b = EnvSched(catalog, cfg, seed=3), EnvSched(catalog, cfg, seed=9)
    rng = np.random.default_rng(0)
    for step in (1, 2, 3):
        batch = a.select(step)
        a.observe(
            pd.DataFrame(
                {
                    "task_id": np.repeat(batch["task_id"].to_numpy(), 8),
                    "step": step,
                    "reward": (rng.random(len(batch) * 8) < 0.4).astype(float),
                }
            )
        )
    b.load_state_dict(a.state_dict())
    pd.testing.assert_frame_equal(a.predict(), b.predict())
    pd.testing.assert_frame_equal(a.select(4), b.select(4))
    state = a.state_dict()["outcome"]
    assert all(isinstance(v, np.ndarray | int | float) for v in state.values())  # plain arrays / scalars


def test_outcome_empirical_bayes_widens_the_residual_prior_when_tasks_differ(catalog):
    cfg = SchedulerConfig(
        use_within_edges=False,
        use_cross_edges=False,
        rho=1.0,
        adapt_residual_prior=True,
        fit_residual_prior=False,
    )
    m = model(catalog, cfg)
    rows = np.arange(18)
    for step in range(1, 8):  # within every environment half the tasks always pass, half always fail
        observe(m, rows, step, np.where(rows % 2 == 0, 8, 0))
    assert m.tau > cfg.residual_prior_sd  # the features cannot explain it: trust each task's own history more
    fixed = model(
        catalog,
        SchedulerConfig(use_within_edges=False, use_cross_edges=False, rho=1.0, fit_residual_prior=False),
    )
    for step in range(1, 8):
        observe(fixed, rows, step, np.where(rows % 2 == 0, 8, 0))
    assert fixed.tau == cfg.residual_prior_sd


def test_outcome_empirical_bayes_runs_on_a_catalogue_smaller_than_its_minimum_visits(catalog):
    cfg = SchedulerConfig(use_within_edges=False, use_cross_edges=False, rho=1.0, use_global_model=False)
    assert len(catalog) < cfg.prior_fit_min_visits  # 18 tasks can never give 64 first visits
    m = model(catalog, cfg)
    rows = np.arange(len(catalog))
    observe(m, rows[:8], 1, np.where(rows[:8] % 2 == 0, 8, 0))
    assert m.tau == cfg.residual_prior_sd  # 8 first visits: fewer than half the catalogue, no fit yet
    observe(m, rows[8:], 2, np.where(rows[8:] % 2 == 0, 8, 0))
    assert m.tau > 2 * cfg.residual_prior_sd  # all-pass next to all-fail in one environment: tasks differ


@pytest.mark.parametrize("shared", [True, False])
def test_outcome_marginal_likelihood_learns_how_much_neighbours_share(shared):
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=4, per_env=40))
    cfg = SchedulerConfig(use_cross_edges=False, use_global_model=False, prior_fit_min_visits=16)
    pairs = [(i, i + 1) for i in range(0, 160, 2)]  # W links task 2k with task 2k + 1 only
    m = model(catalog, cfg, edges=pairs + [(j, i) for i, j in pairs])
    rng = np.random.default_rng(0)
    first = rng.random(80) < 0.5  # each pair's first task: all-pass or all-fail
    observe(m, np.arange(0, 160, 2), 1, np.where(first, 8, 0))
    second = first if shared else rng.random(80) < 0.5  # its neighbour: the same outcome, or a coin flip
    for step, part in enumerate(np.array_split(np.arange(80), 8), start=2):
        observe(m, 2 * part + 1, step, np.where(second[part], 8, 0))
    assert m.tau > 2 * cfg.residual_prior_sd  # all-pass / all-fail: tasks differ far more than the start
    if shared:
        assert m.a_W > 2 * cfg.a_within  # a neighbour's outcome predicts the task's: propagate more
    else:
        assert m.a_W < 0.5 * cfg.a_within  # it does not: rely on the task's own rollouts
    state = m.state_dict()
    assert state["a_W"] == m.a_W and len(state["first_visits"]) == 160


def test_outcome_all_pass_under_a_wide_prior_stays_finite_and_confident(catalog):
    cfg = SchedulerConfig(use_within_edges=False, use_cross_edges=False, rho=1.0, residual_prior_sd=8.0)
    m = model(catalog, cfg)
    for step in range(1, 6):
        observe(m, np.arange(18), step, np.where(np.arange(18) % 2 == 0, 8, 0))
    out = m.predict(6)
    assert np.isfinite(out.z).all() and np.isfinite(out.v_hat).all()
    assert sigmoid(out.z[0]) > 0.95 and sigmoid(out.z[1]) < 0.05  # 40 of 40 passes is not "mixed"


def test_horizon_discount_exploits_the_shorter_of_two_equally_mixed_tasks():
    frame = make_tasks(n_envs=2, per_env=4)
    frame["gold_calls"] = [1, 1, 1, 1, 8, 8, 8, 8]  # env0's tasks take one call, env1's eight
    catalog = TaskCatalog.from_frame(frame)
    picks = {}
    for discount in (0.0, 1.0):
        cfg = SchedulerConfig(
            batch_size=1, rho=0.0, adaptive_rho=False, horizon_discount=discount, transfer_weight=0.0
        )
        first = []
        for seed in range(4):
            sched = EnvSched(catalog, cfg, seed=seed)
            for step in (1, 2):  # the short task passes 3 of 8, the long one 4 of 8 (more variance)
                short, long = group("e0-t0", step, [1, 1, 1, 0, 0, 0, 0, 0]), group("e1-t0", step, [1, 0] * 4)
                sched.observe(pd.concat([short, long]))
            first.append(sched.select(3)["task_id"].iloc[0])
        picks[discount] = first
    assert picks[0.0] == ["e1-t0"] * 4  # the higher predicted variance
    assert picks[1.0] == ["e0-t0"] * 4  # 1/2 vs 1/9 of its value: the one-call task
    assert catalog.gold_calls.tolist() == frame["gold_calls"].tolist()
    with pytest.raises(ValueError, match="horizon_discount"):
        SchedulerConfig(horizon_discount=-1.0)


def test_state_saved_before_a_config_field_existed_loads_at_its_default(catalog):
    cfg = SchedulerConfig(batch_size=6)
    sched = EnvSched(catalog, cfg, seed=0)
    sched.observe(group("e0-t0", 1, [1, 0] * 4))
    state = sched.state_dict()
    del state["config"]["horizon_discount"]  # as saved by a version without the field
    EnvSched(catalog, cfg, seed=0).load_state_dict(state)
    with pytest.raises(ValueError, match="horizon_discount"):
        EnvSched(catalog, SchedulerConfig(batch_size=6, horizon_discount=0.5), seed=0).load_state_dict(state)


def test_outcome_dispersion_prior_yields_to_a_few_graded_groups(catalog):
    cfg = SchedulerConfig(use_within_edges=False, use_cross_edges=False, rho=1.0)
    m = model(catalog, cfg)
    rng = np.random.default_rng(1)
    graded = rng.binomial(4, 0.5, size=(6, 8)) / 4  # env 1, one step: 6 groups of 4 partial checks
    m.update(np.arange(6, 12), 1, graded.mean(axis=1), graded.var(axis=1), np.full(6, 8.0))
    # the prior is dispersion_prior_groups (4) groups' worth, so 6 groups already outweigh it
    assert m.dispersion()[1] < 0.6


@pytest.mark.parametrize("by_verifier", [True, False])
def test_outcome_dispersion_of_an_unseen_environment_follows_its_verifier_kind(by_verifier):
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=4, per_env=6))  # env 0, 2: state_match; 1, 3: graded
    cfg = SchedulerConfig(
        use_within_edges=False, use_cross_edges=False, rho=1.0, dispersion_by_verifier=by_verifier
    )
    m = model(catalog, cfg)
    rng = np.random.default_rng(2)
    for step in range(1, 11):  # env 0 binary, env 1 four partial checks; env 2 and env 3 never seen
        binary = (rng.random((6, 8)) < 0.5).astype(float)
        graded = rng.binomial(4, 0.5, size=(6, 8)) / 4
        for rows, r in ((np.arange(6), binary), (np.arange(6, 12), graded)):
            m.update(rows, step, r.mean(axis=1), r.var(axis=1), np.full(6, 8.0))
    c = m.dispersion()
    if by_verifier:  # each unseen environment takes the ratio of the seen one rewarded the same way
        assert c[2] == pytest.approx(c[0], abs=0.1) and c[3] == pytest.approx(c[1], abs=0.1)
        assert c[2] > 2.5 * c[3]
    else:  # both take the ratio pooled over every kind
        assert c[2] == pytest.approx(c[3]) and c[1] < c[2] < c[0]


@pytest.mark.parametrize("minority", [False, True])
def test_outcome_dispersion_with_one_verifier_kind_is_the_pooled_rule(minority):
    frame = make_tasks(n_envs=3, per_env=6)
    frame["verifier"] = "state_match"  # one source, one verifier: nothing to pool by kind
    if minority:  # the first task's own verifier gets code 0, but every environment's majority is state_match
        frame.loc[0, "verifier"] = "exact_match"
    catalog = TaskCatalog.from_frame(frame)
    rng = np.random.default_rng(3)
    graded = rng.binomial(4, 0.5, size=(6, 8)) / 4
    ratios = []
    for by_verifier in (True, False):
        cfg = SchedulerConfig(
            use_within_edges=False, use_cross_edges=False, rho=1.0, dispersion_by_verifier=by_verifier
        )
        m = model(catalog, cfg)
        m.update(np.arange(6), 1, graded.mean(axis=1), graded.var(axis=1), np.full(6, 8.0))
        ratios.append(m.dispersion())
    np.testing.assert_array_equal(ratios[0], ratios[1])
    assert ratios[0][0] < ratios[0][1]  # the seen graded environment is below the pooled prior of the others


def shared_tool_catalog() -> TaskCatalog:
    """3 environments x 4 tasks: env0 and env1 call get_order, env2 send_mail."""
    frame = make_tasks(n_envs=3, per_env=4)
    frame["tools"] = [["env0.get_order"]] * 4 + [["env1.get_order"]] * 4 + [["env2.send_mail"]] * 4
    frame["tool_effects"] = [["read"]] * 12
    return TaskCatalog.from_frame(frame)


def test_frontier_transfer_counts_frontier_tasks_sharing_environment_or_tool_base_name():
    m = model(shared_tool_catalog(), SchedulerConfig())
    frontier = np.r_[np.full(4, 0.25), np.zeros(8)]  # only environment 0 is at the frontier
    transfer = m.frontier_transfer(frontier)
    # env0: its environment and its tool's base name (4 x 0.25 each); env1 shares only get_order; env2 nothing
    np.testing.assert_allclose(transfer, np.r_[np.full(4, 2.0), np.full(4, 1.0), np.zeros(4)])


def test_transfer_per_environment_takes_a_large_environment_s_size_advantage_away():
    frame = make_tasks(n_envs=2, per_env=12)
    frame = frame[(frame["env_id"] == "env0") | (frame.index % 12 < 3)]  # env0: 12 tasks, env1: 3
    frame["tools"] = [[f"{env}.get_order"] for env in frame["env_id"]]  # one tool base name, shared by both
    catalog = TaskCatalog.from_frame(frame)
    frontier = np.full(len(frame), 0.25)  # every task equally at the frontier
    big = (frame["env_id"] == "env0").to_numpy()
    total = model(catalog, SchedulerConfig()).frontier_transfer(frontier)
    per_env = model(catalog, SchedulerConfig(transfer_per_environment=True)).frontier_transfer(frontier)
    # in total: env0's 12 x 0.25 against env1's 3 x 0.25, plus the shared get_order's 15 x 0.25 for both
    np.testing.assert_allclose(total, np.where(big, 3.0 + 3.75, 0.75 + 3.75))
    np.testing.assert_allclose(per_env, np.full(len(frame), 1.875 + 3.75))  # x 7.5/12 and x 7.5/3: equal
    even = shared_tool_catalog()  # equal sizes: nothing changes
    v = np.linspace(0.0, 0.25, len(even))
    np.testing.assert_array_equal(
        model(even, SchedulerConfig()).frontier_transfer(v),
        model(even, SchedulerConfig(transfer_per_environment=True)).frontier_transfer(v),
    )


def test_transfer_weight_ranks_the_task_sharing_more_frontier_above_a_slightly_more_mixed_one():
    m = model(shared_tool_catalog(), SchedulerConfig())
    frontier = np.r_[np.full(4, 0.25), np.full(4, 0.05), np.full(4, 0.05)]
    value = np.r_[np.full(4, 0.20), np.full(4, 0.05), np.full(4, 0.22)]  # task 8 alone is a bit more mixed
    assert np.argmax(value * frontier_transfer_factor(m, frontier, 0.0)) == 8
    assert np.argmax(value * frontier_transfer_factor(m, frontier, 1.0)) == 0  # env0's crowded frontier wins
    with pytest.raises(ValueError, match="transfer_weight"):
        SchedulerConfig(transfer_weight=-0.5)


def test_informed_coverage_prefers_unseen_tasks_whose_tools_more_frontier_tasks_share():
    frame = make_tasks(n_envs=4, per_env=3)
    tools = {"env0": "get_order", "env1": "send_mail", "env2": "lookup", "env3": "get_order"}
    frame["tools"] = [[f"{env}.{tools[env]}"] for env in frame["env_id"]]
    frame["tool_effects"] = [["read"]] * len(frame)
    catalog = TaskCatalog.from_frame(frame)  # get_order is shared by env0 and env3, send_mail by env1 only
    picks = {}
    for weight in (0.0, 1.0):
        cfg = SchedulerConfig(
            batch_size=1,
            rho=1.0,
            adaptive_rho=False,
            use_cross_edges=False,
            use_global_model=False,
            n_patterns=1,
            transfer_weight=weight,
        )
        envs = []
        for seed in range(12):
            sched = EnvSched(catalog, cfg, seed=seed)
            sched.observe(group("e2-t0", 1, [1, 0] * 4))  # every unseen task is equally uncertain
            envs.append(sched.select(2)["env_id"].iloc[0])
        picks[weight] = envs
    assert "env1" in picks[0.0]  # the same optimistic variance everywhere: ties broken at random
    assert (
        "env1" not in picks[1.0] and "env2" not in picks[1.0]
    )  # 6 frontier tasks share get_order, 3 send_mail


def test_seen_only_propagation_gives_the_full_mat_vec_sums_exactly():
    rng = np.random.default_rng(0)
    n = 2000
    src, dst = np.repeat(np.arange(n), 4), rng.integers(0, n, 4 * n)
    W = propagation_matrix(src, dst, rng.random(4 * n).astype(np.float32), n, 0.1)
    P = np.zeros(n)
    seen = rng.choice(n, 50, replace=False)
    P[seen] = rng.random(50) * 3
    Pm = P * rng.normal(size=n)
    full = W @ np.column_stack([P, Pm])
    into = ColumnIndex(W)
    assert into.entries(seen) is not None  # 50 of 2,000 columns: found through the index
    for index in (None, into):
        N, S = _sum_over_nonzero_columns(W, P, Pm, index)
        assert np.array_equal(N, full[:, 0]) and np.array_equal(S, full[:, 1])
        assert (N > 0).sum() > 0 and (N[np.asarray(W[:, seen].sum(axis=1)).ravel() == 0] == 0).all()
    many = np.zeros(n)
    many[rng.choice(n, 400, replace=False)] = 1.0  # a fifth of the columns: too many for the index
    assert into.entries(np.flatnonzero(many)) is None
    N, S = _sum_over_nonzero_columns(W, many, many, into)
    assert np.array_equal(N, W @ many)


def test_float32_expected_bernoulli_variance_matches_float64_and_stays_positive():
    z = np.array([-60.0, -8.0, -1.0, 0.0, 2.5, 40.0])
    sd = np.array([0.0, 0.5, 1.0, 3.0, 0.2, 1.0])
    nodes, weights = np.polynomial.hermite_e.hermegauss(5)
    p = sigmoid(z[:, None] + sd[:, None] * nodes[None, :])
    reference = (p * (1.0 - p)) @ (weights / weights.sum())
    fast = expected_bernoulli_variance(z, sd)
    assert fast.dtype == np.float64
    np.testing.assert_allclose(fast[1:-1], reference[1:-1], rtol=1e-5)
    assert reference[0] == reference[-1] == 0  # 1 - sigmoid(60) rounds to 0 in float64 ...
    assert (fast > 0).all()  # ... e^-|x| / (1 + e^-|x|)^2 does not


@pytest.mark.parametrize("trend", [False, True])
def test_global_trend_predicts_where_an_improving_environment_is_now(catalog, trend):
    cfg = SchedulerConfig(use_within_edges=False, use_cross_edges=False, rho=1.0, global_trend=trend)
    m = model(catalog, cfg)
    rng = np.random.default_rng(4)
    truth = {}
    for step in range(1, 16):  # environment 0 improves by 0.4 logits a step; environment 1 stays put
        truth[0], truth[1] = -3.0 + 0.4 * step, -1.0
        for env, rows in ((0, np.arange(6)), (1, np.arange(6, 12))):
            successes = rng.binomial(8, sigmoid(np.full(6, truth[env])))
            observe(m, rows, step, successes)
    z = m.predict(16).z
    lag_0, error_1 = truth[0] - z[:6].mean(), abs(truth[1] - z[6:12].mean())
    if trend:
        # the fit extrapolates to now: no lag in the improving environment, none made up in the flat one
        assert abs(lag_0) < 1.0 and error_1 < 0.5
        slopes = m.state_dict()["w_trend"]  # per step of age: global, then per environment
        assert slopes[0] + slopes[1] > 0.2 and abs(slopes[0] + slopes[2]) < 0.05
    else:  # the decay-weighted average over the window trails the improving environment by ~6 steps
        assert lag_0 > 2.0 and error_1 < 0.5
