"""Synthetic source: determinism, shared tool shapes, verifier, isolation, tool errors, catalogue load."""

import itertools
import random
import re

import dagster as dg
import pytest
from click.testing import CliRunner

from assets.catalog import catalog_checks, environment_catalog
from environments.base import CallRecord, ToolCall, Trajectory, TurnRecord, replay_gold
from environments.frames import catalog_frames
from environments.registry import get_source
from environments.synthetic import SyntheticSource
from environments.synthetic.schema import copy_state
from environments.verify_gold import verify_gold
from pipelines.cli import main
from pipelines.resources import WarehouseResource
from warehouse.store import Warehouse

CORE_ROLES = {
    "ticketing": {"get_item", "search_item", "create", "update", "assign", "close", "get_person", "search_person"},
    "inventory": {"get_item", "search_item", "create", "reprice", "move", "restock", "sell", "remove",
                  "get_location", "search_location"},
    "booking": {"get_resource", "search_resource", "get_booking", "search_booking", "create", "reschedule",
                "cancel"},
    "ledger": {"get_account", "search_account", "create", "deposit", "withdraw", "transfer", "freeze", "unfreeze",
               "search_entry"},
}  # fmt: skip


@pytest.fixture(scope="module")
def source():
    return SyntheticSource(envs=16, tasks_per_env=25, seed=11)


@pytest.fixture(scope="module")
def catalog(source):
    return source.load()


def _trajectory(env, task, turns) -> Trajectory:
    env.reset(task)
    return Trajectory(
        task.task_id,
        [TurnRecord([CallRecord(c, env.call(c.name, c.arguments)) for c in turn]) for turn in turns],
    )


def test_synthetic_same_seed_gives_identical_catalogue_and_content_hashes():
    first = catalog_frames(SyntheticSource(envs=8, tasks_per_env=10, seed=5).load())
    second = catalog_frames(SyntheticSource(envs=8, tasks_per_env=10, seed=5).load())
    other = catalog_frames(SyntheticSource(envs=8, tasks_per_env=10, seed=6).load())
    for table in ("environments", "tools", "tasks"):
        assert getattr(first, table).equals(getattr(second, table)), table
    assert len(first.tasks) == 80 and first.tasks.task_id.is_unique
    assert set(first.tasks.content_hash).isdisjoint(other.tasks.content_hash)
    assert list(first.tasks.text) != list(other.tasks.text)


def test_synthetic_task_regenerates_alone_equal_to_the_catalogue_one(source, catalog):
    """Tasks are functions of (seed, environment, index): generating one needs none of the others."""
    fresh = SyntheticSource(envs=16, tasks_per_env=25, seed=11)
    for task in catalog.tasks[::37]:
        meta = task.metadata
        assert fresh.task(meta["env_index"], meta["task_index"]) == task


def _param_types(spec) -> tuple[str, ...]:
    return tuple(sorted(str(p.get("type")) for p in spec.parameters["properties"].values()))


def test_synthetic_families_share_tool_shapes_with_different_names(catalog):
    by_family: dict[str, list] = {}
    for env in catalog.environments:
        by_family.setdefault(env.metadata["family"], []).append(env)
    assert set(by_family) == set(CORE_ROLES)
    for family, envs in by_family.items():
        shapes, names = set(), set()
        for env in envs:
            roles = env.metadata["tool_roles"]
            assert CORE_ROLES[family] <= set(roles.values()), (env.env_id, roles)
            specs = {spec.name: spec for spec in env.tools}
            # A shape: role, effect and the JSON types of its parameters (names vary per environment).
            shape = frozenset(
                (role, specs[name].effect, _param_types(specs[name]))
                for name, role in roles.items()
                if role in CORE_ROLES[family]
            )
            shapes.add(shape)
            names.add(frozenset(roles))
        assert len(shapes) == 1, family  # same shapes in every environment of the family ...
        assert len(names) == len(envs), family  # ... under different tool names


def test_synthetic_gold_sequences_vary_in_length_and_turns(catalog):
    lengths = {task.gold_calls for task in catalog.tasks}
    assert min(lengths) == 1 and max(lengths) >= 6 and max(lengths) <= 8
    assert any(len(task.user_turns) > 1 for task in catalog.tasks)
    assert all(task.metadata["goal"] for task in catalog.tasks)  # every task changes state
    assert {task.split for task in catalog.tasks} == {"train", "test"}


def test_synthetic_task_texts_differ_within_an_environment(catalog):
    env_id = catalog.tasks[0].env_id
    texts = [task.text for task in catalog.tasks if task.env_id == env_id]
    assert len(set(texts)) == len(texts)
    words = [set(re.findall(r"[a-z0-9']+", t.lower())) for t in texts]
    overlaps = [len(a & b) / len(a | b) for a, b in itertools.combinations(words, 2)]
    assert sum(overlaps) / len(overlaps) < 0.35


def test_synthetic_verify_gold_passes_every_task(source):
    report = verify_gold(source)
    assert (report.passed, report.total) == (400, 400), report.summary()


