"""ACEBench agent in its default ``semantics: original``, checked against the original benchmark's
recorded behaviour (``tests/data/acebench_original``: ACEBench @e6db74b run on 2132 trajectories; only
its outputs are committed). Every recorded trajectory is replayed through make_environment / reset /
call_batch / verify and must give the original's tool results, end state, verdict and process score.
"""

from collections import Counter

import pytest

from environments.acebench import AceBenchAgentSource, OriginalAceBenchEnvironment
from environments.acebench.data_errors import GOLD_CORRECTIONS, KNOWN_DATA_ERRORS
from environments.acebench.original.dispatch import MULTI_TURN_BATCH_ERROR, UNREADABLE_BATCH
from environments.acebench.original.scoring import end_state_errors, process_score
from environments.acebench.original.text import render_batch
from environments.acebench.recorded import expected_results, load_recorded, replay
from environments.base import ToolCall, Trajectory, replay_gold
from environments.verify_gold import verify_gold


@pytest.fixture(scope="module")
def recorded():
    return {row["name"]: row for row in load_recorded()}


@pytest.fixture(scope="module")
def source():
    return AceBenchAgentSource()


@pytest.fixture(scope="module")
def tasks(source):
    return {t.metadata["acebench_id"]: t for t in source.load().tasks}


def differences(source, tasks, record):
    env, results, verdict = replay(source, tasks, record)
    found = []
    texts = [[r.content for r in batch] for batch in results]
    if texts != expected_results(record):
        found.append(f"tool results {texts} != {expected_results(record)}")
    if env.end_state() != record["end_state"]:
        found.append("end state differs")
    if verdict.passed != record["valid"]:
        found.append(f"verdict {verdict.passed} != {record['valid']}: {verdict.reason}")
    if verdict.metrics["process_score"] != record["process"]:
        found.append(f"process score {verdict.metrics['process_score']} != {record['process']}")
    return found


def test_acebench_original_reproduces_every_recorded_trajectory(recorded, source, tasks):
    mismatched = {name: d for name, r in recorded.items() if (d := differences(source, tasks, r))}
    assert len(recorded) >= 1700
    assert not mismatched, f"{len(mismatched)} of {len(recorded)} differ, e.g. {list(mismatched.items())[:3]}"


# One group per behaviour class of issue 17; each names the hand-written recorded cases it covers.
BEHAVIOUR_CLASSES = {
    "callable": [
        "search_reminders",
        "delete_reminder",
        "view_all_reminders",
        "view_orders",
        "uninvolved_class",
    ],
    "batch": ["error_mid_batch", "unknown_first", "unknown_after_known", "all_in_one", "object_argument"],
    "phone": [
        "login_twice",
        "check_balance_unknown",
        "empty_order",
        "quantity_as_string",
        "reminder_bad_time",
        "latest_after_send",
        "delete_id_as_string",
        "send_wifi_off",
    ],
    "travel": [
        "cancel_twice",
        "cancel_airline",
        "bags_per_call",
        "partial_modification",
        "card_and_first_class",
        "overbooking",
        "lookup_both_ids",
    ],
    "end_state": ["extra_message"],
}


@pytest.mark.parametrize("behaviour", sorted(BEHAVIOUR_CLASSES))
def test_acebench_original_hand_written_cases_of_each_behaviour_class_agree(
    recorded, source, tasks, behaviour
):
    cases = {n: r for n, r in recorded.items() if r["kind"] == f"case:{behaviour}"}
    assert {n.split("/")[-1] for n in cases} >= set(BEHAVIOUR_CLASSES[behaviour])
    assert {n: d for n, r in cases.items() if (d := differences(source, tasks, r))} == {}


