"""The ``acebench_agent`` source: ACEBench's agent tasks (multi-step and multi-turn) over five
executable scenario classes, with its end-state verifier and process score.

Two semantics (option ``semantics``):

- ``original`` (default): the original benchmark's observable behaviour (ACEBench @e6db74b, recorded
  in ``tests/data/acebench_original``): its callable methods, tool results, batches, state changes,
  end-state rule (subset check, misspelt classes unchecked) and process score. See
  ``environments/acebench/original/``.
- ``policy``: this project's stricter re-implementation for training: only the task's listed
  functions, schema-checked arguments, refusals as errors, all-or-nothing modifications, an exact
  end-state check with misspelt classes mapped, and an LCS milestone score.

Option ``end_state`` picks the end-state rule on its own: ``subset`` (the original's) or ``strict``
(exact match of every listed field, class names mapped); default: the one of the semantics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from environments.acebench.backend import execute, new_state
from environments.acebench.checker import end_state_differences, milestone_score
from environments.acebench.data import MODES, SOURCE, AceBenchData, default_data_dir, load_data
from environments.acebench.original.dispatch import CLASSES, OriginalSession
from environments.acebench.original.scoring import end_state_errors, process_score, unchecked_classes
from environments.base import (
    Environment,
    EnvironmentSource,
    SourceCatalog,
    Task,
    ToolCall,
    ToolResult,
    ToolSpec,
    Trajectory,
    Verdict,
    private_arguments,
)

SEMANTICS = ("original", "policy")
END_STATE_RULES = ("subset", "strict")


class OriginalAceBenchEnvironment(Environment):
    """One rollout with the original's behaviour: its own instances of the involved classes. Tools shown
    are the task's function list; callable are the instances' public methods (see ``original.dispatch``).
    ``call_batch`` runs one agent message; ``call`` is a batch of one call."""

    def __init__(
        self, tools: dict[str, ToolSpec], defaults: dict[str, dict[str, Any]], end_state: str = "subset"
    ):
        self._all_tools = tools
        self._defaults = defaults
        self._end_state_rule = end_state
        self._task: Task | None = None
        self._tools: dict[str, ToolSpec] = {}
        self.session: OriginalSession | None = None

    def reset(self, task: Task) -> list[ToolSpec]:
        self._task = task
        meta = task.metadata
        self._tools = {name: self._all_tools[name] for name in meta["functions"]}
        self.session = OriginalSession(
            self._defaults, meta["initial_config"], meta["class_order"], meta["mode"] == "multi_turn"
        )
        return self.tools(0)

    def tools(self, turn: int) -> list[ToolSpec]:
        self._require_task()
        return list(self._tools.values())

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        return self.call_batch([ToolCall(name, arguments)])[0]

    def call_batch(self, calls: list[ToolCall]) -> list[ToolResult]:
        if self.session is None:
            return [ToolResult("Error: environment not reset", is_error=True) for _ in calls]
        # Each call on its own copy of its arguments (JSON text decoded), as every source does.
        return self.session.run_batch([ToolCall(c.name, private_arguments(c.arguments)) for c in calls])

    def end_state(self) -> list[dict[str, Any]]:
        """The end state as the original's evaluator reads it (``[{class: {field: value}}]``)."""
        self._require_task()
        return self.session.end_state()

    def verify(self, trajectory: Trajectory) -> Verdict:
        """Reward 1 when the original's end-state rule passes (or, with ``end_state: strict``, every listed
        field matches exactly); ``metrics["process_score"]`` is the original's process score."""
        meta = self._require_task().metadata
        end_state = self.session.end_state()
        if self._end_state_rule == "strict":
            reported = {name: fields for entry in end_state for name, fields in entry.items()}
            errors = end_state_differences(reported, meta["ground_truth"])
        else:
            errors = end_state_errors(end_state, meta["ground_truth_entries"])
        score = process_score(self.session.messages, meta["milestone_text"], not errors)
        metrics = {"process_score": score}
        if not errors:
            skipped = (
                unchecked_classes(end_state, meta["ground_truth_entries"])
                if self._end_state_rule == "subset"
                else []
            )
            note = f" (not checked, as in the original: {', '.join(skipped)})" if skipped else ""
            return Verdict(1.0, f"end state matches the ground truth{note}; process score {score}", metrics)
        return Verdict(0.0, "end state differs: " + "; ".join(errors) + f"; process score {score}", metrics)

    def _require_task(self) -> Task:
        if self._task is None or self.session is None:
            raise RuntimeError("call reset(task) first")
        return self._task


