"""What both domains' tools share: argument checking against the JSON schema, the error convention,
the domain-free tools (``calculate``, ``think``, ``transfer_to_human_agents``) and dispatch.

Two dispatchers, one per mode. ``policy`` (:func:`execute`): a tool is ``fn(db, **arguments) ->
str`` that raises :class:`ToolError` for a call the domain rejects; that, and any argument that does
not fit the schema, becomes ``ToolResult("Error: ...", is_error=True)``, and write tools check
everything before they change anything. ``original`` (:func:`execute_original`, the default): as
tau-bench's ``Env.step``, no schema check; a tool returns its own ``"Error: ..."`` text, and any
exception it raises is reported as ``Error: <exception>`` (what it changed before stays changed, as
in the original). Exception wording is Python's (recorded under Python 3.11).
"""

from __future__ import annotations

import ast
import inspect
import json
import operator
from collections.abc import Callable
from typing import Any

from environments.base import ToolResult, ToolSpec, private_arguments
from environments.tau_bench.db import Database

Tool = Callable[..., str]
TERMINAL_TOOL = "transfer_to_human_agents"  # ends the episode in tau-bench


class ToolError(Exception):
    """A call the domain rejects; the message is shown to the agent after ``Error: ``."""


def dump(value: Any) -> str:
    """Tool output format: JSON, as tau-bench's tools return it."""
    return json.dumps(value)


def money(value: float) -> float:
    """Amounts are kept to cents, as in the source data."""
    return round(value + 0.0, 2)


# --- argument checking (the subset of JSON schema that tools.json uses) ---------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "array": (list,),
    "object": (dict,),
    "boolean": (bool,),
}


def schema_errors(value: Any, schema: dict[str, Any], path: str) -> str | None:
    """The first way ``value`` breaks ``schema``, or None."""
    expected = schema.get("type")
    if expected in _TYPES:
        wrong_bool = isinstance(value, bool) and expected in ("integer", "number")
        if wrong_bool or not isinstance(value, _TYPES[expected]):
            return f"argument '{path}' should be of type {expected}, got {type(value).__name__}"
    if "enum" in schema and value not in schema["enum"]:
        return f"argument '{path}' should be one of {schema['enum']}, got {value!r}"
    if expected == "object":
        for name in schema.get("required", []):
            if name not in value:
                return f"missing required argument '{path}.{name}'" if path else f"missing argument '{name}'"
        props = schema.get("properties", {})
        for name, item in value.items():
            where = f"{path}.{name}" if path else name
            if name not in props:
                return f"unexpected argument '{where}'"
            if (error := schema_errors(item, props[name], where)) is not None:
                return error
    if expected == "array" and "items" in schema:
        for i, item in enumerate(value):
            if (error := schema_errors(item, schema["items"], f"{path}[{i}]")) is not None:
                return error
    return None


def execute(
    db: Database, specs: dict[str, ToolSpec], tools: dict[str, Tool], name: str, arguments
) -> ToolResult:
    """Run one call; every failure comes back as an error result, never as an exception."""
    if name not in specs or name not in tools:
        return ToolResult(f"Error: unknown tool '{name}'", is_error=True)
    arguments = private_arguments(arguments)  # tools may keep what they are given
    if not isinstance(arguments, dict):
        return ToolResult(f"Error: arguments should be an object, got {type(arguments).__name__}", True)
    if (error := schema_errors(arguments, specs[name].parameters, "")) is not None:
        return ToolResult(f"Error: {error}", is_error=True)
    try:
        return ToolResult(tools[name](db, **arguments))
    except ToolError as exc:
        return ToolResult(f"Error: {exc}", is_error=True)
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:  # a defect: still not the agent's crash
        return ToolResult(f"Error: {type(exc).__name__}: {exc}", is_error=True)


