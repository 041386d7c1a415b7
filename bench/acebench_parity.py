"""ACEBench agent: agreement of the project's environment with the original benchmark.

    PYTHONPATH=. .venv/bin/python bench/acebench_parity.py                # the agreement table
    PYTHONPATH=. .venv/bin/python bench/acebench_parity.py trajectories OUT.jsonl   # the trajectory family

The original's behaviour is recorded data: ``tests/data/acebench_original/recorded.jsonl.gz`` holds,
for each trajectory (a task and its calls, grouped into batches = one agent message each), what the
original ACEBench (@e6db74b: its scenario classes, dispatcher and ``agent_eval``) returned for every
batch, its end state, verdict and process score. The recording ran the original code outside this
repository; only its outputs are committed (see ``tests/data/acebench_original/README.md``).

The table replays every recorded trajectory through ``make_environment`` / ``reset`` /
``call_batch`` / ``verify`` in each ``semantics`` mode and counts agreements:
gold tool results equal as JSON, gold end states equal, verdicts equal, process scores equal.

``trajectories`` writes the family that was recorded: the 50 gold solutions, hand-written cases for
each behaviour class of issue 17, seeded perturbations of every gold solution (drop, duplicate,
swap, probe calls of every public method, argument edits, batch regrouping), and random walks over
each task's probe calls.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
from collections import Counter
from typing import Any

from environments.acebench.recorded import expected_results, load_recorded, replay
from environments.acebench.source import AceBenchAgentSource
from environments.base import Task

PERTURBATIONS_PER_TASK = 32
RANDOM_WALKS = 400
SEED = 17

# Calls of every public method of the original's classes (and of a few that only the function lists
# name), with plausible arguments: the probe pool the perturbations insert.
PROBES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "BaseApi": [("turn_on_wifi", {}), ("login_device", {})],
    "MessageApi": [
        ("send_message", {"sender_name": "Eve", "receiver_name": "Frank", "message": "See you at 5."}),
        ("send_message", {"sender_name": "Eve", "receiver_name": "Nobody", "message": "Hi"}),
        ("delete_message", {"message_id": 1}),
        ("delete_message", {"message_id": 9}),
        ("delete_message", {"message_id": "4"}),
        ("view_messages_between_users", {"sender_name": "Eve", "receiver_name": "Frank"}),
        ("view_messages_between_users", {"sender_name": "Jack", "receiver_name": "Eve"}),
        ("search_messages", {"user_name": "Eve", "keyword": "meeting"}),
        ("search_messages", {"user_name": "Grace", "keyword": "zzz"}),
        ("get_all_message_times_with_ids", {}),
        ("get_latest_message_id", {}),
        ("get_earliest_message_id", {}),
    ],
    "ReminderApi": [
        ("view_reminder_by_title", {"title": "To-do list"}),
        ("view_reminder_by_title", {"title": "Nothing"}),
        ("add_reminder", {"title": "Call", "description": "Call mum", "time": "2024-07-20 10:00"}),
        ("add_reminder", {"title": "Call", "description": "Call mum", "time": "tomorrow"}),
        ("delete_reminder", {"reminder_id": 1}),
        ("delete_reminder", {"reminder_id": 3}),
        ("delete_reminder", {"reminder_id": 1003}),
        ("view_all_reminders", {}),
        ("search_reminders", {"keyword": "meeting"}),
    ],
    "FoodPlatform": [
        ("login_food_platform", {"username": "Eve", "password": "password123"}),
        ("login_food_platform", {"username": "Frank", "password": "wrong"}),
        ("view_logged_in_users", {}),
        ("check_balance", {"user_name": "Eve"}),
        ("check_balance", {"user_name": "Nobody"}),
        ("get_products", {"merchant_name": "Heytea"}),
        ("get_products", {"merchant_name": "Nowhere"}),
        ("add_food_delivery_order", {"username": "Eve", "merchant_name": "Heytea", "items": []}),
        (
            "add_food_delivery_order",
            {
                "username": "Eve",
                "merchant_name": "Heytea",
                "items": [{"product": "Cheese Milk Tea", "quantity": 2}],
            },
        ),
        ("view_orders", {"user_name": "Eve"}),
        ("search_orders", {"keyword": "tea"}),
    ],
    "Travel": [
        ("get_flight_details", {"origin": "Beijing", "destination": "Shanghai"}),
        ("get_flight_details", {"origin": "Paris"}),
        ("get_user_details", {"user_id": "user1", "password": "password123"}),
        ("get_user_details", {"user_id": "user1", "password": "nope"}),
        ("get_reservation_details", {"reservation_id": "res_1"}),
        ("get_reservation_details", {"user_id": "user2"}),
        ("get_reservation_details", {"reservation_id": "res_3", "user_id": "user1"}),
        ("get_reservation_details", {}),
        ("authenticate_user", {"user_id": "user2", "password": "password456"}),
        ("get_baggage_allowance", {"membership_level": "silver", "cabin_class": "Business Class"}),
        (
            "find_transfer_flights",
            {"origin_city": "Beijing", "transfer_city": "Nanjing", "destination_city": "Shenzhen"},
        ),
        (
            "find_transfer_flights",
            {"origin_city": "Beijing", "transfer_city": "Xiamen", "destination_city": "Chengdu"},
        ),
        (
            "calculate_baggage_fee",
            {"membership_level": "regular", "cabin_class": "Economy Class", "baggage_count": 3},
        ),
        (
            "reserve_flight",
            {
                "user_id": "user1",
                "password": "password123",
                "flight_no": "CA1234",
                "cabin": "Economy Class",
                "payment_method": "card",
                "baggage_count": 1,
            },
        ),
        (
            "reserve_flight",
            {
                "user_id": "user3",
                "password": "password789",
                "flight_no": "MU3561",
                "cabin": "First Class",
                "payment_method": "cash",
                "baggage_count": 5,
            },
        ),
        (
            "reserve_flight",
            {
                "user_id": "user1",
                "password": "wrong",
                "flight_no": "CA1234",
                "cabin": "Economy Class",
                "payment_method": "bank",
                "baggage_count": 0,
            },
        ),
        ("modify_flight", {"user_id": "user1", "reservation_id": "res_1", "add_baggage": 2}),
        ("modify_flight", {"user_id": "user1", "reservation_id": "res_2", "new_cabin": "Economy Class"}),
        ("modify_flight", {"user_id": "user2", "reservation_id": "res_3", "new_flight_no": "CA1234"}),
        (
            "cancel_reservation",
            {"user_id": "user1", "reservation_id": "res_1", "reason": "The airline has canceled the flight."},
        ),
        ("cancel_reservation", {"user_id": "user2", "reservation_id": "res_4", "reason": "Change of plans"}),
    ],
}
UNINVOLVED_OR_MISSING = [("cancel_order", {"order_id": 1}), ("search_reminders", {"keyword": "To-do"})]


def _call(name: str, arguments: dict[str, Any]) -> list[Any]:
    return [name, copy.deepcopy(arguments)]


def _gold_calls(task: Task) -> list[list[Any]]:
    return [_call(c.name, c.arguments) for turn in task.gold for c in turn]


def _entry(name: str, task: Task, batches: list[list[list[Any]]], kind: str) -> dict[str, Any]:
    return {"name": name, "task": task.metadata["acebench_id"], "kind": kind, "batches": batches}


def _probes(task: Task) -> list[list[Any]]:
    pool = [_call(n, a) for cls in task.metadata["involved_classes"] for n, a in PROBES[cls]]
    others = [c for c in PROBES if c not in task.metadata["involved_classes"]]
    pool += [_call(n, a) for cls in others for n, a in PROBES[cls][:2]]
    return pool + [_call(n, a) for n, a in UNINVOLVED_OR_MISSING]


def _mutate_argument(call: list[Any], rng: random.Random) -> list[Any]:
    name, arguments = call[0], copy.deepcopy(call[1])
    if not arguments:
        return [name, {"unexpected": 1}]
    key = rng.choice(sorted(arguments))
    value = arguments[key]
    choice = rng.randrange(5)
    if choice == 0:
        del arguments[key]
    elif choice == 1:
        arguments["unexpected"] = True
    elif isinstance(value, bool):
        arguments[key] = not value
    elif isinstance(value, int | float):
        arguments[key] = [value + 1, str(value), -value, 0][choice - 2]
    elif isinstance(value, str):
        arguments[key] = [value.upper(), value + " ", ""][choice - 2]
    elif isinstance(value, list):
        if value and isinstance(value[0], dict) and choice != 4:
            item = dict(value[0])
            item["quantity"] = [0, "2"][choice - 2]
            arguments[key] = [item, *value[1:]]
        else:
            arguments[key] = []
    else:
        arguments[key] = None
    return [name, arguments]


def _regroup(calls: list[list[Any]], rng: random.Random) -> list[list[list[Any]]]:
    """Split ``calls`` into contiguous batches (one agent message each) at random cut points."""
    batches, current = [], []
    for call in calls:
        current.append(call)
        if rng.random() < 0.4:
            batches.append(current)
            current = []
    if current:
        batches.append(current)
    return batches


def perturbations(task: Task, count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(f"{seed}/{task.task_id}")
    gold = _gold_calls(task)
    probes = _probes(task)
    out = []
    for k in range(count):
        calls = copy.deepcopy(gold)
        ops = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            op = rng.choice(["drop", "duplicate", "swap", "probe", "probe", "argument", "argument"])
            if op in ("drop", "duplicate", "swap", "argument") and not calls:
                op = "probe"
            i = rng.randrange(len(calls)) if calls else 0
            if op == "drop":
                calls.pop(i)
            elif op == "duplicate":
                calls.insert(i, copy.deepcopy(calls[i]))
            elif op == "swap" and i + 1 < len(calls):
                calls[i], calls[i + 1] = calls[i + 1], calls[i]
            elif op == "probe":
                calls.insert(rng.randrange(len(calls) + 1), copy.deepcopy(rng.choice(probes)))
            elif op == "argument":
                calls[i] = _mutate_argument(calls[i], rng)
            ops.append(op)
        batches = _regroup(calls, rng) if rng.random() < 0.6 else [[c] for c in calls]
        out.append(_entry(f"{task.metadata['acebench_id']}/perturbed/{k}", task, batches, "+".join(ops)))
    return out


def hand_written(tasks: dict[str, Task]) -> list[dict[str, Any]]:
    """One or more trajectories per behaviour class of issue 17 (the names say which)."""

    def gold(tid: str) -> list[list[Any]]:
        return _gold_calls(tasks[tid])

    def case(name: str, tid: str, batches: list[list[list[Any]]]) -> dict[str, Any]:
        return _entry(f"{tid}/{name}", tasks[tid], batches, f"case:{name.split('/')[0]}")

    wifi, login = _call("turn_on_wifi", {}), _call("login_device", {})
    eve_login = _call("login_food_platform", {"username": "Eve", "password": "password123"})
    send = _call("send_message", {"sender_name": "Eve", "receiver_name": "Frank", "message": "Hi"})
    bad_kw = _call("send_message", {"sender_name": "Eve", "receiver": "Frank", "message": "Hi"})
    cases = []
    for tid in ("agent_multi_step_0", "agent_multi_turn_4", "agent_multi_step_12"):
        g = gold(tid)
        cases += [
            case(
                "callable/search_reminders",
                tid,
                [[c] for c in g] + [[_call("search_reminders", {"keyword": "x"})]],
            ),
            case(
                "callable/delete_reminder",
                tid,
                [[c] for c in g] + [[_call("delete_reminder", {"reminder_id": 1})]],
            ),
            case("callable/view_all_reminders", tid, [[_call("view_all_reminders", {})], *[[c] for c in g]]),
            case(
                "callable/view_orders", tid, [[c] for c in g] + [[_call("view_orders", {"user_name": "Eve"})]]
            ),
            case("callable/uninvolved_class", tid, [[c] for c in g] + [[send]]),
            case("batch/error_mid_batch", tid, [[g[0], bad_kw, *g[1:]]]),
            case("batch/unknown_first", tid, [[_call("no_such_tool", {}), *g]]),
            case(
                "batch/unknown_after_known", tid, [[g[0], _call("no_such_tool", {})], *[[c] for c in g[1:]]]
            ),
            case("batch/all_in_one", tid, [g]),
        ]
    for tid in ("agent_multi_step_0", "agent_multi_turn_9"):
        cases += [
            case("phone/login_twice", tid, [[wifi, eve_login, eve_login]]),
            case("phone/check_balance_unknown", tid, [[_call("check_balance", {"user_name": "Zed"})]]),
            case(
                "phone/empty_order",
                tid,
                [
                    [wifi, eve_login],
                    [
                        _call(
                            "add_food_delivery_order",
                            {"username": "Eve", "merchant_name": "Heytea", "items": []},
                        )
                    ],
                ],
            ),
            case(
                "phone/quantity_as_string",
                tid,
                [
                    [wifi, eve_login],
                    [
                        _call(
                            "add_food_delivery_order",
                            {
                                "username": "Eve",
                                "merchant_name": "Heytea",
                                "items": [{"product": "Cheese Milk Tea", "quantity": "1"}],
                            },
                        )
                    ],
                ],
            ),
            case(
                "phone/reminder_bad_time",
                tid,
                [[login, _call("add_reminder", {"title": "T", "description": "D", "time": "next week"})]],
            ),
            case(
                "phone/reminder_time_null",
                tid,
                [[_call("add_reminder", {"title": "T", "description": "D", "time": None})]],
            ),
        ]
    for tid in ("agent_multi_turn_4", "agent_multi_step_14"):
        cases += [
            case("phone/latest_after_send", tid, [[wifi, login, send], [_call("get_latest_message_id", {})]]),
            case("phone/earliest_after_send", tid, [[wifi, send], [_call("get_earliest_message_id", {})]]),
            case("phone/delete_id_as_string", tid, [[login, _call("delete_message", {"message_id": "1"})]]),
            case("phone/send_wifi_off", tid, [[send]]),
            case("phone/message_times", tid, [[_call("get_all_message_times_with_ids", {})]]),
            case("end_state/extra_message", tid, [[wifi, send], *[[c] for c in gold(tid)]]),
        ]
    travel = sorted(t for t in tasks if tasks[t].metadata["involved_classes"] == ["Travel"])
    for tid in travel[:3]:
        g = gold(tid)
        cancel = _call(
            "cancel_reservation", {"user_id": "user1", "reservation_id": "res_2", "reason": "Plans changed"}
        )
        cases += [
            case("travel/cancel_twice", tid, [[cancel], [cancel]]),
            case(
                "travel/cancel_airline",
                tid,
                [
                    [
                        _call(
                            "cancel_reservation",
                            {
                                "user_id": "user2",
                                "reservation_id": "res_3",
                                "reason": "The airline has canceled the flight.",
                            },
                        )
                    ]
                ],
            ),
            case(
                "travel/bags_per_call",
                tid,
                [
                    [
                        _call(
                            "modify_flight", {"user_id": "user1", "reservation_id": "res_1", "add_baggage": 1}
                        )
                    ]
                    for _ in range(3)
                ],
            ),
            case(
                "travel/partial_modification",
                tid,
                [
                    [
                        _call(
                            "modify_flight",
                            {
                                "user_id": "user3",
                                "reservation_id": "res_4",
                                "new_cabin": "Economy Class",
                                "add_baggage": 9,
                            },
                        )
                    ],
                    [
                        _call(
                            "modify_flight",
                            {
                                "user_id": "user2",
                                "reservation_id": "res_3",
                                "new_cabin": "Economy Class",
                                "new_payment_method": "cash",
                                "add_baggage": 200,
                            },
                        )
                    ],
                ],
            ),
            case("travel/card_and_first_class", tid, [[c] for c in _odd_travel_calls()]),
            case(
                "travel/overbooking",
                tid,
                [
                    [
                        _call(
                            "reserve_flight",
                            {
                                "user_id": "user2",
                                "password": "password456",
                                "flight_no": "MU5678",
                                "cabin": "Economy Class",
                                "payment_method": "bank",
                                "baggage_count": 0,
                            },
                        )
                    ]
                    for _ in range(5)
                ],
            ),
            case(
                "travel/lookup_both_ids",
                tid,
                [[_call("get_reservation_details", {"reservation_id": "res_1", "user_id": "user2"})]],
            ),
            case(
                "travel/gold_then_lookup",
                tid,
                [[c] for c in g] + [[_call("get_reservation_details", {"user_id": "user1"})]],
            ),
            case(
                "travel/unknown_flight",
                tid,
                [[_call("reserve_flight", {**_odd_reserve(), "flight_no": "XX0000"})]],
            ),
            case(
                "callable/helper_methods",
                tid,
                [
                    [_call("update_balance", {"user": "user1", "payment_method": "cash", "amount": 5})],
                    [_call("process_refund", {"user": "user1", "amount": 5})],
                    [
                        _call(
                            "calculate_price_difference",
                            {"flight": "CA1234", "old_cabin": "Economy Class", "new_cabin": "x"},
                        )
                    ],
                    [
                        _call(
                            "get_baggage_allowance",
                            {"membership_level": "gold", "cabin_class": "First Class"},
                        )
                    ],
                ],
            ),
        ]
    # An object argument: the original's parser reads it as a nested call and gives up on the message.
    cases.append(
        case(
            "batch/object_argument",
            "agent_multi_step_0",
            [
                [
                    _call(
                        "update_balance", {"user": {"cash_balance": 5}, "payment_method": "cash", "amount": 1}
                    )
                ],
                *[[c] for c in gold("agent_multi_step_0")],
            ],
        )
    )
    return cases


def _odd_reserve() -> dict[str, Any]:
    return {
        "user_id": "user1",
        "password": "password123",
        "flight_no": "CA1234",
        "cabin": "Economy Class",
        "payment_method": "bank",
        "baggage_count": 2,
    }


def _odd_travel_calls() -> list[list[Any]]:
    return [
        _call("reserve_flight", {**_odd_reserve(), "payment_method": "card"}),
        _call("reserve_flight", {**_odd_reserve(), "cabin": "First Class"}),
        _call("modify_flight", {"user_id": "user1", "reservation_id": "res_1", "new_cabin": "First Class"}),
        _call(
            "modify_flight",
            {"user_id": "user1", "reservation_id": "res_2", "new_payment_method": "card", "add_baggage": 3},
        ),
    ]


def random_walks(tasks: list[Task], count: int, seed: int) -> list[dict[str, Any]]:
    """Trajectories of 1-14 calls drawn from a task's probes and gold calls (some with an argument
    edited), in random batches: combinations no single perturbation of the gold makes."""
    rng = random.Random(f"{seed}/walks")
    out = []
    for k in range(count):
        task = rng.choice(tasks)
        pool = _probes(task) + _gold_calls(task)
        calls = []
        for _ in range(rng.randint(1, 14)):
            call = copy.deepcopy(rng.choice(pool))
            calls.append(_mutate_argument(call, rng) if rng.random() < 0.3 else call)
        out.append(_entry(f"{task.metadata['acebench_id']}/walk/{k}", task, _regroup(calls, rng), "walk"))
    return out


def trajectory_family(source: AceBenchAgentSource) -> list[dict[str, Any]]:
    tasks = {t.metadata["acebench_id"]: t for t in source.load().tasks}
    family = [_entry(f"{tid}/gold", t, [[c] for c in _gold_calls(t)], "gold") for tid, t in tasks.items()]
    family += hand_written(tasks)
    for task in tasks.values():
        family += perturbations(task, PERTURBATIONS_PER_TASK, SEED)
    return family + random_walks(list(tasks.values()), RANDOM_WALKS, SEED)


# -- comparison ----------------------------------------------------------------------------------------


def as_json(content: str) -> Any:
    """A tool result as the original's agent reads it: parsed JSON where it parses, else the text."""
    try:
        return json.loads(content)
    except json.JSONDecodeError:
        return content


