"""Isolation of every source: a verdict depends on the trajectory alone.

Not on object aliasing between the caller and the environment (tool code keeps what it is given and
may mutate it later), not on earlier rollouts of the same ``Task`` object, and not on state a rollout
left in a shared mutable default of third-party code. Each test drives environments through their
public API with freshly JSON-decoded arguments, as the agent loop does.
"""

from __future__ import annotations

import copy
import inspect
import json
import random

import pytest

from environments.base import (
    CallRecord,
    EnvironmentSource,
    Task,
    ToolCall,
    Trajectory,
    TurnRecord,
    as_agent_sends,
    replay_gold,
)
from environments.registry import get_source

SOURCES = {
    "bfcl_v3_multi_turn": {},
    "tau_bench_retail": {},
    "tau_bench_airline": {},
    "acebench_agent": {},
    "synthetic": {"envs": 4, "tasks_per_env": 6},
}
# BFCL tasks that post a tweet and then `mention` users in it: `mention` extends the stored list.
BFCL_MENTION_TASKS = [
    f"bfcl_v3_multi_turn/multi_turn_{category}_{n}"
    for category in ("base", "long_context", "miss_func", "miss_param")
    for n in (90, 147)
]


@pytest.fixture(scope="module", params=sorted(SOURCES))
def loaded(request) -> tuple[EnvironmentSource, list[Task]]:
    source = get_source(request.param, **SOURCES[request.param])
    return source, source.load().tasks


def _rollout(source: EnvironmentSource, task: Task, turns, mutate_after_call: bool = False):
    """Run ``turns`` through a fresh environment as an agent would; returns the verdict.

    With ``mutate_after_call`` the caller scribbles over every argument object after each call, which
    must not reach the environment's state (nor therefore the verdict)."""
    env = source.make_environment(task)
    env.reset(task)
    trajectory = Trajectory(task.task_id)
    for turn_calls in turns:
        record = TurnRecord()
        for gold_call in turn_calls:
            call = as_agent_sends(gold_call)
            result = env.call(call.name, call.arguments)
            if mutate_after_call:  # the trajectory keeps its own copy; the caller's objects change
                record.calls.append(CallRecord(as_agent_sends(gold_call), result))
                _scribble(call.arguments)
            else:  # as the agent loop does: the trajectory records the very objects it passed
                record.calls.append(CallRecord(call, result))
        if task.gold_replies and len(trajectory.turns) < len(task.gold_replies):
            record.replies.extend(task.gold_replies[len(trajectory.turns)])
        trajectory.turns.append(record)
    return env.verify(trajectory)


def _scribble(value) -> None:
    """Mutate every list and dict inside ``value`` in place."""
    if isinstance(value, dict):
        for inner in list(value.values()):
            _scribble(inner)
        value["__scribbled__"] = True
    elif isinstance(value, list):
        for inner in list(value):
            _scribble(inner)
        value.append("@scribbled")


def _sample(tasks: list[Task], n: int, seed: int = 0) -> list[Task]:
    with_calls = [t for t in tasks if t.gold_calls]
    return random.Random(seed).sample(with_calls, min(n, len(with_calls)))


def _gold_passes(source, task) -> bool:
    env = source.make_environment(task)
    return env.verify(replay_gold(env, task)).passed


def _without_a_write(task: Task, source: EnvironmentSource):
    """The gold with its last write call dropped (None when the task has no write)."""
    writes = {s.name for s in source.make_environment(task).reset(task) if s.effect == "write"}
    positions = [(t, i) for t, turn in enumerate(task.gold) for i, c in enumerate(turn) if c.name in writes]
    if not positions:
        return None
    t, i = positions[-1]
    return [[c for j, c in enumerate(turn) if (k, j) != (t, i)] for k, turn in enumerate(task.gold)]


def test_isolation_caller_mutations_after_a_call_never_reach_the_environment(loaded):
    source, tasks = loaded
    checked = 0
    for task in _sample(tasks, 25):
        if not _gold_passes(source, task):
            continue  # a known unreachable gold; nothing to compare
        assert _rollout(source, task, task.gold, mutate_after_call=True).passed, task.task_id
        checked += 1
    assert checked >= 5


def test_isolation_same_task_object_gives_identical_verdicts_in_any_order(loaded):
    source, tasks = loaded
    checked = 0
    for task in _sample(tasks, 12, seed=1):
        wrong = _without_a_write(task, source)
        if wrong is None:
            continue
        gold_before = copy.deepcopy(task.gold)
        sequence = ["right", "wrong", "right", "right", "wrong", "wrong", "right"]
        verdicts = {"right": set(), "wrong": set()}
        for kind in sequence:
            verdict = _rollout(source, task, task.gold if kind == "right" else wrong)
            verdicts[kind].add((verdict.reward, verdict.reason))
        assert len(verdicts["right"]) == 1 and len(verdicts["wrong"]) == 1, (task.task_id, verdicts)
        assert task.gold == gold_before, f"{task.task_id}: a rollout changed task.gold"
        checked += 1
    assert checked >= 3


