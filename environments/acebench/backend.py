"""Executing ACEBench tool calls on one rollout's scenario state.

``new_state`` builds a rollout's state (a deep copy of the defaults merged with the task's
``initial_config``); ``execute`` checks a call against the tool's JSON schema and runs the owning
scenario class's method on that state. A bad call never raises: it comes back as an error result.
"""

from __future__ import annotations

import copy
import inspect
import json
from typing import Any

from environments.acebench.errors import ToolError
from environments.acebench.phone import BaseApi, FoodPlatform, MessageApi, ReminderApi
from environments.acebench.travel import Travel
from environments.base import Effect, ToolResult, ToolSpec, private_arguments

SCENARIO_CLASSES: dict[str, type] = {
    "BaseApi": BaseApi,
    "MessageApi": MessageApi,
    "ReminderApi": ReminderApi,
    "FoodPlatform": FoodPlatform,
    "Travel": Travel,
}
# tool name -> (owning class, effect on state)
TOOL_OWNERS: dict[str, tuple[str, Effect]] = {
    tool: (class_name, effect)
    for class_name, cls in SCENARIO_CLASSES.items()
    for tool, effect in cls.TOOLS.items()
}
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def new_state(
    defaults: dict[str, dict[str, Any]], initial_config: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """A fresh, private state: every class's defaults, with the task's fields replacing them."""
    state = copy.deepcopy(defaults)
    for class_name, fields in initial_config.items():
        state.setdefault(class_name, {}).update(copy.deepcopy(fields))
    return state


def schema_errors(schema: dict[str, Any], value: Any, where: str) -> list[str]:
    """What is wrong with ``value`` against a (small) JSON schema: type, enum, required, properties, items."""
    expected = schema.get("type")
    if expected in _JSON_TYPES:
        ok = isinstance(value, _JSON_TYPES[expected]) and not (
            isinstance(value, bool) and expected in ("integer", "number")
        )
        if not ok:
            return [f"{where} must be of type {expected}, got {type(value).__name__} {value!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where} must be one of {schema['enum']}, got {value!r}"]
    errors: list[str] = []
    if isinstance(value, dict) and "properties" in schema:
        properties = schema["properties"]
        errors += [f"{where} is missing '{k}'" for k in schema.get("required", []) if k not in value]
        for key, item in value.items():
            if key not in properties:
                errors.append(f"{where} has unknown field '{key}'")
            elif not (item is None and properties[key].get("default", 0) is None):
                errors += schema_errors(properties[key], item, f"{where}.{key}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            errors += schema_errors(schema["items"], item, f"{where}[{i}]")
    return errors


def render(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def execute(state: dict[str, Any], tools: dict[str, ToolSpec], name: str, arguments: Any) -> ToolResult:
    """Run one call. ``tools`` are the tools this task shows; anything else is refused."""
    if name not in tools:
        return ToolResult(
            f"Error: no tool named '{name}' in this task; tools: {', '.join(tools)}.", is_error=True
        )
    arguments = private_arguments(arguments)  # scenario methods may keep what they are given
    if not isinstance(arguments, dict):
        return ToolResult(f"Error: arguments of {name} must be an object.", is_error=True)
    problems = schema_errors(tools[name].parameters, arguments, "arguments")
    if problems:
        return ToolResult(f"Error: invalid arguments for {name}: " + "; ".join(problems), is_error=True)
    class_name, _ = TOOL_OWNERS[name]
    method = getattr(SCENARIO_CLASSES[class_name](state), name)
    kwargs = {k: v for k, v in arguments.items() if v is not None}
    try:
        inspect.signature(method).bind(**kwargs)
    except TypeError as exc:
        return ToolResult(f"Error: invalid arguments for {name}: {exc}", is_error=True)
    try:
        return ToolResult(render(method(**kwargs)))
    except ToolError as exc:
        return ToolResult(f"Error: {exc}", is_error=True)
    except (KeyError, TypeError, ValueError) as exc:  # state the data left malformed: still not a crash
        return ToolResult(f"Error: {name} failed: {type(exc).__name__}: {exc}", is_error=True)
