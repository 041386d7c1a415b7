"""A batch of tool calls as the text an ACEBench agent writes: ``[name(key=value, ...), ...]``.

The original reads the agent's message as that text, runs it, and scores the process by comparing
each message with the milestone strings, so the project renders a batch the same way: values as
Python literals (``repr``), arguments in the call's order, calls joined by ``", "``.
"""

from __future__ import annotations

from typing import Any


def render_call(name: str, arguments: dict[str, Any]) -> str:
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"


def render_batch(calls: list[tuple[str, dict[str, Any]]]) -> str:
    return "[" + ", ".join(render_call(name, arguments) for name, arguments in calls) + "]"
