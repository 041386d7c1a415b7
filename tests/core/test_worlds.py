import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from envsched_core import SchedulerConfig
from envsched_core.baselines import DAPOConfig, RandomScheduler
from envsched_core.simulator import run_campaign
from envsched_core.worlds import (
    ALL_REGIMES,
    BASE,
    REGIMES,
    STRESS_REGIMES,
    WILD_ATTACKS,
    WILD_SETTINGS,
    Regime,
    WorldSimulator,
    attack_fields,
    by_name,
    calibrate,
    compound_names,
    compound_regime,
    regime_named,
    wild_name,
    wild_names,
)

SMALL = replace(BASE, n_envs=6, tasks_per_env=10, heldout_per_env=2)
TEN_ENVS = replace(SMALL, n_envs=10, drift=0.0)


def every_task_once(config=TEN_ENVS, seed=4):
    """The plain world, a batch of every training task, and the rollouts it returns at step 1."""
    plain = WorldSimulator(config, seed=seed)
    batch = pd.DataFrame({"task_id": np.asarray(plain.task_ids)})
    return plain, batch, plain.rollout(batch, step=1)


def test_worlds_differ_by_seed_and_repeat_for_the_same_seed():
    regime = Regime("t", "test", SMALL)
    a, b, again = regime.world(1), regime.world(2), regime.world(1)
    assert not np.allclose(a.success_probability(), b.success_probability())
    np.testing.assert_array_equal(a.success_probability(), again.success_probability())


def test_worlds_scrambled_catalogue_keeps_ids_and_breaks_the_link_to_tasks():
    plain = WorldSimulator(SMALL, seed=3).catalog_frame()
    scrambled = WorldSimulator(SMALL, seed=3, scramble=True).catalog_frame()
    assert (plain["task_id"] == scrambled["task_id"]).all() and (plain["env_id"] == scrambled["env_id"]).all()
    moved = [
        not np.array_equal(x, y) for x, y in zip(plain["embedding"], scrambled["embedding"], strict=True)
    ]
    assert np.mean(moved) > 0.9  # almost every task carries another task's embedding and signature
    assert sorted(map(tuple, plain["tools"])) == sorted(
        map(tuple, scrambled["tools"])
    )  # same values, permuted


def test_worlds_forgetting_pulls_untrained_skills_back_to_the_start():
    sim = WorldSimulator(replace(SMALL, drift=0.0), seed=0, forget=0.5)
    sim.theta[: sim._off_task] += 1.0
    sim.drift()
    np.testing.assert_allclose(sim.theta[: sim._off_task], sim._theta0[: sim._off_task] + 0.5)
    with pytest.raises(ValueError, match="forget=1.0"):
        WorldSimulator(SMALL, forget=1.0)


def test_worlds_paper_regime_is_calibrated_to_table_2():
    stats = calibrate(REGIMES["paper"], seeds=[100, 101], steps=30).mean()
    assert 0.02 < stats["mean_var"] < 0.045  # the paper: random's mean selected variance 0.032
    assert 0.5 < stats["median_reward"] < 0.7  # the paper: median reward 0.595


def test_worlds_flaky_verifiers_ignore_the_policy_and_teach_nothing_on_average():
    sim = WorldSimulator(replace(SMALL, drift=0.0), seed=4, flaky=0.3)
    flaky = sim.flaky_tasks
    assert 0.1 < flaky.mean() < 0.5 and len(flaky) == sim.n_train
    before = sim.success_probability()
    assert np.all((before[flaky] >= 0.3) & (before[flaky] <= 0.7))
    sim.theta += 2.0  # a much better policy: every learnable task gets easier, no flaky one moves
    after = sim.success_probability()
    np.testing.assert_array_equal(after[flaky], before[flaky])
    assert np.all(after[~flaky] > before[~flaky])
    # Training on flaky groups only: pushes of the usual size in random directions, mean ~0 per skill.
    sim.theta -= 2.0
    ids = pd.Series(np.asarray(sim.task_ids)[flaky])
    moves = []
    for step in range(200):
        start = sim.theta.copy()
        sim.train(sim.rollout(pd.DataFrame({"task_id": ids}), step), max_groups=len(ids))
        moves.append(sim.theta - start)
    moves = np.array(moves)
    assert np.abs(moves).sum(axis=1).mean() > 0  # they do move the policy ...
    env_skills = moves[:, : sim._off_type].sum(axis=1)
    assert abs(env_skills.mean()) < 3 * env_skills.std() / np.sqrt(len(env_skills))  # ... nowhere on average
    assert heldout_of(sim) == heldout_of(
        WorldSimulator(replace(SMALL, drift=0.0), seed=4)
    )  # held-out stay true
    with pytest.raises(ValueError, match="flaky=1.0"):
        WorldSimulator(SMALL, flaky=1.0)


def heldout_of(sim: WorldSimulator) -> float:
    sim.theta = sim._theta0.copy()
    return sim.heldout_score()


def test_worlds_flaky_environments_break_every_training_task_of_the_chosen_environments():
    sim = WorldSimulator(TEN_ENVS, seed=4, flaky_envs=0.2)
    env_of = sim._task_env[sim._train_rows]
    broken = np.unique(env_of[sim.flaky_tasks])
    assert len(broken) == 2  # exactly round(0.2 x 10) environments
    np.testing.assert_array_equal(sim.flaky_tasks, np.isin(env_of, broken))  # all of their tasks, no other
    before = sim.success_probability()
    sim.theta += 2.0
    np.testing.assert_array_equal(sim.success_probability()[sim.flaky_tasks], before[sim.flaky_tasks])
    plain = WorldSimulator(TEN_ENVS, seed=4)
    assert heldout_of(sim) == heldout_of(plain)  # held-out tasks of broken environments stay true
    with pytest.raises(ValueError, match="flaky_envs=1.0"):
        WorldSimulator(SMALL, flaky_envs=1.0)


