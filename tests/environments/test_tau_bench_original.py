"""tau-bench's default semantics against the original's recorded behaviour.

The recordings (``tests/environments/data/tau_bench_*_original.json.gz``) are what
sierra-research/tau-bench@59a200c returned, stored and scored on the gold actions of every task, on
hand-written cases (one per known difference class) and on a seeded family of perturbed trajectories.
"""

import json

import pytest

from environments.base import ToolCall
from environments.tau_bench import TauBenchAirlineSource, TauBenchRetailSource
from environments.tau_bench.recorded import agreement_table, fuzz_agreement, load_recording, replay
from environments.tau_bench.source import EPISODE_ENDED

SOURCES = {"retail": TauBenchRetailSource, "airline": TauBenchAirlineSource}
RECORDINGS = {domain: load_recording(domain) for domain in SOURCES}


@pytest.fixture(scope="module")
def sources():
    return {domain: cls() for domain, cls in SOURCES.items()}


@pytest.fixture(scope="module")
def tables(sources):
    return {domain: agreement_table(sources[domain], RECORDINGS[domain]) for domain in SOURCES}


def _cases():
    for domain, recording in RECORDINGS.items():
        for recorded in recording["perturbed"]:
            if recorded["kind"].startswith("case:"):
                yield pytest.param(domain, recorded, id=f"{domain}-{recorded['kind'][5:]}")


@pytest.mark.parametrize("domain", list(SOURCES))
def test_tau_bench_original_gold_agrees_with_the_recording(tables, domain):
    table = tables[domain]
    equal, total = table.gold_calls_equal
    assert total == {"retail": 1375, "airline": 158}[domain]
    assert equal == total, [d for d in table.disagreements if d[1] == "gold"][:5]
    assert (
        table.gold_final_db_identical[0]
        == table.gold_final_db_identical[1]
        == len(RECORDINGS[domain]["gold"])
    )


@pytest.mark.parametrize("domain", list(SOURCES))
def test_tau_bench_original_perturbed_rewards_agree_with_the_recording(tables, domain):
    table = tables[domain]
    family = [p for p in RECORDINGS[domain]["perturbed"] if not p["kind"].startswith("case:")]
    assert len(family) >= 300
    rewards = {p["reward"] for p in family}
    assert rewards == {0.0, 1.0}  # the family is not degenerate: both outcomes occur
    agreed, total = table.perturbed_same_reward
    assert total == len(family) and agreed == total, table.disagreements[:5]
    assert (
        table.cases_same_reward[0]
        == table.cases_same_reward[1]
        == len(RECORDINGS[domain]["perturbed"]) - total
    )


@pytest.mark.parametrize("domain", list(SOURCES))
def test_tau_bench_original_random_call_sequences_agree_with_the_recording(sources, domain):
    recording = load_recording(domain, "fuzz")
    assert len(recording["fuzz"]) >= 900
    counts = fuzz_agreement(sources[domain], recording)
    for name in ("results", "final_db", "reward"):
        agreed, total = counts[name]
        assert agreed == total, (name, counts["disagreements"][:5])


@pytest.mark.parametrize("domain, recorded", list(_cases()))
def test_tau_bench_original_case_matches_results_database_and_reward(sources, domain, recorded):
    source = sources[domain]
    task = next(t for t in source.load().tasks if t.task_id == recorded["task_id"])
    agreement = replay(source, task, recorded)
    assert all(agreement.results), agreement.first_difference
    assert agreement.final_db, agreement.first_difference
    assert agreement.reward, (agreement.project_reward, recorded["reward"])


def test_tau_bench_original_calls_after_transfer_are_refused_and_not_scored(sources):
    source = sources["airline"]
    task = next(t for t in source.load().tasks if t.task_id == "tau_bench_airline/test/1")  # cancels Z7GOZK
    env = source.make_environment(task)
    env.reset(task)
    assert env.call("transfer_to_human_agents", {"summary": "x"}).content == "Transfer successful"
    late = env.call("cancel_reservation", {"reservation_id": "Z7GOZK"})
    assert late.is_error and late.content == EPISODE_ENDED
    assert env.db.touched() == set()
    env.reset(task)  # a new episode starts open
    assert not env.call("cancel_reservation", {"reservation_id": "Z7GOZK"}).is_error


@pytest.mark.parametrize(
    "domain, call, original, policy",
    [
        # (domain, call, what the default mode answers, what the policy mode answers) -- one per class
        (
            "airline",
            ToolCall("get_reservation_details", {"reservation_id": "ZZ"}),
            "user not found",
            "reservation not found",
        ),
        (
            "airline",
            ToolCall("send_certificate", {"user_id": "mia_li_3668", "amount": 0}),
            "certificate_3221322",
            "positive",
        ),
        ("retail", ToolCall("calculate", {"expression": "7//2"}), "3.0", "invalid expression"),
        (
            "retail",
            ToolCall("get_order_details", {"order_id": 7}),
            "order not found",
            "should be of type string",
        ),
    ],
)
def test_tau_bench_semantics_option_selects_the_mode(domain, call, original, policy):
    cls = SOURCES[domain]
    for source, expected in ((cls(), original), (cls(semantics="policy"), policy)):
        catalog = source.load()
        env = source.make_environment(catalog.tasks[0])
        env.reset(catalog.tasks[0])
        assert expected in env.call(call.name, call.arguments).content


def test_tau_bench_unknown_semantics_is_rejected_naming_the_option():
    with pytest.raises(ValueError, match="tau_bench_retail: option 'semantics' must be one of"):
        TauBenchRetailSource(semantics="strict")


def test_tau_bench_original_arguments_as_json_text_run_like_an_object(sources):
    source = sources["retail"]
    task = next(t for t in source.load().tasks if t.task_id == "tau_bench_retail/dev/0")  # cancels #W5442520
    results = []
    for arguments in ({"order_id": "#W5442520", "reason": "no longer needed"},) * 2:
        env = source.make_environment(task)
        env.reset(task)
        results.append(env.call("cancel_pending_order", arguments if not results else json.dumps(arguments)))
    assert results[0] == results[1] and not results[1].is_error
    assert env.call("get_order_details", "[1]").content == "Error: arguments should be an object, got str"
