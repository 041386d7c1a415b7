"""Reading ACEBench's agent data (multi-step and multi-turn) into catalogue rows.

Files (``data_dir``): ``data_agent_multi_step.json`` / ``data_agent_multi_turn.json`` (JSON Lines:
``id, question, initial_config, involved_classes, function``), ``possible_answer/`` with the same
names (``ground_truth``: expected end state per class; ``mile_stone``: the expected call sequence, or
a list of alternative sequences) and ``scenario_defaults.json`` (each class's default state and
public methods).

What an *environment* is here: the set of scenario classes a task involves, per mode, e.g.
``acebench_agent/multi_step/BaseApi+FoodPlatform+MessageApi``. Tasks of one environment run the same
state machine from the same defaults and are checked on the same classes; multi-step and multi-turn
tasks are kept apart because they are posed differently (a direct request vs. a user simulator's
instructions). The data gives 10 environments of 2-10 tasks each.

Multi-turn tasks in ACEBench are driven by an LLM user simulator that follows ``question``. This
project has no simulator yet, so they run in *instruction mode*: the instruction is the first and
only user message (``metadata["user_simulator"] == "instruction"``). The gold solution is the first
milestone alternative, as one turn of tool calls, with the edits of ``data_errors.GOLD_CORRECTIONS``
applied for the tasks whose milestone contradicts a reachable ground truth.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from environments.acebench.backend import SCENARIO_CLASSES, TOOL_OWNERS
from environments.acebench.calls import parse_step
from environments.acebench.data_errors import GOLD_CORRECTIONS, KNOWN_DATA_ERRORS, GoldCorrection, Insert
from environments.base import EnvironmentInfo, SourceDataError, Task, ToolCall, ToolSpec
from environments.schema import bfcl_to_json_schema, read_jsonl

SOURCE = "acebench_agent"
MODES = ("multi_step", "multi_turn")
VERIFIER = "acebench_end_state"
DEFAULTS_FILE = "scenario_defaults.json"
# Misspelt class names found in the answers -> the class they mean.
CLASS_ALIASES = {"ReminderAPI": "ReminderApi", "Reminderpi": "ReminderApi", "BaseAPI": "BaseApi"}


def default_data_dir() -> Path:
    """``$ENVSCHED_ACEBENCH_DIR`` if set, else ``shared/data/acebench`` beside the project checkout."""
    if os.environ.get("ENVSCHED_ACEBENCH_DIR"):
        return Path(os.environ["ENVSCHED_ACEBENCH_DIR"])
    return Path(__file__).resolve().parents[2].parent / "shared/data/acebench"


def canonical_class(name: Any, where: str) -> str:
    """A class name as written in the data -> the scenario class it means; unknown names are an error."""
    if name in SCENARIO_CLASSES:
        return name
    if name in CLASS_ALIASES:
        return CLASS_ALIASES[name]
    raise SourceDataError(f"{where}: unknown scenario class {name!r}; known: {sorted(SCENARIO_CLASSES)}")


@dataclass
class AceBenchData:
    environments: list[EnvironmentInfo]
    tasks: list[Task]
    tools: dict[str, ToolSpec]  # every tool any task shows, by name
    defaults: dict[str, dict[str, Any]]  # class -> default state


def load_defaults(data_dir: Path) -> dict[str, dict[str, Any]]:
    """Each class's default state; checks the file's method lists against the classes implemented here."""
    path = data_dir / DEFAULTS_FILE
    if not path.is_file():
        raise SourceDataError(f"{path}: file not found")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SourceDataError(f"{path} line {exc.lineno}: invalid JSON ({exc.msg})") from None
    states = raw.get("default_state") if isinstance(raw, dict) else None
    if not isinstance(states, dict):
        raise SourceDataError(f"{path}: field 'default_state' must be an object of class -> state")
    defaults = {}
    for name, state in states.items():
        if not isinstance(state, dict):
            raise SourceDataError(f"{path}: field 'default_state.{name}' must be an object")
        defaults[canonical_class(name, f"{path} field 'default_state'")] = state
    missing = sorted(set(SCENARIO_CLASSES) - set(defaults))
    if missing:
        raise SourceDataError(f"{path}: field 'default_state' has no state for {missing}")
    for name, methods in (raw.get("methods") or {}).items():
        owner = canonical_class(name, f"{path} field 'methods'")
        for method in methods:
            if method in TOOL_OWNERS and TOOL_OWNERS[method][0] != owner:
                raise SourceDataError(
                    f"{path}: field 'methods.{name}' lists {method!r}, which belongs to {TOOL_OWNERS[method][0]}"
                )
    return defaults


def tool_spec(function: Any, where: str) -> ToolSpec:
    """One entry of a task's ``function`` list -> ToolSpec (standard JSON schema, effect from the owner)."""
    if not isinstance(function, dict):
        raise SourceDataError(f"{where}: expected a function object")
    for key in ("name", "description", "parameters"):
        if key not in function:
            raise SourceDataError(f"{where}: function is missing field '{key}'")
    name = function["name"]
    if name not in TOOL_OWNERS:
        raise SourceDataError(
            f"{where}: function {name!r} has no implementation here; known: {sorted(TOOL_OWNERS)}"
        )
    parameters = bfcl_to_json_schema(function["parameters"])
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        raise SourceDataError(f"{where}: function {name!r}: 'parameters' must be an object schema")
    # reserve_flight requires 'payment_methods' but declares 'payment_method': keep only declared names.
    declared = parameters.get("properties", {})
    parameters["required"] = [k for k in parameters.get("required", []) if k in declared]
    return ToolSpec(name, function["description"], parameters, TOOL_OWNERS[name][1])


