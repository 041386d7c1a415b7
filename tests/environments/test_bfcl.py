"""BFCL-v3 multi-turn source: catalogue, isolation, tool errors and agreement with bfcl-eval's checker."""

import random
import uuid

import pytest

from environments.base import CallRecord, ToolCall, Trajectory, TurnRecord, as_agent_sends, replay_gold
from environments.bfcl import BfclMultiTurnSource
from environments.bfcl.backend import method_table, new_instances, public_state
from environments.verify_gold import verify_gold


@pytest.fixture(scope="module")
def source():
    return BfclMultiTurnSource()


@pytest.fixture(scope="module")
def catalog(source):
    return source.load()


def test_bfcl_catalog_has_800_tasks_200_per_category(catalog):
    assert len(catalog.tasks) == 800
    by_split = {}
    for task in catalog.tasks:
        by_split[task.split] = by_split.get(task.split, 0) + 1
    assert by_split == {"base": 200, "miss_func": 200, "miss_param": 200, "long_context": 200}
    assert len({t.task_id for t in catalog.tasks}) == 800


def test_bfcl_environment_is_class_set_with_long_context_variant(catalog):
    env_ids = {e.env_id for e in catalog.environments}
    assert "bfcl_v3_multi_turn/TicketAPI+TravelAPI" in env_ids
    assert "bfcl_v3_multi_turn/TicketAPI+TravelAPI/long_context" in env_ids
    for task in catalog.tasks:
        classes = "+".join(sorted(task.metadata["involved_classes"]))
        assert task.env_id.split("/")[1] == classes
        assert task.env_id.endswith("/long_context") == (task.split == "long_context")


def test_bfcl_tools_respect_excluded_and_missed_functions(source, catalog):
    task = next(t for t in catalog.tasks if t.metadata["missed_function"] and t.metadata["excluded_function"])
    env = source.make_environment(task)
    (reveal_turn, names), *_ = task.metadata["missed_function"].items()
    shown_before = {s.name for s in env.reset(task)}
    shown_after = {s.name for s in env.tools(int(reveal_turn))}
    assert not set(names) & shown_before
    assert set(names) <= shown_after
    assert not set(task.metadata["excluded_function"]) & (shown_before | shown_after)
    assert all(s.parameters["type"] == "object" for s in env.tools(int(reveal_turn)))


def test_bfcl_write_effect_table_matches_observed_state_changes(catalog):
    """Every tool whose gold call changed public state is tagged 'write' (and is shown as such)."""
    effects = {s.name: s.effect for e in catalog.environments for s in e.tools}
    changed_by = set()
    for task in catalog.tasks[::4]:
        meta = task.metadata
        instances = new_instances(meta["involved_classes"], meta["initial_config"], meta["long_context"])
        methods = method_table(instances)
        for turn in task.gold:
            for call in turn:
                before = {c: repr(public_state(i)) for c, i in instances.items()}
                methods[call.name](**call.arguments)
                if any(repr(public_state(i)) != before[c] for c, i in instances.items()):
                    changed_by.add(call.name)
    assert changed_by, "gold replays should change some state"
    assert {name for name in changed_by if effects[name] != "write"} == set()


def test_bfcl_bad_calls_return_error_results(source, catalog):
    task = catalog.tasks[0]
    env = source.make_environment(task)
    env.reset(task)
    for name, args in [
        ("no_such_tool", {}),
        ("cd", {"bogus": 1}),
        ("cd", "not-a-dict"),
        ("cd", {"folder": 3}),
    ]:
        result = env.call(name, args)
        assert result.is_error, (name, args, result)
        assert result.content


def test_bfcl_state_does_not_leak_between_rollouts(source, catalog):
    task = next(t for t in catalog.tasks if any(c.name == "mkdir" for turn in t.gold for c in turn))
    first = replay_gold(source.make_environment(task), task)
    second = replay_gold(source.make_environment(task), task)
    env = source.make_environment(task)
    replay_gold(env, task)
    third = replay_gold(env, task)  # reset() on a used instance starts from scratch too
    results = [[[r.result.content for r in turn.calls] for turn in t.turns] for t in (first, second, third)]
    assert results[0] == results[1] == results[2]
    assert not any(r.result.is_error for turn in first.turns for r in turn.calls if r.call.name == "mkdir")


def test_bfcl_verify_gold_passes_every_task(source):
    report = verify_gold(source)
    assert report.total == 800
    assert report.passed == 800, report.summary()


def _bfcl_call_string(call: ToolCall) -> str:
    return f"{call.name}({', '.join(f'{k}={v!r}' for k, v in call.arguments.items())})"


