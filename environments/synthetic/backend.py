"""Executes a tool call against one rollout's state: validation first, then the effect.

Every failure (unknown tool or record, wrong type, a value outside its range or enum, a guard or
table constraint violated) returns ``ToolResult(is_error=True)`` with a message that names the
argument or record; nothing here raises for a bad call. Results are JSON.
"""

from __future__ import annotations

import json
from typing import Any

from environments.base import ToolResult, private_arguments
from environments.synthetic.schema import FieldSpec, State, TableSpec, ToolDef, World

_TYPE_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
               "enum": "a string", "ref": "a string id"}  # fmt: skip


def record_id(table: TableSpec, number: int) -> str:
    return f"{table.id_prefix}-{number:04d}"


def next_id(table: TableSpec, rows: dict[str, Any]) -> str:
    """Ids never go back below the initial ones, so deleting a record never changes later ids."""
    numbers = [int(rid.rsplit("-", 1)[1]) for rid in rows]
    return record_id(table, max([table.initial_rows, *numbers]) + 1)


def params(table: TableSpec, tool: ToolDef) -> tuple[dict[str, str], tuple[str, ...]]:
    """(argument name -> what it is: 'id', 'from', 'to', 'amount' or a field role; required names)."""
    names: dict[str, str] = {}
    required: list[str] = []
    if tool.kind == "transfer":
        names = {f"from_{tool.id_param}": "from", f"to_{tool.id_param}": "to", "amount": "amount"}
        return names, tuple(names)
    if tool.id_param:
        names[tool.id_param] = "id"
        required.append(tool.id_param)
    if tool.kind in ("search", "create", "update"):
        for role in tool.fields:
            names[table.field(role).name] = role
        required += [table.field(role).name for role in tool.required]
    if tool.kind == "adjust":
        names["amount"] = "amount"
        required.append("amount")
    return names, tuple(required)


def execute(world: World, state: State, name: str, arguments: Any) -> ToolResult:
    tool = world.tools_by_name.get(name)
    if tool is None:
        return _error(f"unknown tool '{name}'; available: {', '.join(sorted(world.tools_by_name))}")
    arguments = private_arguments(arguments)  # operations may keep what they are given
    if not isinstance(arguments, dict):
        return _error(f"arguments of {name} must be a JSON object, got {type(arguments).__name__}")
    table = world.tables_by_role[tool.table]
    names, required = params(table, tool)
    unexpected = sorted(set(arguments) - set(names))
    if unexpected:
        return _error(f"{name} got unexpected argument(s) {unexpected}; it accepts {sorted(names)}")
    missing = [n for n in required if n not in arguments]
    if missing:
        return _error(f"{name} is missing required argument(s) {missing}")
    try:
        return _OPERATIONS[tool.kind](world, state, table, tool, names, arguments)
    except _CallError as exc:
        return _error(str(exc))


class _CallError(Exception):
    """Raised inside an operation, turned into an error result by ``execute``."""


def _error(message: str) -> ToolResult:
    return ToolResult(f"Error: {message}", is_error=True)


def _ok(value: Any) -> ToolResult:
    return ToolResult(json.dumps(value, sort_keys=True))


def validate(world: World, state: State, spec: FieldSpec, value: Any) -> Any:
    """The value to store for ``spec`` (floats rounded to cents); raises _CallError if it is invalid."""
    if value is None:
        if spec.nullable:
            return None
        raise _CallError(f"wrong type for '{spec.name}': expected {_TYPE_WORDS[spec.type]}, got null")
    kind = spec.type
    ok = (
        isinstance(value, str) if kind in ("str", "enum", "ref")
        else isinstance(value, bool) if kind == "bool"
        else isinstance(value, int) and not isinstance(value, bool) if kind == "int"
        else isinstance(value, int | float) and not isinstance(value, bool)
    )  # fmt: skip
    if not ok:
        raise _CallError(
            f"wrong type for '{spec.name}': expected {_TYPE_WORDS[kind]}, got {type(value).__name__} ({value!r})"
        )
    if kind == "str" and not value.strip():
        raise _CallError(f"'{spec.name}' must not be empty")
    if kind == "enum" and value not in spec.choices:
        raise _CallError(f"invalid value {value!r} for '{spec.name}'; allowed: {list(spec.choices)}")
    if kind == "ref":
        target = world.tables_by_role[spec.ref]
        if value not in state[target.name]:
            raise _CallError(f"unknown {target.singular} id {value!r} (argument '{spec.name}')")
    if kind == "float":
        value = round(float(value), 2)
    if kind in ("int", "float"):
        _check_range(spec, value, f"'{spec.name}'")
    return value


