"""What the agent sees of a tool: a description written from its definition, and its JSON schema."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from environments.base import ToolSpec
from environments.synthetic.backend import params
from environments.synthetic.schema import FieldSpec, TableSpec, ToolDef


def describe(tool: ToolDef, tables: dict[str, TableSpec]) -> ToolDef:
    """``tool`` with its description filled in from its kind, table and rules."""
    table = tables[tool.table]
    one, many = table.singular, table.name.replace("_", " ")
    rule = ""
    if tool.guard:
        name = table.field(tool.guard[0]).name
        rule = f" Only allowed when its {name} is one of {list(tool.guard[1])}."
    target = table.field(tool.fields[0]).name if tool.fields else ""
    text = {
        "get": f"Return the {one} with the given id and all its fields.",
        "search": f"List the {many} matching every given filter (text filters match case-insensitive "
        f"substrings; no filter lists all).",
        "create": f"Create a new {one} and return it with its new id. Omitted optional fields get defaults.",
        "update": f"Change the given fields of a {one}; fields not given stay as they are.{rule}",
        "set": f"Set the {target} of a {one} to {tool.value!r}.{rule}",
        "delete": f"Delete a {one} for good.{rule}",
        "adjust": f"{'Add' if tool.sign > 0 else 'Subtract'} a positive amount {'to' if tool.sign > 0 else 'from'}"
        f" the {target} of a {one}; the result must stay within its limits.{rule}",
        "transfer": f"Move a positive amount of {target} from one {one} to another.{rule}",
    }[tool.kind]
    if tool.log:
        text += f" Records a {tables[tool.log].singular}."
    return replace(tool, description=text)


def _schema(spec: FieldSpec, tables: dict[str, TableSpec]) -> dict[str, Any]:
    if spec.type == "ref":
        schema: dict[str, Any] = {"type": "string", "description": f"id of a {tables[spec.ref].singular}"}
        if spec.nullable:
            schema = {"type": ["string", "null"], "description": schema["description"] + " (null for none)"}
        return schema
    schema = {
        "str": {"type": "string"},
        "int": {"type": "integer"},
        "float": {"type": "number"},
        "bool": {"type": "boolean"},
        "enum": {"type": "string", "enum": list(spec.choices)},
    }[spec.type]
    if spec.minimum is not None:
        schema["minimum"] = spec.minimum
    if spec.maximum is not None:
        schema["maximum"] = spec.maximum
    return schema


def tool_spec(tool: ToolDef, tables: dict[str, TableSpec]) -> ToolSpec:
    table = tables[tool.table]
    names, required = params(table, tool)
    properties: dict[str, Any] = {}
    for name, what in names.items():
        if what in ("id", "from", "to"):
            prefix = {"id": "", "from": "source ", "to": "target "}[what]
            properties[name] = {"type": "string", "description": f"{prefix}{table.singular} id"}
        elif what == "amount":
            kind = table.field(tool.fields[0]).type
            properties[name] = {"type": "integer" if kind == "int" else "number", "exclusiveMinimum": 0}
        else:
            properties[name] = _schema(table.field(what), tables)
    parameters = {"type": "object", "properties": properties, "required": list(required)}
    return ToolSpec(tool.name, tool.description, parameters, tool.effect)
