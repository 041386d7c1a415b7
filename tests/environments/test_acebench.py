"""ACEBench agent source in ``semantics: policy`` (the project's strict rules): catalogue, gold replay,
end-state verifier, milestone score, isolation, errors. The default semantics (the original's behaviour)
is tested against recorded data in ``test_acebench_original.py``."""

import json
import shutil
from pathlib import Path

import dagster as dg
import pytest

from assets.catalog import catalog_checks, environment_catalog
from environments.acebench import AceBenchAgentSource
from environments.acebench.calls import parse_step
from environments.acebench.data import CLASS_ALIASES, canonical_class, default_data_dir
from environments.acebench.data_errors import GOLD_CORRECTIONS, KNOWN_DATA_ERRORS
from environments.base import CallRecord, SourceDataError, ToolCall, Trajectory, TurnRecord, replay_gold
from environments.verify_gold import verify_gold
from pipelines.resources import WarehouseResource
from warehouse.store import Warehouse


@pytest.fixture(scope="module")
def source():
    return AceBenchAgentSource(semantics="policy")


@pytest.fixture(scope="module")
def tasks(source):
    return {t.metadata["acebench_id"]: t for t in source.load().tasks}


def _run(source, task, calls):
    """A fresh rollout of ``task`` that makes ``calls`` in one turn; returns (environment, trajectory)."""
    env = source.make_environment(task)
    env.reset(task)
    turn = TurnRecord([CallRecord(c, env.call(c.name, c.arguments)) for c in calls])
    return env, Trajectory(task.task_id, [turn])


def _replace(calls, name, **arguments):
    return [ToolCall(c.name, {**c.arguments, **arguments}) if c.name == name else c for c in calls]


def test_acebench_catalog_has_50_tasks_in_10_environments(source):
    catalog = source.load()
    assert len(catalog.tasks) == 50 and len({t.task_id for t in catalog.tasks}) == 50
    assert sorted({t.split for t in catalog.tasks}) == ["multi_step", "multi_turn"]
    assert len(catalog.environments) == 10
    env_ids = {e.env_id for e in catalog.environments}
    assert "acebench_agent/multi_turn/Travel" in env_ids
    for task in catalog.tasks:
        assert task.env_id == f"acebench_agent/{task.split}/{'+'.join(task.metadata['involved_classes'])}"
        assert task.env_id in env_ids and task.gold_calls > 0 and len(task.user_turns) == 1
    tools = [s for e in catalog.environments for s in e.tools]
    assert {s.name for s in tools} >= {"send_message", "add_food_delivery_order", "reserve_flight"}
    assert "'dict'" not in json.dumps([s.parameters for s in tools]).replace('"', "'")
    assert all(s.parameters["type"] == "object" for s in tools)
    reserve = next(s for s in tools if s.name == "reserve_flight")
    assert set(reserve.parameters["required"]) <= set(reserve.parameters["properties"])


def test_acebench_only_write_tools_change_state_during_gold_replays(source):
    catalog = source.load()
    effects = {s.name: s.effect for e in catalog.environments for s in e.tools}
    changed_by = set()
    for task in catalog.tasks:
        env = source.make_environment(task)
        env.reset(task)
        for call in task.gold[0]:
            before = json.dumps(env.state, sort_keys=True)
            env.call(call.name, call.arguments)
            if json.dumps(env.state, sort_keys=True) != before:
                changed_by.add(call.name)
    assert {"send_message", "add_reminder", "reserve_flight", "modify_flight"} <= changed_by
    assert {name for name in changed_by if effects[name] != "write"} == set()


def test_acebench_verify_gold_fails_exactly_the_known_data_errors(source):
    report = verify_gold(source)
    assert report.total == 50
    assert report.passed == 50 - len(KNOWN_DATA_ERRORS), report.summary()
    failed = {task_id.removeprefix("acebench_agent/") for task_id, _ in report.failures}
    assert failed == set(KNOWN_DATA_ERRORS)
    assert all("known source data error" in reason for _, reason in report.failures)