def _check_range(spec: FieldSpec, value: float, what: str) -> None:
    if spec.minimum is not None and value < spec.minimum:
        raise _CallError(f"constraint violated: {what} would be {value}, below the minimum {spec.minimum:g}")
    if spec.maximum is not None and value > spec.maximum:
        raise _CallError(f"constraint violated: {what} would be {value}, above the maximum {spec.maximum:g}")


def check_record(
    world: World, state: State, table: TableSpec, rid: str | None, record: dict, changed: set[str] | None
) -> str | None:
    """The first table constraint ``record`` (id ``rid``, None if new) violates, or None.

    Only checks that involve a changed field role run (``changed`` None = all of them)."""
    for check in table.checks:
        involved = set(check.fields) | ({check.scope} if check.scope else set())
        if changed is not None and not involved & changed:
            continue
        if check.kind == "unique":
            if check.scope and record[table.field(check.scope).name] not in check.scope_values:
                continue
            names = [table.field(role).name for role in check.fields]
            key = [record[n] for n in names]
            for other_id, other in state[table.name].items():
                if other_id == rid or [other[n] for n in names] != key:
                    continue
                if check.scope and other[table.field(check.scope).name] not in check.scope_values:
                    continue
                shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, key, strict=True))
                return f"constraint violated: {table.singular} {other_id} already has {shown}"
        elif check.kind == "fits":
            size = table.field(check.fields[0])
            ref_spec = table.field(check.fields[1])
            target_table = world.tables_by_role[ref_spec.ref]
            target = state[target_table.name][record[ref_spec.name]]
            limit = target[target_table.field(check.fields[2]).name]
            if record[size.name] > limit:
                return (
                    f"constraint violated: {size.name} {record[size.name]} exceeds the "
                    f"{target_table.field(check.fields[2]).name} {limit} of {target_table.singular} "
                    f"{record[ref_spec.name]}"
                )
        elif check.kind == "ref_requires":
            ref_spec = table.field(check.fields[0])
            target_id = record[ref_spec.name]
            if target_id is None:
                continue
            target_table = world.tables_by_role[ref_spec.ref]
            flag = target_table.field(check.fields[1]).name
            if state[target_table.name][target_id][flag] not in check.scope_values:
                value = state[target_table.name][target_id][flag]
                return f"constraint violated: {target_table.singular} {target_id} has {flag}={value!r}"
    return None


def text_match(value: str, needle_lower: str) -> bool:
    """How search tools match text filters: case-insensitive substring."""
    return needle_lower in value.lower()


def _record(state: State, table: TableSpec, rid: Any) -> dict:
    if not isinstance(rid, str):
        raise _CallError(
            f"wrong type for the {table.singular} id: expected a string, got {type(rid).__name__}"
        )
    record = state[table.name].get(rid)
    if record is None:
        raise _CallError(f"unknown {table.singular} id {rid!r}")
    return record


def _guard(table: TableSpec, tool: ToolDef, rid: str, record: dict) -> None:
    if tool.guard is None:
        return
    role, allowed = tool.guard
    name = table.field(role).name
    if record[name] not in allowed:
        raise _CallError(
            f"constraint violated: {table.singular} {rid} has {name}={record[name]!r}; "
            f"{tool.name} needs {name} in {list(allowed)}"
        )


def _amount(table: TableSpec, tool: ToolDef, value: Any) -> int | float:
    spec = table.field(tool.fields[0])
    integer = spec.type == "int"
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        raise _CallError(f"wrong type for 'amount': expected {_TYPE_WORDS[spec.type]}, got {value!r}")
    if value <= 0:
        raise _CallError(f"constraint violated: 'amount' must be positive, got {value}")
    return value


def _get(world, state, table, tool, names, args) -> ToolResult:
    rid = args[tool.id_param]
    return _ok({"id": rid, **_record(state, table, rid)})