def test_worlds_late_environments_are_whole_environments_and_change_nothing_else():
    config = replace(SMALL, n_envs=9, drift=0.0)
    sim = WorldSimulator(config, seed=4, late_envs=1 / 3, late_step=5)
    env_of = sim._task_env[sim._train_rows]
    late = np.unique(env_of[sim.late_tasks])
    assert len(late) == 3 and sim.late_step == 5
    np.testing.assert_array_equal(sim.late_tasks, np.isin(env_of, late))
    plain = WorldSimulator(config, seed=4)
    np.testing.assert_array_equal(sim.success_probability(), plain.success_probability())
    assert not plain.late_tasks.any() and plain.available_tasks().all()
    # held back from the pool until step 5: not available, and refused by rollout
    late_id = pd.DataFrame({"task_id": [np.asarray(sim.task_ids)[sim.late_tasks][0]]})
    for step in range(1, 5):
        np.testing.assert_array_equal(sim.available_tasks(), ~sim.late_tasks)
        with pytest.raises(ValueError, match="join the pool at step 5"):
            sim.rollout(late_id, step)
        sim.drift()
    assert sim.available_tasks().all() and len(sim.rollout(late_id, 5)) == config.group_size
    with pytest.raises(ValueError, match="late_step=1"):
        WorldSimulator(config, late_envs=0.2, late_step=1)


def test_worlds_relabelled_environment_ids_merge_whole_environments_or_split_them_per_task_and_nothing_else():
    config = replace(SMALL, n_envs=9)
    sim, plain = WorldSimulator(config, seed=4, env_labels=3), WorldSimulator(config, seed=4)
    coarse, fine = sim.catalog_frame(), plain.catalog_frame()
    assert sorted(coarse["env_id"].unique()) == ["bench0", "bench1", "bench2"]
    # each true environment lies inside one label, and each label holds three of them
    labels_of = fine.groupby("env_id")["task_id"].apply(lambda t: coarse.loc[t.index, "env_id"].nunique())
    assert (labels_of == 1).all() and (fine.groupby(coarse["env_id"])["env_id"].nunique() == 3).all()
    other = [c for c in fine.columns if c not in ("env_id", "embedding")]
    pd.testing.assert_frame_equal(coarse[other], fine[other])  # tools keep their true environment's prefix
    np.testing.assert_array_equal(np.stack(coarse["embedding"]), np.stack(fine["embedding"]))
    np.testing.assert_array_equal(sim.success_probability(), plain.success_probability())
    with pytest.raises(ValueError, match="env_labels=10"):
        WorldSimulator(config, env_labels=10)
    per_task = WorldSimulator(config, seed=4, task_env_ids=True).catalog_frame()
    assert (per_task["env_id"] == fine["task_id"]).all()
    pd.testing.assert_frame_equal(per_task[other], fine[other])
    with pytest.raises(ValueError, match="choose one"):
        WorldSimulator(config, env_labels=3, task_env_ids=True)


def test_worlds_unseen_environments_leave_the_catalogue_and_alone_make_the_held_out_score():
    config = replace(SMALL, n_envs=9)
    sim, plain = WorldSimulator(config, seed=4, unseen_envs=1 / 3), WorldSimulator(config, seed=4)
    unseen = sim.unseen_envs
    assert unseen.sum() == 3 and not plain.unseen_envs.any()
    frame, full = sim.catalog_frame(), plain.catalog_frame()
    assert not frame["env_id"].isin(plain.env_names[unseen]).any()
    kept = ~full["env_id"].isin(plain.env_names[unseen])
    # the other environments' tasks are the plain world's, skills and catalogue columns alike
    assert frame["task_id"].tolist() == full.loc[kept, "task_id"].tolist()
    np.testing.assert_array_equal(np.stack(frame["embedding"]), np.stack(full.loc[kept, "embedding"]))
    np.testing.assert_array_equal(sim.success_probability(), plain.success_probability()[kept.to_numpy()])
    # the held-out score is every task of the unseen environments, and of nothing else
    rows = np.flatnonzero(unseen[plain._task_env])
    assert len(rows) == 3 * (config.tasks_per_env + config.heldout_per_env)
    assert sim.heldout_score() == pytest.approx(plain._success(rows).mean())
    # training the seen environments moves them through the shared tool types and families only
    batch = pd.DataFrame({"task_id": frame["task_id"]})
    before = sim.heldout_score()
    sim.train(
        pd.DataFrame(
            {"task_id": np.repeat(batch["task_id"], 8), "reward": np.tile([0.0, 1.0], 4 * len(batch))}
        ),
        len(batch),
    )
    env_skill = sim.theta[: config.n_envs]
    np.testing.assert_array_equal(env_skill[unseen], sim._theta0[: config.n_envs][unseen])
    assert sim.heldout_score() != before
    with pytest.raises(ValueError, match="unseen_envs=1.0"):
        WorldSimulator(config, unseen_envs=1.0)


NINE_ENVS = replace(SMALL, n_envs=9, drift=0.0)


def attacked_and_plain(attack: str, share: float):
    """The nine-environment world with ``share`` of its training tasks under ``attack`` and without it, the
    attacked tasks' mask (some, not all) and both worlds' success probabilities."""
    sim, plain = WorldSimulator(NINE_ENVS, seed=4, **{attack: share}), WorldSimulator(NINE_ENVS, seed=4)
    mask = getattr(sim, f"{attack}_tasks")
    assert 0 < mask.sum() < len(mask) and not getattr(plain, f"{attack}_tasks").any()
    return sim, plain, mask, sim.success_probability(), plain.success_probability()


