"""tau-bench retail and airline: catalogue, tool effects and errors, isolation, reward, bad data.

The default mode's agreement with the original is in ``test_tau_bench_original.py``; tests here that
check what only the policy-checked mode does use the ``*_policy`` fixtures."""

import json
import shutil
from pathlib import Path

import dagster as dg
import pytest

from assets.catalog import environment_catalog
from environments.base import CallRecord, SourceDataError, ToolCall, Trajectory, TurnRecord, replay_gold
from environments.registry import get_source
from environments.tau_bench import TauBenchAirlineSource, TauBenchRetailSource
from environments.tau_bench.data import DATA_DIR_ENV, default_data_dir
from environments.tau_bench.db import record_hash
from environments.verify_gold import verify_gold
from pipelines.resources import WarehouseResource
from warehouse.store import Warehouse


@pytest.fixture(scope="module")
def retail():
    source = TauBenchRetailSource()
    return source, source.load()


@pytest.fixture(scope="module")
def airline():
    source = TauBenchAirlineSource()
    return source, source.load()


@pytest.fixture(scope="module")
def retail_policy():
    source = TauBenchRetailSource(semantics="policy")
    return source, source.load()


@pytest.fixture(scope="module")
def airline_policy():
    source = TauBenchAirlineSource(semantics="policy")
    return source, source.load()


def _task(catalog, task_id):
    return next(t for t in catalog.tasks if t.task_id == task_id)


def _run(source, task, calls, replies=()):
    """A one-turn trajectory of ``calls`` run in a fresh environment; returns (env, trajectory)."""
    env = source.make_environment(task)
    env.reset(task)
    record = TurnRecord([CallRecord(c, env.call(c.name, c.arguments)) for c in calls], list(replies))
    return env, Trajectory(task.task_id, [record])


def _gold_calls(task):
    return [c for turn in task.gold for c in turn]


# --- catalogue ------------------------------------------------------------------------------------


def test_tau_bench_catalog_has_every_split(retail, airline):
    for (_, catalog), expected in ((retail, {"train": 500, "dev": 20, "test": 115}), (airline, {"test": 50})):
        splits = {}
        for task in catalog.tasks:
            splits[task.split] = splits.get(task.split, 0) + 1
        assert splits == expected
        assert len({t.task_id for t in catalog.tasks}) == len(catalog.tasks)
    task = _task(retail[1], "tau_bench_retail/train/12")
    assert task.user_turns == (
        json.loads((default_data_dir() / "retail/tasks_train.json").read_text())[12]["instruction"],
    )
    assert len(task.gold) == 1 and task.tools == tuple(sorted({c.name for c in task.gold[0]}))


def test_tau_bench_environment_is_domain_times_write_family(retail, airline):
    (_, r), (_, a) = retail, airline
    assert len(r.environments) == 38 and len(a.environments) == 12
    assert {"tau_bench_retail/cancel", "tau_bench_retail/exchange", "tau_bench_retail/read_only"} <= {
        e.env_id for e in r.environments
    }
    for catalog in (r, a):
        effects = {s.name: s.effect for s in catalog.environments[0].tools}
        for task in catalog.tasks:
            family = task.env_id.split("/", 1)[1]
            writes = [n for n in task.tools if effects[n] == "write" or n == "transfer_to_human_agents"]
            assert (family == "read_only") == (not writes), task.task_id
            assert family == "read_only" or len(family.split("+")) == len(writes)
    retail_effects = {s.name: s.effect for s in r.environments[0].tools}
    assert retail_effects["cancel_pending_order"] == "write" and retail_effects["get_order_details"] == "read"
    assert len(retail_effects) == 16 and len(a.environments[0].tools) == 14


