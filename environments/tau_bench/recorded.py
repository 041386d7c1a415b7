"""Agreement with the original tau-bench, measured against its recorded behaviour.

``tests/environments/data/tau_bench_<domain>_original.json.gz`` holds what
sierra-research/tau-bench@59a200c did on chosen trajectories (run with its ``Env.step`` and
``calculate_reward``, no LLM): per trajectory the steps (tool calls and replies to the user), each
tool result up to the end of the episode, the changed database records at the end, and the reward.
``gold`` has every task's gold actions followed by its outputs said as replies; ``perturbed`` has
hand-written cases (``kind`` = ``case:<name>``) and a seeded perturbation family. The
``tau_bench_<domain>_fuzz.json.gz`` files hold random call sequences over each task's own records,
with results and final changes stored as digests (:func:`digest`) to stay small. Only facts are
stored, no original code; the recording script lives outside this repository.

:func:`replay` runs one recorded trajectory through this project's environment and says where it
agrees. A reply closes a turn, so the project's trajectory has the original's order of calls and
replies.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from environments.base import CallRecord, Task, ToolCall, Trajectory, TurnRecord
from environments.tau_bench.source import TauBenchSource

RECORDINGS = Path(__file__).resolve().parents[2] / "tests/environments/data"


def recording_path(domain: str) -> Path:
    return RECORDINGS / f"tau_bench_{domain}_original.json.gz"


def load_recording(domain: str, kind: str = "original") -> dict[str, Any]:
    """``kind``: ``original`` (gold, cases, perturbations) or ``fuzz`` (random sequences, digests)."""
    path = recording_path(domain) if kind == "original" else RECORDINGS / f"tau_bench_{domain}_fuzz.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def digest(text: str) -> str:
    """A short hash of a value's canonical text, as the fuzz recordings store results and changes."""
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def result_digest(content: str) -> str:
    try:
        return digest(canonical(json.loads(content)))
    except (json.JSONDecodeError, TypeError):
        return digest(content)


def canonical(value: Any) -> str:
    """A value as canonical JSON text: equal texts <=> equal as JSON, with 1 and 1.0 different."""
    return json.dumps(value, sort_keys=True)


def same_result(project: str, original: str | None) -> bool:
    """Tool results equal as JSON (parsed when both parse, else as text)."""
    original = "None" if original is None else original
    try:
        return canonical(json.loads(project)) == canonical(json.loads(original))
    except (json.JSONDecodeError, TypeError):
        return project == original


@dataclass
class Agreement:
    """Where one trajectory agrees with the recording."""

    results: list[bool]  # one per tool call the original ran
    final_db: bool
    reward: bool
    project_reward: float
    first_difference: str = ""


def replay(source: TauBenchSource, task: Task, recorded: dict[str, Any], hashed: bool = False) -> Agreement:
    """Run ``recorded["steps"]`` in a fresh environment and compare; ``hashed``: the recording holds
    digests of the results and of the final changes (the fuzz files)."""
    env = source.make_environment(task)
    env.reset(task)
    trajectory, turn = Trajectory(task.task_id), TurnRecord()
    results, first = [], ""
    end = recorded["end"]
    for index, step in enumerate(recorded["steps"]):
        if "respond" in step:
            turn.replies.append(step["respond"])
            trajectory.turns.append(turn)
            turn = TurnRecord()
            continue
        result = env.call(step["name"], step["kwargs"])
        turn.calls.append(CallRecord(_call(step), result))
        if end is None or index <= end:
            expected = recorded["results"][index]
            if hashed:
                ok = result_digest(result.content) == expected
            else:
                ok = same_result(result.content, expected)
            results.append(ok)
            if not ok and not first:
                first = f"step {index} {step['name']}: {result.content[:200]!r} != {recorded['results'][index]!r:.200}"
    if turn.calls or turn.replies or not trajectory.turns:
        trajectory.turns.append(turn)
    if hashed:
        final_db = digest(canonical(_changes(source, env.db))) == recorded["final"]
    else:
        final_db = _same_changes(source, env.db, recorded["final"])
    if not final_db and not first:
        first = "final database differs"
    reward = env.verify(trajectory).reward
    return Agreement(results, final_db, reward == recorded["reward"], reward, first)


