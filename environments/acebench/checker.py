"""ACEBench's two scores: the end-state check (the reward) and the milestone/process score.

End state: every field that ``ground_truth`` lists for a class must equal the rollout's final value
(compared as JSON, so message ids ``7`` and ``"7"`` are the same key, and ``412`` equals ``412.0``).
This is stricter than a per-key subset check: an extra message left in the inbox is a difference.

Milestone score: the share of a milestone call sequence that the agent's calls contain in order
(longest common subsequence / milestone length), the best over the task's alternative sequences.
Two calls match when the names agree and the arguments agree after normalising: strings compared
case-insensitively with whitespace collapsed, numbers by value, and arguments left at the tool's
documented default treated as absent.
"""

from __future__ import annotations

import json
from typing import Any

from environments.base import ToolCall, ToolSpec

_MISSING = object()


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _first_difference(expected: Any, actual: Any, path: str) -> str | None:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in expected:
            if key not in actual:
                return f"{path}[{key!r}]: expected {_short(expected[key])}, missing"
            found = _first_difference(expected[key], actual[key], f"{path}[{key!r}]")
            if found:
                return found
        extra = [key for key in actual if key not in expected]
        return f"{path}[{extra[0]!r}]: not expected, got {_short(actual[extra[0]])}" if extra else None
    if isinstance(expected, list) and isinstance(actual, list):
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            found = _first_difference(e, a, f"{path}[{i}]")
            if found:
                return found
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} entries, got {len(actual)}"
        return None
    # Scalars: 412 equals 412.0, but True is not 1.
    if expected == actual and isinstance(expected, bool) == isinstance(actual, bool):
        return None
    return f"{path}: expected {_short(expected)}, got {_short(actual)}"


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def end_state_differences(state: dict[str, Any], ground_truth: dict[str, dict[str, Any]]) -> list[str]:
    """One line per (class, field) whose final value differs from the ground truth; empty when all match."""
    differences = []
    for class_name, fields in ground_truth.items():
        actual_class = _as_json(state.get(class_name, {}))
        for field_name, expected in fields.items():
            actual = actual_class.get(field_name, _MISSING)
            where = f"{class_name}.{field_name}"
            if actual is _MISSING:
                differences.append(f"{where}: expected {_short(expected)}, missing")
                continue
            found = _first_difference(_as_json(expected), actual, where)
            if found:
                differences.append(found)
    return differences


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split()).casefold()
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    return value


def _call_key(call: ToolCall, tools: dict[str, ToolSpec]) -> str:
    properties = tools[call.name].parameters.get("properties", {}) if call.name in tools else {}
    arguments = {}
    for key, value in call.arguments.items():
        spec = properties.get(key, {})
        if value is None or ("default" in spec and _normalise(value) == _normalise(spec["default"])):
            continue
        arguments[key] = _normalise(value)
    return json.dumps([call.name, arguments], sort_keys=True)


def _lcs(a: list[str], b: list[str]) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def milestone_score(
    calls: list[ToolCall], alternatives: list[list[ToolCall]], tools: dict[str, ToolSpec]
) -> float:
    """Best share, over the alternatives, of a milestone sequence matched in order by ``calls``."""
    made = [_call_key(c, tools) for c in calls]
    best = 0.0
    for milestone in alternatives:
        if not milestone:
            return 1.0
        expected = [_call_key(c, tools) for c in milestone]
        best = max(best, _lcs(expected, made) / len(expected))
    return best