def test_acebench_gold_corrections_and_known_data_errors_are_the_nine_contradicting_tasks(tasks):
    corrected = {task_id for task_id, task in tasks.items() if "gold_correction" in task.metadata}
    # 0/1 are corrected too (the original's rule passes them), but the strict rule still fails them.
    assert corrected == set(GOLD_CORRECTIONS) and set(KNOWN_DATA_ERRORS) < corrected
    assert sorted(corrected) == sorted(
        [f"agent_multi_step_{i}" for i in (0, 1, 12, 13, 14, 15, 16, 17)] + ["agent_multi_turn_6"]
    )
    for task_id, task in tasks.items():
        milestone = [ToolCall(m["name"], m["arguments"]) for m in task.metadata["milestones"][0]]
        assert (list(task.gold[0]) != milestone) == (task_id in GOLD_CORRECTIONS)


@pytest.mark.parametrize("task_id", sorted(set(GOLD_CORRECTIONS) - set(KNOWN_DATA_ERRORS)))
def test_acebench_corrected_gold_passes_and_the_uncorrected_milestone_does_not(source, tasks, task_id):
    task = tasks[task_id]
    correction = task.metadata["gold_correction"]
    assert correction["reason"] == GOLD_CORRECTIONS[task_id].reason
    assert len(correction["edits"]) == len(GOLD_CORRECTIONS[task_id].edits) > 0
    env = source.make_environment(task)
    verdict = env.verify(replay_gold(env, task))
    assert verdict.passed, verdict.reason
    assert not any(record.result.is_error for turn in replay_gold(env, task).turns for record in turn.calls)
    milestone = [ToolCall(m["name"], m["arguments"]) for m in task.metadata["milestones"][0]]
    env, trajectory = _run(source, task, milestone)
    verdict = env.verify(trajectory)
    assert verdict.reward == 0.0 and verdict.metrics["milestone_score"] == 1.0
    assert "known source data error" not in verdict.reason  # the task is solvable: no data-error note


@pytest.mark.parametrize("task_id", ["agent_multi_step_0", "agent_multi_step_1"])
def test_acebench_super_supreme_tasks_stay_unreachable_under_the_strict_rule(source, tasks, task_id):
    # The corrected gold orders 'Super Supreme Pizza', but the ground truth's reminder key 3 / id 3 in place
    # of the 'To-do list' reminder cannot be produced: add_reminder takes id 4, and no listed tool deletes
    # one. The strict rule checks the misspelt 'ReminderAPI' as ReminderApi; the original does not.
    task = tasks[task_id]
    assert "delete_reminder" not in task.metadata["functions"]
    assert any(
        c.arguments.get("items") == [{"product": "Super Supreme Pizza", "quantity": 1}] for c in task.gold[0]
    )
    env, trajectory = _run(source, task, list(task.gold[0]))
    verdict = env.verify(trajectory)
    assert verdict.reward == 0.0 and "FoodPlatform" not in verdict.reason.split(" [")[0]
    assert "ReminderApi.reminder_list['3']['reminder_id']: expected 3, got 1003" in verdict.reason


def test_acebench_stale_gold_correction_is_a_source_data_error(tmp_path):
    # If a copy of the data already fixes the milestone, the correction's anchor call is gone: loading says
    # so instead of applying the edit somewhere else.
    data_dir = _data_copy(tmp_path)
    path = data_dir / "possible_answer/data_agent_multi_step.json"
    lines = path.read_text().splitlines()
    line_no = next(i for i, line in enumerate(lines) if '"agent_multi_step_14"' in line)
    lines[line_no] = lines[line_no].replace("delete_message(message_id=3)", "delete_message(message_id=4)")
    path.write_text("\n".join(lines) + "\n")
    where = rf"multi_step.json line {line_no + 1}: gold correction 'replace delete_message\(message_id=3\)"
    with pytest.raises(SourceDataError, match=where):
        AceBenchAgentSource(data_dir=data_dir).load()