def test_acebench_original_unlisted_public_methods_run_and_missing_ones_do_not(recorded, source, tasks):
    # delete_reminder is not in any function list but runs in the original; it flips multi-turn task 4.
    case = recorded["agent_multi_turn_4/callable/delete_reminder"]
    assert recorded["agent_multi_turn_4/gold"]["valid"] and not case["valid"]
    _, results, verdict = replay(source, tasks, case)
    assert results[-1][0].content == case["results"][-1][0] and not results[-1][0].is_error
    assert not verdict.passed
    # search_reminders is listed in all 40 phone tasks but the original has no such method.
    case = recorded["agent_multi_step_0/callable/search_reminders"]
    _, results, _ = replay(source, tasks, case)
    assert results[-1][0].is_error and results[-1][0].content == case["results"][-1][0]
    assert case["results"][-1][0].startswith("Error during execution: ")
    # A method of a class the task does not involve is not called either: mid-batch, the original
    # repeats the previous result (send_message in a task without MessageApi).
    case = recorded["agent_multi_step_0/batch/error_mid_batch"]
    assert case["results"][0][1] == case["results"][0][0]
    _, results, _ = replay(source, tasks, case)
    assert results[0][1].content == results[0][0].content


def test_acebench_original_multi_turn_batch_stops_at_the_first_exception(recorded, source, tasks):
    turn = recorded["agent_multi_turn_4/batch/error_mid_batch"]
    step = recorded["agent_multi_step_12/batch/error_mid_batch"]
    assert turn["results"] == [{"batch": MULTI_TURN_BATCH_ERROR}]  # the original's literal text
    _, results, _ = replay(source, tasks, turn)
    assert [r.content for r in results[0]] == [MULTI_TURN_BATCH_ERROR] * len(turn["batches"][0])
    # Multi-step: the same mistake is one error among the batch's results, and the rest still runs.
    texts = step["results"][0]
    assert texts[1].startswith("Error during execution: ") and "unexpected keyword argument" in texts[1]
    assert not texts[2].startswith("Error") and step["valid"]
    _, results, verdict = replay(source, tasks, step)
    assert [r.content for r in results[0]] == texts and verdict.passed


def test_acebench_original_object_argument_makes_the_message_unreadable(recorded, source, tasks):
    case = recorded["agent_multi_step_0/batch/object_argument"]
    assert case["results"][0] == {"batch": UNREADABLE_BATCH} and case["valid"]
    assert differences(source, tasks, case) == []


def test_acebench_original_perturbation_family_has_300_plus_trajectories_with_both_rewards(
    recorded, source, tasks
):
    family = [
        r for r in recorded.values() if r["kind"] not in ("gold",) and not r["kind"].startswith("case:")
    ]
    rewards = Counter(r["valid"] for r in family)
    assert len(family) >= 300 and rewards[True] > 50 and rewards[False] > 50
    assert len({r["task"] for r in family}) == 50
    agree = sum(differences(source, tasks, r) == [] for r in family)
    assert agree / len(family) >= 0.995


def test_acebench_original_verify_gold_passes_all_50_tasks(source):
    report = verify_gold(source)
    assert (report.passed, report.total) == (50, 50), report.summary()


def test_acebench_policy_semantics_keeps_the_strict_rule_and_its_two_data_errors():
    report = verify_gold(AceBenchAgentSource(semantics="policy"))
    assert report.passed == 48
    assert {t.removeprefix("acebench_agent/") for t, _ in report.failures} == set(KNOWN_DATA_ERRORS)


@pytest.mark.parametrize("task_id", sorted(GOLD_CORRECTIONS))
def test_acebench_original_corrected_gold_passes_and_the_raw_milestone_does_not(
    recorded, source, tasks, task_id
):
    task = tasks[task_id]
    env = source.make_environment(task)
    assert env.verify(replay_gold(env, task)).passed and recorded[f"{task_id}/gold"]["valid"]
    milestone = [ToolCall(m["name"], m["arguments"]) for m in task.metadata["milestones"][0]]
    env.reset(task)
    env.call_batch(milestone)
    assert not env.verify(Trajectory(task.task_id)).passed