def parse_milestones(raw: Any, where: str) -> list[list[ToolCall]]:
    """``mile_stone`` -> alternatives, each a flat list of calls (one sequence is one alternative)."""
    if not isinstance(raw, list) or not raw:
        raise SourceDataError(f"{where}: field 'mile_stone' must be a non-empty list")
    if all(isinstance(step, str) for step in raw):
        sequences = [raw]
    elif all(isinstance(seq, list) and all(isinstance(s, str) for s in seq) for seq in raw):
        sequences = raw
    else:
        raise SourceDataError(f"{where}: field 'mile_stone' must be a list of strings or of lists of strings")
    alternatives = []
    for a, sequence in enumerate(sequences):
        calls: list[ToolCall] = []
        for s, step in enumerate(sequence):
            try:
                calls += parse_step(step)
            except ValueError as exc:
                raise SourceDataError(
                    f"{where}: field 'mile_stone' alternative {a} step {s}: {exc}"
                ) from None
        alternatives.append(calls)
    return alternatives


def _one_call(text: str, where: str) -> ToolCall:
    try:
        calls = parse_step(text)
    except ValueError as exc:
        raise SourceDataError(f"{where}: {exc}: {text!r}") from None
    if len(calls) != 1:
        raise SourceDataError(f"{where}: expected one call, got {len(calls)}: {text!r}")
    return calls[0]


def corrected_gold(milestone: list[ToolCall], correction: GoldCorrection, where: str) -> list[ToolCall]:
    """``milestone`` with the correction's edits applied in order. Each edit's anchor call (the call to
    insert before, or to replace) must occur exactly once, else the correction no longer fits the data."""
    calls = list(milestone)
    for edit in correction.edits:
        anchor_text = edit.before if isinstance(edit, Insert) else edit.old
        anchor = _one_call(anchor_text, f"{where} (gold correction)")
        found = [i for i, call in enumerate(calls) if call == anchor]
        if len(found) != 1:
            raise SourceDataError(
                f"{where}: gold correction '{edit.describe()}' does not apply: the milestone has "
                f"{len(found)} calls {anchor_text}, expected 1"
            )
        if isinstance(edit, Insert):
            calls.insert(found[0], _one_call(edit.call, f"{where} (gold correction)"))
        else:
            calls[found[0]] = _one_call(edit.new, f"{where} (gold correction)")
    return calls


def parse_ground_truth(raw: Any, where: str) -> dict[str, dict[str, Any]]:
    """``ground_truth`` (a list of ``{class: {field: value}}``) -> canonical class -> expected fields."""
    if not isinstance(raw, list) or not raw:
        raise SourceDataError(f"{where}: field 'ground_truth' must be a non-empty list")
    expected: dict[str, dict[str, Any]] = {}
    for entry in raw:
        if not isinstance(entry, dict):
            raise SourceDataError(f"{where}: field 'ground_truth' entries must be objects")
        for name, fields in entry.items():
            if not isinstance(fields, dict):
                raise SourceDataError(f"{where}: field 'ground_truth.{name}' must be an object")
            expected.setdefault(canonical_class(name, f"{where} field 'ground_truth'"), {}).update(fields)
    return expected


def environment_id(mode: str, classes: list[str]) -> str:
    return f"{SOURCE}/{mode}/{'+'.join(sorted(classes))}"


def load_data(data_dir: Path, modes: tuple[str, ...] = MODES) -> AceBenchData:
    defaults = load_defaults(data_dir)
    tools: dict[str, ToolSpec] = {}
    env_tools: dict[str, dict[str, ToolSpec]] = {}
    env_classes: dict[str, list[str]] = {}
    tasks = []
    for mode in modes:
        question_path = data_dir / f"data_agent_{mode}.json"
        answer_path = data_dir / "possible_answer" / f"data_agent_{mode}.json"
        answers = {}
        for line_no, row in enumerate(read_jsonl(answer_path), start=1):
            answers[row.get("id")] = (row, f"{answer_path} line {line_no}")
        for line_no, entry in enumerate(read_jsonl(question_path), start=1):
            where = f"{question_path} line {line_no}"
            task, specs = _task(entry, answers, mode, where)
            for spec in specs:
                if tools.setdefault(spec.name, spec) != spec:
                    raise SourceDataError(
                        f"{where}: function {spec.name!r} differs from its earlier definition"
                    )
            env_tools.setdefault(task.env_id, {}).update({s.name: s for s in specs})
            env_classes[task.env_id] = task.metadata["involved_classes"]
            tasks.append(task)
    environments = [
        _environment(env_id, env_classes[env_id], list(env_tools[env_id].values())) for env_id in env_tools
    ]
    return AceBenchData(environments, tasks, tools, defaults)