GROUPS = {
    "gold": "gold solutions",
    "case": "hand-written cases",
    "perturbed": "perturbation family",
    "walk": "random walks",
}


def _group(record: dict[str, Any]) -> str:
    kind = record["kind"]
    return kind if kind in ("gold", "walk") else "case" if kind.startswith("case:") else "perturbed"


def agreement(semantics: str, records: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Row -> (agreeing, total) for the project's ``semantics`` against the recorded original."""
    source = AceBenchAgentSource(semantics=semantics)
    tasks = {t.metadata["acebench_id"]: t for t in source.load().tasks}
    counts: Counter[str] = Counter()
    for record in records:
        env, results, verdict = replay(source, tasks, record)
        # The policy semantics has its own (LCS) score: compared all the same, it rarely agrees.
        process = verdict.metrics.get("process_score", verdict.metrics.get("milestone_score"))
        pairs = [
            (a.content, b)
            for got_batch, want_batch in zip(results, expected_results(record), strict=True)
            for a, b in zip(got_batch, want_batch, strict=True)
        ]
        group = GROUPS[_group(record)]
        for row, agree, total in (
            ("trajectories, same verdict", verdict.passed == record["valid"], 1),
            ("trajectories, same process score", process == record["process"], 1),
            ("trajectories, same end state", env.end_state() == record["end_state"], 1),
            ("tool results equal as JSON", sum(as_json(a) == as_json(b) for a, b in pairs), len(pairs)),
        ):
            counts[(group, row, "agree")] += agree
            counts[(group, row, "total")] += total
    return {
        f"{group}: {row}": (counts[(group, row, "agree")], counts[(group, row, "total")])
        for group in GROUPS.values()
        for row in (
            "trajectories, same verdict",
            "trajectories, same process score",
            "trajectories, same end state",
            "tool results equal as JSON",
        )
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", default="table", choices=["table", "trajectories"])
    parser.add_argument("out", nargs="?", help="output file of `trajectories`")
    args = parser.parse_args(argv)
    if args.command == "trajectories":
        family = trajectory_family(AceBenchAgentSource())
        with open(args.out or "trajectories.jsonl", "w", encoding="utf-8") as f:
            for entry in family:
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        print(f"{len(family)} trajectories -> {args.out}", file=sys.stderr)
        return
    records = load_recorded()
    tables = {mode: agreement(mode, records) for mode in ("original", "policy")}
    print(
        f"| ACEBench agent vs the original ({len(records)} recorded trajectories) | original (default) | policy |"
    )
    print("|---|---|---|")
    for row in tables["original"]:
        cells = [f"{a}/{b} ({100 * a / max(b, 1):.1f}%)" for a, b in (tables[m][row] for m in tables)]
        print(f"| {row} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