def test_acebench_original_misspelt_class_is_unchecked_unless_the_strict_rule_is_chosen(tasks):
    task = tasks["agent_multi_step_0"]  # its ground truth spells the reminder class 'ReminderAPI'
    subset = AceBenchAgentSource().make_environment(task)
    verdict = subset.verify(replay_gold(subset, task))
    assert verdict.passed and "not checked, as in the original: ReminderAPI" in verdict.reason
    strict = AceBenchAgentSource(end_state="strict").make_environment(task)
    assert isinstance(strict, OriginalAceBenchEnvironment)
    verdict = strict.verify(replay_gold(strict, task))
    assert not verdict.passed and "ReminderApi.reminder_list" in verdict.reason


def test_acebench_original_end_state_checks_only_the_listed_keys():
    truth = [{"MessageApi": {"inbox": {"1": {"message": "hi"}}}}, {"BaseAPI": {"wifi": True}}]
    extra = [{"MessageApi": {"inbox": {"1": {"message": "hi"}, "7": {"message": "new"}}}}, {"BaseApi": {}}]
    assert end_state_errors(extra, truth) == []  # an extra message passes; 'BaseAPI' matches no class
    assert end_state_errors(extra[:1], truth) == [
        "wrong number of classes: the ground truth lists 2, the episode reported 1"
    ]
    changed = [{"MessageApi": {"inbox": {"1": {"message": "hi!"}}}}, {"BaseApi": {}}]
    assert end_state_errors(changed, truth) == [
        'MessageApi.inbox[\'1\']: expected {"message": "hi"}, got {"message": "hi!"}'
    ]
    unlisted = [{"MessageApi": {"inbox": {}, "outbox": []}}, {"BaseApi": {}}]
    assert "MessageApi.outbox: not in the ground truth" in end_state_errors(unlisted, truth)


def test_acebench_original_process_score_is_a_forward_scan_or_one_when_the_end_state_passes():
    a, b, c = "[login_device()]", "[turn_on_wifi()]", "[send_message(message='x')]"
    assert process_score([b, a], [a, b], end_state_passed=False) == 0.5  # b before a: only a is found
    assert process_score([a, " " + c + " ", b], [a, b, c], end_state_passed=False) == 0.667
    assert process_score([c], [[a, c], [c]], end_state_passed=False) == 1.0  # best alternative
    assert process_score([], [a], end_state_passed=True) == 1.0
    assert render_batch([("send_message", {"message": "x"})]) == c


def test_acebench_original_two_rollouts_of_one_task_do_not_share_state(source, tasks):
    task = tasks["agent_multi_turn_20"]
    first = source.make_environment(task)
    replay_gold(first, task)
    second = source.make_environment(task)
    second.reset(task)
    second.call_batch([ToolCall("get_user_details", {"user_id": "user1", "password": "password123"})])
    assert second.end_state() != first.end_state()
    fresh = source.make_environment(task)
    fresh.reset(task)
    fresh.call_batch([ToolCall("get_user_details", {"user_id": "user1", "password": "password123"})])
    assert fresh.end_state() == second.end_state()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"semantics": "orignal"},
            "acebench_agent option semantics='orignal': choose one of ['original', 'policy']",
        ),
        (
            {"end_state": "exact"},
            "acebench_agent option end_state='exact': choose one of ['subset', 'strict']",
        ),
    ],
)
def test_acebench_source_rejects_unknown_options_naming_them(options, message):
    with pytest.raises(ValueError) as excinfo:
        AceBenchAgentSource(**options)
    assert str(excinfo.value) == message


def test_acebench_policy_semantics_with_the_subset_rule_passes_the_misspelt_class_tasks(tasks):
    source = AceBenchAgentSource(semantics="policy", end_state="subset")
    for task_id in KNOWN_DATA_ERRORS:
        env = source.make_environment(tasks[task_id])
        verdict = env.verify(replay_gold(env, tasks[task_id]))
        assert verdict.passed and "known source data error" not in verdict.reason, verdict.reason