def _perturb(task, rng: random.Random, kind: str, write_tools: set[str]):
    """The gold calls per turn with one change; None when the task offers nothing to change."""
    turns = [list(turn) for turn in task.gold]
    positions = [(t, i) for t, turn in enumerate(turns) for i in range(len(turn))]
    if not positions:
        return None
    t, i = rng.choice(positions)
    call = turns[t][i]
    if kind == "drop":
        del turns[t][i]
    elif kind == "wrong_argument":
        if not call.arguments:
            return None
        key = rng.choice(sorted(call.arguments))
        value = call.arguments[key]
        if isinstance(value, bool):
            new = not value
        elif isinstance(value, int | float):
            new = value + rng.choice([1, 7, 100])
        elif isinstance(value, str):
            new = value + "_x" if rng.random() < 0.5 else value[::-1]
        elif isinstance(value, list):
            new = value[:-1] if value else ["x"]
        else:
            return None
        turns[t][i] = ToolCall(call.name, {**call.arguments, key: new})
    elif kind == "extra_write":
        writes = [c for turn in task.gold for c in turn if c.name in write_tools]
        if not writes:
            return None
        turns[t].insert(i + 1, rng.choice(writes))  # a write from elsewhere in the task, repeated here
    elif kind == "omit_list_argument":  # leave out a list argument: the callee's default list is used
        lists = [
            (t2, i2, k)
            for t2, i2 in positions
            for k, v in turns[t2][i2].arguments.items()
            if isinstance(v, list)
        ]
        if not lists:
            return None
        t2, i2, key = rng.choice(lists)
        turns[t2][i2] = ToolCall(
            turns[t2][i2].name, {k: v for k, v in turns[t2][i2].arguments.items() if k != key}
        )
    elif kind == "swap_adjacent":
        pairs = [(t2, i2) for t2, i2 in positions if i2 + 1 < len(turns[t2])]
        if not pairs:
            return None
        t2, i2 = rng.choice(pairs)
        turns[t2][i2], turns[t2][i2 + 1] = turns[t2][i2 + 1], turns[t2][i2]
    elif kind == "gold":
        pass
    return turns


def test_bfcl_verifier_agrees_with_bfcl_eval_checker_on_perturbed_trajectories(source, catalog):
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    write_tools = {s.name for e in catalog.environments for s in e.tools if s.effect == "write"}
    rng = random.Random(0)
    # A random sample plus every task whose gold mutates an earlier call's argument (post, then mention).
    mention_tasks = [
        t for t in catalog.tasks if {"post_tweet", "mention"} <= {c.name for u in t.gold for c in u}
    ]
    tasks = rng.sample(catalog.tasks, 120) + mention_tasks
    kinds = ("gold", "drop", "wrong_argument", "extra_write", "omit_list_argument", "swap_adjacent")
    compared, outcomes, per_kind = 0, {True: 0, False: 0}, {k: [0, 0] for k in kinds}
    for task in tasks:
        for kind in kinds:
            turns = _perturb(task, rng, kind, write_tools)
            if turns is None:
                continue
            env = source.make_environment(task)
            env.reset(task)
            # Through `call` as the agent loop drives it: freshly JSON-decoded arguments, and the
            # trajectory records the very objects that were passed.
            turns = [[as_agent_sends(c) for c in turn] for turn in turns]
            trajectory = Trajectory(
                task.task_id,
                [TurnRecord([CallRecord(c, env.call(c.name, c.arguments)) for c in turn]) for turn in turns],
            )
            ours = env.verify(trajectory)
            entry = {
                "id": task.metadata["bfcl_id"],
                "initial_config": task.metadata["initial_config"],
                "involved_classes": task.metadata["involved_classes"],
            }
            decoded = [[[_bfcl_call_string(c) for c in turn]] if turn else [] for turn in turns]
            gold = [[_bfcl_call_string(c) for c in turn] for turn in task.gold]
            theirs = multi_turn_checker(decoded, gold, entry, task.split, f"envsched_{uuid.uuid4().hex}")
            per_kind[kind][0] += ours.passed == theirs["valid"]
            per_kind[kind][1] += 1
            assert ours.passed == theirs["valid"], (task.task_id, kind, ours.reason, theirs)
            compared += 1
            outcomes[ours.passed] += 1
    print("\nagreement with multi_turn_checker per perturbation kind (agree/compared):")
    for kind, (agree, n) in per_kind.items():
        print(f"  {kind:20s} {agree}/{n}")
    print(f"  {'all':20s} {compared}/{compared} (pass {outcomes[True]}, fail {outcomes[False]})")
    assert compared >= 400
    assert outcomes[True] > 0 and outcomes[False] > 0  # both verdicts occur, so agreement means something
