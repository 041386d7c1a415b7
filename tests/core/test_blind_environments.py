import copy

import numpy as np
import pandas as pd
import scipy.sparse as sp
from task_frames import group, make_tasks, rollouts_for

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.blind_environments import FLOOR, MIN_CATALOGUE_ENVS, BlindEnvironments, sandboxes

G = 8


def campaign(model: BlindEnvironments, rate: np.ndarray, steps: int, keep_revisiting, seed=0) -> None:
    """Environment e's tasks start at success 0.3-0.7 and gain rate[e] per unit of the variance they were trained
    on (capped at 1); each step every task that ``keep_revisiting(last observed mean)`` allows is visited, a group
    of G Bernoulli draws, and trained on its group's variance."""
    rng = np.random.default_rng(seed)
    env = model.env
    start = rng.uniform(0.3, 0.7, len(env))
    trained = np.zeros(len(env))
    last = np.full(len(env), 0.5)
    for _ in range(steps):
        rows = np.flatnonzero(keep_revisiting(last))
        p = np.minimum(start[rows] + rate[env[rows]] * trained[rows], 1.0)
        mean = rng.binomial(G, p) / G
        variance = mean * (1 - mean)
        model.update(rows, mean, variance, np.full(len(rows), 0.5))
        trained[rows] += variance
        last[rows] = mean


def test_blind_environments_find_the_environments_whose_rewards_never_move():
    model = BlindEnvironments(np.repeat(np.arange(10), 6), 10, G, prior=0.1)
    rate = np.r_[np.full(8, 0.15), 0.0, 0.0]  # environments 8 and 9 flip coins
    campaign(model, rate, steps=12, keep_revisiting=lambda last: np.ones(len(last), bool))
    moves = model.learnable()
    assert np.all(moves[:8] > 0.8) and np.all(moves[8:] < 0.2)
    assert model.rate > 0 and np.all(model.factor() >= FLOOR)


def test_blind_environments_leave_a_catalogue_of_few_environments_alone():
    model = BlindEnvironments(
        np.repeat(np.arange(MIN_CATALOGUE_ENVS - 1), 6), MIN_CATALOGUE_ENVS - 1, G, prior=0.1
    )
    rate = np.r_[np.full(MIN_CATALOGUE_ENVS - 3, 0.15), 0.0, 0.0]
    campaign(model, rate, steps=12, keep_revisiting=lambda last: np.ones(len(last), bool))
    assert model.factor().tolist() == [1.0] * len(model.env)


def test_blind_environments_are_not_fooled_by_revisiting_only_the_tasks_still_mixed():
    # a scheduler stops revisiting a task once it looks solved, so the learnable tasks it sees again are the ones
    # that moved least; the coin flips always look mixed and are revisited every step
    model = BlindEnvironments(np.repeat(np.arange(10), 6), 10, G, prior=0.1)
    rate = np.r_[np.full(8, 0.15), 0.0, 0.0]
    campaign(model, rate, steps=15, keep_revisiting=lambda last: (last > 0.05) & (last < 0.85), seed=1)
    moves = model.learnable()
    assert np.all(moves[:8] > 0.5) and np.all(moves[8:] < 0.2)


def test_blind_environments_weigh_nothing_down_where_nothing_moves_or_rewards_fall():
    everywhere = lambda last: np.ones(len(last), bool)  # noqa: E731
    for rate in (np.zeros(10), np.full(10, -0.1)):  # coin flips everywhere; forgetting everywhere
        model = BlindEnvironments(np.repeat(np.arange(10), 6), 10, G, prior=0.1)
        campaign(model, rate, steps=12, keep_revisiting=everywhere)
        assert model.factor().min() > 0.5
    model = BlindEnvironments(np.repeat(np.arange(10), 6), 10, G, prior=0.1)
    model.update(np.arange(60), np.full(60, 0.5), np.full(60, 0.25), np.full(60, 0.5))  # first visits only
    assert model.factor().tolist() == [1.0] * 60 and model.rate == 0.0


