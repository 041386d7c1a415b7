"""Reading BFCL-v3 multi-turn task files, answers and function docs into catalogue rows.

What an *environment* is here: the set of API classes a task involves (e.g. ``TicketAPI+TravelAPI``),
with long-context tasks as their own variant (``.../long_context``), because their state is much
larger and behaves differently. Base, miss-func and miss-param tasks of the same classes share an
environment: the executable state machine is the same, only what the agent is told differs. This
gives a few dozen environments whose statistics pool tasks that really run the same code.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from environments.base import EnvironmentInfo, SourceDataError, Task, ToolCall, ToolSpec
from environments.bfcl.backend import API_CLASSES, WRITE_TOOLS, api_class
from environments.schema import bfcl_to_json_schema, read_jsonl

SOURCE = "bfcl_v3_multi_turn"
CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
# What bfcl-eval's inference loop says in a turn that only reveals held-out functions.
ADDITIONAL_FUNCTION_PROMPT = "I have updated some more functions you can choose from. What about now?"


def default_data_dir() -> Path:
    import bfcl_eval

    return Path(bfcl_eval.__file__).parent / "data"


def load_tool_specs(data_dir: Path) -> dict[str, list[ToolSpec]]:
    """class name -> its tools, from bfcl's function-doc files."""
    specs = {}
    for class_name, (_, doc_file) in API_CLASSES.items():
        path = data_dir / "multi_turn_func_doc" / doc_file
        tools = []
        for line_no, doc in enumerate(read_jsonl(path), start=1):
            for key in ("name", "description", "parameters"):
                if key not in doc:
                    raise SourceDataError(f"{path} line {line_no}: missing field '{key}'")
            effect = "write" if doc["name"] in WRITE_TOOLS else "read"
            tools.append(
                ToolSpec(doc["name"], doc["description"], bfcl_to_json_schema(doc["parameters"]), effect)
            )
        specs[class_name] = tools
    return specs


def parse_call(source: str, signatures: dict[str, inspect.Signature], where: str) -> ToolCall:
    """A gold call string such as ``mv(source='a', destination='b')`` -> ToolCall with keywords."""
    try:
        node = ast.parse(source, mode="eval").body
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            raise ValueError("not a plain function call")
        name = node.func.id
        arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
        if node.args:  # a few answers pass arguments by position: name them from the signature
            params = [p for p in signatures[name].parameters if p != "self"]
            for param, value in zip(params, node.args, strict=False):
                arguments[param] = ast.literal_eval(value)
    except (SyntaxError, ValueError, KeyError) as exc:
        raise SourceDataError(f"{where}: cannot parse gold call {source!r} ({exc})") from None
    return ToolCall(name, arguments)


def environment_id(classes: list[str], long_context: bool) -> str:
    env = f"{SOURCE}/{'+'.join(sorted(classes))}"
    return f"{env}/long_context" if long_context else env


def load_catalog(data_dir: Path, categories: tuple[str, ...] = CATEGORIES):
    """Environments and tasks of the chosen categories."""
    specs = load_tool_specs(data_dir)
    signatures = {}
    for class_name in API_CLASSES:
        cls = api_class(class_name)
        for name, fn in inspect.getmembers(cls, predicate=inspect.isfunction):
            if not name.startswith("_"):
                signatures[name] = inspect.signature(fn)

    environments: dict[str, EnvironmentInfo] = {}
    tasks: list[Task] = []
    for category in categories:
        question_path = data_dir / f"BFCL_v4_multi_turn_{category}.json"
        answer_path = data_dir / "possible_answer" / f"BFCL_v4_multi_turn_{category}.json"
        answers = {row.get("id"): row for row in read_jsonl(answer_path)}
        for line_no, entry in enumerate(read_jsonl(question_path), start=1):
            where = f"{question_path} line {line_no}"
            task = _task_from_entry(entry, answers, specs, signatures, category, where)
            if task.env_id not in environments:
                environments[task.env_id] = _environment(task.env_id, entry["involved_classes"], specs)
            tasks.append(task)
    return list(environments.values()), tasks


def _environment(env_id: str, classes: list[str], specs: dict[str, list[ToolSpec]]) -> EnvironmentInfo:
    tools = tuple(spec for c in sorted(classes) for spec in specs[c])
    long = env_id.endswith("/long_context")
    return EnvironmentInfo(
        env_id=env_id,
        source=SOURCE,
        name=env_id.removeprefix(f"{SOURCE}/"),
        description=f"BFCL-v3 multi-turn: {', '.join(sorted(classes))}" + (" (long context)" if long else ""),
        tools=tools,
        metadata={"api_classes": sorted(classes), "long_context": long},
    )


def _task_from_entry(entry, answers, specs, signatures, category, where) -> Task:
    for key in ("id", "question", "involved_classes"):
        if key not in entry:
            raise SourceDataError(f"{where}: missing field '{key}'")
    unknown = [c for c in entry["involved_classes"] if c not in API_CLASSES]
    if unknown:
        raise SourceDataError(f"{where}: unknown API class(es) {unknown} in 'involved_classes'")
    answer = answers.get(entry["id"])
    if answer is None or "ground_truth" not in answer:
        raise SourceDataError(f"{where}: no ground_truth for task '{entry['id']}' in possible_answer")
    if len(answer["ground_truth"]) != len(entry["question"]):
        raise SourceDataError(
            f"{where}: '{entry['id']}' has {len(entry['question'])} turns but "
            f"{len(answer['ground_truth'])} ground-truth turns"
        )
    gold = tuple(
        tuple(parse_call(s, signatures, f"{where} turn {t}") for s in turn)
        for t, turn in enumerate(answer["ground_truth"])
    )
    missed = {int(t): list(names) for t, names in entry.get("missed_function", {}).items()}
    user_turns = tuple(
        " ".join(m.get("content", "") for m in turn)
        if turn
        else (ADDITIONAL_FUNCTION_PROMPT if t in missed else "")
        for t, turn in enumerate(entry["question"])
    )
    long = category == "long_context"
    effects = {s.name: s.effect for c in entry["involved_classes"] for s in specs[c]}
    tools = tuple(sorted({call.name for turn in gold for call in turn}))
    return Task(
        task_id=f"{SOURCE}/{entry['id']}",
        env_id=environment_id(entry["involved_classes"], long),
        source=SOURCE,
        split=category,
        user_turns=user_turns,
        gold=gold,
        tools=tools,
        # The verifier compares each involved class's public state; the initial config names its fields.
        state_fields=tuple(
            sorted(
                f"{c}.{k}"
                for c in entry["involved_classes"]
                for k in entry.get("initial_config", {}).get(c, {})
            )
        ),
        verifier="bfcl_state_and_response",
        metadata={
            "bfcl_id": entry["id"],
            "category": category,
            "involved_classes": list(entry["involved_classes"]),
            "initial_config": entry.get("initial_config", {}),
            "excluded_function": list(entry.get("excluded_function", [])),
            "missed_function": {str(t): names for t, names in missed.items()},
            "long_context": long,
            "tool_effects": [effects.get(name, "read") for name in tools],
        },
    )
