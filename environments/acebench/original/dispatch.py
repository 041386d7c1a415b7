"""The original ACEBench dispatcher's observable behaviour, for one rollout.

Observed by running ACEBench @e6db74b (``execute_agent_func_call`` and the execution roles), written
here from the recordings:

- One instance per involved class, built from the defaults; each takes its start flags from its own
  ``initial_config`` entry and then from ``BaseApi``'s.
- Every public method of an involved instance can be called, whether or not the task's function list
  shows it; a name no involved instance has is not called. A method several instances have (the device
  methods of the phone apps) runs on each of them in turn, and the last result is the call's result.
- A batch is one agent message (its calls, in order). Each call's result is the method's return
  value, turned into text when the batch ends: a string as is, a dict as JSON (``json.dumps``,
  ASCII-escaped), anything else with ``str`` (a list as Python text).
- Multi-step: an exception gives that call ``Error during execution: <exception>`` and the batch goes
  on. A call of an unknown name repeats the batch's previous result, and fails as the original's
  unbound local variable when there is none.
- Multi-turn: the first exception stops the batch. The agent then sees only the literal text
  ``Error during execution: {str(e)}`` (the original forgot the ``f`` of its f-string), for every call
  of the batch; the calls before it keep their effects. An unknown name first in a batch is such an
  exception.
- Arguments are passed as given: no type or schema check (``delete_message("4")`` looks for the
  string key).
- The end state the evaluator sees is each instance's saved fields (``SAVED``) after a JSON round
  trip, and only once the dispatcher has handed its instances back: after at least one multi-step
  batch that parsed, or one multi-turn batch that raised nothing. Before that it is empty.

Not modelled (the original cannot receive them as text, or crashes outright): a tool name that is not
a Python identifier is treated as unknown; an argument name that is not one (or is a keyword) makes
the batch unreadable, answered as the original's multi-step parser does ("Please do not ask me any
questions, ..."), and so does a top-level object argument (the original reads ``key={...}`` as a nested
call; in a multi-step message that fails the parse, in a multi-turn one it ends the original's run).
"""

from __future__ import annotations

import copy
import inspect
import json
import keyword
from collections.abc import Callable
from typing import Any

from environments.acebench.original.phone import BaseApi, FoodPlatform, MessageApi, ReminderApi
from environments.acebench.original.text import render_batch
from environments.acebench.original.travel import Travel
from environments.base import ToolCall, ToolResult

CLASSES: dict[str, type] = {
    "BaseApi": BaseApi,
    "MessageApi": MessageApi,
    "ReminderApi": ReminderApi,
    "FoodPlatform": FoodPlatform,
    "Travel": Travel,
}
ERROR_PREFIX = "Error during execution: "
MULTI_TURN_BATCH_ERROR = ERROR_PREFIX + "{str(e)}"
UNREADABLE_BATCH = "Please do not ask me any questions, use the known conditions to solve the problem"
_UNBOUND = "cannot access local variable 'func_call_result' where it is not associated with a value"
_NOTHING = object()


def render_result(value: Any) -> str:
    """A method's return value as the original's dispatcher passes it on."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def is_refusal(value: Any) -> bool:
    return type(value) is dict and value.get("status") in (False, "error")


def _readable(call: ToolCall) -> bool:
    """Whether the original could read the call as text: names that are identifiers, no object values
    (its parser takes ``key={...}`` for a nested call and fails on the message)."""
    return isinstance(call.arguments, dict) and all(
        isinstance(k, str) and k.isidentifier() and not keyword.iskeyword(k) and not isinstance(v, dict)
        for k, v in call.arguments.items()
    )


class OriginalSession:
    """The instances of one rollout, the methods they offer, and the text of each batch (the process)."""

    def __init__(
        self,
        defaults: dict[str, dict[str, Any]],
        initial_config: dict[str, dict[str, Any]],
        involved_classes: list[str],
        multi_turn: bool,
    ):
        self.multi_turn = multi_turn
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, list[Callable[..., Any]]] = {}
        for name in involved_classes:
            instance = CLASSES[name](copy.deepcopy(defaults[name]))
            instance._configure(initial_config.get(name, {}))
            instance._configure(initial_config.get("BaseApi", {}))
            self.instances[name] = instance
            for method_name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method_name.startswith("_"):
                    self.methods.setdefault(method_name, []).append(method)
        self.messages: list[str] = []  # each batch as the agent's text: what the process score reads
        self.reported = False  # whether the evaluator would see the instances (see the module doc)

    def run_batch(self, calls: list[ToolCall]) -> list[ToolResult]:
        if not calls:
            return []
        readable = all(_readable(c) for c in calls)
        self.messages.append(
            render_batch([(c.name, c.arguments) for c in calls])
            if readable
            else repr([c.name for c in calls])
        )
        if not readable:
            return [
                ToolResult(
                    UNREADABLE_BATCH
                    if isinstance(c.arguments, dict)
                    else f"Error: the arguments of {c.name} must be a JSON object, got {c.arguments!r}",
                    is_error=True,
                )
                for c in calls
            ]
        values: list[Any] = []
        failed: list[bool] = []
        last: Any = _NOTHING
        for call in calls:
            methods = self.methods.get(call.name, []) if call.name.isidentifier() else []
            try:
                for method in methods:
                    last = method(**copy.deepcopy(call.arguments))
                if last is _NOTHING:
                    raise UnboundLocalError(_UNBOUND)
                values.append(last)
                failed.append(False)
            except Exception as exc:  # noqa: BLE001 - any exception is what the original reports
                if self.multi_turn:
                    return [ToolResult(MULTI_TURN_BATCH_ERROR, is_error=True) for _ in calls]
                values.append(f"{ERROR_PREFIX}{exc}")
                failed.append(True)
        self.reported = True
        # Rendered only now, as the original does: a live object returned early shows later changes.
        return [
            ToolResult(render_result(v), is_error=f or is_refusal(v))
            for v, f in zip(values, failed, strict=True)
        ]

    def end_state(self) -> list[dict[str, Any]]:
        """What the original's evaluator reads: ``[{class: {saved field: value}}]`` as JSON."""
        if not self.reported:
            return []
        saved = [
            {name: {k: v for k, v in vars(instance).items() if k in instance.SAVED}}
            for name, instance in self.instances.items()
        ]
        return json.loads(json.dumps(saved, ensure_ascii=False))