@pytest.mark.parametrize(
    "task_id, change, expected_in_reason",
    [
        # phone: the message text is wrong
        ("agent_multi_turn_0", ("send_message", {"message": "Lunch?"}), "MessageApi.inbox['7']['message']"),
        # phone: the order has the dearer pizza
        (
            "agent_multi_turn_8",
            ("add_food_delivery_order", {"items": [{"product": "Super Supreme Pizza", "quantity": 1}]}),
            "FoodPlatform.users['Grace']['balance']",
        ),
        # travel: business instead of economy class
        ("agent_multi_turn_20", ("reserve_flight", {"cabin": "Business Class"}), "Travel."),
    ],
)
def test_acebench_wrong_action_fails_the_verifier_with_a_reason(
    source, tasks, task_id, change, expected_in_reason
):
    task = tasks[task_id]
    name, arguments = change
    env, trajectory = _run(source, task, _replace(task.gold[0], name, **arguments))
    verdict = env.verify(trajectory)
    assert verdict.reward == 0.0
    assert expected_in_reason in verdict.reason


def test_acebench_missing_write_fails_and_names_the_class_and_field(source, tasks):
    task = tasks["agent_multi_turn_4"]
    env, trajectory = _run(source, task, [c for c in task.gold[0] if c.name != "add_reminder"])
    verdict = env.verify(trajectory)
    assert verdict.reward == 0.0
    assert "ReminderApi.reminder_list['4']" in verdict.reason and "missing" in verdict.reason


def test_acebench_two_rollouts_of_one_task_do_not_share_state(source, tasks):
    task = tasks["agent_multi_turn_22"]  # books two flights: writes users and reservations
    first, second = source.make_environment(task), source.make_environment(task)
    first.reset(task)
    second.reset(task)
    fresh = json.dumps(second.state, sort_keys=True)
    assert first.verify(replay_gold(first, task)).passed
    assert json.dumps(second.state, sort_keys=True) == fresh
    assert not second.verify(Trajectory(task.task_id)).passed
    assert first.verify(replay_gold(first, task)).passed  # reset() on a used instance starts afresh
    assert len(first.state["Travel"]["reservations"]) == 6


@pytest.mark.parametrize(
    "task_id, name, arguments, expected",
    [
        ("agent_multi_turn_0", "no_such_tool", {}, "no tool named"),
        ("agent_multi_turn_20", "send_message", {}, "no tool named"),  # a phone tool in a travel task
        ("agent_multi_turn_0", "delete_message", "3", "must be an object"),
        ("agent_multi_turn_0", "delete_message", {"message_id": "3"}, "must be of type integer"),
        ("agent_multi_turn_0", "delete_message", {}, "missing 'message_id'"),
        ("agent_multi_turn_0", "delete_message", {"message_id": 3, "force": True}, "unknown field 'force'"),
        ("agent_multi_turn_0", "delete_message", {"message_id": 99}, "No message with id 99"),
        ("agent_multi_turn_1", "get_latest_message_id", {}, "not logged in"),
        (
            "agent_multi_turn_0",
            "send_message",
            {"sender_name": "Eve", "receiver_name": "Frank", "message": "hi"},
            "Wi-Fi",
        ),
        (
            "agent_multi_turn_3",
            "send_message",
            {"sender_name": "Eve", "receiver_name": "Frank", "message": "hi"},
            "full",
        ),
        (
            "agent_multi_turn_9",
            "login_food_platform",
            {"username": "Grace", "password": "nope"},
            "Wrong password",
        ),
        (
            "agent_multi_turn_9",
            "add_food_delivery_order",
            {
                "username": "Grace",
                "merchant_name": "Domino's",
                "items": [{"product": "Pizza", "quantity": 1}],
            },
            "not logged in",
        ),
        (
            "agent_multi_turn_9",
            "add_food_delivery_order",
            {"username": "Grace", "merchant_name": "Domino's", "items": [{"product": "Pizza"}]},
            "missing 'quantity'",
        ),
        (
            "agent_multi_turn_20",
            "reserve_flight",
            {
                "user_id": "user2",
                "password": "wrong",
                "flight_no": "CA1234",
                "cabin": "Economy Class",
                "payment_method": "bank",
                "baggage_count": 1,
            },
            "Incorrect user ID or password",
        ),
        (
            "agent_multi_turn_23",
            "modify_flight",
            {"user_id": "user1", "reservation_id": "res_9"},
            "No reservation",
        ),
        (
            "agent_multi_turn_23",
            "modify_flight",
            {"user_id": "user1", "reservation_id": "res_2", "new_flight_no": "CA1234"},
            "does not fly Shanghai -> Beijing",
        ),
    ],
)
def test_acebench_tool_errors_come_back_as_results(source, tasks, task_id, name, arguments, expected):
    task = tasks[task_id]
    env = source.make_environment(task)
    env.reset(task)
    before = json.dumps(env.state, sort_keys=True)
    result = env.call(name, arguments)
    assert result.is_error and expected in result.content, result
    assert json.dumps(env.state, sort_keys=True) == before  # a refused call changes nothing