def test_tau_bench_data_dir_comes_from_env_var(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert get_source("tau_bench_airline").folder == tmp_path / "airline"
    monkeypatch.delenv(DATA_DIR_ENV)
    assert default_data_dir().parts[-3:] == ("shared", "data", "tau_bench")


# --- reward ---------------------------------------------------------------------------------------


def test_tau_bench_gold_with_outputs_passes_and_without_replies_fails(retail):
    source, catalog = retail
    task = _task(catalog, "tau_bench_retail/test/34")  # outputs ['1093.34']
    env, trajectory = _run(source, task, _gold_calls(task))
    verdict = env.verify(trajectory)
    assert verdict.reward == 0.0 and "1093.34" in verdict.reason and "never said" in verdict.reason
    env, trajectory = _run(source, task, _gold_calls(task), ["Your total comes to $1,093.34 ."])
    assert env.verify(trajectory).passed  # commas and case do not matter, as in tau-bench


@pytest.mark.parametrize(
    "source_name, task_id, wrong, where",
    [
        # the right order cancelled for the wrong reason
        (
            "tau_bench_retail",
            "tau_bench_retail/dev/0",
            lambda c: ToolCall(c.name, {**c.arguments, "reason": "ordered by mistake"}),
            "orders/#W5442520: cancel_reason=",
        ),
        # one passenger too many bags paid for on the right reservation
        (
            "tau_bench_airline",
            None,
            lambda c: ToolCall(c.name, {**c.arguments, "total_baggages": c.arguments["total_baggages"] + 1}),
            "total_baggages=",
        ),
    ],
)
def test_tau_bench_wrong_action_fails_with_reason(retail, airline, source_name, task_id, wrong, where):
    source, catalog = retail if source_name == "tau_bench_retail" else airline
    task = (
        _task(catalog, task_id)
        if task_id
        else next(
            t for t in catalog.tasks if "update_reservation_baggages" in t.tools and not t.metadata["outputs"]
        )
    )
    calls = _gold_calls(task)
    last_write = max(i for i, c in enumerate(calls) if c.name.startswith(("cancel", "update")))
    calls[last_write] = wrong(calls[last_write])
    env, trajectory = _run(source, task, calls, task.gold_replies[0])
    assert not any(r.result.is_error for r in trajectory.turns[0].calls)
    verdict = env.verify(trajectory)
    assert verdict.reward == 0.0
    assert "database differs from gold" in verdict.reason and where in verdict.reason


@pytest.mark.parametrize("mode, seats_named", [("original", False), ("policy", True)])
def test_tau_bench_missing_write_names_the_record(airline, airline_policy, mode, seats_named):
    source, catalog = airline if mode == "original" else airline_policy
    task = next(t for t in catalog.tasks if t.tools == ("book_reservation",))
    env, trajectory = _run(source, task, [])
    reason = env.verify(trajectory).reason
    assert "missing record" in reason and task.metadata["user_id"] in reason
    assert ("available_seats" in reason) == seats_named  # only the policy mode books seats


# --- isolation ------------------------------------------------------------------------------------


def test_tau_bench_rollouts_of_one_task_do_not_share_state(retail):
    source, catalog = retail
    task = _task(catalog, "tau_bench_retail/dev/0")  # cancels #W5442520
    first = source.make_environment(task)
    replay_gold(first, task)
    second = source.make_environment(task)
    second.reset(task)
    assert (
        json.loads(first.call("get_order_details", {"order_id": "#W5442520"}).content)["status"]
        == "cancelled"
    )
    assert (
        json.loads(second.call("get_order_details", {"order_id": "#W5442520"}).content)["status"] == "pending"
    )
    first.reset(task)  # reset on a used instance starts from scratch too
    assert first.db.digest() == second.db.digest()


def test_tau_bench_replaying_all_gold_leaves_the_loaded_database_untouched(retail, airline):
    for source, catalog in (retail, airline):
        tables = source.domain_data().tables.tables
        before = {name: {k: record_hash(r) for k, r in t.items()} for name, t in tables.items()}
        for task in catalog.tasks:
            replay_gold(source.make_environment(task), task)
        assert {name: {k: record_hash(r) for k, r in t.items()} for name, t in tables.items()} == before


def test_tau_bench_digest_depends_on_content_only(airline):
    source, _ = airline
    tables = source.domain_data().tables
    db = tables.fresh()
    user_id = next(iter(db.tables["users"]))
    email = db.get("users", user_id)["email"]
    db.edit("users", user_id)["email"] = "x@example.com"
    assert db.digest() != tables.fresh().digest()
    db.edit("users", user_id)["email"] = email
    assert db.digest() == tables.fresh().digest() and db.diff(tables.fresh()) == []


def test_tau_bench_digest_equal_for_the_same_changes_in_any_order(airline):
    source, _ = airline
    tables = source.domain_data().tables
    first, second = tables.fresh(), tables.fresh()
    a, b = list(first.tables["users"])[:2]
    first.edit("users", a)["email"] = "a@example.com"
    first.edit("users", b)["email"] = "b@example.com"
    second.edit("users", b)["email"] = "b@example.com"
    second.edit("users", a)["email"] = "a@example.com"
    assert first.digest() == second.digest() != tables.fresh().digest()
    second.insert("users", "new_user", {"email": "n@example.com"})
    assert second.digest() != first.digest()  # a new record counts


# --- tools ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "domain, name, arguments, message",
    [
        ("retail", "no_such_tool", {}, "unknown tool"),
        ("retail", "get_order_details", "not-a-dict", "should be an object"),
        ("retail", "get_order_details", {}, "missing argument 'order_id'"),
        ("retail", "get_order_details", {"order_id": 7}, "should be of type string"),
        ("retail", "get_order_details", {"order_id": "#W5442520", "x": 1}, "unexpected argument 'x'"),
        ("retail", "get_order_details", {"order_id": "#W0"}, "order not found"),
        ("retail", "cancel_pending_order", {"order_id": "#W5442520", "reason": "bored"}, "should be one of"),
        (
            "retail",
            "cancel_pending_order",
            {"order_id": "#W2611340", "reason": "no longer needed"},
            "non-pending",
        ),
        ("retail", "calculate", {"expression": "__import__('os')"}, "invalid characters"),
        ("retail", "calculate", {"expression": "1 / 0"}, "division by zero"),
        ("retail", "calculate", {"expression": "2 ** 8"}, "invalid expression"),
        ("airline", "get_reservation_details", {"reservation_id": "NOPE00"}, "reservation not found"),
        (
            "airline",
            "update_reservation_passengers",
            {"reservation_id": "4WQ150", "passengers": []},
            "does not match",
        ),
        ("airline", "book_reservation", {"user_id": "mia_li_3668"}, "missing argument"),
        (
            "airline",
            "update_reservation_flights",
            {
                "reservation_id": "4WQ150",
                "cabin": "economy",
                "flights": [{"flight_number": "HAT001"}],
                "payment_id": "x",
            },
            "missing required argument 'flights[0].date'",
        ),
        (
            "airline",
            "update_reservation_baggages",
            {
                "reservation_id": "4WQ150",
                "total_baggages": 1,
                "nonfree_baggages": 0,
                "payment_id": "gift_card_3576581",
            },
            "not removed",
        ),
    ],
)
def test_tau_bench_policy_bad_calls_return_error_results_and_change_nothing(
    retail_policy, airline_policy, domain, name, arguments, message
):
    source, catalog = retail_policy if domain == "retail" else airline_policy
    env = source.make_environment(catalog.tasks[0])
    env.reset(catalog.tasks[0])
    result = env.call(name, arguments)
    assert result.is_error and result.content.startswith("Error: ") and message in result.content
    assert env.db.digest() == source.domain_data().tables.fresh().digest()