def _search(world, state, table, tool, names, args) -> ToolResult:
    filters = []
    for arg, value in args.items():
        spec = table.field(names[arg])
        if spec.type == "str":
            if not isinstance(value, str):
                raise _CallError(f"wrong type for '{arg}': expected a string, got {type(value).__name__}")
            filters.append((arg, value.lower(), True))
        else:
            filters.append((arg, validate(world, state, spec, value), False))
    found = [
        {"id": rid, **rec}
        for rid, rec in state[table.name].items()
        if all(text_match(rec[arg], needle) if text else rec[arg] == needle for arg, needle, text in filters)
    ]
    return _ok(found)


def _create(world, state, table, tool, names, args) -> ToolResult:
    record = {}
    for spec in table.fields:
        if spec.name in args:
            record[spec.name] = validate(world, state, spec, args[spec.name])
        else:
            record[spec.name] = spec.default
    problem = check_record(world, state, table, None, record, None)
    if problem:
        raise _CallError(problem)
    rid = next_id(table, state[table.name])
    state[table.name][rid] = record
    return _ok({"id": rid, **record})


def _update(world, state, table, tool, names, args) -> ToolResult:
    rid = args[tool.id_param]
    record = _record(state, table, rid)
    _guard(table, tool, rid, record)
    changes = {
        arg: validate(world, state, table.field(names[arg]), value)
        for arg, value in args.items()
        if arg != tool.id_param
    }
    if not changes:
        raise _CallError(f"{tool.name} needs at least one of {[n for n in names if n != tool.id_param]}")
    updated = {**record, **changes}
    problem = check_record(world, state, table, rid, updated, {names[arg] for arg in changes})
    if problem:
        raise _CallError(problem)
    state[table.name][rid] = updated
    return _ok({"id": rid, **updated})


def _set(world, state, table, tool, names, args) -> ToolResult:
    rid = args[tool.id_param]
    record = _record(state, table, rid)
    _guard(table, tool, rid, record)
    record[table.field(tool.fields[0]).name] = tool.value
    return _ok({"id": rid, **record})


def _delete(world, state, table, tool, names, args) -> ToolResult:
    rid = args[tool.id_param]
    _guard(table, tool, rid, _record(state, table, rid))
    del state[table.name][rid]
    return _ok({"deleted": rid})


def _log(world: World, state: State, tool: ToolDef, account: str, counterparty: str | None, amount) -> str:
    table = world.tables_by_role[tool.log]
    rid = next_id(table, state[table.name])
    state[table.name][rid] = {
        table.field("account").name: account,
        table.field("counterparty").name: counterparty,
        table.field("amount").name: amount,
        table.field("kind").name: tool.value,
    }
    return rid


def _adjust(world, state, table, tool, names, args) -> ToolResult:
    rid = args[tool.id_param]
    record = _record(state, table, rid)
    amount = _amount(table, tool, args["amount"])
    _guard(table, tool, rid, record)
    spec = table.field(tool.fields[0])
    new = record[spec.name] + tool.sign * amount
    _check_range(spec, new, f"{spec.name} of {table.singular} {rid}")
    record[spec.name] = round(new, 2) if spec.type == "float" else new
    result = {"id": rid, **record}
    if tool.log:
        result["entry"] = _log(world, state, tool, rid, None, amount)
    return _ok(result)


def _transfer(world, state, table, tool, names, args) -> ToolResult:
    source_id, target_id = args[f"from_{tool.id_param}"], args[f"to_{tool.id_param}"]
    source, target = _record(state, table, source_id), _record(state, table, target_id)
    if source_id == target_id:
        raise _CallError(
            f"constraint violated: cannot {tool.verb} from {table.singular} {source_id} to itself"
        )
    amount = _amount(table, tool, args["amount"])
    _guard(table, tool, source_id, source)
    _guard(table, tool, target_id, target)
    spec = table.field(tool.fields[0])
    _check_range(spec, source[spec.name] - amount, f"{spec.name} of {table.singular} {source_id}")
    _check_range(spec, target[spec.name] + amount, f"{spec.name} of {table.singular} {target_id}")
    source[spec.name] -= amount
    target[spec.name] += amount
    entry = _log(world, state, tool, source_id, target_id, amount) if tool.log else None
    return _ok({"from": {"id": source_id, **source}, "to": {"id": target_id, **target}, "entry": entry})


_OPERATIONS = {
    "get": _get,
    "search": _search,
    "create": _create,
    "update": _update,
    "set": _set,
    "delete": _delete,
    "adjust": _adjust,
    "transfer": _transfer,
}
