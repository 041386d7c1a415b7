"""The typed description of one synthetic environment: tables, fields, tools, and its state type.

Everything has two names: a *role* shared by all environments of a family (``item``, ``priority``,
``close``) and a concrete *name* chosen for this environment (``incidents``, ``urgency``,
``resolve_incident``). Task generation speaks roles; the agent, the state and the verifier see names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

FieldType = Literal["str", "int", "float", "bool", "enum", "ref"]
ToolKind = Literal["get", "search", "create", "update", "set", "delete", "adjust", "transfer"]

# table name -> record id -> field name -> JSON scalar. Records hold scalars only, so copying a
# state is one dict() per record.
State = dict[str, dict[str, dict[str, Any]]]


@dataclass(frozen=True)
class FieldSpec:
    name: str
    role: str
    type: FieldType
    choices: tuple[str, ...] = ()  # enum values
    minimum: float | None = None
    maximum: float | None = None
    ref: str | None = None  # role of the table a ref field points to
    nullable: bool = False
    default: Any = None  # value a create call uses when the argument is left out

    @property
    def words(self) -> str:
        return self.name.replace("_", " ")


@dataclass(frozen=True)
class Check:
    """A table constraint checked after every create/update of a record.

    ``unique``: no other record whose ``scope`` field is in ``scope_values`` has the same ``fields``.
    ``fits``: record[fields[0]] <= referenced record (via ref field ``fields[1]``)[fields[2]].
    ``ref_requires``: the record referenced by ``fields[0]`` has ``fields[1]`` in ``scope_values``.
    (All names here are field roles.)
    """

    kind: Literal["unique", "fits", "ref_requires"]
    fields: tuple[str, ...]
    scope: str | None = None
    scope_values: tuple[Any, ...] = ()


@dataclass(frozen=True)
class TableSpec:
    name: str  # plural, e.g. "incidents"
    role: str
    singular: str  # e.g. "incident"
    id_prefix: str  # ids look like INC-0007
    label: str  # role of the field that names a record in task text (title, name, holder, ...)
    label_phrase: str  # how text introduces a new record's label, e.g. "titled '{}'"
    fields: tuple[FieldSpec, ...]
    initial_rows: int
    checks: tuple[Check, ...] = ()

    def field(self, role: str) -> FieldSpec:
        for spec in self.fields:
            if spec.role == role:
                return spec
        raise KeyError(f"table {self.name} has no field with role {role!r}")

    def has(self, role: str) -> bool:
        return any(spec.role == role for spec in self.fields)


@dataclass(frozen=True)
class ToolDef:
    """One tool: a generic operation (``kind``) on a table, configured by field roles.

    get/delete/set/update/adjust take the record id as ``id_param``. ``fields`` are the field roles
    the tool accepts (search filters, create/update arguments) or changes (set, adjust, transfer);
    ``required`` those that must be given. ``value`` is what ``set`` writes; ``sign`` is +1/-1 for
    ``adjust``. ``guard``: (field role, allowed values) every touched record must satisfy. ``log``:
    role of a table that ``adjust``/``transfer`` append a movement record to.
    """

    name: str
    role: str
    kind: ToolKind
    table: str  # table role
    description: str
    id_param: str = ""
    fields: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    value: Any = None
    sign: int = 1
    guard: tuple[str, tuple[Any, ...]] | None = None
    log: str | None = None
    verb: str = ""  # imperative used in task text ("resolve", "restock")
    past: str = ""  # participle ("resolved", "restocked")

    @property
    def effect(self) -> str:
        return "read" if self.kind in ("get", "search") else "write"


@dataclass(frozen=True)
class EnvSpec:
    """A generated environment: its family and theme, tables and tools, and text vocabulary."""

    env_id: str
    seed: int
    index: int
    family: str
    theme: str  # the setting in words, e.g. "IT helpdesk"
    tables: tuple[TableSpec, ...]
    tools: tuple[ToolDef, ...]
    words: dict[str, Any] = field(default_factory=dict)  # units, openers and other theme words

    def table(self, role: str) -> TableSpec:
        for spec in self.tables:
            if spec.role == role:
                return spec
        raise KeyError(f"environment {self.env_id} has no table with role {role!r}")

    def tool(self, role: str) -> ToolDef | None:
        return next((t for t in self.tools if t.role == role), None)

    def tool_named(self, name: str) -> ToolDef | None:
        return next((t for t in self.tools if t.name == name), None)


@dataclass(frozen=True)
class World:
    """One generated environment: its spec and initial state (never mutated; rollouts copy it)."""

    spec: EnvSpec
    initial: State

    @cached_property
    def tools_by_name(self) -> dict[str, ToolDef]:
        return {tool.name: tool for tool in self.spec.tools}

    @cached_property
    def tables_by_role(self) -> dict[str, TableSpec]:
        return {table.role: table for table in self.spec.tables}


def copy_state(state: State) -> State:
    return {table: {rid: dict(rec) for rid, rec in rows.items()} for table, rows in state.items()}