def test_isolation_arguments_as_json_text_are_decoded(loaded):
    source, tasks = loaded
    task = next(t for t in _sample(tasks, 25, seed=2) if _gold_passes(source, t))
    env = source.make_environment(task)
    env.reset(task)
    trajectory = Trajectory(task.task_id)
    for turn_calls in task.gold:
        record = TurnRecord()
        for call in turn_calls:
            record.calls.append(CallRecord(call, env.call(call.name, json.dumps(call.arguments))))
        trajectory.turns.append(record)
    if task.gold_replies:
        for record, replies in zip(trajectory.turns, task.gold_replies, strict=False):
            record.replies.extend(replies)
    assert env.verify(trajectory).passed
    name = task.gold[0][0].name if task.gold[0] else next(c.name for turn in task.gold for c in turn)
    result = source.make_environment(task)
    result.reset(task)
    refused = result.call(name, "[1, 2]")  # JSON, but not an object
    assert refused.is_error


def test_isolation_tool_functions_of_reimplemented_sources_have_no_mutable_defaults():
    from environments.acebench import phone, travel
    from environments.tau_bench import airline, retail, toolkit

    offenders = []
    for module in (phone, travel, airline, retail, toolkit):
        for owner_name, owner in [(module.__name__, module), *inspect.getmembers(module, inspect.isclass)]:
            for name, function in inspect.getmembers(owner, inspect.isfunction):
                for p in inspect.signature(function).parameters.values():
                    if isinstance(p.default, list | dict | set):
                        offenders.append(f"{owner_name}.{name}({p.name}=...)")
    assert offenders == []


# --- BFCL: the aliasing cases the referee found -------------------------------------------------------


@pytest.fixture(scope="module")
def bfcl():
    source = get_source("bfcl_v3_multi_turn")
    return source, {t.task_id: t for t in source.load().tasks}


@pytest.mark.parametrize("task_id", BFCL_MENTION_TASKS)
def test_isolation_bfcl_post_then_mention_passes_a_correct_rollout(bfcl, task_id):
    source, tasks = bfcl
    task = tasks[task_id]
    assert any(c.name == "mention" for turn in task.gold for c in turn)
    for _ in range(3):  # repeatedly, on the same Task object
        assert _rollout(source, task, task.gold).passed


def test_isolation_bfcl_polluting_a_mutable_default_changes_no_later_rollout(bfcl):
    from environments.bfcl.backend import api_class

    source, tasks = bfcl
    twitter = api_class("TwitterAPI")
    defaults_before = copy.deepcopy(twitter.post_tweet.__defaults__)
    victim = tasks["bfcl_v3_multi_turn/multi_turn_base_5"]
    assert any(c.name == "post_tweet" for turn in victim.gold for c in turn)
    assert _rollout(source, victim, victim.gold).passed
    # A rollout that posts without `mentions` and then mentions someone in that tweet.
    polluter = tasks["bfcl_v3_multi_turn/multi_turn_base_90"]
    env = source.make_environment(polluter)
    env.reset(polluter)
    for login in [c for turn in polluter.gold for c in turn if c.name == "authenticate_twitter"]:
        env.call(login.name, as_agent_sends(login).arguments)
    posted = json.loads(env.call("post_tweet", {"content": "hello"}).content)
    assert "id" in posted, posted
    env.call("mention", {"tweet_id": posted["id"], "mentioned_usernames": ["@Polluter"]})
    assert twitter.post_tweet.__defaults__ == defaults_before
    assert _rollout(source, victim, victim.gold).passed
    explicit = [
        [ToolCall(c.name, {**c.arguments, "mentions": []}) if c.name == "post_tweet" else c for c in turn]
        for turn in victim.gold
    ]
    if all("mentions" not in c.arguments for turn in victim.gold for c in turn if c.name == "post_tweet"):
        assert _rollout(source, victim, explicit).passed


def test_isolation_bfcl_long_context_rollouts_leave_module_tables_untouched(bfcl):
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import long_context

    source, tasks = bfcl
    tables = {
        name: copy.deepcopy(getattr(long_context, name)) for name in dir(long_context) if name.isupper()
    }
    long_tasks = [t for t in tasks.values() if t.metadata["long_context"] and t.gold_calls]
    for task in random.Random(3).sample(long_tasks, 30):
        _rollout(source, task, task.gold, mutate_after_call=True)
    changed = [name for name, value in tables.items() if getattr(long_context, name) != value]
    # bfcl-eval's vehicle API rewrites one random temperature in place on every weather call; that
    # value is recomputed before each use and never part of a rollout's state.
    assert set(changed) <= {"LONG_WEATHER_EXTENSION"}, changed


def test_isolation_bfcl_verdicts_do_not_depend_on_earlier_rollouts_of_the_task(bfcl):
    """The referee's sequence on one Task object: correct, one that skips `mention`, three correct."""
    source, tasks = bfcl
    task = tasks["bfcl_v3_multi_turn/multi_turn_base_90"]
    gold_before = copy.deepcopy(task.gold)
    skips_mention = [[c for c in turn if c.name != "mention"] for turn in task.gold]
    verdicts = [
        _rollout(source, task, turns).passed
        for turns in (task.gold, skips_mention, task.gold, task.gold, task.gold)
    ]
    assert verdicts == [True, False, True, True, True]
    assert task.gold == gold_before
