"""The second world model (envsched_core/latent_world.py): its oracle variance, its update (with transfer that can be
negative), what its catalogue shows, and that the suite runs its regimes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from bench.scheduler_suite import make_world, run_world
from envsched_core.latent_world import LATENT_REGIMES, LatentConfig, LatentRegime, LatentWorld
from envsched_core.worlds import ALL_REGIMES, REGIMES, STRESS_REGIMES

SMALL = LatentConfig(n_families=3, envs_per_family=4, tasks_per_env=8, heldout_per_env=2, drift=0.0)


def test_expected_variance_is_the_mean_population_variance_of_drawn_groups():
    sim = LatentWorld(replace(SMALL, graded_share=0.5), seed=3)
    graded = sim._graded[sim._train_rows]
    assert 0 < graded.mean() < 1
    batch = pd.DataFrame({"task_id": np.asarray(sim.task_ids)})
    draws = [
        sim.rollout(batch, 1)["reward"].to_numpy().reshape(len(batch), -1).var(axis=1) for _ in range(400)
    ]
    realised = np.mean(draws, axis=0)
    expected = sim.expected_variance()
    for kind in (graded, ~graded):  # correlated checks and binary passes alike
        np.testing.assert_allclose(realised[kind].mean(), expected[kind].mean(), rtol=0.05)
    assert np.corrcoef(realised, expected)[0, 1] > 0.95


def group_of(sim: LatentWorld, task: str, rewards) -> pd.DataFrame:
    return pd.DataFrame({"task_id": task, "step": 1, "reward": np.asarray(rewards, dtype=float)})


def test_a_trained_group_moves_other_environments_by_the_cosine_of_their_requirements():
    sim = LatentWorld(SMALL, seed=4)
    rows, env = sim._train_rows, sim._env[sim._train_rows]
    j = 0
    other = env != env[j]  # no shared familiarity, no shared memory: only the skill vector moves them
    before = sim._logit(rows)
    assert sim.train(group_of(sim, sim.task_ids[j], [1, 0] * 4), max_groups=1) == 1
    change = sim._logit(rows) - before
    cosine = sim.a[rows] @ sim.a[rows[j]]
    # std of the group is 0.5; push lr_skill / B * std along a_j, B = 1
    np.testing.assert_allclose(change[other], SMALL.lr_skill * 0.5 * cosine[other])
    assert (change[other & (cosine < 0)] < 0).any()  # interference: tasks pointing away get worse
    same_env = (env == env[j]) & (np.arange(len(rows)) != j)
    np.testing.assert_allclose(change[same_env], 0.5 * (SMALL.lr_skill * cosine[same_env] + SMALL.lr_env))
    np.testing.assert_allclose(change[j], 0.5 * (SMALL.lr_skill + SMALL.lr_env + SMALL.lr_task))


def test_unnormalised_advantages_push_by_the_variance_and_all_equal_groups_not_at_all():
    sim = LatentWorld(replace(SMALL, normalise=False), seed=4)
    before = sim._logit(sim._train_rows[:1])
    sim.train(group_of(sim, sim.task_ids[0], [1, 0] * 4), max_groups=1)
    c = sim.config
    np.testing.assert_allclose(
        sim._logit(sim._train_rows[:1]) - before, 0.25 * (c.lr_skill + c.lr_env + c.lr_task)
    )
    assert sim.train(group_of(sim, sim.task_ids[1], [1] * 8), max_groups=1) == 0


def test_tool_names_share_base_names_within_a_family_only_and_reset_restores_the_policy():
    sim = LatentWorld(SMALL, seed=5)
    frame = sim.catalog_frame()
    family = sim._family[sim._env[sim._train_rows]]
    base = [{t.rsplit(".", 1)[1] for t in tools} for tools in frame["tools"]]
    nouns = [{b.split("_")[1] for b in names} for names in base]
    assert all(len(n) == 1 for n in nouns)  # every tool of a task names its family's object
    assert len({(f, next(iter(n))) for f, n in zip(family, nouns, strict=True)}) == SMALL.n_families
    assert frame["task_id"].is_unique and len(frame) == sim.n_train == 3 * 4 * 8
    start = sim.heldout_score()
    sim.train(group_of(sim, sim.task_ids[0], [1, 0] * 4), max_groups=1)
    assert sim.heldout_score() != start
    assert sim.reset(0).heldout_score() == start


def test_held_out_environments_never_reach_the_catalogue():
    sim = LatentWorld(replace(SMALL, heldout_envs=1, heldout_per_env=0), seed=6)
    trained_envs = set(sim.catalog_frame()["env_id"])
    held_envs = set(sim.env_names[sim._env[sim._heldout_rows]])
    assert len(held_envs) == 3 and not trained_envs & held_envs and len(trained_envs) == 12


def test_the_suite_runs_latent_regimes_and_they_are_held_out_by_name():
    assert set(LATENT_REGIMES) <= set(ALL_REGIMES) and not set(LATENT_REGIMES) & (
        set(REGIMES) | set(STRESS_REGIMES)
    )
    regime = LatentRegime("t", "small", SMALL, batch_size=8)
    world = make_world(regime, seed=1, quick=True)
    per_world = run_world(world, ["random", "dps", "envsched"], horizon=12, target_step=6)
    assert per_world["random"]["steps"] == 6 and per_world["envsched"]["rollouts"] > 0
    with pytest.raises(ValueError, match="dim=9"):
        LatentConfig(dim=9)
