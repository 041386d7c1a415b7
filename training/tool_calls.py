"""Tool calls out of a model's text, in the Hermes / Qwen3 format, without ever raising.

A call is a JSON object inside ``<tool_call>`` ... ``</tool_call>``::

    I'll look first.
    <tool_call>
    {"name": "ls", "arguments": {"a": true}}
    </tool_call>

``parse_tool_calls(text)`` returns the well-formed calls in order, the assistant's text outside the
blocks, and one message per malformed block (the agent loop reports these back to the model and
counts them). Rules:

* ``name`` must be a non-empty string; ``arguments`` must be a JSON object, or a string holding one
  (OpenAI's encoding); a missing ``arguments`` means no arguments; other keys are ignored;
* a block that is not exactly one JSON object, an unclosed ``<tool_call>``, a ``<tool_call>`` opened
  inside another and a ``</tool_call>`` with no opening are errors; an unclosed block is not
  executed even when its JSON is complete (the model did not finish the call);
* reasoning (everything up to the last ``</think>``, as Qwen3 emits it) is neither parsed nor kept
  as text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from environments.base import ToolCall

OPEN, CLOSE, END_THINK = "<tool_call>", "</tool_call>", "</think>"


@dataclass(frozen=True)
class ParsedOutput:
    calls: list[ToolCall] = field(default_factory=list)
    text: str = ""
    errors: list[str] = field(default_factory=list)


def parse_tool_calls(output: str) -> ParsedOutput:
    """Calls, text outside the call blocks, and parse errors of one model output."""
    if END_THINK in output:
        output = output[output.rindex(END_THINK) + len(END_THINK) :]
    calls: list[ToolCall] = []
    errors: list[str] = []
    text_parts: list[str] = []
    pos, block = 0, 0
    while True:
        start = output.find(OPEN, pos)
        outside = output[pos:] if start < 0 else output[pos:start]
        if CLOSE in outside:
            errors.append(f"'{CLOSE}' without an opening '{OPEN}'")
            outside = outside.replace(CLOSE, "")
        text_parts.append(outside)
        if start < 0:
            break
        block += 1
        body_start = start + len(OPEN)
        end = output.find(CLOSE, body_start)
        inner = output.find(OPEN, body_start)
        if end < 0:
            errors.append(f"tool call {block}: '{OPEN}' is never closed")
            break
        if 0 <= inner < end:
            errors.append(f"tool call {block}: '{OPEN}' opened inside another tool call")
            pos = inner
            continue
        call, error = _parse_body(output[body_start:end])
        if error is None:
            calls.append(call)
        else:
            errors.append(f"tool call {block}: {error}")
        pos = end + len(CLOSE)
    return ParsedOutput(calls, "".join(text_parts).strip(), errors)


def _parse_body(body: str) -> tuple[ToolCall | None, str | None]:
    try:
        payload: Any = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(payload, dict):
        return None, f"expected a JSON object, got {type(payload).__name__}"
    name = payload.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, "missing or empty 'name'"
    arguments = payload.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None, f"'arguments' of {name!r} is a string that is not JSON"
    if not isinstance(arguments, dict):
        return None, f"'arguments' of {name!r} must be an object, got {type(arguments).__name__}"
    return ToolCall(name.strip(), arguments), None


def format_tool_call(call: ToolCall) -> str:
    """One call in the format the parser reads (what a chat template renders for a tool call)."""
    return f"{OPEN}\n{json.dumps({'name': call.name, 'arguments': call.arguments})}\n{CLOSE}"