def test_acebench_call_before_reset_is_an_error_result(source, tasks):
    result = source.make_environment(tasks["agent_multi_turn_0"]).call("turn_on_wifi", {})
    assert result.is_error


def test_acebench_modify_flight_is_all_or_nothing_when_balance_is_short(source, tasks):
    task = tasks["agent_multi_turn_23"]
    env = source.make_environment(task)
    env.reset(task)
    env.state["Travel"]["users"]["user1"]["bank_balance"] = 10.0
    before = json.dumps(env.state, sort_keys=True)
    result = env.call(
        "modify_flight",
        {"user_id": "user1", "reservation_id": "res_2", "new_flight_no": "CZ4321", "add_baggage": 3},
    )
    assert result.is_error and "Insufficient bank balance" in result.content
    assert json.dumps(env.state, sort_keys=True) == before


@pytest.mark.parametrize("written, canonical", sorted(CLASS_ALIASES.items()))
def test_acebench_misspelt_class_names_resolve(written, canonical):
    assert canonical_class(written, "here") == canonical


def test_acebench_misspelt_ground_truth_classes_are_checked_under_their_canonical_name(source, tasks):
    # The answers spell ReminderApi "ReminderAPI" (agent_multi_step_0) and "Reminderpi" (agent_multi_turn_7),
    # and BaseApi "BaseAPI" (agent_multi_turn_9).
    for task_id, canonical in (
        ("agent_multi_step_0", "ReminderApi"),
        ("agent_multi_turn_7", "ReminderApi"),
        ("agent_multi_turn_9", "BaseApi"),
    ):
        assert canonical in tasks[task_id].metadata["ground_truth"]
        assert any(f.startswith(f"{canonical}.") for f in tasks[task_id].state_fields)
    task = tasks["agent_multi_turn_7"]
    env, trajectory = _run(source, task, [c for c in task.gold[0] if c.name != "add_reminder"])
    assert "ReminderApi.reminder_list['4']" in env.verify(trajectory).reason
    with pytest.raises(SourceDataError, match="unknown scenario class 'RemindrApi'"):
        canonical_class("RemindrApi", "somewhere")


def test_acebench_milestone_score_is_one_for_gold_and_lower_without_a_call(source, tasks):
    task = tasks["agent_multi_turn_0"]  # four milestone calls
    env = source.make_environment(task)
    gold = env.verify(replay_gold(env, task))
    assert gold.passed and gold.metrics["milestone_score"] == 1.0
    calls = list(task.gold[0])
    env, trajectory = _run(source, task, calls[:1] + calls[2:])  # skips get_earliest_message_id
    assert env.verify(trajectory).metrics["milestone_score"] == pytest.approx(3 / 4)
    # Case and spacing of string arguments do not matter, extra calls do not lower the score.
    shouted = _replace(calls, "send_message", message="ARE YOU free tomorrow  to have lunch with me?")
    env, trajectory = _run(
        source, task, [ToolCall("search_messages", {"user_name": "Grace", "keyword": "x"})] + shouted
    )
    assert env.verify(trajectory).metrics["milestone_score"] == 1.0


def test_acebench_milestone_score_takes_the_best_alternative(source, tasks):
    task = tasks["agent_multi_step_6"]  # two alternatives: order before or after deleting a message
    second = [ToolCall(m["name"], m["arguments"]) for m in task.metadata["milestones"][1]]
    env, trajectory = _run(source, task, second)
    verdict = env.verify(trajectory)
    assert verdict.passed and verdict.metrics["milestone_score"] == 1.0