def test_worlds_broken_tasks_never_pass_and_change_nothing_else():
    sim, plain, broken, p, p_plain = attacked_and_plain("broken", 0.3)
    assert (p[broken] == 0).all()
    np.testing.assert_array_equal(p[~broken], p_plain[~broken])
    assert sim.heldout_score() == plain.heldout_score()  # held-out tasks are never broken
    ids = np.asarray(sim.task_ids)
    rewards = sim.rollout(pd.DataFrame({"task_id": ids[broken]}), step=1)["reward"]
    assert (rewards == 0).all()  # binary or graded, not one check passes
    pd.testing.assert_frame_equal(sim.catalog_frame(), plain.catalog_frame())  # nothing marks them
    with pytest.raises(ValueError, match="broken=1.0"):
        WorldSimulator(NINE_ENVS, broken=1.0)


def test_worlds_inverted_tasks_pay_the_wrong_answer_and_teach_the_wrong_skill():
    sim, plain, inverted, p, p_plain = attacked_and_plain("inverted", 0.3)
    np.testing.assert_allclose(p[inverted], 1 - p_plain[inverted])
    np.testing.assert_array_equal(p[~inverted], p_plain[~inverted])
    # as mixed as the true task
    np.testing.assert_allclose(sim.expected_variance(), plain.expected_variance())
    assert sim.heldout_score() == plain.heldout_score()  # held-out tasks are never inverted
    pd.testing.assert_frame_equal(sim.catalog_frame(), plain.catalog_frame())  # nothing marks them
    ids = np.asarray(sim.task_ids)
    # GRPO on an inverted task's group lowers every skill it loads on, and the held-out score with them; the same
    # push on the true verifier raises them
    before = sim.theta.copy()
    trained = sim.train(sim.rollout(pd.DataFrame({"task_id": ids[inverted]}), step=1), max_groups=len(ids))
    assert trained > 0
    moved = sim.theta - before
    assert (moved <= 0).all() and moved.min() < 0
    assert sim.heldout_score() < plain.heldout_score()
    with pytest.raises(ValueError, match="inverted=1.0"):
        WorldSimulator(NINE_ENVS, inverted=1.0)
    with pytest.raises(ValueError, match="do not combine"):
        WorldSimulator(NINE_ENVS, inverted=0.1, chain=True)


def test_worlds_outage_zeroes_the_down_environments_over_its_steps_only():
    config = replace(SMALL, n_envs=8, drift=0.0)
    sim = WorldSimulator(config, seed=4, outage=0.25, outage_step=3, outage_steps=2)
    plain = WorldSimulator(config, seed=4)
    down = sim.outage_tasks
    env_of = sim._task_env[sim._train_rows]
    assert len(np.unique(env_of[down])) == 2  # round(0.25 x 8) environments, every training task of theirs
    np.testing.assert_array_equal(down, np.isin(env_of, np.unique(env_of[down])))
    ids, p_plain = np.asarray(sim.task_ids), plain.success_probability()
    for step in range(1, 7):  # the coming step is steps_done + 1; down over steps 3 and 4
        p = sim.success_probability()
        assert sim.in_outage() == (step in (3, 4))
        np.testing.assert_array_equal(p[~down], p_plain[~down])
        np.testing.assert_array_equal(p[down], 0.0 if step in (3, 4) else p_plain[down])
        rewards = sim.rollout(pd.DataFrame({"task_id": ids[down]}), step=step)["reward"]
        assert (rewards == 0).all() == (step in (3, 4))  # binary or graded, not one check passes while down
        assert sim.heldout_score() == plain.heldout_score()  # the policy is untouched
        sim.drift()
        plain.drift()
    assert sim.outage_end == 5
    pd.testing.assert_frame_equal(sim.catalog_frame(), plain.catalog_frame())  # nothing marks them
    with pytest.raises(ValueError, match="outage_steps=0"):
        WorldSimulator(config, outage=0.5, outage_steps=0)


def test_worlds_copied_tasks_are_their_originals_in_all_but_name_and_text():
    config = replace(SMALL, n_envs=8, drift=0.0)
    sim, plain = WorldSimulator(config, seed=4, duplicates=0.5), WorldSimulator(config, seed=4)
    template = sim.templates
    copy = template != np.arange(len(template))
    env = plain.catalog_frame()["env_id"].to_numpy()
    assert 0.3 < copy.mean() < 0.6 and (env[template] == env).all()  # a copy's original is in its environment
    assert not copy[template].any()  # an original is no copy
    p, p_plain = sim.success_probability(), plain.success_probability()
    np.testing.assert_array_equal(p[~copy], p_plain[~copy])  # originals and held-out tasks unchanged
    np.testing.assert_array_equal(p, p[template])
    assert sim.heldout_score() == plain.heldout_score()
    frame = sim.catalog_frame()
    for column in ("tools", "gold_calls", "turns", "verifier"):
        assert (
            frame[column].iloc[np.flatnonzero(copy)].tolist() == frame[column].iloc[template[copy]].tolist()
        )
    emb = np.stack(frame["embedding"])
    assert (np.sum(emb[copy] * emb[template[copy]], axis=1) > 0.98).all()  # near copies
    ids = np.asarray(sim.task_ids)
    first = np.flatnonzero(copy)[0]
    sim.train(sim.rollout(pd.DataFrame({"task_id": ids[[first] * 20]}), step=1), max_groups=20)
    moved = sim.success_probability() - p
    assert moved[first] != 0 and moved[template[first]] == moved[first]  # training a copy trains its original
    unseen = WorldSimulator(config, seed=4, unseen_envs=0.25)  # fewer training tasks: every task its own
    np.testing.assert_array_equal(unseen.templates, np.arange(unseen.n_train))
    with pytest.raises(ValueError, match="duplicates=1.0"):
        WorldSimulator(config, duplicates=1.0)


