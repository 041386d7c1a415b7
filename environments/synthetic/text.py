"""Task text from templates: how records are referred to, one clause per step, and whole user turns.

Phrasing varies along several independent axes (opener, request form, clause template, connector,
closer, how a record is named), and the concrete titles, names, amounts and field names differ per
task, so texts of one environment are not near-duplicates of each other.
"""

from __future__ import annotations

import random
from typing import Any

from environments.synthetic.schema import FieldSpec, TableSpec, ToolDef
from environments.synthetic.vocabulary import CLOSERS, CONNECTORS, FOLLOW_UPS, OPENERS, REQUESTS


def by_id(rng: random.Random, table: TableSpec, rid: str) -> str:
    return rng.choice(
        (f"{table.singular} {rid}", f"the {table.singular} with id {rid}", f"{table.singular} #{rid}")
    )


def by_label(rng: random.Random, table: TableSpec, label: str) -> str:
    options = [f"the {table.singular} {table.label_phrase.format(label)}"]
    if table.label_phrase.startswith("for "):  # records named after a person: "Ada Abbott's account"
        options.append(f"{label}'s {table.singular}")
    return rng.choice(options)


def value_phrase(spec: FieldSpec, value: Any) -> str:
    if spec.type == "bool":
        return spec.words if value else f"not {spec.words}"
    if spec.type == "enum":
        return str(value).replace("_", " ")
    if spec.type == "float":
        return f"{value:.2f}"
    if spec.type == "str":
        return f"'{value}'"
    return str(value)


def _assignments(pairs: list[tuple[str | None, str]], link: str) -> str:
    """ "priority 3 and channel chat"; a pair without a field name is already a whole phrase."""
    parts = [value if field is None else f"{field}{link}{value}" for field, value in pairs]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def ref_pair(field: str, mention: str) -> tuple[str | None, str]:
    """A referenced record in a create request: "the branch called 'X' as location" (or just the
    mention when it already says what it is, e.g. "branch BR-0003" for field branch)."""
    return (None, mention) if field in mention else (None, f"{mention} as {field}")


def create_clause(rng: random.Random, tool: ToolDef, table: TableSpec, label: str, pairs) -> str:
    head = f"{tool.verb} a new {table.singular} {table.label_phrase.format(label)}"
    if not pairs:
        return head
    with_form = f"{head} with {_assignments(pairs, ' ')}"
    if any(field is None for field, _ in pairs):
        return with_form
    return rng.choice((with_form, f"{head}; set its {_assignments(pairs, ' to ')}"))


def update_clause(rng: random.Random, tool: ToolDef, target: str, pairs) -> str:
    if tool.role == "assign":
        value = pairs[0][1]
        return rng.choice((f"assign {target} to {value}", f"hand {target} over to {value}",
                           f"make {value} responsible for {target}"))  # fmt: skip
    if tool.role in ("move", "switch") and len(pairs) == 1:
        return rng.choice((f"move {target} to {pairs[0][1]}", f"put {target} on {pairs[0][1]}"))
    if tool.role == "set_available":
        return rng.choice((f"mark {target} as {pairs[0][1]}", f"record that {target} is now {pairs[0][1]}"))
    return rng.choice((
        f"change the {_assignments(pairs, ' of ' + target + ' to ')}" if len(pairs) == 1
        else f"change {target}: {_assignments(pairs, ' to ')}",
        f"set the {_assignments(pairs, ' to ')} for {target}",
        f"update {target} so that its {_assignments(pairs, ' is ')}",
    ))  # fmt: skip


def set_clause(rng: random.Random, tool: ToolDef, target: str) -> str:
    return rng.choice(
        (f"{tool.verb} {target}", f"make sure {target} is {tool.past}", f"get {target} {tool.past}")
    )


def delete_clause(rng: random.Random, tool: ToolDef, target: str) -> str:
    return rng.choice(
        (f"{tool.verb} {target}", f"make sure {target} gets {tool.past}", f"{tool.verb} {target} for good")
    )


def adjust_clause(rng: random.Random, tool: ToolDef, target: str, field: str, amount, unit: str) -> str:
    if tool.sign > 0:
        options = (f"{tool.verb} {amount} {unit} for {target}", f"add {amount} {unit} to the {field} of {target}",
                   f"increase the {field} of {target} by {amount}")  # fmt: skip
    else:
        options = (f"{tool.verb} {amount} {unit} of {target}", f"take {amount} {unit} off the {field} of {target}",
                   f"reduce the {field} of {target} by {amount}")  # fmt: skip
    return rng.choice(options)


def transfer_clause(rng: random.Random, tool: ToolDef, source: str, target: str, amount, unit: str) -> str:
    return rng.choice((f"{tool.verb} {amount} {unit} from {source} to {target}",
                       f"move {amount} {unit} out of {source} into {target}",
                       f"make sure {target} receives {amount} {unit} from {source}"))  # fmt: skip


def turn_text(rng: random.Random, clauses: list[str], first: bool, theme: str, person: str) -> str:
    """One user message asking for ``clauses`` in order."""
    body = clauses[0]
    for clause in clauses[1:-1]:
        body += f", {rng.choice(CONNECTORS)} {clause}"
    if len(clauses) > 1:
        body += f", and {rng.choice(('finally', 'lastly', 'then'))} {clauses[-1]}"
    if first:
        request = rng.choice(REQUESTS).format(body)
        opener = rng.choice(OPENERS).format(theme=theme, person=person)
    else:  # a later turn continues the conversation: "Great, now <clauses>."
        request, opener = f"{body}.", rng.choice(FOLLOW_UPS)
    request = request[0].upper() + request[1:] if first else request
    return " ".join(part for part in (opener, request, rng.choice(CLOSERS)) if part)
