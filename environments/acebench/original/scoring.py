"""ACEBench's two scores as the original's ``agent_eval`` computes them (observed @e6db74b).

End state (the verdict), over the ground truth as written in the answers (a list of ``{class: fields}``):

1. the episode must report as many classes as the ground truth lists, else it fails;
2. each ground-truth entry is compared with the reported class of exactly that name; an entry whose
   name matches none (the misspelt ``ReminderAPI``, ``Reminderpi``, ``BaseAPI``) is not checked;
3. every saved field of the reported class must appear in the entry; a field whose expected value is
   an object is checked key by key, only on the keys the ground truth lists (an extra inbox message or
   reminder passes), each value compared exactly; any other field is compared exactly. Values compare
   as Python does after a JSON round trip (``412 == 412.0``).

Process score: 1.0 when the end state passes; else the milestones (one sequence, or alternatives: the
best one) matched by a forward scan over the agent's messages: each milestone string, stripped, must
equal a later message, stripped, in order; the share found, rounded to 3 decimals as reported.
"""

from __future__ import annotations

import json
from typing import Any


def _short(value: Any, limit: int = 100) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _class_errors(reported: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    name, expected = next(iter(entry.items()))
    actual = next(iter(reported.values()))
    errors = []
    for field, value in actual.items():
        if field not in expected:
            errors.append(f"{name}.{field}: not in the ground truth")
        elif isinstance(expected[field], dict):
            for key, want in expected[field].items():
                if key not in value:
                    errors.append(f"{name}.{field}[{key!r}]: expected {_short(want)}, missing")
                elif want != value[key]:
                    errors.append(
                        f"{name}.{field}[{key!r}]: expected {_short(want)}, got {_short(value[key])}"
                    )
        elif expected[field] != value:
            errors.append(f"{name}.{field}: expected {_short(expected[field])}, got {_short(value)}")
    return errors


def end_state_errors(end_state: list[dict[str, Any]], ground_truth: Any) -> list[str]:
    """Why the original's evaluator fails this end state; empty when it passes."""
    entries = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    if len(entries) != len(end_state):
        return [
            f"wrong number of classes: the ground truth lists {len(entries)}, the episode reported {len(end_state)}"
        ]
    errors: list[str] = []
    for entry in entries:
        reported = next((r for r in end_state if set(r) == set(entry)), None)
        if reported is not None:  # a misspelt class matches nothing and is not checked
            errors += _class_errors(reported, entry)
    return errors


def unchecked_classes(end_state: list[dict[str, Any]], ground_truth: Any) -> list[str]:
    entries = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    return [name for entry in entries if not any(set(r) == set(entry) for r in end_state) for name in entry]


def _forward_share(messages: list[str], milestones: list[str]) -> float:
    if not milestones:
        return 1.0
    found, i = 0, 0
    for stone in milestones:
        while i < len(messages):
            hit = messages[i].strip() == stone.strip()
            i += 1
            if hit:
                found += 1
                break
    return found / len(milestones)


def process_score(messages: list[str], milestone_text: list[Any], end_state_passed: bool) -> float:
    if end_state_passed:
        return 1.0
    if milestone_text and isinstance(milestone_text[0], list):
        return max(round(_forward_share(messages, alternative), 3) for alternative in milestone_text)
    return round(_forward_share(messages, milestone_text), 3)