def test_worlds_lookalikes_look_like_their_template_but_are_as_hard_as_their_own_draw():
    config = replace(SMALL, n_envs=8, drift=0.0)
    sim, copies = (
        WorldSimulator(config, seed=4, lookalikes=0.5),
        WorldSimulator(config, seed=4, duplicates=0.5),
    )
    template = sim.lookalike_templates
    np.testing.assert_array_equal(
        template, copies.templates
    )  # the same tasks copied, from the same originals
    np.testing.assert_array_equal(sim.templates, np.arange(sim.n_train))  # none is a copy in all but name
    copy = template != np.arange(len(template))
    frame, copied = sim.catalog_frame(), copies.catalog_frame()
    for column in ("tools", "gold_calls", "turns", "verifier", "text"):
        assert frame[column].tolist() == copied[column].tolist()  # the catalogue cannot tell them apart
    np.testing.assert_array_equal(np.stack(frame["embedding"]), np.stack(copied["embedding"]))
    p, p_copies = sim.success_probability(), copies.success_probability()
    np.testing.assert_array_equal(p[~copy], p_copies[~copy])  # originals and held-out tasks unchanged
    logit = np.log(p / (1 - p))
    assert np.mean(np.abs(logit[copy] - logit[template[copy]]) > 0.5) > 0.5  # most differ from their template
    ids = np.asarray(sim.task_ids)
    first = np.flatnonzero(copy)[0]
    sim.train(sim.rollout(pd.DataFrame({"task_id": ids[[first] * 20]}), step=1), max_groups=20)
    after = sim.success_probability()
    moved = np.abs(np.log(after / (1 - after)) - logit)
    assert moved[first] > moved[template[first]] > 0  # its own task skill trains, not its template's
    with pytest.raises(ValueError, match="choose one"):
        WorldSimulator(config, duplicates=0.5, lookalikes=0.5)


def test_worlds_settled_environments_are_far_easier_or_harder_from_the_start_and_stay_so_on_reset():
    config = replace(SMALL, n_envs=20, drift=0.0)
    sim, plain = WorldSimulator(config, seed=4, settled_envs=0.5), WorldSimulator(config, seed=4)
    logit = lambda p: np.log(p / (1 - p))  # noqa: E731
    moved = logit(sim.success_probability()) - logit(plain.success_probability())
    env = sim._task_env[sim._train_rows]
    per_env = np.array([np.unique(np.round(moved[env == e], 6)) for e in range(20)], dtype=object)
    assert all(len(v) == 1 for v in per_env)  # one shift per environment, every task of it
    shifts = np.array([v[0] for v in per_env])
    assert set(np.round(shifts, 6)) == {-6.0, 0.0, 6.0} and 5 <= np.sum(shifts != 0) <= 15
    np.testing.assert_array_equal(
        sim.out_of_reach_tasks, moved < 0
    )  # harder: the oracle's out-of-reach tasks
    assert not plain.out_of_reach_tasks.any()
    assert sim.heldout_score() != plain.heldout_score()  # held-out tasks are settled too
    before = sim.success_probability()
    sim.reset(1)
    np.testing.assert_array_equal(sim.success_probability(), before)
    with pytest.raises(ValueError, match="settled_envs=1.0"):
        WorldSimulator(config, settled_envs=1.0)


def test_worlds_judged_environments_score_a_fixed_level_with_a_small_spread_whatever_the_policy():
    config = replace(SMALL, n_envs=10, drift=0.0, group_size=400)
    sim, plain = WorldSimulator(config, seed=4, judged=0.2), WorldSimulator(config, seed=4)
    judged = sim.judged_tasks
    env_of = sim._task_env[sim._train_rows]
    assert len(np.unique(env_of[judged])) == 2  # round(0.2 x 10) environments, every training task of theirs
    assert (sim.flaky_tasks == judged).all()  # policy-blind, as flaky verifiers are
    p = sim.success_probability()
    assert ((p[judged] >= 0.3) & (p[judged] <= 0.7)).all()
    np.testing.assert_array_equal(p[~judged], plain.success_probability()[~judged])
    np.testing.assert_allclose(sim.expected_variance()[judged], 0.02**2 * 399 / 400)
    ids = np.asarray(sim.task_ids)
    rewards = (
        sim.rollout(pd.DataFrame({"task_id": ids[judged]}), step=1)["reward"].to_numpy().reshape(-1, 400)
    )
    np.testing.assert_allclose(rewards.mean(axis=1), p[judged], atol=0.005)
    np.testing.assert_allclose(rewards.std(axis=1), 0.02, rtol=0.15)  # a little spread in every group
    before = sim.heldout_score()
    sim.train(sim.rollout(pd.DataFrame({"task_id": ids[judged]}), step=1), max_groups=int(judged.sum()))
    assert abs(sim.heldout_score() - before) < 1e-3  # their groups push by noise the size of their spread
    assert sim.heldout_score() != before
    down = WorldSimulator(config, seed=4, judged=0.2, outage=1.0, outage_step=1)  # a judge's sandbox down too
    assert (down.rollout(pd.DataFrame({"task_id": ids[judged]}), step=1)["reward"] == 0).all()
    assert (down.expected_variance()[judged] == 0).all()
    with pytest.raises(ValueError, match="judged=1.0"):
        WorldSimulator(config, judged=1.0)


