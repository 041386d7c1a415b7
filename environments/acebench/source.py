"""The ``acebench_agent`` source: ACEBench's agent tasks (multi-step and multi-turn) over five
executable scenario classes, with its end-state verifier and milestone score."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from environments.acebench.backend import execute, new_state
from environments.acebench.checker import end_state_differences, milestone_score
from environments.acebench.data import MODES, SOURCE, AceBenchData, default_data_dir, load_data
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
)


class AceBenchEnvironment(Environment):
    """One rollout: its own copy of the scenario state; the task's functions are its tools."""

    def __init__(self, tools: dict[str, ToolSpec], defaults: dict[str, dict[str, Any]]):
        self._all_tools = tools
        self._defaults = defaults
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
        differences = end_state_differences(self.state, meta["ground_truth"])
        metrics = {"milestone_score": score}
        if not differences:
            classes = ", ".join(meta["ground_truth"])
            return Verdict(
                1.0, f"end state matches the ground truth ({classes}); milestone score {score}", metrics
            )
        reason = "end state differs: " + "; ".join(differences) + f"; milestone score {score}"
        if "data_error" in meta:
            reason += f" [known source data error: {meta['data_error']}]"
        return Verdict(0.0, reason, metrics)

    def _require_task(self) -> Task:
        if self._task is None:
            raise RuntimeError("call reset(task) first")
        return self._task


class AceBenchAgentSource(EnvironmentSource):
    """Options: ``data_dir`` (default: ``$ENVSCHED_ACEBENCH_DIR``, else ``shared/data/acebench`` beside
    the checkout) and ``modes`` (default: multi_step, multi_turn)."""

    name = SOURCE

    def __init__(self, data_dir: str | Path | None = None, modes: tuple[str, ...] | list[str] = MODES):
        self.data_dir = Path(data_dir) if data_dir else default_data_dir()
        unknown = set(modes) - set(MODES)
        if unknown:
            raise ValueError(f"unknown ACEBench modes {sorted(unknown)}; choose from {list(MODES)}")
        self.modes = tuple(modes)
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
        return AceBenchEnvironment(data.tools, data.defaults)
