"""Graded rewards for the skill policy: the share of a verifier's own checks that a rollout passed.

The environments' verdicts stay binary (they reproduce the original benchmarks); this is an opt-in of
the skill engine (``reward=graded``), used to put CPU campaigns in the EnvSched paper's regime, where
an LLM's rewards are graded and random's selected groups have a small, non-zero variance (Table 2:
mean 0.032, median 0.0147, median reward 0.595). A passing rollout always scores 1, a failing one the
partial credit below (in [0, 1), by construction strictly below 1):

* BFCL-v3 multi-turn (``bfcl_v3_multi_turn``): the checker checks the turns whose gold list is
  non-empty, in order, and the first failing turn decides (later turns are not checked, their state
  follows from the failed one). Credit = checked turns passed before the first failure / checked turns.
  The failing turn is read off the checker's reason (``turn N: ...``; ``force-terminated`` = 0).
* tau-bench (``tau_bench_retail`` / ``tau_bench_airline``): the reward is "database equals gold" and
  "every required output said". Credit = (database credit + outputs said) / (1 + outputs), where the
  database credit is the share of records touched by the rollout or by the gold actions whose final
  value equals the gold one (1 when the databases are equal). The gold database is the gold actions
  replayed through the environment's own tools after the rollout.
* ACEBench (``acebench_agent``): the original's process score (``metrics["process_score"]``, the
  share of milestone text found in order), or in the policy mode the milestone score.
* any other source: the verdict's reward (binary).
"""

from __future__ import annotations

import re

from environments.base import Environment, Task, Trajectory, Verdict

REWARDS = ("binary", "graded")
_BFCL_TURN = re.compile(r"^turn (\d+):")
_ACEBENCH_SCORES = ("process_score", "milestone_score")
_TAU_TERMINAL = "transfer_to_human_agents"  # ends an episode in tau-bench; not a database write


def graded_reward(task: Task, env: Environment, trajectory: Trajectory, verdict: Verdict) -> float:
    """Partial credit of a rollout whose ``verdict`` the environment ``env`` just gave (module docstring).
    ``env`` must be the rollout's own environment, after ``verify`` (tau-bench reads its database)."""
    if verdict.passed:
        return 1.0
    if task.source == "bfcl_v3_multi_turn":
        credit = bfcl_turn_credit(task, verdict.reason)
    elif task.source.startswith("tau_bench"):
        credit = tau_bench_credit(task, env, trajectory)
    elif task.source == "acebench_agent":
        credit = next((float(verdict.metrics[k]) for k in _ACEBENCH_SCORES if k in verdict.metrics), 0.0)
    else:
        return float(verdict.reward)
    return min(max(credit, 0.0), 0.999)  # a failed rollout never ties a pass


def bfcl_turn_credit(task: Task, reason: str) -> float:
    checked = [t for t, calls in enumerate(task.gold) if calls]
    match = _BFCL_TURN.match(reason)
    if not checked or match is None:
        return 0.0
    failed = int(match.group(1))
    return sum(t < failed for t in checked) / len(checked)


def tau_bench_credit(task: Task, env: Environment, trajectory: Trajectory) -> float:
    from environments.tau_bench.verifier import missing_outputs

    final = env.db
    env.reset(task)  # a fresh database for the gold actions, through the same tools
    for call in (c for turn in task.gold for c in turn if c.name != _TAU_TERMINAL):
        env.call(call.name, call.arguments)
    gold = env.db
    records = final.touched() | gold.touched()
    equal = sum(final.tables[t].get(k) == gold.tables[t].get(k) for t, k in records)
    database = equal / len(records) if records else 1.0
    outputs = list(task.metadata.get("outputs") or [])
    replies = [reply for turn in trajectory.turns for reply in turn.replies]
    said = len(outputs) - len(missing_outputs(outputs, replies))
    return (database + said) / (1 + len(outputs))