def test_worlds_lost_groups_never_come_back_and_count_as_spent():
    config = TEN_ENVS
    plain, batch, expected = every_task_once()
    ids = batch["task_id"].to_numpy()
    for kind in ({"lost": 0.2}, {"lost_envs": 0.2}):
        sim = WorldSimulator(config, seed=4, **kind)
        lost = sim.lost_tasks
        assert 0 < lost.sum() < len(ids)
        got = sim.rollout(batch, step=1)
        assert not got["task_id"].isin(ids[lost]).any()
        # every other group is the plain world's, reward for reward
        kept = expected[~expected["task_id"].isin(ids[lost])].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, kept)
        pd.testing.assert_frame_equal(sim.catalog_frame(), plain.catalog_frame())  # nothing marks them
    env_of = sim._task_env[sim._train_rows]
    assert len(np.unique(env_of[sim.lost_tasks])) == 2  # lost_envs: round(0.2 x 10) environments, whole
    np.testing.assert_array_equal(sim.lost_tasks, np.isin(env_of, np.unique(env_of[sim.lost_tasks])))

    # the transient kind: drawn per (step, task), the same in every round of a step, other tasks untouched
    sim = WorldSimulator(config, seed=4, dropped=0.3)
    first, again = sim.rollout(batch, step=1), sim.rollout(batch.iloc[::-1], step=1)
    assert set(first["task_id"]) == set(again["task_id"])
    later = set(sim.rollout(batch, step=2)["task_id"])
    assert 0.5 < len(set(first["task_id"])) / len(ids) < 0.9 and later != set(first["task_id"])
    assert not sim.lost_tasks.any()

    # run_campaign counts every group handed out, those that never came back included
    sim = WorldSimulator(config, seed=4, lost=0.5)
    metrics = run_campaign(RandomScheduler(sim.task_catalog(), DAPOConfig(batch_size=8)), sim, steps=3)
    assert (metrics["rollouts"] == 8 * config.group_size).all()
    assert (metrics["trained_groups"] < 8).any()
    with pytest.raises(ValueError, match="dropped=1.0"):
        WorldSimulator(config, dropped=1.0)


def test_worlds_partial_groups_come_back_short_with_the_plain_worlds_rewards():
    config = TEN_ENVS
    plain, batch, expected = every_task_once()
    ids = batch["task_id"].to_numpy()
    g = config.group_size

    sim = WorldSimulator(config, seed=4, partial=0.25)
    got = sim.rollout(batch, step=1)
    assert 0.65 < len(got) / len(expected) < 0.85
    # what came back are the plain world's rewards, task by task in the batch's order, some left out
    assert list(dict.fromkeys(got["task_id"])) == [t for t in ids if t in set(got["task_id"])]
    for task, rewards in got.groupby("task_id")["reward"]:
        plain_rewards = expected.loc[expected["task_id"] == task, "reward"].value_counts()
        assert (rewards.value_counts().reindex(plain_rewards.index, fill_value=0) <= plain_rewards).all()
        assert rewards.isin(plain_rewards.index).all()
    again = sim.rollout(batch.iloc[::-1], step=1)  # the same rollouts lost in every round of a step
    np.testing.assert_array_equal(again.groupby("task_id").size(), got.groupby("task_id").size())
    assert not sim.slow_tasks.any()

    sim = WorldSimulator(config, seed=4, slow=0.3)
    slow = sim.slow_tasks
    assert 0 < slow.sum() < len(ids)
    size = sim.rollout(batch, step=1).groupby("task_id").size().reindex(ids, fill_value=0).to_numpy()
    assert (size[~slow] == g).all() and size[slow].mean() < 0.4 * g
    pd.testing.assert_frame_equal(sim.catalog_frame(), plain.catalog_frame())  # nothing marks them

    # every task handed out counts G rollouts spent; the policy trains on what came back
    metrics = run_campaign(RandomScheduler(sim.task_catalog(), DAPOConfig(batch_size=8)), sim, steps=3)
    assert (metrics["rollouts"] == 8 * g).all()
    with pytest.raises(ValueError, match="partial=1.0"):
        WorldSimulator(config, partial=1.0)


@pytest.mark.parametrize(
    "share, mask, rescaled",
    [
        ("floor_envs", "floored_tasks", lambda r: 0.2 + 0.8 * r),  # a failed attempt scores 0.2
        ("ceiling_envs", "capped_tasks", lambda r: 0.8 * r),  # a pass scores 0.8
    ],
)
def test_worlds_with_a_reward_floor_or_ceiling_rescale_the_outcome_and_train_alike(share, mask, rescaled):
    plain, batch, expected = every_task_once()
    sim = WorldSimulator(TEN_ENVS, seed=4, **{share: 0.4})
    ids = batch["task_id"].to_numpy()
    chosen = getattr(sim, mask)
    assert len(np.unique(sim._task_env[sim._train_rows][chosen])) == 4  # whole environments
    got = sim.rollout(batch, step=1)
    inside = got["task_id"].isin(ids[chosen]).to_numpy()
    np.testing.assert_allclose(got["reward"][inside], rescaled(expected["reward"][inside]))
    np.testing.assert_array_equal(got["reward"][~inside], expected["reward"][~inside])
    np.testing.assert_allclose(
        sim.expected_variance(), np.where(chosen, 0.64, 1.0) * plain.expected_variance()
    )
    # the same outcomes push the policy the same way, rescaled or not
    plain.train(expected, max_groups=len(ids))
    sim.train(got, max_groups=len(ids))
    np.testing.assert_allclose(sim.theta, plain.theta)
    with pytest.raises(ValueError, match=f"{share}=1.5"):
        WorldSimulator(TEN_ENVS, **{share: 1.5})


def test_no_capped_rollout_scores_1_and_a_world_takes_a_floor_or_a_ceiling_not_both():
    _, batch, _ = every_task_once()
    sim = WorldSimulator(TEN_ENVS, seed=4, ceiling_envs=0.4)
    got = sim.rollout(batch, step=1)
    assert got.loc[got["task_id"].isin(batch["task_id"].to_numpy()[sim.capped_tasks]), "reward"].max() < 1
    with pytest.raises(ValueError, match="choose one"):
        WorldSimulator(TEN_ENVS, floor_envs=0.5, ceiling_envs=0.5)


