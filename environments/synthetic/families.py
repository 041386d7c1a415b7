"""Families of environments: each builder fixes the tool shapes and draws names, enums and options.

Every environment of a family has the same table roles, field roles and core tool roles (so
environments are structurally alike), while its theme, table/field/tool names, enum values, optional
tools, sizes and initial records come from the environment's own random stream.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

from environments.synthetic import backend, toolspecs
from environments.synthetic.schema import Check, EnvSpec, FieldSpec, State, TableSpec, ToolDef, World
from environments.synthetic.themes import BOOKING, INVENTORY, LEDGER, TICKETING, Theme
from environments.synthetic.vocabulary import draw_distinct

Sampler = Callable[[random.Random, State], Any]
PAST = {
    "create": "created", "open": "opened", "file": "filed", "log": "logged", "close": "closed",
    "resolve": "resolved", "complete": "completed", "add": "added", "register": "registered",
    "remove": "removed", "discontinue": "discontinued", "delist": "delisted", "cancel": "cancelled",
    "release": "released", "freeze": "frozen", "lock": "locked", "suspend": "suspended",
    "unfreeze": "unfrozen", "unlock": "unlocked", "reinstate": "reinstated", "enrol": "enrolled",
    "book": "booked", "reserve": "reserved", "schedule": "scheduled", "reopen": "reopened",
    "start": "started", "restock": "restocked", "receive": "received", "sell": "sold", "ship": "shipped",
    "dispatch": "dispatched", "deposit": "deposited", "credit": "credited", "top_up": "topped up",
    "withdraw": "withdrawn", "debit": "debited", "charge": "charged", "transfer": "transferred",
    "send": "sent", "move": "moved",
}  # fmt: skip


def snake(words: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", words.lower()).strip("_")


def _verb(rng: random.Random, *verbs: str) -> tuple[str, str, str]:
    """(name part, imperative, participle) of one of ``verbs``."""
    verb = rng.choice(verbs)
    return snake(verb), verb.replace("_", " "), PAST.get(verb, verb + "ed")


def _table(rng, theme: Theme, role: str, label: str, phrase: str, fields, rows: int, checks=()) -> TableSpec:
    singular, plural, prefix = theme.nouns[role]
    return TableSpec(snake(plural), role, singular, prefix, label, phrase, tuple(fields), rows, tuple(checks))


def _readers(rng: random.Random, table: TableSpec, filters: tuple[str, ...]) -> list[ToolDef]:
    one, many = snake(table.singular), table.name
    id_param = f"{one}_id"
    return [
        ToolDef(f"{rng.choice(('get', 'show', 'fetch'))}_{one}", f"get_{table.role}", "get", table.role,
                "", id_param=id_param),
        ToolDef(f"{rng.choice(('search', 'find', 'list'))}_{many}", f"search_{table.role}", "search",
                table.role, "", fields=filters),
    ]  # fmt: skip


def _ticketing(rng: random.Random, theme: Theme) -> tuple[list[TableSpec], list[ToolDef], dict]:
    status = rng.choice(
        (("open", "in_progress", "closed"), ("new", "active", "resolved"), ("todo", "doing", "done"),
         ("reported", "investigating", "fixed"))
    )  # fmt: skip
    teams = theme.choices["team"]
    person = _table(rng, theme, "person", "name", "named '{}'", [
        FieldSpec("name", "name", "str"),
        FieldSpec(rng.choice(("team", "group", "squad")), "team", "enum", teams, default=teams[0]),
        FieldSpec(rng.choice(("available", "on_duty", "on_shift")), "available", "bool", default=True),
    ], rng.randint(5, 12), [Check("unique", ("name",))])  # fmt: skip
    item = _table(rng, theme, "item", "title", rng.choice(("titled '{}'", "called '{}'", "about '{}'")), [
        FieldSpec(rng.choice(("title", "summary", "subject")), "title", "str"),
        FieldSpec(rng.choice(("priority", "urgency", "severity", "impact")), "priority", "int",
                  minimum=1, maximum=5, default=3),
        FieldSpec(rng.choice(("status", "state", "stage")), "status", "enum", status, default=status[0]),
        FieldSpec(rng.choice(("assignee", "owner", "handler")), "assignee", "ref", ref="person", nullable=True),
        FieldSpec(rng.choice(("channel", "reported_via", "source")), "channel", "enum",
                  ("email", "phone", "chat", "portal", "walk-in"), default="email"),
    ], rng.randint(15, 45), [
        Check("unique", ("title",)), Check("ref_requires", ("assignee", "available"), scope_values=(True,))
    ])  # fmt: skip
    it, live = snake(item.singular), status[:2]
    create, close = _verb(rng, "create", "open", "file", "log"), _verb(rng, "close", "resolve", "complete")
    tools = _readers(rng, item, ("title", "status", "assignee")) + [
        ToolDef(f"{create[0]}_{it}", "create", "create", "item", "", fields=("title", "priority", "channel",
                "assignee"), required=("title", "priority"), verb=create[1], past=create[2]),
        ToolDef(f"{rng.choice(('update', 'edit', 'modify'))}_{it}", "update", "update", "item", "",
                id_param=f"{it}_id", fields=("title", "priority", "channel"), guard=("status", live)),
        ToolDef(f"{rng.choice(('assign', 'route', 'delegate'))}_{it}", "assign", "update", "item", "",
                id_param=f"{it}_id", fields=("assignee",), required=("assignee",), guard=("status", live)),
        ToolDef(f"{close[0]}_{it}", "close", "set", "item", "", id_param=f"{it}_id", fields=("status",),
                value=status[2], guard=("status", live), verb=close[1], past=close[2]),
    ]  # fmt: skip
    if rng.random() < 0.6:
        tools.append(ToolDef(f"start_{it}", "start", "set", "item", "", id_param=f"{it}_id", fields=("status",),
                             value=status[1], guard=("status", status[:1]), verb="start work on",
                             past="started"))  # fmt: skip
    if rng.random() < 0.5:
        tools.append(ToolDef(f"reopen_{it}", "reopen", "set", "item", "", id_param=f"{it}_id",
                             fields=("status",), value=status[0], guard=("status", status[2:]), verb="reopen",
                             past="reopened"))  # fmt: skip
    tools += _readers(rng, person, ("name", "team", "available"))
    if rng.random() < 0.5:
        pe = snake(person.singular)
        tools.append(
            ToolDef(
                f"set_{pe}_{person.field('available').name}",
                "set_available",
                "update",
                "person",
                "",
                id_param=f"{pe}_id",
                fields=("available",),
                required=("available",),
            )
        )
    return [person, item], tools, {}


def _inventory(rng: random.Random, theme: Theme) -> tuple[list[TableSpec], list[ToolDef], dict]:
    categories = theme.choices["category"]
    location = _table(rng, theme, "location", "name", "called '{}'", [
        FieldSpec("name", "name", "str"),
        FieldSpec(rng.choice(("region", "district", "area")), "region", "enum", ("north", "south", "east", "west")),
    ], rng.randint(3, 8), [Check("unique", ("name",))])  # fmt: skip
    item = _table(rng, theme, "item", "name", rng.choice(("called '{}'", "named '{}'")), [
        FieldSpec(rng.choice(("name", "title", "label")), "name", "str"),
        FieldSpec(rng.choice(("category", "department", "section")), "category", "enum", categories),
        FieldSpec(rng.choice(("price", "unit_price", "list_price")), "price", "float", minimum=0.01,
                  maximum=10000.0),
        FieldSpec(rng.choice(("stock", "quantity", "on_hand", "units_in_stock")), "stock", "int", minimum=0,
                  maximum=100000, default=0),
        FieldSpec(snake(location.singular), "location", "ref", ref="location"),
    ], rng.randint(15, 45), [Check("unique", ("name",))])  # fmt: skip
    it = snake(item.singular)
    add, remove = _verb(rng, "add", "register"), _verb(rng, "remove", "discontinue", "delist")
    restock, sell = _verb(rng, "restock", "receive"), _verb(rng, "sell", "ship", "dispatch")
    tools = _readers(rng, item, ("name", "category", "location")) + [
        ToolDef(f"{add[0]}_{it}", "create", "create", "item", "", fields=("name", "category", "price", "stock",
                "location"), required=("name", "category", "price", "location"), verb=add[1], past=add[2]),
        ToolDef(f"set_{it}_{item.field('price').name}", "reprice", "update", "item", "", id_param=f"{it}_id",
                fields=("price",), required=("price",)),
        ToolDef(f"{rng.choice(('move', 'relocate', 'transfer'))}_{it}", "move", "update", "item", "",
                id_param=f"{it}_id", fields=("location",), required=("location",)),
        ToolDef(f"{restock[0]}_{it}", "restock", "adjust", "item", "", id_param=f"{it}_id", fields=("stock",),
                sign=1, verb=restock[1], past=restock[2]),
        ToolDef(f"{sell[0]}_{it}", "sell", "adjust", "item", "", id_param=f"{it}_id", fields=("stock",),
                sign=-1, verb=sell[1], past=sell[2]),
        ToolDef(f"{remove[0]}_{it}", "remove", "delete", "item", "", id_param=f"{it}_id", guard=("stock", (0,)),
                verb=remove[1], past=remove[2]),
    ]  # fmt: skip
    if rng.random() < 0.5:
        tools.append(ToolDef(f"recategorize_{it}", "recategorize", "update", "item", "", id_param=f"{it}_id",
                             fields=("category",), required=("category",)))  # fmt: skip
    tools += _readers(rng, location, ("name", "region"))
    samplers = {
        ("item", "stock"): lambda r, s: 0 if r.random() < 0.15 else r.randint(1, 250),
        ("item", "price"): lambda r, s: round(r.uniform(1.0, 300.0), 2),
    }
    return [location, item], tools, samplers


def _booking(rng: random.Random, theme: Theme) -> tuple[list[TableSpec], list[ToolDef], dict]:
    live, dead = rng.choice((("booked", "cancelled"), ("confirmed", "cancelled"), ("active", "void"),
                             ("held", "released")))  # fmt: skip
    kinds = theme.choices["kind"]
    resource = _table(rng, theme, "resource", "name", "called '{}'", [
        FieldSpec("name", "name", "str"),
        FieldSpec(rng.choice(("kind", "type", "category")), "kind", "enum", kinds),
        FieldSpec(rng.choice(("capacity", "seats", "max_people")), "capacity", "int", minimum=1, maximum=20),
    ], rng.randint(4, 10), [Check("unique", ("name",))])  # fmt: skip
    booking = _table(rng, theme, "booking", "guest", "for {}", [
        FieldSpec(rng.choice(("guest", "customer", "client", "booked_by")), "guest", "str"),
        FieldSpec(snake(resource.singular), "resource", "ref", ref="resource"),
        FieldSpec(rng.choice(("day", "day_of_month")), "day", "int", minimum=1, maximum=28),
        FieldSpec(rng.choice(("hour", "slot", "start_hour")), "slot", "int", minimum=8, maximum=21),
        FieldSpec(rng.choice(("party_size", "people", "group_size", "headcount")), "size", "int", minimum=1,
                  maximum=20),
        FieldSpec(rng.choice(("status", "state")), "status", "enum", (live, dead), default=live),
    ], rng.randint(10, 40), [
        Check("fits", ("size", "resource", "capacity")),
        Check("unique", ("resource", "day", "slot"), scope="status", scope_values=(live,)),
    ])  # fmt: skip
    bk = snake(booking.singular)
    book, cancel = _verb(rng, "book", "reserve", "schedule"), _verb(rng, "cancel", "release")
    tools = _readers(rng, resource, ("name", "kind")) + _readers(
        rng, booking, ("guest", "resource", "day", "status")
    )
    tools += [
        ToolDef(f"{book[0]}_{snake(resource.singular)}", "create", "create", "booking", "",
                fields=("guest", "resource", "day", "slot", "size"),
                required=("guest", "resource", "day", "slot", "size"), verb=book[1], past=book[2]),
        ToolDef(f"{rng.choice(('reschedule', 'move'))}_{bk}", "reschedule", "update", "booking", "",
                id_param=f"{bk}_id", fields=("day", "slot"), guard=("status", (live,))),
        ToolDef(f"{cancel[0]}_{bk}", "cancel", "set", "booking", "", id_param=f"{bk}_id", fields=("status",),
                value=dead, guard=("status", (live,)), verb=cancel[1], past=cancel[2]),
    ]  # fmt: skip
    if rng.random() < 0.6:
        tools.append(ToolDef(f"resize_{bk}", "resize", "update", "booking", "", id_param=f"{bk}_id",
                             fields=("size",), required=("size",), guard=("status", (live,))))  # fmt: skip
    if rng.random() < 0.5:
        tools.append(ToolDef(f"change_{bk}_{snake(resource.singular)}", "switch", "update", "booking", "",
                             id_param=f"{bk}_id", fields=("resource",), required=("resource",),
                             guard=("status", (live,))))  # fmt: skip
    samplers = {
        ("resource", "capacity"): lambda r, s: r.randint(2, 12),
        ("booking", "size"): lambda r, s: r.randint(1, 6),
        ("booking", "status"): lambda r, s: dead if r.random() < 0.15 else live,
    }
    return [resource, booking], tools, samplers


def _ledger(rng: random.Random, theme: Theme) -> tuple[list[TableSpec], list[ToolDef], dict]:
    tiers = theme.choices["tier"]
    kinds = rng.choice((("deposit", "withdrawal", "transfer"), ("credit", "debit", "transfer")))
    account = _table(rng, theme, "account", "holder", "for {}", [
        FieldSpec(rng.choice(("holder", "owner", "member_name")), "holder", "str"),
        FieldSpec(rng.choice(("balance", snake(theme.unit))), "balance", "int", minimum=0, maximum=10_000_000,
                  default=0),
        FieldSpec(rng.choice(("tier", "level", "plan")), "tier", "enum", tiers, default=tiers[0]),
        FieldSpec(rng.choice(("frozen", "locked", "suspended")), "frozen", "bool", default=False),
    ], rng.randint(8, 30), [Check("unique", ("holder",))])  # fmt: skip
    entry = _table(rng, theme, "entry", "kind", "'{}'", [
        FieldSpec(snake(account.singular), "account", "ref", ref="account"),
        FieldSpec("counterparty", "counterparty", "ref", ref="account", nullable=True),
        FieldSpec("amount", "amount", "int", minimum=1),
        FieldSpec(rng.choice(("kind", "type", "movement")), "kind", "enum", kinds),
    ], rng.randint(5, 20))  # fmt: skip
    ac = snake(account.singular)
    create = _verb(rng, "open", "register", "enrol")
    deposit, withdraw = _verb(rng, "deposit", "credit", "top_up"), _verb(rng, "withdraw", "debit", "charge")
    transfer, freeze = _verb(rng, "transfer", "send", "move"), _verb(rng, "freeze", "lock", "suspend")
    unfreeze = _verb(rng, "unfreeze", "unlock", "reinstate")
    not_frozen = ("frozen", (False,))
    tools = _readers(rng, account, ("holder", "tier", "frozen")) + [
        ToolDef(f"{create[0]}_{ac}", "create", "create", "account", "", fields=("holder", "tier"),
                required=("holder",), verb=create[1], past=create[2]),
        ToolDef(f"{deposit[0]}", "deposit", "adjust", "account", "", id_param=f"{ac}_id", fields=("balance",),
                sign=1, guard=not_frozen, log="entry", value=kinds[0], verb=deposit[1], past=deposit[2]),
        ToolDef(f"{withdraw[0]}", "withdraw", "adjust", "account", "", id_param=f"{ac}_id", fields=("balance",),
                sign=-1, guard=not_frozen, log="entry", value=kinds[1], verb=withdraw[1], past=withdraw[2]),
        ToolDef(f"{transfer[0]}_{theme.unit}", "transfer", "transfer", "account", "", id_param=f"{ac}_id",
                fields=("balance",), guard=not_frozen, log="entry", value=kinds[2], verb=transfer[1],
                past=transfer[2]),
        ToolDef(f"{freeze[0]}_{ac}", "freeze", "set", "account", "", id_param=f"{ac}_id", fields=("frozen",),
                value=True, guard=("frozen", (False,)), verb=freeze[1], past=freeze[2]),
        ToolDef(f"{unfreeze[0]}_{ac}", "unfreeze", "set", "account", "", id_param=f"{ac}_id", fields=("frozen",),
                value=False, guard=("frozen", (True,)), verb=unfreeze[1], past=unfreeze[2]),
        ToolDef(f"list_{entry.name}", "search_entry", "search", "entry", "", fields=("account", "kind")),
    ]  # fmt: skip
    if rng.random() < 0.5:
        tools.append(
            ToolDef(
                f"change_{ac}_{account.field('tier').name}",
                "change_tier",
                "update",
                "account",
                "",
                id_param=f"{ac}_id",
                fields=("tier",),
                required=("tier",),
                guard=not_frozen,
            )
        )
    samplers = {
        ("account", "balance"): lambda r, s: r.choice((0, r.randint(1, 100), r.randint(100, 5000))),
        ("account", "frozen"): lambda r, s: r.random() < 0.15,
        ("entry", "amount"): lambda r, s: r.randint(1, 500),
        ("entry", "counterparty"): lambda r, s: None,
    }
    return [account, entry], tools, samplers


FAMILIES: dict[str, tuple[Callable, tuple[Theme, ...]]] = {
    "ticketing": (_ticketing, TICKETING),
    "inventory": (_inventory, INVENTORY),
    "booking": (_booking, BOOKING),
    "ledger": (_ledger, LEDGER),
}


def build_world(seed: int, index: int, family: str, env_id: str) -> World:
    """The environment ``index`` of family ``family`` under ``seed``: same arguments, same world."""
    builder, themes = FAMILIES[family]
    rng = random.Random(f"synthetic:{seed}:{family}:{index}")
    theme = rng.choice(themes)
    tables, tools, samplers = builder(rng, theme)
    tools = [toolspecs.describe(tool, {t.role: t for t in tables}) for tool in tools]
    spec = EnvSpec(env_id, seed, index, family, theme.name, tuple(tables), tuple(tools), {"unit": theme.unit})
    return World(spec, _populate(rng, spec, theme, samplers))


def _populate(rng: random.Random, spec: EnvSpec, theme: Theme, samplers: dict) -> State:
    """Initial records, table by table (referenced tables first); each must pass the table's checks."""
    state: State = {t.name: {} for t in spec.tables}
    world = World(spec, state)
    for table in spec.tables:
        pool = list(theme.labels.get(table.role, ()))
        labels = draw_distinct(rng, pool, table.initial_rows) if pool else []
        for i in range(table.initial_rows):
            for _ in range(30):
                record = {
                    f.name: labels[i] if labels and f.role == table.label
                    else samplers[(table.role, f.role)](rng, state) if (table.role, f.role) in samplers
                    else _sample(rng, f, spec, state)
                    for f in table.fields
                }  # fmt: skip
                if backend.check_record(world, state, table, None, record, None) is None:
                    state[table.name][backend.record_id(table, i + 1)] = record
                    break
    return state


def _sample(rng: random.Random, spec: FieldSpec, env: EnvSpec, state: State) -> Any:
    if spec.type == "int":
        return rng.randint(int(spec.minimum or 0), int(spec.maximum if spec.maximum is not None else 1000))
    if spec.type == "float":
        return round(rng.uniform(spec.minimum or 0.0, spec.maximum or 1000.0), 2)
    if spec.type == "bool":
        return rng.random() < 0.8
    if spec.type == "enum":
        return rng.choice(spec.choices)
    if spec.type == "ref":
        if spec.nullable and rng.random() < 0.25:
            return None
        return rng.choice(sorted(state[env.table(spec.ref).name]))
    return f"{spec.words} {rng.randint(1, 999)}"