@pytest.mark.parametrize("kind", ["drop_write", "other_record", "extra_write", "nothing"])
def test_synthetic_wrong_action_fails_verifier_with_reason(source, catalog, kind):
    rng = random.Random(kind)
    checked = 0
    for task in rng.sample(catalog.tasks, 100):
        env = source.make_environment(task)
        env.reset(task)
        writes = {s.name for s in env.tools(0) if s.effect == "write"}
        turns = [list(turn) for turn in task.gold]
        last_turn = max(i for i, turn in enumerate(turns) if any(c.name in writes for c in turn))
        write_at = max(i for i, c in enumerate(turns[last_turn]) if c.name in writes)
        call = turns[last_turn][write_at]
        if kind == "drop_write":
            del turns[last_turn][write_at]
        elif kind == "other_record":
            ids = [k for k in call.arguments if k.endswith("_id")]
            if not ids:
                continue
            key = ids[0]
            table = next((t for t, rows in env.state.items() if call.arguments[key] in rows), None)
            if table is None:  # a record the task itself creates
                continue
            others = sorted(set(env.state[table]) - {call.arguments[key]})
            turns[last_turn][write_at] = ToolCall(call.name, {**call.arguments, key: rng.choice(others)})
        elif kind == "extra_write":
            # The same write once more; only kinds whose repeat changes state (an update to the same
            # value is a no-op, and an error result changes nothing).
            if source.world(task.metadata["env_index"]).tools_by_name[call.name].kind not in (
                "create",
                "adjust",
                "transfer",
            ):
                continue
            turns[last_turn].append(call)
            if _trajectory(env, task, turns).turns[last_turn].calls[-1].result.is_error:
                continue
        else:
            turns = []
        verdict = env.verify(_trajectory(env, task, turns))
        assert verdict.reward == 0.0, (task.task_id, kind)
        assert re.search(r"differs from the goal: \w+/[A-Z]+-\d{4}", verdict.reason), verdict.reason
        checked += 1
    assert checked >= 10


def test_synthetic_verifier_reason_names_table_record_and_field(source, catalog):
    task = next(t for t in catalog.tasks if t.gold_calls == 1 and t.metadata["steps"] == ["update"])
    env = source.make_environment(task)
    (call,) = task.gold[0]
    env.reset(task)
    rid = call.arguments[next(k for k in call.arguments if k.endswith("_id"))]
    table = next(t for t, rows in env.state.items() if rid in rows)
    field, value = next((k, v) for k, v in call.arguments.items() if not k.endswith("_id"))
    verdict = env.verify(_trajectory(env, task, [[]]))
    assert not verdict.passed
    assert f"{table}/{rid}.{field}: expected {value!r}" in verdict.reason


def test_synthetic_rollouts_of_one_task_do_not_share_state(source, catalog):
    task = next(t for t in catalog.tasks if t.gold_calls >= 3)
    first, second = source.make_environment(task), source.make_environment(task)
    second.reset(task)
    untouched = copy_state(second.state)
    trajectory = replay_gold(first, task)
    assert first.verify(trajectory).passed
    assert second.state == untouched  # the other rollout saw none of it
    assert source.world(task.metadata["env_index"]).initial == untouched  # nor did the shared initial state
    assert first.state != untouched
    first.reset(task)
    assert first.state == untouched  # reset starts from scratch
    again = replay_gold(first, task)
    assert [[r.result for r in turn.calls] for turn in again.turns] == [
        [r.result for r in turn.calls] for turn in trajectory.turns
    ]