def test_worlds_with_group_shifts_share_one_draw_per_group():
    plain, batch, _ = every_task_once()
    sim = WorldSimulator(TEN_ENVS, seed=4, group_sd=2.0)
    np.testing.assert_array_equal(sim.success_probability(), plain.success_probability())  # the same policy
    assert sim.heldout_score() == plain.heldout_score()
    steps = 40
    p = plain.success_probability()
    binary, middle = ~sim._graded[sim._train_rows], (p > 0.3) & (p < 0.7)

    def group_variances(world):
        out = []
        for step in range(1, steps + 1):
            rewards = world.rollout(batch, step).groupby("task_id", sort=False)["reward"].var(ddof=0)
            out.append(rewards.reindex(batch["task_id"]).to_numpy())
            world._set_steps_done(step)  # the next step's draws, without training
        return np.array(out)

    shifted, independent = group_variances(sim), group_variances(plain)
    # a group's rollouts share its conditions: all-pass or all-fail far more often at a middling success rate
    equal = lambda v: (v[:, binary & middle] == 0).mean()  # noqa: E731
    assert equal(shifted) > 5 * equal(independent) and equal(shifted) > 0.1
    # the oracle's expected group variance is what the groups realise
    np.testing.assert_allclose(shifted.mean(), sim.expected_variance().mean(), rtol=0.1)
    assert sim.expected_variance()[middle].mean() < plain.expected_variance()[middle].mean()
    with pytest.raises(ValueError, match="group_sd=-1"):
        WorldSimulator(TEN_ENVS, group_sd=-1.0)
    with pytest.raises(ValueError, match="does not combine"):
        WorldSimulator(TEN_ENVS, group_sd=1.0, chain=True)


def test_regime_names_are_unique():
    assert STRESS_REGIMES["slow"].config.lr == 2.0 and STRESS_REGIMES["slow-tasks"].slow > 0
    with pytest.raises(ValueError, match="'t' is given twice"):
        by_name(Regime("t", "one", SMALL), Regime("t", "two", SMALL))


def test_worlds_without_flaky_tasks_are_the_plain_simulator():
    plain = Regime("t", "test", SMALL).world(5)
    same = WorldSimulator(SMALL, seed=5)
    np.testing.assert_array_equal(plain.success_probability(), same.success_probability())
    assert not same.flaky_tasks.any()


def test_worlds_shift_moves_the_chosen_environments_at_its_step_and_resets():
    sim = WorldSimulator(replace(SMALL, n_envs=12, drift=0.0), seed=5, shift=0.5, shift_step=3)
    moved = sim.shifted_envs
    assert 0 < moved.sum() < len(moved)
    env = sim._task_env
    before = sim._difficulty.copy()
    for _ in range(2):
        sim.drift()
    np.testing.assert_array_equal(sim._difficulty, before)  # nothing moves before the shift step
    saved = sim.state_dict()
    sim.drift()  # the third step ends: the environments are updated
    change = sim._difficulty - before
    np.testing.assert_allclose(np.abs(change[moved[env]]), 2.5)  # training and held-out tasks alike
    assert (change[~moved[env]] == 0).all()
    assert len(np.unique(np.sign(change[moved[env]]))) == 2  # some got harder, some easier
    sim.drift()
    np.testing.assert_array_equal(sim._difficulty - before, change)  # once, not every step
    sim.load_state_dict(saved)  # a resume before the shift step shifts again at it
    sim.drift()
    np.testing.assert_array_equal(sim._difficulty - before, change)
    sim.reset(1)
    np.testing.assert_array_equal(sim._difficulty, before)
    with pytest.raises(ValueError, match="shift=1.5"):
        WorldSimulator(SMALL, shift=1.5)


def test_stress_regimes_are_held_out_variations_of_the_suite_worlds():
    assert not set(STRESS_REGIMES) & set(REGIMES) and set(REGIMES) | set(STRESS_REGIMES) < set(ALL_REGIMES)
    base = REGIMES["default"].world(7).success_probability().mean()
    assert STRESS_REGIMES["easy"].world(7).success_probability().mean() > base + 0.1  # easier tasks
    sim = STRESS_REGIMES["g4"].world(7).reset(0)
    batch = pd.DataFrame({"task_id": sim.task_ids[:3]})
    assert sim.rollout(batch, 1).groupby("task_id").size().tolist() == [4, 4, 4]
    # too few environments to fill B under the configured quota
    assert STRESS_REGIMES["coarse-envs"].world(7).catalog_frame()["env_id"].nunique() == 6
    frame = STRESS_REGIMES["three-envs"].world(7).catalog_frame()
    assert frame["env_id"].nunique() * SchedulerConfig(batch_size=32).env_quota < 32
    # multi-step tasks, graded by the share of calls passed
    chain = STRESS_REGIMES["chain-graded"].world(7).reset(0)
    reward = chain.rollout(pd.DataFrame({"task_id": chain.task_ids[:50]}), 1)["reward"]
    assert chain.chain and 0 < reward.mean() < 1 and reward.isin([0.0, 1.0]).mean() < 1


def rewards_of_every_task(sim: WorldSimulator, steps: int) -> np.ndarray:
    """(training tasks, steps * G) rewards: every task rolled out at each of ``steps`` steps."""
    batch = pd.DataFrame({"task_id": np.asarray(sim.task_ids)})
    groups = [sim.rollout(batch, s)["reward"].to_numpy().reshape(len(batch), -1) for s in range(steps)]
    return np.concatenate(groups, axis=1)