def test_tau_bench_retail_cancel_refunds_a_gift_card_at_once(retail):
    source, catalog = retail
    env = source.make_environment(catalog.tasks[0])
    env.reset(catalog.tasks[0])
    order_id, order = next(
        (k, o)
        for k, o in env.db.tables["orders"].items()
        if o["status"] == "pending" and o["payment_history"][0]["payment_method_id"].startswith("gift_card")
    )
    card = order["payment_history"][0]["payment_method_id"]
    balance = env.db.get("users", order["user_id"])["payment_methods"][card]["balance"]
    result = env.call("cancel_pending_order", {"order_id": order_id, "reason": "no longer needed"})
    assert not result.is_error and json.loads(result.content)["status"] == "cancelled"
    after = env.db.get("users", order["user_id"])["payment_methods"][card]["balance"]
    assert after == round(balance + order["payment_history"][0]["amount"], 2)


def test_tau_bench_policy_airline_booking_charges_takes_seats_and_gets_a_stable_id(airline_policy):
    source, catalog = airline_policy
    task = _task(catalog, "tau_bench_airline/test/0")  # two certificates; one used, with a credit card
    ids = []
    for _ in range(2):
        env = source.make_environment(task)
        trajectory = replay_gold(env, task)
        booked = json.loads(trajectory.turns[0].calls[0].result.content)
        ids.append(booked["reservation_id"])
        user = env.db.get("users", "mia_li_3668")
        assert (
            "certificate_7504069" not in user["payment_methods"]
            and booked["reservation_id"] in user["reservations"]
        )
        seats = env.db.get("flights", "HAT136")["dates"]["2024-05-20"]["available_seats"]["economy"]
        base = source.domain_data().tables.tables["flights"]["HAT136"]["dates"]["2024-05-20"]
        assert seats == base["available_seats"]["economy"] - 1
    assert ids[0] == ids[1]