def test_synthetic_tool_errors_come_back_as_results(source):
    checked = set()
    for index in range(4):
        world = source.world(index)
        task = source.task(index, 0)
        env = source.make_environment(task)
        env.reset(task)
        family = world.spec.family
        tools = {t.role: t for t in world.spec.tools}
        tables = world.tables_by_role
        item = next(iter(tables.values()))
        bad_calls = [
            ("no_such_tool", {}, "unknown tool"),
            (tools["create"].name, "not-a-dict", "must be a JSON object"),
            (tools["create"].name, {"bogus": 1}, "unexpected argument"),
            (tools["create"].name, {}, "missing required"),
            (tools[f"get_{item.role}"].name, {tools[f"get_{item.role}"].id_param: "NOPE-9999"}, "unknown"),
            (tools[f"get_{item.role}"].name, {tools[f"get_{item.role}"].id_param: 7}, "wrong type"),
        ]
        if family == "ticketing":
            t = tables["item"]
            closed = tools["close"]
            rid = next(
                r for r, rec in env.state[t.name].items() if rec[t.field("status").name] in closed.guard[1]
            )
            assert not env.call(closed.name, {closed.id_param: rid}).is_error
            bad_calls += [
                (closed.name, {closed.id_param: rid}, "constraint violated"),
                (tools["update"].name, {tools["update"].id_param: rid}, "constraint violated"),
                (
                    tools["create"].name,
                    {t.field("title").name: "x", t.field("priority").name: "high"},
                    "wrong type",
                ),
                (tools["create"].name, {t.field("title").name: "x", t.field("priority").name: 9}, "maximum"),
            ]
        elif family == "inventory":
            t = tables["item"]
            rid = next(r for r, rec in env.state[t.name].items() if rec[t.field("stock").name] > 0)
            stock = env.state[t.name][rid][t.field("stock").name]
            bad_calls += [
                (tools["sell"].name, {tools["sell"].id_param: rid, "amount": stock + 1}, "below the minimum"),
                (tools["sell"].name, {tools["sell"].id_param: rid, "amount": -3}, "must be positive"),
                (tools["remove"].name, {tools["remove"].id_param: rid}, "constraint violated"),
                (tools["search_item"].name, {t.field("category").name: "no-such"}, "invalid value"),
            ]
        elif family == "booking":
            t, r = tables["booking"], tables["resource"]
            rid, rec = next(
                (k, v)
                for k, v in env.state[t.name].items()
                if v[t.field("status").name] == t.field("status").default
            )
            args = {
                t.field(role).name: rec[t.field(role).name]
                for role in ("guest", "resource", "day", "slot", "size")
            }
            capacity = env.state[r.name][rec[t.field("resource").name]][r.field("capacity").name]
            bad_calls += [
                (tools["create"].name, args, "already has"),  # double booking
                (tools["create"].name, {**args, t.field("size").name: capacity + 1, t.field("day").name: 28,
                                        t.field("slot").name: 21}, "exceeds"),
                (tools["create"].name, {**args, t.field("resource").name: "XYZ-0001"}, "unknown"),
            ]  # fmt: skip
        else:
            t = tables["account"]
            rows = env.state[t.name]
            a, b = sorted(rows)[:2]
            param = tools["transfer"].id_param
            balance = rows[a][t.field("balance").name]
            bad_calls += [
                (tools["transfer"].name, {f"from_{param}": a, f"to_{param}": a, "amount": 1}, "itself"),
                (
                    tools["transfer"].name,
                    {f"from_{param}": a, f"to_{param}": b, "amount": balance + 1},
                    "violated",
                ),
                (tools["deposit"].name, {tools["deposit"].id_param: a, "amount": 1.5}, "wrong type"),
            ]
        before = copy_state(env.state)
        for name, args, message in bad_calls:
            result = env.call(name, args)
            assert result.is_error and message in result.content, (family, name, args, result.content)
        assert env.state == before  # a failed call changes nothing
        checked.add(family)
    assert checked == {"ticketing", "inventory", "booking", "ledger"}


def test_synthetic_random_garbage_calls_never_raise(source):
    rng = random.Random(0)
    junk = [None, 0, -1, 1.5, True, "", "x", [], {}, "ZZZ-0001", 10**9]
    for index in range(4):
        task = source.task(index, 1)
        env = source.make_environment(task)
        for spec in env.reset(task):
            names = list(spec.parameters["properties"])
            for _ in range(25):
                args = {n: rng.choice(junk) for n in names if rng.random() < 0.7}
                result = env.call(spec.name, args)
                assert isinstance(result.content, str) and result.content


def test_synthetic_rejects_bad_options():
    with pytest.raises(ValueError, match="unknown families"):
        SyntheticSource(families="ticketing,spaceships")
    with pytest.raises(ValueError, match="envs must be a positive integer"):
        SyntheticSource(envs=0)
    only = SyntheticSource(envs=4, tasks_per_env=2, families="ledger, booking").load()
    assert {e.metadata["family"] for e in only.environments} == {"ledger", "booking"}


def test_synthetic_cli_flags_set_envs_and_tasks_per_env():
    result = CliRunner().invoke(main, ["envs", "verify-gold", "--source", "synthetic", "--envs", "3",
                                       "--tasks-per-env", "7", "--option", "seed=4"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "passed 21/21" in result.output
    assert get_source("synthetic", envs=3).envs == 3


def _materialize(path, options):
    return dg.materialize(
        [environment_catalog, *catalog_checks],
        resources={"warehouse": WarehouseResource(path=str(path))},
        run_config={
            "ops": {"environment_catalog": {"config": {"sources": ["synthetic"], "source_options": options}}}
        },
    )


def test_synthetic_catalog_asset_loads_idempotently(tmp_path):
    options = {"synthetic": {"envs": 6, "tasks_per_env": 10, "seed": 3}}
    first = _materialize(tmp_path / "w.duckdb", options)
    assert first.success and all(c.passed for c in first.get_asset_check_evaluations())
    store = Warehouse(tmp_path / "w.duckdb")
    summary = store.query("SELECT * FROM source_summary WHERE source = 'synthetic'").iloc[0]
    assert (summary.environments, summary.tasks) == (6, 60)
    before = store.query("SELECT task_id, content_hash, loaded_at FROM tasks ORDER BY task_id")
    second = _materialize(tmp_path / "w.duckdb", options)
    meta = {m.asset_key.to_user_string(): m for m in second.get_asset_materialization_events()}
    assert meta["tasks"].materialization.metadata["by_source"].value["synthetic"]["unchanged"] == 60
    assert store.query("SELECT task_id, content_hash, loaded_at FROM tasks ORDER BY task_id").equals(before)
