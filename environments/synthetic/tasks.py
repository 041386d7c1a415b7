"""Task generation: simulate a short plan of tool calls on a copy of the initial state.

A task is drawn from its own random stream ``(seed, environment, task index)``, so any one task can be
regenerated without the others. The planner picks 1-4 write steps; each step picks a record that
satisfies the tool's guard, new values that satisfy the table's constraints, and decides whether the
text names records by id (no lookup needed) or by their title/name (a search call first). Every call
is executed on the simulated state as it is planned, so the gold sequence is valid by construction;
the goal is the difference between the initial and the final simulated state.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from environments.base import Task, ToolCall
from environments.synthetic import backend, text
from environments.synthetic.schema import FieldSpec, State, TableSpec, ToolDef, World, copy_state
from environments.synthetic.themes import THEMES_BY_NAME
from environments.synthetic.vocabulary import fresh, person_names

SOURCE = "synthetic"
VERIFIER = "state_diff"
MAX_CALLS = 8
_STEP_COUNTS, _STEP_WEIGHTS = (1, 2, 3, 4), (30, 35, 25, 10)
_RANGES = {"priority": (1, 5), "stock": (0, 300), "capacity": (1, 12), "size": (1, 4), "day": (1, 28),
           "slot": (8, 21)}  # fmt: skip
_PEOPLE = person_names()


class _Retry(Exception):
    """This step cannot be planned with the choices made; try another."""


@dataclass
class _Step:
    calls: list[ToolCall] = field(default_factory=list)
    clause: str = ""
    role: str = ""


class _Planner:
    def __init__(self, world: World, rng: random.Random):
        self.world, self.rng = world, rng
        self.state: State = copy_state(world.initial)
        self.theme = THEMES_BY_NAME[world.spec.theme]
        self.touched: set[str] = set()  # records an earlier step changed; later steps pick others

    # -- execution on the simulated state ---------------------------------------------------------
    def run(self, call: ToolCall) -> Any:
        result = backend.execute(self.world, self.state, call.name, call.arguments)
        if result.is_error:
            raise _Retry(result.content)
        return json.loads(result.content)

    def rows(self, table: TableSpec, tool: ToolDef | None = None) -> list[str]:
        """Ids of ``table``'s records that pass ``tool``'s guard."""
        rows = self.state[table.name]
        if tool is None or tool.guard is None:
            return sorted(rows)
        name = table.field(tool.guard[0]).name
        return sorted(rid for rid, rec in rows.items() if rec[name] in tool.guard[1])

    def mention(self, table: TableSpec, rid: str, calls: list[ToolCall]) -> str:
        """How the text names record ``rid``; appends the lookup call it then needs to ``calls``."""
        search = self.world.spec.tool(f"search_{table.role}")
        label = table.field(table.label)
        if search and label.type == "str" and self.rng.random() < 0.7:
            value = self.state[table.name][rid][label.name]
            needle = value.lower()
            # What the search call will return, computed directly (the call itself is replayed later).
            found = [
                other
                for other, rec in self.state[table.name].items()
                if backend.text_match(rec[label.name], needle)
            ]
            if found == [rid]:
                calls.append(ToolCall(search.name, {label.name: value}))
                return text.by_label(self.rng, table, value)
        return text.by_id(self.rng, table, rid)

    # -- values ------------------------------------------------------------------------------------
    def new_value(
        self, table: TableSpec, spec: FieldSpec, current: Any, calls: list[ToolCall]
    ) -> tuple[Any, str]:
        """(argument value, its phrase in the text) for ``spec``, different from ``current``."""
        rng = self.rng
        if spec.type == "ref":
            target = self.world.tables_by_role[spec.ref]
            eligible = [rid for rid in self.rows(target) if rid != current and self._ref_ok(table, spec, rid)]
            if not eligible:
                raise _Retry(f"no eligible {target.singular}")
            rid = rng.choice(eligible)
            return rid, self.mention(target, rid, calls)
        if spec.type == "str":
            taken = {rec[spec.name] for rec in self.state[table.name].values()}
            pool = list(self.theme.labels.get(table.role) or _PEOPLE)
            value = fresh(rng, pool, taken)
        elif spec.type == "int":
            low, high = _RANGES.get(spec.role, (int(spec.minimum or 0), int(spec.minimum or 0) + 300))
            value = rng.randint(low, high)
        elif spec.type == "float":
            value = round(rng.uniform(1.0, 300.0), 2)
        elif spec.type == "enum":
            value = rng.choice([c for c in spec.choices if c != current] or list(spec.choices))
        else:
            value = not current if current is not None else rng.random() < 0.5
        if value == current:
            raise _Retry("no new value")
        return value, text.value_phrase(spec, value)

    def _ref_ok(self, table: TableSpec, spec: FieldSpec, target_id: str) -> bool:
        for check in table.checks:
            if check.kind == "ref_requires" and check.fields[0] == spec.role:
                target = self.world.tables_by_role[spec.ref]
                return (
                    self.state[target.name][target_id][target.field(check.fields[1]).name]
                    in check.scope_values
                )
        return True

    # -- steps -------------------------------------------------------------------------------------
    def step(self, tool: ToolDef) -> _Step:
        table = self.world.tables_by_role[tool.table]
        step = _Step(role=tool.role)
        rng, calls = self.rng, step.calls
        if tool.kind == "create":
            label = table.field(table.label)
            label_value, _ = self.new_value(table, label, None, calls)
            args, pairs = {label.name: label_value}, []
            for role in tool.fields:
                spec = table.field(role)
                if role == table.label or (role not in tool.required and rng.random() < 0.5):
                    continue
                args[spec.name], phrase = self.new_value(table, spec, None, calls)
                pairs.append(
                    text.ref_pair(spec.words, phrase) if spec.type == "ref" else (spec.words, phrase)
                )
            calls.append(ToolCall(tool.name, args))
            step.clause = text.create_clause(rng, tool, table, label_value, pairs)
            return step
        if tool.kind == "transfer":
            eligible = [rid for rid in self.rows(table, tool) if rid not in self.touched]
            spec = table.field(tool.fields[0])
            sources = [rid for rid in eligible if self.state[table.name][rid][spec.name] >= 1]
            if len(eligible) < 2 or not sources:
                raise _Retry("nothing to transfer")
            source = rng.choice(sources)
            target = rng.choice([rid for rid in eligible if rid != source])
            amount = rng.randint(1, min(500, self.state[table.name][source][spec.name]))
            source_text = self.mention(table, source, calls)
            target_text = self.mention(table, target, calls)
            name = tool.id_param
            calls.append(
                ToolCall(tool.name, {f"from_{name}": source, f"to_{name}": target, "amount": amount})
            )
            step.clause = text.transfer_clause(rng, tool, source_text, target_text, amount, self._unit(spec))
            return step
        candidates = [rid for rid in self.rows(table, tool) if rid not in self.touched]
        if not candidates:
            raise _Retry(f"no {table.singular} passes the guard of {tool.name}")
        rid = rng.choice(candidates)
        record = self.state[table.name][rid]
        target = self.mention(table, rid, calls)
        args: dict[str, Any] = {tool.id_param: rid}
        if tool.kind == "update":
            roles = list(tool.required) or rng.sample(
                tool.fields, rng.choice((1, 1, 2)) if len(tool.fields) > 1 else 1
            )
            pairs = []
            for role in roles:
                spec = table.field(role)
                args[spec.name], phrase = self.new_value(table, spec, record[spec.name], calls)
                pairs.append((spec.words, phrase))
            step.clause = text.update_clause(rng, tool, target, pairs)
        elif tool.kind == "set":
            step.clause = text.set_clause(rng, tool, target)
        elif tool.kind == "delete":
            step.clause = text.delete_clause(rng, tool, target)
        elif tool.kind == "adjust":
            spec = table.field(tool.fields[0])
            if tool.sign < 0 and record[spec.name] < 1:
                raise _Retry("nothing to take away")
            args["amount"] = rng.randint(1, record[spec.name] if tool.sign < 0 else 200)
            step.clause = text.adjust_clause(rng, tool, target, spec.words, args["amount"], self._unit(spec))
        calls.append(ToolCall(tool.name, args))
        return step

    def _unit(self, spec: FieldSpec) -> str:
        return self.world.spec.words.get("unit") or "units"


def generate_task(world: World, task_index: int) -> Task:
    """Task ``task_index`` of ``world``: same world and index, same task."""
    spec = world.spec
    rng = random.Random(f"synthetic:{spec.seed}:{spec.family}:{spec.index}:task:{task_index}")
    planner = _Planner(world, rng)
    writers = [t for t in spec.tools if t.effect == "write"]
    wanted = rng.choices(_STEP_COUNTS, _STEP_WEIGHTS)[0]
    steps: list[_Step] = []
    for _ in range(wanted * 6):  # a few tries per step; guards or constraints may rule a choice out
        if len(steps) == wanted:
            break
        try:
            step = planner.step(rng.choice(writers))
        except _Retry:
            continue
        if sum(len(s.calls) for s in steps) + len(step.calls) > MAX_CALLS:
            continue
        try:
            planner.run(step.calls[-1])  # the write; lookups ran while planning
        except _Retry:
            continue
        steps.append(step)
        planner.touched.update(v for k, v in step.calls[-1].arguments.items() if k.endswith("_id"))
    if not steps:
        raise RuntimeError(f"{spec.env_id}: could not plan task {task_index}")  # a generator bug
    turns = _split_turns(rng, steps)
    person = rng.choice(_PEOPLE)
    user_turns = tuple(
        text.turn_text(rng, [s.clause for s in turn], i == 0, spec.theme, person)
        for i, turn in enumerate(turns)
    )
    gold = tuple(tuple(call for s in turn for call in s.calls) for turn in turns)
    goal = state_diff(world.initial, planner.state)
    used = list(dict.fromkeys(call.name for turn in gold for call in turn))
    return Task(
        task_id=f"{spec.env_id}/{task_index:04d}",
        env_id=spec.env_id,
        source=SOURCE,
        split="test" if task_index % 10 == 9 else "train",
        user_turns=user_turns,
        gold=gold,
        tools=tuple(used),
        state_fields=_state_fields(world.initial, goal),
        verifier=VERIFIER,
        metadata={
            "family": spec.family,
            "theme": spec.theme,
            "seed": spec.seed,
            "env_index": spec.index,
            "task_index": task_index,
            "steps": [s.role for s in steps],
            "goal": goal,
        },
    )


def _split_turns(rng: random.Random, steps: list[_Step]) -> list[list[_Step]]:
    """One turn, or (for some tasks of 2+ steps) 2-3 turns, each asking for the next steps."""
    if len(steps) < 2 or rng.random() >= 0.4:
        return [steps]
    n_turns = rng.randint(2, min(3, len(steps)))
    cuts = sorted(rng.sample(range(1, len(steps)), n_turns - 1))
    bounds = [0, *cuts, len(steps)]
    return [steps[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def state_diff(initial: State, final: State) -> dict[str, dict[str, dict | None]]:
    """Records of ``final`` that differ from ``initial`` (None: deleted), by table and id."""
    diff: dict[str, dict[str, dict | None]] = {}
    for table, rows in final.items():
        before = initial[table]
        changed = {rid: dict(rec) for rid, rec in rows.items() if before.get(rid) != rec}
        changed.update({rid: None for rid in before if rid not in rows})
        if changed:
            diff[table] = dict(sorted(changed.items()))
    return diff


def _state_fields(initial: State, goal: dict) -> tuple[str, ...]:
    fields = set()
    for table, changes in goal.items():
        for rid, rec in changes.items():
            before = initial[table].get(rid) or {}
            after = rec or {}
            fields.update(
                f"{table}.{name}"
                for name in before.keys() | after.keys()
                if before.get(name) != after.get(name)
            )
    return tuple(sorted(fields))