def _environment(env_id: str, classes: list[str], tools: list[ToolSpec]) -> EnvironmentInfo:
    mode = env_id.split("/")[1]
    return EnvironmentInfo(
        env_id=env_id,
        source=SOURCE,
        name=env_id.removeprefix(f"{SOURCE}/"),
        description=f"ACEBench agent ({mode.replace('_', '-')}): {', '.join(sorted(classes))}",
        tools=tuple(sorted(tools, key=lambda s: s.name)),
        metadata={
            "scenario_classes": sorted(classes),
            "mode": mode,
            "user_simulator": "instruction" if mode == "multi_turn" else "none",
        },
    )


def _task(entry: dict[str, Any], answers: dict, mode: str, where: str) -> tuple[Task, list[ToolSpec]]:
    for key in ("id", "question", "involved_classes", "function"):
        if key not in entry:
            raise SourceDataError(f"{where}: missing field '{key}'")
    if not isinstance(entry["question"], str) or not entry["question"].strip():
        raise SourceDataError(f"{where}: field 'question' must be a non-empty string")
    if entry["id"] not in answers:
        raise SourceDataError(f"{where}: no answer for task {entry['id']!r} in possible_answer")
    answer, answer_where = answers[entry["id"]]
    for key, kind in (("involved_classes", list), ("function", list), ("initial_config", dict)):
        if not isinstance(entry.get(key, kind()), kind):
            raise SourceDataError(f"{where}: field '{key}' must be a {kind.__name__}")
    classes = sorted(
        {canonical_class(c, f"{where} field 'involved_classes'") for c in entry["involved_classes"]}
    )
    specs = [tool_spec(f, f"{where} field 'function'") for f in entry["function"]]
    shown = {s.name for s in specs}
    initial_config = {
        canonical_class(name, f"{where} field 'initial_config'"): fields
        for name, fields in (entry.get("initial_config") or {}).items()
    }
    ground_truth = parse_ground_truth(answer.get("ground_truth"), answer_where)
    milestones = parse_milestones(answer.get("mile_stone"), answer_where)
    unknown = sorted({c.name for alt in milestones for c in alt} - shown)
    if unknown:
        raise SourceDataError(
            f"{answer_where}: field 'mile_stone' calls {unknown}, not in the task's functions"
        )
    correction = GOLD_CORRECTIONS.get(entry["id"])
    gold = tuple(corrected_gold(milestones[0], correction, answer_where) if correction else milestones[0])
    unknown = sorted({c.name for c in gold} - shown)
    if unknown:
        raise SourceDataError(
            f"{answer_where}: the gold correction calls {unknown}, not in the task's functions"
        )
    tools = tuple(sorted({c.name for c in gold}))
    metadata = {
        "acebench_id": entry["id"],
        "mode": mode,
        "involved_classes": classes,
        # The data's order: the original builds (and reports) the classes in it.
        "class_order": list(dict.fromkeys(canonical_class(c, where) for c in entry["involved_classes"])),
        "initial_config": initial_config,
        "functions": [s.name for s in specs],
        "ground_truth": ground_truth,
        "milestones": [[{"name": c.name, "arguments": c.arguments} for c in alt] for alt in milestones],
        # As written in the answers: the original's rules read these (class names unmapped, calls as text).
        "ground_truth_entries": answer["ground_truth"],
        "milestone_text": answer["mile_stone"],
        "user_simulator": "instruction" if mode == "multi_turn" else "none",
        "tool_effects": [TOOL_OWNERS[name][1] for name in tools],
    }
    if entry["id"] in KNOWN_DATA_ERRORS:
        metadata["data_error"] = KNOWN_DATA_ERRORS[entry["id"]]
    if correction:
        # The gold is not milestones[0]: say so, how and why (the process score still uses the milestones).
        metadata["gold_correction"] = {
            "reason": correction.reason,
            "edits": [edit.describe() for edit in correction.edits],
        }
    task = Task(
        task_id=f"{SOURCE}/{entry['id']}",
        env_id=environment_id(mode, classes),
        source=SOURCE,
        split=mode,
        user_turns=(entry["question"],),
        gold=(gold,),
        tools=tools,
        state_fields=tuple(sorted(f"{c}.{f}" for c, fields in ground_truth.items() for f in fields)),
        verifier=VERIFIER,
        metadata=metadata,
    )
    return task, specs