def test_worlds_chain_tasks_stop_at_their_first_failing_call():
    sim = WorldSimulator(replace(SMALL, drift=0.0, graded_share=0.5), seed=3, chain=True)
    calls = sim._calls[sim._train_rows]
    assert calls.min() == 1 and calls.max() >= 3
    q0 = 1.0 / (1.0 + np.exp(-sim._call_offset))
    np.testing.assert_allclose(q0**sim._calls, 0.5)  # at logit 0 the full pass is 1/2, however many calls
    rewards = rewards_of_every_task(sim, 300)  # 2,400 rollouts per task
    graded = sim._graded[sim._train_rows]
    np.testing.assert_array_equal(np.isin(rewards[~graded], [0.0, 1.0]), True)
    steps = rewards[graded] * calls[graded][:, None]
    np.testing.assert_allclose(steps, np.rint(steps))  # the share of calls passed: multiples of 1 / n
    mean, var = sim._chain_moments(sim._train_rows)
    assert np.abs(rewards.mean(axis=1) - mean).max() < 0.04
    assert np.abs(rewards.var(axis=1) - var).max() < 0.03
    np.testing.assert_allclose(sim.success_probability(), mean)  # the expected reward under the verifier
    with pytest.raises(ValueError, match="do not combine with flaky, broken, inverted, noisy"):
        WorldSimulator(SMALL, chain=True, flaky=0.1)


