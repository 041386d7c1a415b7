"""The ``bfcl_v3_multi_turn`` source: 800 tasks over the eight executable BFCL API classes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from environments.base import (
    Environment,
    EnvironmentSource,
    SourceCatalog,
    Task,
    ToolResult,
    ToolSpec,
    Trajectory,
    Verdict,
)
from environments.bfcl import checker
from environments.bfcl.backend import execute, method_table, new_instances
from environments.bfcl.data import CATEGORIES, SOURCE, default_data_dir, load_catalog, load_tool_specs


class BfclEnvironment(Environment):
    """One rollout's API instances. Tools follow bfcl-eval's rules: ``excluded_function`` is never
    shown; a ``missed_function`` is hidden until the turn that reveals it. As in bfcl-eval, a call is
    dispatched by name over the task's classes whether or not the tool is shown, so verdicts match."""

    def __init__(self, specs: dict[str, list[ToolSpec]]):
        self._specs = specs
        self._task: Task | None = None
        self._methods: dict[str, Any] = {}

    def reset(self, task: Task) -> list[ToolSpec]:
        meta = task.metadata
        self._task = task
        self._methods = method_table(
            new_instances(meta["involved_classes"], meta["initial_config"], meta["long_context"])
        )
        return self.tools(0)

    def tools(self, turn: int) -> list[ToolSpec]:
        meta = self._require_task().metadata
        hidden = set(meta["excluded_function"])
        for reveal_turn, names in meta["missed_function"].items():
            if int(reveal_turn) > turn:
                hidden.update(names)
        return [s for c in meta["involved_classes"] for s in self._specs[c] if s.name not in hidden]

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if self._task is None:
            return ToolResult("Error during execution: environment not reset", is_error=True)
        return execute(self._methods, name, arguments)

    def verify(self, trajectory: Trajectory) -> Verdict:
        task = self._require_task()
        return checker.check(task, [[rec.call for rec in turn.calls] for turn in trajectory.turns])

    def _require_task(self) -> Task:
        if self._task is None:
            raise RuntimeError("call reset(task) first")
        return self._task


class BfclMultiTurnSource(EnvironmentSource):
    """Options: ``data_dir`` (default: the data folder inside the installed ``bfcl-eval``) and
    ``categories`` (default: base, miss_func, miss_param, long_context)."""

    name = SOURCE

    def __init__(
        self, data_dir: str | Path | None = None, categories: tuple[str, ...] | list[str] = CATEGORIES
    ):
        self.data_dir = Path(data_dir) if data_dir else default_data_dir()
        unknown = set(categories) - set(CATEGORIES)
        if unknown:
            raise ValueError(f"unknown BFCL categories {sorted(unknown)}; choose from {list(CATEGORIES)}")
        self.categories = tuple(categories)
        self._specs: dict[str, list[ToolSpec]] | None = None

    def load(self) -> SourceCatalog:
        environments, tasks = load_catalog(self.data_dir, self.categories)
        return SourceCatalog(SOURCE, environments, tasks)

    def make_environment(self, task: Task) -> Environment:
        if self._specs is None:
            self._specs = load_tool_specs(self.data_dir)
        return BfclEnvironment(self._specs)
