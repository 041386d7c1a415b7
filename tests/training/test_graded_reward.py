"""Graded rewards (the skill engine's ``reward=graded``): the share of a real verifier's checks passed."""

import numpy as np
import pytest

from environments.base import CallRecord, Trajectory, TurnRecord
from training.policies.graded_reward import graded_reward
from training.policies.skill import SkillActor, SkillConfig, SkillWorld
from training.tasks import TaskResolver

BFCL, RETAIL = "bfcl_v3_multi_turn", "tau_bench_retail"


@pytest.fixture(scope="module")
def resolver():
    return TaskResolver([BFCL, RETAIL])


def _play(env, task, turns, replies=()):
    """Run ``turns`` (lists of gold calls) through the real environment; ``replies`` said in the last turn."""
    env.reset(task)
    trajectory = Trajectory(task.task_id)
    for calls in turns:
        trajectory.turns.append(TurnRecord([CallRecord(c, env.call(c.name, c.arguments)) for c in calls]))
    if trajectory.turns:
        trajectory.turns[-1].replies.extend(replies)
    return trajectory, env.verify(trajectory)


def test_graded_reward_bfcl_is_the_share_of_checked_turns_passed_before_the_first_failure(resolver):
    task = next(
        resolver.task(t)
        for t in resolver.task_ids()
        if t.startswith("bfcl") and sum(bool(g) for g in resolver.task(t).gold) >= 3
    )
    checked = [t for t, calls in enumerate(task.gold) if calls]
    # Gold calls in every turn but the second checked one: the checker fails there.
    turns = [[] if t == checked[1] else list(calls) for t, calls in enumerate(task.gold)]
    env = resolver.environment(task.task_id)
    trajectory, verdict = _play(env, task, turns)
    assert verdict.reward == 0.0
    assert graded_reward(task, env, trajectory, verdict) == pytest.approx(1 / len(checked))
    trajectory, verdict = _play(env, task, [list(c) for c in task.gold])
    assert verdict.reward == 1.0 and graded_reward(task, env, trajectory, verdict) == 1.0


def _writes(task):
    return any(
        c.name.startswith(("cancel", "modify", "return", "exchange")) for calls in task.gold for c in calls
    )


def test_graded_reward_tau_bench_counts_the_database_and_each_output_said(resolver):
    task = next(
        resolver.task(t)
        for t in sorted(resolver.task_ids())
        if t.startswith("tau")
        and len(resolver.task(t).metadata["outputs"]) >= 2
        and _writes(resolver.task(t))
    )
    outputs = task.metadata["outputs"]
    env = resolver.environment(task.task_id)
    gold = [list(calls) for calls in task.gold]
    # Database right, only the first output said: (1 + 1) / (1 + n_outputs).
    trajectory, verdict = _play(env, task, gold, replies=[f"here it is: {outputs[0]}"])
    assert verdict.reward == 0.0
    assert graded_reward(task, env, trajectory, verdict) == pytest.approx(2 / (1 + len(outputs)))
    # Nothing done, only the first output said: the database differs in every record the gold
    # actions touch (the task is chosen so that they change it), so (0 + 1) / (1 + n_outputs).
    trajectory, verdict = _play(env, task, [[] for _ in gold], replies=[outputs[0]])
    assert verdict.reason.startswith("database differs")
    assert graded_reward(task, env, trajectory, verdict) == pytest.approx(1 / (1 + len(outputs)))


def test_graded_reward_skill_actor_scores_graded_and_keeps_the_binary_verdict(resolver):
    world = SkillWorld(resolver)
    actor = SkillActor(world, SkillConfig().mistake_weights, reward="graded")
    task_ids = [t for t in world.resolver.task_ids() if t.startswith("bfcl")][:15]
    theta = world.initial_theta(SkillConfig(initial_success=0.3), 0, task_ids)
    episodes = [
        actor.act(
            resolver.task(t), resolver.environment(t), theta, np.random.default_rng(j), keep_trajectory=True
        )
        for t in task_ids
        for j in range(3)
    ]
    partial = [e for e in episodes if 0.0 < e.reward < 1.0]
    assert partial and all(e.verdict_reward == 0.0 for e in partial)
    assert all((e.reward == 1.0) == (e.verdict_reward == 1.0) for e in episodes)
    with pytest.raises(ValueError, match="reward 'partial' unknown"):
        SkillConfig(reward="partial")