def test_worlds_chain_group_push_is_the_policy_gradient_of_the_call_logit():
    sim = WorldSimulator(replace(SMALL, drift=0.0, graded_share=0.5), seed=3, chain=True)
    rows, calls, graded = sim._train_rows, sim._calls, sim._graded
    one = rows[(calls[rows] == 1) & ~graded[rows]][:1]
    reward = np.array([[1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(
        sim._group_signal(one, reward, reward.std(axis=1)), reward.std()
    )  # the base rule
    two = rows[(calls[rows] == 2) & graded[rows]][:1]
    q = sim._call_success(two)[0]
    reward = np.array([[0.0, 0.5, 1.0, 1.0]])  # stopped at call 1, at call 2, passed both twice
    std = np.sqrt(np.mean((reward - 0.625) ** 2))  # 0.41458
    score = np.array([-q, (1 - q) - q, 2 * (1 - q), 2 * (1 - q)])  # d log pi / d logit of each rollout
    expected = np.mean((reward[0] - 0.625) / std * score) / 2
    np.testing.assert_allclose(sim._group_signal(two, reward, np.array([std])), [expected])
    assert expected > 0
    # every rollout stopping at the same call: no spread, no update
    task = sim.task_ids[np.flatnonzero(rows == two[0])[0]]
    same = pd.DataFrame({"task_id": [task] * sim.config.group_size, "step": 1, "reward": 0.5})
    before = sim.theta.copy()
    assert sim.train(same, max_groups=1) == 0
    np.testing.assert_array_equal(sim.theta, before)


def test_worlds_chain_policy_learns_from_random_batches():
    sim = WorldSimulator(replace(SMALL, drift=0.0), seed=3, chain=True)
    start = sim.heldout_score()
    rng = np.random.default_rng(0)
    for step in range(30):
        ids = pd.Series(rng.choice(np.asarray(sim.task_ids), 12, replace=False))
        sim.train(sim.rollout(pd.DataFrame({"task_id": ids}), step), max_groups=12)
    assert sim.heldout_score() > start + 0.02


def test_worlds_noisy_verifiers_misread_checks_and_shrink_the_push():
    config = replace(SMALL, drift=0.0, graded_share=0.5)
    sim = WorldSimulator(config, seed=3, noise=0.1)
    rewards = rewards_of_every_task(sim, 300)
    p = sim.success_probability()  # what the policy achieves, the held-out score's measure
    np.testing.assert_allclose(p, WorldSimulator(config, seed=3).success_probability())
    assert np.abs(rewards.mean(axis=1) - (0.1 + 0.8 * p)).max() < 0.04  # each check read flipped 1 time in 10
    graded = sim._graded[sim._train_rows]
    assert np.isin(rewards[~graded], [0.0, 1.0]).all() and not np.isin(rewards[graded], [0.0, 1.0]).all()
    g = config.group_size
    expected = sim.expected_variance() / ((g - 1) / g)
    realised = rewards.var(axis=1)
    assert np.abs(realised - expected).max() < 0.03
    # the push: the noise-free one times P(pass | read pass) - P(pass | read fail); at p = 1/2 that is 0.9 - 0.1
    row = sim._train_rows[:1]
    sim.theta[:] = 0.0
    sim._difficulty = sim._difficulty + sim._logit(sim._train_rows)[0]  # task 0's logit is now 0: p = 1/2
    reward = np.array([[1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(sim._group_signal(row, reward, reward.std(axis=1)), 0.8 * reward.std())
    # a hopeless task's misread passes say little: p = 0.01 gives 0.083 - 0.0011
    sim._difficulty[row] += np.log(99)
    np.testing.assert_allclose(
        sim._reward_information(row), 0.009 / (0.009 + 0.099) - 0.001 / (0.001 + 0.891)
    )
    with pytest.raises(ValueError, match="noise=0.5"):
        WorldSimulator(SMALL, noise=0.5)


def test_compound_regimes_are_a_suite_world_with_two_or_three_stress_attacks_and_one_world_per_name():
    drawn = [compound_regime(draw, i) for draw in (0, 1) for i in range(len(compound_names(draw)))]
    assert len({r.description for r in drawn}) > 40  # draws differ
    plain = Regime("plain", "", BASE)
    for regime in drawn:
        base, *attacks = regime.description.split(" + ")
        assert 2 <= len(attacks) <= 3 and regime.config == REGIMES[base].config
        expected = {f: v for a in attacks for f, v in attack_fields(a).items()}
        assert {f: getattr(regime, f) for f in expected} == expected
        others = set(regime.__dataclass_fields__) - set(expected) - {"name", "description", "tags"}
        assert all(getattr(regime, f) == getattr(REGIMES[base], f) for f in others)
    assert attack_fields("inverted") == {"inverted": 0.2} and attack_fields("no-info") == {"scramble": True}
    assert attack_fields("floor") == {"floor_envs": 0.5} and not attack_fields("default")
    assert plain.inverted == 0.0
    # a name is one world: drawn again, the same regime and the same rewards
    again = regime_named("compound-1-20")
    assert again == compound_regime(1, 20) and again.name == "compound-1-20"
    a, b = again.world(3, quick=True).reset(3), compound_regime(1, 20).world(3, quick=True).reset(3)
    batch = pd.DataFrame({"task_id": np.asarray(a.task_ids[:20])})
    pd.testing.assert_frame_equal(a.rollout(batch, 1), b.rollout(batch, 1))
    assert regime_named("paper") is ALL_REGIMES["paper"]
    # a combination named by its parts
    named = regime_named("sparse+settled+inverted")
    assert named.config == REGIMES["sparse"].config and (named.settled_envs, named.inverted) == (0.9, 0.2)
    for bad in ("compound-1", "compound-x-2", "nothing", "sparse+paper", "sparse+coarse-envs+task-envs"):
        with pytest.raises(KeyError):
            regime_named(bad)


def test_wild_regimes_draw_settings_and_attack_strengths_over_their_ranges_and_one_world_per_name():
    names = [wild_name(draw, i) for draw in (0, 1) for i in range(len(wild_names(draw)))]
    assert len(set(names)) == len(names)  # draws differ
    strengths: dict[str, set] = {}
    for name in names:
        base, *parts = name.split("+")
        settings = [p.split("=") for p in parts if p.split("=")[0] in WILD_SETTINGS]
        attacks = [p.split("=") for p in parts if p.split("=")[0] in WILD_ATTACKS]
        assert base in REGIMES and 1 <= len(settings) <= 2 and 1 <= len(attacks) <= 3
        assert len(settings) + len(attacks) == len(parts)
        for field, value in attacks:
            low, high = WILD_ATTACKS[field]
            assert low * 0.99 <= float(value) <= high * 1.01
            strengths.setdefault(field, set()).add(value)
        regime = regime_named(name)
        for field, value in settings + attacks:
            held = regime.batch_size if field == "batch_size" else getattr(regime, field, None)
            held = getattr(regime.config, field) if field in BASE.__dataclass_fields__ else held
            assert held == type(held)(value)  # the value reaches the world as drawn
    assert max(len(v) for v in strengths.values()) >= 3  # strengths vary, not one per attack
    # a name is one world: its explicit parts, under its own name
    again = regime_named("wild-1-3")
    assert again.name == "wild-1-3" and again.description == regime_named(wild_name(1, 3)).description
    a, b = again.world(2, quick=True).reset(2), regime_named(wild_name(1, 3)).world(2, quick=True).reset(2)
    batch = pd.DataFrame({"task_id": np.asarray(a.task_ids[:20])})
    pd.testing.assert_frame_equal(a.rollout(batch, 1), b.rollout(batch, 1))
    for bad in ("wild-1", "wild-x-2", "wild-1-2-3"):
        with pytest.raises(KeyError):
            regime_named(bad)


def test_a_regime_name_sets_mechanisms_at_any_strength():
    extreme = regime_named("paper+settled+inverted=0.4")
    assert extreme.config == REGIMES["paper"].config and (extreme.settled_envs, extreme.inverted) == (
        0.9,
        0.4,
    )
    assert extreme.description == "paper + settled + inverted=0.4"
    assert (
        regime_named("default+chain=true").chain
        and regime_named("default+outage=0.5+outage_steps=30").outage_steps == 30
    )
    # the strength is the world's: half the tasks flaky against the stress regime's tenth
    half, tenth = (
        regime_named("default+flaky=0.5").world(3, quick=True),
        regime_named("default+flaky").world(3, quick=True),
    )
    assert half.flaky_tasks.mean() > 0.4 > 0.2 > tenth.flaky_tasks.mean()
    # and any world setting: the batch size and the simulator's own fields, the quick world's too
    small = regime_named("paper+group_size=4+lr=3+batch_size=16")
    assert (small.config.group_size, small.config.lr, small.batch_size) == (4, 3.0, 16)
    assert small.config.difficulty_sd == REGIMES["paper"].config.difficulty_sd
    assert small.world(3, quick=True).config.group_size == 4
    few = regime_named("large+n_envs=20")
    assert few.config.n_envs == few.quick_config.n_envs == 20 != REGIMES["large"].quick_config.n_envs
    bad = {
        "default+nothing=1": "neither a regime mechanism nor a world setting",
        "default+config=1": "neither a regime mechanism nor a world setting",
        "default+flaky=x": "flaky must be a number",
        "default+chain=maybe": "chain must be true or false",
        "default+group_size=1.5": "group_size must be an integer",
        "default+group_size=1": "group_size=1 must be >= 2",
        "default+n_envs=0": "n_envs=0 must be >= 1",
        "default+batch_size=0": "batch_size=0 must be >= 1",
        "default+flaky=2": "flaky=2.0 must be in [0, 1)",
        "default+flaky=0.1+flaky=0.2": "['flaky'] set twice",
        "default+inverted+inverted=0.3": "set by an attack and again by name",
    }
    for name, reason in bad.items():
        with pytest.raises(KeyError, match=re.escape(reason)):
            regime_named(name)