def test_acebench_milestone_parser_repairs_unescaped_apostrophes():
    calls = parse_step("[add_reminder(title='Today's spending', time='2024-07-15 09:30'), turn_on_wifi()] ")
    assert calls == [
        ToolCall("add_reminder", {"title": "Today's spending", "time": "2024-07-15 09:30"}),
        ToolCall("turn_on_wifi", {}),
    ]
    assert parse_step("[f(items=[{'product': 'Domino's pie', 'quantity': 1}])]")[0].arguments == {
        "items": [{"product": "Domino's pie", "quantity": 1}]
    }


def _data_copy(tmp_path: Path) -> Path:
    destination = tmp_path / "acebench"
    shutil.copytree(default_data_dir(), destination)
    for path in destination.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return destination


def _rewrite_line(path: Path, line_no: int, edit) -> None:
    lines = path.read_text().splitlines()
    lines[line_no - 1] = edit(lines[line_no - 1])
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "name, line_no, edit, message",
    [
        # (file, line, how to damage it, error expected) -- one row per kind of damage
        ("data_agent_multi_turn.json", 3, lambda line: line[:40], "line 3: invalid JSON"),
        (
            "possible_answer/data_agent_multi_step.json",
            2,
            lambda line: line.replace('"BaseApi"', '"NoSuchApi"', 1),
            "unknown scenario class 'NoSuchApi'",
        ),
        (
            "possible_answer/data_agent_multi_step.json",
            2,
            lambda line: line.replace("[turn_on_wifi()]", "[turn_on_wifi(]"),
            "field 'mile_stone'",
        ),
        (
            "data_agent_multi_step.json",
            1,
            lambda line: line.replace('"name": "check_balance"', '"name": "check_balance_v2"'),
            "'check_balance_v2' has no implementation",
        ),
        ("scenario_defaults.json", 10, lambda line: line[:-5], "invalid JSON"),
    ],
)
def test_acebench_malformed_data_file_raises_source_data_error_naming_the_file(
    tmp_path, name, line_no, edit, message
):
    data_dir = _data_copy(tmp_path)
    _rewrite_line(data_dir / name, line_no, edit)
    with pytest.raises(SourceDataError) as raised:
        AceBenchAgentSource(data_dir=data_dir).load()
    assert message in str(raised.value) and name.split("/")[-1] in str(raised.value)


def test_acebench_data_dir_comes_from_the_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVSCHED_ACEBENCH_DIR", str(tmp_path / "elsewhere"))
    assert AceBenchAgentSource().data_dir == tmp_path / "elsewhere"
    with pytest.raises(SourceDataError, match="scenario_defaults.json: file not found"):
        AceBenchAgentSource().load()


def _materialize(warehouse_path: Path, data_dir: Path):
    return dg.materialize(
        [environment_catalog, *catalog_checks],
        resources={"warehouse": WarehouseResource(path=str(warehouse_path))},
        run_config={
            "ops": {
                "environment_catalog": {
                    "config": {
                        "sources": ["acebench_agent"],
                        "source_options": {"acebench_agent": {"data_dir": str(data_dir)}},
                    }
                }
            }
        },
    )


def test_acebench_catalog_asset_loads_the_source_idempotently(tmp_path):
    warehouse_path = tmp_path / "w.duckdb"
    first = _materialize(warehouse_path, default_data_dir())
    assert first.success and all(c.passed for c in first.get_asset_check_evaluations())
    store = Warehouse(warehouse_path)
    counts = "SELECT (SELECT count(*) FROM environments), (SELECT count(*) FROM tools), (SELECT count(*) FROM tasks)"
    assert store.query(counts).iloc[0].tolist() == [10, 142, 50]
    before = store.query("SELECT task_id, content_hash, loaded_at FROM tasks ORDER BY task_id")
    second = _materialize(warehouse_path, default_data_dir())
    events = {m.asset_key.to_user_string(): m for m in second.get_asset_materialization_events()}
    assert events["tasks"].materialization.metadata["by_source"].value["acebench_agent"]["unchanged"] == 50
    assert store.query(counts).iloc[0].tolist() == [10, 142, 50]
    assert store.query("SELECT task_id, content_hash, loaded_at FROM tasks ORDER BY task_id").equals(before)