def coin_flip_passes(rng: np.random.Generator) -> dict:
    """Passes of 8 per task of ``make_tasks(n_envs=10, per_env=6)`` at step s: env1's tasks swing between 4 and 5
    (the most variance) and never improve; the others climb from 1."""
    learns = [0, *range(2, 10)]
    passes = {f"e{e}-t{j}": (lambda s, j=j: min(1 + (s + j) // 4, 7)) for e in learns for j in range(6)}
    return passes | {f"e1-t{j}": (lambda s: 4 + int(rng.random() < 0.5)) for j in range(6)}


def observe_passes(sched: EnvSched, passes: dict, steps: int = 15) -> None:
    """Steps 1..steps, every task a group of 8 with ``passes[task](step)`` passes."""
    for step in range(1, steps + 1):
        frames = [group(t, step, [1] * passes[t](step) + [0] * (8 - passes[t](step))) for t in passes]
        sched.observe(pd.concat(frames, ignore_index=True))


def test_blind_environments_scheduler_leaves_a_coin_flip_environment_for_one_that_learns():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=10, per_env=6))
    passes = coin_flip_passes(np.random.default_rng(0))
    picked = {}
    for prior in (0.1, 0.0):
        cfg = SchedulerConfig(batch_size=6, rho=0.0, eta=0.0, adaptive_rho=False, blind_env_prior=prior)
        sched = EnvSched(catalog, cfg, seed=0)
        observe_passes(sched, passes)
        batch = sched.select(16)
        picked[prior] = batch["env_id"].eq("env1").mean()
        if prior:
            ranked, chosen = sched.predict().set_index("task_id"), batch["task_id"]
    assert picked[0.0] >= 2 / 6 and picked[0.1] == 0.0  # off: env1 fills its quota of the batch
    # the predictions say why: env1's tasks predict the most variance, but they rank below every pick
    coin_flips = ranked.index.str.startswith("e1-")
    assert ranked["predicted_variance"][coin_flips].min() > ranked["predicted_variance"][~coin_flips].median()
    assert ranked["moves"][coin_flips].max() < 0.2 and ranked["moves"][~coin_flips].min() > 0.8
    assert ranked["value"][coin_flips].max() < ranked.loc[chosen, "value"].min()


def test_sandboxes_are_the_tool_namespaces_else_the_environment():
    def units(env, tool_lists):
        names = sorted({t for tools in tool_lists for t in tools})
        rows = [i for i, tools in enumerate(tool_lists) for _ in tools]
        cols = [names.index(t) for tools in tool_lists for t in tools]
        incidence = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(tool_lists), len(names)))
        code, n = sandboxes(np.asarray(env, np.int32), incidence, np.asarray(names, dtype=object))
        return code.tolist(), n

    # one id per benchmark, tools named by their environment: the namespaces split it
    assert units([0, 0, 0, 1], [["a.x"], ["b.x", "b.y"], ["a.y"], ["c.x"]]) == ([0, 1, 0, 2], 3)
    # a sandbox per task: the namespaces join them
    assert units([0, 1, 2, 3], [["a.x"], ["a.y"], ["b.x"], ["b.x"]]) == ([0, 0, 1, 1], 2)
    # no namespace: the environment; a task without one among named tasks: its environment; two: a unit of both
    assert units([1, 0, 1], [["x"], ["y"], []]) == ([1, 0, 1], 2)
    assert units([0, 0, 1, 0], [["a.x"], ["x"], ["y"], ["a.x", "b.z"]]) == ([0, 1, 2, 3], 4)
    # a catalogue whose tasks use no tools: the environments
    assert units([0, 1], [[], []]) == ([0, 1], 2)
    # namespaces that cross the environments (tools shuffled between them): the environments
    assert units([0, 0, 1, 1], [["a.x"], ["b.x"], ["a.y"], ["b.y"]]) == ([0, 0, 1, 1], 2)


def test_blind_environments_find_a_coin_flip_environment_inside_a_benchmark_registered_whole():
    # ten environments registered as two benchmarks (too few ids to fit a mixture over); their tools' namespaces
    # still tell env1's coin flips apart, as in the test above
    frame = make_tasks(n_envs=10, per_env=6)
    frame["env_id"] = np.where(frame["env_id"].str[3:].astype(int) < 5, "benchA", "benchB")
    catalog = TaskCatalog.from_frame(frame)
    cfg = SchedulerConfig(batch_size=6, rho=0.0, eta=0.0, adaptive_rho=False, env_quota_min=6)
    sched = EnvSched(catalog, cfg, seed=0)
    observe_passes(sched, coin_flip_passes(np.random.default_rng(0)))
    moves = sched.blind.factor()
    coin_flips = catalog.tasks["task_id"].str.startswith("e1-").to_numpy()
    assert sched.blind.rate > 0 and moves[coin_flips].max() < 0.2 and moves[~coin_flips].min() > 0.8
    assert not sched.select(16)["task_id"].str.startswith("e1-").any()


def test_blind_environments_state_round_trips_exactly():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=10, per_env=6))  # enough environments to fit
    cfg = SchedulerConfig(batch_size=6)
    original = EnvSched(catalog, cfg, seed=0)
    ids = catalog.task_ids
    for step in range(1, 8):  # environments 0-7 climb, 8 and 9 flip coins
        p = {t: 0.5 if t.startswith(("e8-", "e9-")) else min(0.1 * step, 0.9) for t in ids}
        original.observe(rollouts_for(original.select(step), step, p=p))
    resumed = EnvSched(catalog, cfg, seed=5)
    resumed.load_state_dict(copy.deepcopy(original.state_dict()))
    assert original.blind.rate > 0  # the mixture was fitted, so its state carries something
    np.testing.assert_array_equal(resumed.blind.factor(), original.blind.factor())
    pd.testing.assert_frame_equal(original.select(8), resumed.select(8))