# --- gold -----------------------------------------------------------------------------------------


def test_tau_bench_verify_gold_passes_a_subsample_of_every_split(
    retail, airline, retail_policy, airline_policy
):
    for source, catalog, step in ((*retail, 7), (*airline, 1), (*retail_policy, 7), (*airline_policy, 1)):
        for task in catalog.tasks[::step]:
            env = source.make_environment(task)
            verdict = env.verify(replay_gold(env, task))
            assert verdict.passed, (task.task_id, verdict.reason)
    report = verify_gold(TauBenchAirlineSource(), limit=10)
    assert (report.total, report.passed) == (10, 10)


def test_tau_bench_gold_calls_rejected_by_the_tools_are_recorded(retail):
    _, catalog = retail
    task = _task(catalog, "tau_bench_retail/train/24")  # pays a $97.35 order with an $18 gift card
    assert [n["name"] for n in task.metadata["gold_rejected_calls"]] == ["modify_pending_order_payment"]
    assert "insufficient gift card balance" in task.metadata["gold_rejected_calls"][0]["error"]


# --- bad data -------------------------------------------------------------------------------------


def _copy_data(tmp_path: Path) -> Path:
    dst = tmp_path / "tau_bench"
    shutil.copytree(default_data_dir(), dst)
    for path in dst.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)  # the shared copy is read-only
    return dst


@pytest.mark.parametrize(
    "domain, file, damage, message",
    [
        # (domain, file, how to damage its parsed JSON or text, what the error must say) -- one per kind
        ("retail", "tasks_dev.json", lambda text: text[:-20], "invalid JSON"),
        (
            "retail",
            "orders.json",
            lambda rows: rows["#W2611340"].pop("status"),
            "record '#W2611340': missing field 'status'",
        ),
        (
            "retail",
            "tasks_test.json",
            lambda rows: rows[3]["actions"][0].update(name="fly"),
            "row 3: field 'actions[0].name'",
        ),
        ("airline", "tasks_test.json", lambda rows: rows[7].pop("instruction"), "row 7: field 'instruction'"),
        (
            "airline",
            "tools.json",
            lambda rows: rows[0]["function"].update(name="teleport"),
            "item 0: tool 'teleport'",
        ),
    ],
)
def test_tau_bench_malformed_file_raises_source_data_error_naming_it(tmp_path, domain, file, damage, message):
    data_dir = _copy_data(tmp_path)
    path = data_dir / domain / file
    if message == "invalid JSON":
        path.write_text(damage(path.read_text()))
    else:
        rows = json.loads(path.read_text())
        damage(rows)
        path.write_text(json.dumps(rows))
    source = get_source(f"tau_bench_{domain}", data_dir=str(data_dir))
    with pytest.raises(SourceDataError) as error:
        source.load()
    assert str(path) in str(error.value) and message in str(error.value)


# --- warehouse ------------------------------------------------------------------------------------


def _materialize(path: Path):
    sources = ["tau_bench_retail", "tau_bench_airline"]
    return dg.materialize(
        [environment_catalog],
        resources={"warehouse": WarehouseResource(path=str(path))},
        run_config={"ops": {"environment_catalog": {"config": {"sources": sources, "source_options": {}}}}},
    )


def test_tau_bench_catalog_asset_loads_both_sources_idempotently(tmp_path):
    path = tmp_path / "w.duckdb"
    assert _materialize(path).success
    store = Warehouse(path)
    counts = store.query(
        "SELECT source, count(DISTINCT env_id) AS envs, count(*) AS tasks FROM tasks GROUP BY source ORDER BY source"
    )
    assert counts.values.tolist() == [["tau_bench_airline", 12, 50], ["tau_bench_retail", 38, 635]]
    before = [store.scalar(f"SELECT count(*) FROM {t}") for t in ("environments", "tools", "tasks")]
    result = _materialize(path)
    meta = {m.asset_key.to_user_string(): m for m in result.get_asset_materialization_events()}
    by_source = meta["tasks"].materialization.metadata["by_source"].value
    assert (
        by_source["tau_bench_retail"]["unchanged"] == 635
        and by_source["tau_bench_airline"]["unchanged"] == 50
    )
    assert [store.scalar(f"SELECT count(*) FROM {t}") for t in ("environments", "tools", "tasks")] == before
