"""The state-diff verifier: reward 1 iff the final state equals the task's goal state.

The goal state is the environment's initial state with the task's goal diff applied (records
changed, created or deleted by the gold solution). The reason of a failure names the first
difference in a fixed order: table, then record id, then field.
"""

from __future__ import annotations

from typing import Any

from environments.base import Verdict
from environments.synthetic.schema import State


def goal_state(initial: State, goal: dict[str, dict[str, dict | None]]) -> State:
    """``initial`` with ``goal`` applied; records are shared with ``initial``, not copied (read-only)."""
    expected = {table: dict(rows) for table, rows in initial.items()}
    for table, changes in goal.items():
        for rid, record in changes.items():
            if record is None:
                expected[table].pop(rid, None)
            else:
                expected[table][rid] = record
    return expected


def first_difference(expected: State, actual: State) -> str | None:
    for table in sorted(expected.keys() | actual.keys()):
        want, got = expected.get(table, {}), actual.get(table, {})
        if want == got:
            continue
        for rid in sorted(want.keys() | got.keys()):
            if rid not in got:
                return f"{table}/{rid}: expected record {_show(want[rid])} is missing"
            if rid not in want:
                return f"{table}/{rid}: unexpected record {_show(got[rid])}"
            for name in sorted(want[rid].keys() | got[rid].keys()):
                a, b = want[rid].get(name), got[rid].get(name)
                if a != b:
                    return f"{table}/{rid}.{name}: expected {a!r}, got {b!r}"
    return None


def verify_state(initial: State, goal: dict[str, dict[str, dict | None]], final: State) -> Verdict:
    difference = first_difference(goal_state(initial, goal), final)
    if difference is None:
        changed = sum(len(changes) for changes in goal.values())
        return Verdict(1.0, f"final state equals the goal state ({changed} record(s) changed)")
    return Verdict(0.0, f"final state differs from the goal: {difference}")


def _show(record: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={v!r}" for k, v in sorted(record.items())) + "}"
