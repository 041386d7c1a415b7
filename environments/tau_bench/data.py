"""Reading a tau-bench domain folder (database tables, tools.json, policy.md, task splits) into
catalogue rows, with every malformed file reported by name, row and field.

What an *environment* is here: a domain crossed with a **task family**, the set of write tools the
gold actions use ("which kind of change does the task make"), e.g. ``tau_bench_retail/cancel+return``
or ``tau_bench_airline/read_only``. Every environment runs the same domain code on the same database,
but tasks of one family need the same decisions and the same kind of database change, so their
rewards move together; the user's individual situation would be too fine a grain (one task each).
Ids are built from tool names only, so they are stable across data versions (retail: 38, airline: 12).

Tool semantics: ``original`` (default, tau-bench's own behaviour: ``retail.py``, ``airline.py``) or
``policy`` (policy.md's limits enforced: ``retail_policy.py``, ``airline_policy.py``); see SEMANTICS.

Interaction mode: tau-bench plays the user with an LLM simulator that is given ``instruction``. This
project uses no user simulator: the instruction is the task's single user message, and the gold
solution is the task's ``actions`` in one turn, followed by its ``outputs`` said to the user.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from environments.base import EnvironmentInfo, SourceDataError, Task, ToolCall, ToolSpec
from environments.tau_bench import airline, airline_policy, retail, retail_policy
from environments.tau_bench.db import BaseTables

# Tool semantics by mode: "original" reproduces tau-bench's tools (the default), "policy" adds the
# checks of policy.md and keeps seat counts (see the README's list of differences).
SEMANTICS: dict[str, dict[str, ModuleType]] = {
    "original": {"retail": retail, "airline": airline},
    "policy": {"retail": retail_policy, "airline": airline_policy},
}
DOMAINS: dict[str, ModuleType] = SEMANTICS["original"]
SPLITS = ("train", "dev", "test")
DATA_DIR_ENV = "ENVSCHED_TAU_BENCH_DIR"
VERIFIER = "tau_bench_db_and_outputs"
TERMINAL_TOOLS = ("transfer_to_human_agents",)  # not a database write, but a kind of outcome
# Short family names: the tool's verb and object without the domain's boilerplate.
FAMILY_ALIASES = {
    "cancel_pending_order": "cancel",
    "modify_pending_order_address": "modify_address",
    "modify_pending_order_items": "modify_items",
    "modify_pending_order_payment": "modify_payment",
    "modify_user_address": "modify_user_address",
    "return_delivered_order_items": "return",
    "exchange_delivered_order_items": "exchange",
    "book_reservation": "book",
    "cancel_reservation": "cancel",
    "update_reservation_flights": "update_flights",
    "update_reservation_baggages": "update_baggages",
    "update_reservation_passengers": "update_passengers",
    "send_certificate": "send_certificate",
    "transfer_to_human_agents": "transfer",
}
_REQUIRED_FIELDS = {
    ("retail", "users"): ("name", "address", "email", "payment_methods", "orders"),
    ("retail", "orders"): ("order_id", "user_id", "address", "items", "status", "payment_history"),
    ("retail", "products"): ("name", "product_id", "variants"),
    ("airline", "users"): ("name", "email", "payment_methods", "membership", "reservations"),
    ("airline", "flights"): ("flight_number", "origin", "destination", "dates"),
    ("airline", "reservations"): (
        "reservation_id",
        "user_id",
        "cabin",
        "flights",
        "passengers",
        "payment_history",
    ),
}


def default_data_dir() -> Path:
    """``$ENVSCHED_TAU_BENCH_DIR`` if set, else ``../shared/data/tau_bench`` beside the repository."""
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV])
    return Path(__file__).resolve().parents[2].parent / "shared/data/tau_bench"


def read_json(path: Path) -> Any:
    if not path.is_file():
        raise SourceDataError(f"{path}: file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SourceDataError(f"{path} line {exc.lineno}: invalid JSON ({exc.msg})") from None


def _table(domain: str, folder: Path, name: str) -> dict[str, dict[str, Any]]:
    path = folder / f"{name}.json"
    rows = read_json(path)
    if not isinstance(rows, dict):
        raise SourceDataError(f"{path}: expected an object keyed by id, got {type(rows).__name__}")
    for key, row in rows.items():
        if not isinstance(row, dict):
            raise SourceDataError(f"{path} record '{key}': expected an object, got {type(row).__name__}")
        for field in _REQUIRED_FIELDS[(domain, name)]:
            if field not in row:
                raise SourceDataError(f"{path} record '{key}': missing field '{field}'")
    return rows


def load_tables(domain: str, folder: Path) -> BaseTables:
    return BaseTables({name: _table(domain, folder, name) for name in DOMAINS[domain].TABLES})


def domain_module(domain: str, semantics: str = "original") -> ModuleType:
    """The module with ``domain``'s tools (TOOLS, WRITES, TABLES) for one of SEMANTICS' modes."""
    if semantics not in SEMANTICS:
        raise ValueError(
            f"tau_bench_{domain}: option 'semantics' must be one of {sorted(SEMANTICS)}, got {semantics!r}"
        )
    return SEMANTICS[semantics][domain]


def load_tool_specs(domain: str, folder: Path, semantics: str = "original") -> dict[str, ToolSpec]:
    """tools.json (OpenAI function format) -> specs, tagged read/write by what the tool does here."""
    path = folder / "tools.json"
    module = domain_module(domain, semantics)
    entries = read_json(path)
    if not isinstance(entries, list):
        raise SourceDataError(f"{path}: expected a list of tool schemas")
    specs = {}
    for i, entry in enumerate(entries):
        fn = entry.get("function", entry) if isinstance(entry, dict) else None
        if not isinstance(fn, dict):
            raise SourceDataError(f"{path} item {i}: expected a function object")
        for field in ("name", "description", "parameters"):
            if field not in fn:
                raise SourceDataError(f"{path} item {i}: missing field '{field}'")
        if fn["name"] not in module.TOOLS:
            raise SourceDataError(f"{path} item {i}: tool '{fn['name']}' has no implementation in {domain}")
        if not isinstance(fn["parameters"], dict) or fn["parameters"].get("type") != "object":
            raise SourceDataError(
                f"{path} item {i} ('{fn['name']}'): field 'parameters' must be an object schema"
            )
        effect = "write" if fn["name"] in module.WRITES else "read"
        specs[fn["name"]] = ToolSpec(fn["name"], fn["description"], fn["parameters"], effect)
    return specs


def family(domain: str, tool_names: set[str]) -> str:
    """The task family: the write (or terminal) tools its gold actions use, by short name (the same
    write tools in both modes, so environment ids do not depend on the mode)."""
    kinds = sorted(
        FAMILY_ALIASES[n] for n in tool_names if n in DOMAINS[domain].WRITES or n in TERMINAL_TOOLS
    )
    return "+".join(kinds) or "read_only"


@dataclass
class DomainCatalog:
    environments: list[EnvironmentInfo]
    tasks: list[Task]


def _task(
    source: str, domain: str, split: str, index: int, raw: Any, path: Path, specs, semantics: str
) -> Task:
    where = f"{path} row {index}"
    if not isinstance(raw, dict):
        raise SourceDataError(f"{where}: expected an object, got {type(raw).__name__}")
    for field, kind in (("user_id", str), ("instruction", str), ("actions", list), ("outputs", list)):
        if not isinstance(raw.get(field), kind):
            raise SourceDataError(f"{where}: field '{field}' missing or not a {kind.__name__}")
    calls = []
    for j, action in enumerate(raw["actions"]):
        if not isinstance(action, dict) or not isinstance(action.get("kwargs"), dict):
            raise SourceDataError(f"{where}: field 'actions[{j}]' needs 'name' and an object 'kwargs'")
        if action.get("name") not in specs:
            raise SourceDataError(
                f"{where}: field 'actions[{j}].name' is unknown tool {action.get('name')!r}"
            )
        calls.append(ToolCall(action["name"], action["kwargs"]))
    if not all(isinstance(o, str) for o in raw["outputs"]):
        raise SourceDataError(f"{where}: field 'outputs' must be a list of strings")
    names = {c.name for c in calls}
    module = domain_module(domain, semantics)
    return Task(
        task_id=f"{source}/{split}/{index}",
        env_id=f"{source}/{family(domain, names)}",
        source=source,
        split=split,
        user_turns=(raw["instruction"],),
        gold=(tuple(calls),),
        tools=tuple(sorted(names)),
        state_fields=tuple(sorted({f for n in names for f in module.WRITES.get(n, ())})),
        verifier=VERIFIER,
        metadata={
            "domain": domain,
            "user_id": raw["user_id"],
            "annotator": str(raw.get("annotator", "")),
            "outputs": list(raw["outputs"]),
            "family": family(domain, names),
            "tool_effects": [specs[n].effect for n in sorted(names)],
        },
        gold_replies=(tuple(raw["outputs"]),),
    )


def load_domain(
    source: str, domain: str, folder: Path, specs: dict[str, ToolSpec], semantics: str = "original"
) -> DomainCatalog:
    """All tasks of every split present in ``folder`` and the environments (families) they fall in."""
    if not (folder / "policy.md").is_file():
        raise SourceDataError(f"{folder / 'policy.md'}: file not found")
    tasks = []
    for split in SPLITS:
        path = folder / f"tasks_{split}.json"
        if not path.exists():
            continue  # airline ships a test split only
        rows = read_json(path)
        if not isinstance(rows, list):
            raise SourceDataError(f"{path}: expected a list of tasks, got {type(rows).__name__}")
        tasks += [_task(source, domain, split, i, raw, path, specs, semantics) for i, raw in enumerate(rows)]
    if not tasks:
        raise SourceDataError(f"{folder}: no tasks_<split>.json file found")
    policy = (folder / "policy.md").read_text(encoding="utf-8")
    environments = [
        EnvironmentInfo(
            env_id=env_id,
            source=source,
            name=env_id.removeprefix(f"{source}/"),
            description=f"tau-bench {domain}: tasks whose gold actions make the change(s) "
            f"'{env_id.removeprefix(f'{source}/')}'",
            tools=tuple(specs[name] for name in sorted(specs)),
            metadata={"domain": domain, "family": env_id.removeprefix(f"{source}/"), "policy": policy},
        )
        for env_id in sorted({t.env_id for t in tasks})
    ]
    return DomainCatalog(environments, tasks)