# --- tools shared by both domains -------------------------------------------------------------------

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _arith(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_arith(node.left), _arith(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_arith(node.operand))
    raise ToolError("invalid expression: only numbers, + - * /, parentheses and spaces are allowed")


def calculate(db: Database, expression: str) -> str:
    """Evaluate an arithmetic expression (numbers, + - * /, parentheses); result rounded to cents.
    Parsed with ``ast`` and evaluated node by node, so nothing but arithmetic can run."""
    if not set(expression) <= set("0123456789+-*/(). "):
        raise ToolError("invalid characters in expression")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ToolError(f"cannot parse expression {expression!r}") from None
    try:
        return str(round(float(_arith(tree.body)), 2))
    except ZeroDivisionError:
        raise ToolError("division by zero") from None


def think(db: Database, thought: str) -> str:
    """Only logs the thought (it is in the trajectory); changes nothing."""
    return ""


def transfer_to_human_agents(db: Database, summary: str) -> str:
    """Ends the agent's part of the conversation in tau-bench; the database is unchanged."""
    return "Transfer successful"


COMMON_TOOLS: dict[str, Tool] = {
    "calculate": calculate,
    "think": think,
    "transfer_to_human_agents": transfer_to_human_agents,
}


# --- tau-bench's own semantics (the default mode) ---------------------------------------------------


def _class_name(tool: str) -> str:
    """The original's class for a tool: ``get_user_details`` -> ``GetUserDetails``."""
    return "".join(part.capitalize() for part in tool.split("_"))


def _binding_error(tool: str, fn: Tool, arguments: dict[str, Any]) -> str | None:
    """Python's own message for calling the original's ``Class.invoke(data=..., **arguments)`` with
    arguments that do not fit its signature (the original type-checks nothing, but Python checks names)."""
    names = [name for name in inspect.signature(fn).parameters][1:]  # all required, after the database
    where = f"{_class_name(tool)}.invoke()"
    for key in arguments:
        if key == "data":
            return f"{where} got multiple values for argument 'data'"
        if key not in names:
            return f"{where} got an unexpected keyword argument '{key}'"
    missing = [f"'{name}'" for name in names if name not in arguments]
    if not missing:
        return None
    if len(missing) == 1:
        listed = missing[0]
    elif len(missing) == 2:
        listed = " and ".join(missing)
    else:
        listed = ", ".join(missing[:-1]) + ", and " + missing[-1]
    plural = "s" if len(missing) > 1 else ""
    return f"{where} missing {len(missing)} required positional argument{plural}: {listed}"


def execute_original(db: Database, tools: dict[str, Tool], name: str, arguments) -> ToolResult:
    """Run one call as tau-bench's ``Env.step`` does: an unknown tool is ``Unknown action <name>``; any
    exception a tool raises becomes ``Error: <exception>``; no schema check. A tool's own rejections
    are results starting with ``Error:``, marked ``is_error`` here."""
    if name not in tools:
        return ToolResult(f"Unknown action {name}", is_error=True)
    arguments = private_arguments(arguments)  # tools store argument values (passengers, payments) as given
    if not isinstance(arguments, dict):  # tau-bench's Action model only holds an object
        return ToolResult(f"Error: arguments should be an object, got {type(arguments).__name__}", True)
    if (error := _binding_error(name, tools[name], arguments)) is not None:
        return ToolResult(f"Error: {error}", is_error=True)
    try:
        content = tools[name](db, **arguments)
    except Exception as exc:  # noqa: BLE001 -- as the original: every failure is an observation
        return ToolResult(f"Error: {exc}", is_error=True)
    if content is None:  # send_certificate when the user holds all three certificate ids
        return ToolResult("None")
    return ToolResult(content, is_error=content.startswith("Error"))


CALCULATOR_CHARS = "0123456789+-*/(). "
_ORIGINAL_BINARY = {
    **_BINARY,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}
MAX_EXPONENT = 10_000  # the original would compute 9**9**9 for ever; this mode refuses (a listed difference)


def _evaluate(node: ast.AST) -> Any:
    """Python's value of an expression made of CALCULATOR_CHARS, computed node by node (no ``eval``)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _ORIGINAL_BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
            raise OverflowError("exponent too large")
        return _ORIGINAL_BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.Tuple):
        return tuple(_evaluate(item) for item in node.elts)
    if isinstance(node, ast.Call):  # "(2)(3)": Python calls 2
        raise TypeError(f"'{type(_evaluate(node.func)).__name__}' object is not callable")
    raise ValueError(f"unsupported expression element {type(node).__name__}")


def calculate_original(db: Database, expression: str) -> str:
    """tau-bench's calculator: Python arithmetic (``//`` and ``**`` too), rounded to cents, or the error."""
    if not all(char in CALCULATOR_CHARS for char in expression):
        return "Error: invalid characters in expression"
    try:
        if not isinstance(expression, str | bytes):
            raise TypeError("eval() arg 1 must be a string, bytes or code object")
        tree = ast.parse(expression.lstrip(" \t"), "<string>", mode="eval")
        return str(round(float(_evaluate(tree.body)), 2))
    except Exception as exc:  # noqa: BLE001 -- the original reports every failure this way
        return f"Error: {exc}"


ORIGINAL_COMMON_TOOLS: dict[str, Tool] = {
    "calculate": calculate_original,
    "think": think,
    "transfer_to_human_agents": transfer_to_human_agents,
}