def _call(step: dict[str, Any]) -> ToolCall:
    return ToolCall(step["name"], step["kwargs"])


def _same_changes(source: TauBenchSource, db, changed: dict[str, dict[str, Any]]) -> bool:
    """The project's final database equals the original's: the records the original changed, and no
    other record differs from the starting data."""
    base = source.domain_data().tables.tables
    keys = {(t, k) for t, rows in changed.items() for k in rows} | db.touched()
    for table, key in keys:
        expected = changed[table][key] if key in changed.get(table, {}) else base[table].get(key)
        if canonical(db.tables[table].get(key)) != canonical(expected):
            return False
    return True


def _changes(source: TauBenchSource, db) -> dict[str, dict[str, Any]]:
    """The records that differ from the starting data, by table (tables without changes left out)."""
    base = source.domain_data().tables.tables
    out: dict[str, dict[str, Any]] = {}
    for table, key in db.touched():
        if canonical(db.tables[table].get(key)) != canonical(base[table].get(key)):
            out.setdefault(table, {})[key] = db.tables[table].get(key)
    return out


def fuzz_agreement(source: TauBenchSource, recording: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Counts of agreeing results, final databases and rewards over the fuzz recording."""
    tasks = {t.task_id: t for t in source.load().tasks}
    counts = {"results": [0, 0], "final_db": [0, 0], "reward": [0, 0], "disagreements": []}
    for recorded in recording["fuzz"]:
        agreement = replay(source, tasks[recorded["task_id"]], recorded, hashed=True)
        for name, ok, n in (
            ("results", sum(agreement.results), len(agreement.results)),
            ("final_db", agreement.final_db, 1),
            ("reward", agreement.reward, 1),
        ):
            counts[name][0] += ok
            counts[name][1] += n
        if not (all(agreement.results) and agreement.final_db and agreement.reward):
            counts["disagreements"].append((recorded["task_id"], agreement.first_difference))
    return {k: tuple(v) if k != "disagreements" else v for k, v in counts.items()}


@dataclass
class Table:
    """Agreement counts of one domain, the closing note's table."""

    gold_calls_equal: tuple[int, int]
    gold_final_db_identical: tuple[int, int]
    perturbed_same_reward: tuple[int, int]  # the seeded perturbation family
    cases_same_reward: tuple[int, int]  # the hand-written cases
    disagreements: list[tuple[str, str, str]]  # (task_id, kind, first difference)


def agreement_table(source: TauBenchSource, recording: dict[str, Any]) -> Table:
    tasks = {t.task_id: t for t in source.load().tasks}
    calls, dbs, notes = [0, 0], [0, 0], []
    rewards = {"case": [0, 0], "family": [0, 0]}
    for task_id, recorded in sorted(recording["gold"].items()):
        recorded = {**recorded, "steps": _gold_steps(tasks[task_id])}
        agreement = replay(source, tasks[task_id], recorded)
        calls[0] += sum(agreement.results)
        calls[1] += len(agreement.results)
        dbs[0] += agreement.final_db
        dbs[1] += 1
        if not (all(agreement.results) and agreement.final_db):
            notes.append((task_id, "gold", agreement.first_difference))
    for recorded in recording["perturbed"]:
        agreement = replay(source, tasks[recorded["task_id"]], recorded)
        counts = rewards["case" if recorded["kind"].startswith("case:") else "family"]
        counts[0] += agreement.reward
        counts[1] += 1
        if not agreement.reward:
            notes.append((recorded["task_id"], recorded["kind"], agreement.first_difference))
    return Table(tuple(calls), tuple(dbs), tuple(rewards["family"]), tuple(rewards["case"]), notes)


def _gold_steps(task: Task) -> list[dict[str, Any]]:
    steps = [{"name": c.name, "kwargs": c.arguments} for turn in task.gold for c in turn]
    return steps + [{"respond": output} for output in task.metadata["outputs"]]