class PolicyAceBenchEnvironment(Environment):
    """One rollout: its own copy of the scenario state; the task's functions are its tools."""

    def end_state(self) -> list[dict[str, Any]]:
        """The saved fields of the involved classes, in the shape the original's evaluator reads."""
        meta = self._require_task().metadata
        saved = {name: CLASSES[name].SAVED for name in meta["class_order"]}
        return _as_json([{name: {k: self.state[name][k] for k in keep}} for name, keep in saved.items()])

    def __init__(
        self, tools: dict[str, ToolSpec], defaults: dict[str, dict[str, Any]], end_state: str = "strict"
    ):
        self._all_tools = tools
        self._defaults = defaults
        self._end_state_rule = end_state
        self._task: Task | None = None
        self._tools: dict[str, ToolSpec] = {}
        self.state: dict[str, Any] = {}  # class -> its state (JSON-like); this rollout's own copy

    def reset(self, task: Task) -> list[ToolSpec]:
        self._task = task
        self._tools = {name: self._all_tools[name] for name in task.metadata["functions"]}
        self.state = new_state(self._defaults, task.metadata["initial_config"])
        return self.tools(0)

    def tools(self, turn: int) -> list[ToolSpec]:
        self._require_task()
        return list(self._tools.values())

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if self._task is None:
            return ToolResult("Error: environment not reset", is_error=True)
        return execute(self.state, self._tools, name, arguments)

    def verify(self, trajectory: Trajectory) -> Verdict:
        """Reward 1 when every ground-truth class has the expected end state, else 0 with, for each
        differing (class, field), its first difference; the milestone score is a secondary metric."""
        task = self._require_task()
        meta = task.metadata
        calls = [record.call for turn in trajectory.turns for record in turn.calls]
        alternatives = [[ToolCall(m["name"], m["arguments"]) for m in alt] for alt in meta["milestones"]]
        score = round(milestone_score(calls, alternatives, self._tools), 4)
        if self._end_state_rule == "subset":
            differences = end_state_errors(self.end_state(), meta["ground_truth_entries"])
        else:
            differences = end_state_differences(self.state, meta["ground_truth"])
        metrics = {"milestone_score": score}
        if not differences:
            classes = ", ".join(meta["ground_truth"])
            return Verdict(
                1.0, f"end state matches the ground truth ({classes}); milestone score {score}", metrics
            )
        reason = "end state differs: " + "; ".join(differences) + f"; milestone score {score}"
        if "data_error" in meta and self._end_state_rule == "strict":
            reason += f" [known source data error: {meta['data_error']}]"
        return Verdict(0.0, reason, metrics)

    def _require_task(self) -> Task:
        if self._task is None:
            raise RuntimeError("call reset(task) first")
        return self._task


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


class AceBenchAgentSource(EnvironmentSource):
    """Options: ``data_dir`` (default: ``$ENVSCHED_ACEBENCH_DIR``, else ``shared/data/acebench`` beside
    the checkout), ``modes`` (default: multi_step, multi_turn), ``semantics`` (``original``, the
    default, or ``policy``) and ``end_state`` (``subset`` or ``strict``; default: the semantics' own)."""

    name = SOURCE

    def __init__(
        self,
        data_dir: str | Path | None = None,
        modes: tuple[str, ...] | list[str] = MODES,
        semantics: str = "original",
        end_state: str | None = None,
    ):
        self.data_dir = Path(data_dir) if data_dir else default_data_dir()
        unknown = set(modes) - set(MODES)
        if unknown:
            raise ValueError(f"unknown ACEBench modes {sorted(unknown)}; choose from {list(MODES)}")
        if semantics not in SEMANTICS:
            raise ValueError(
                f"acebench_agent option semantics={semantics!r}: choose one of {list(SEMANTICS)}"
            )
        if end_state is not None and end_state not in END_STATE_RULES:
            raise ValueError(
                f"acebench_agent option end_state={end_state!r}: choose one of {list(END_STATE_RULES)}"
            )
        self.modes = tuple(modes)
        self.semantics = semantics
        self.end_state = end_state or ("subset" if semantics == "original" else "strict")
        self._data: AceBenchData | None = None

    def _loaded(self) -> AceBenchData:
        if self._data is None:
            self._data = load_data(self.data_dir, self.modes)
        return self._data

    def load(self) -> SourceCatalog:
        self._data = None  # re-read the files: load() is how a changed copy gets picked up
        data = self._loaded()
        return SourceCatalog(SOURCE, data.environments, data.tasks)

    def make_environment(self, task: Task) -> Environment:
        data = self._loaded()
        if self.semantics == "policy":
            return PolicyAceBenchEnvironment(data.tools, data.defaults, self.end_state)
        return OriginalAceBenchEnvironment(data.tools, data.defaults, self.end_state)
