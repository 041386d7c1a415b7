"""The ``tau_bench_retail`` and ``tau_bench_airline`` sources and their environment."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

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
from environments.tau_bench import verifier
from environments.tau_bench.data import DOMAINS, default_data_dir, load_domain, load_tables, load_tool_specs
from environments.tau_bench.db import BaseTables, Database
from environments.tau_bench.toolkit import Tool, execute


@dataclass(frozen=True)
class Domain:
    """A domain's data as loaded once per source; shared read-only by its environments."""

    name: str
    tables: BaseTables
    specs: dict[str, ToolSpec]
    tools: dict[str, Tool]

    def run(self, db: Database, call: ToolCall) -> ToolResult:
        return execute(db, self.specs, self.tools, call.name, call.arguments)


class TauBenchEnvironment(Environment):
    """One rollout: a copy-on-write view of the domain database, the domain's tools, the reward.

    ``verify`` is a pure function of the trajectory: it replays the trajectory's calls and the gold
    actions, each on a fresh copy, and compares the two databases (tools are deterministic, so the
    replay ends where the rollout did)."""

    def __init__(self, domain: Domain):
        self._domain = domain
        self._task: Task | None = None
        self.db: Database | None = None

    def reset(self, task: Task) -> list[ToolSpec]:
        self._task = task
        self.db = self._domain.tables.fresh()
        return self.tools(0)

    def tools(self, turn: int) -> list[ToolSpec]:
        return list(self._domain.specs.values())

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if self.db is None:
            return ToolResult("Error: environment not reset", is_error=True)
        return self._domain.run(self.db, ToolCall(name, arguments))

    def verify(self, trajectory: Trajectory) -> Verdict:
        if self._task is None:
            raise RuntimeError("call reset(task) first")
        final = self._domain.tables.fresh()
        verifier.replay(
            final, (rec.call for turn in trajectory.turns for rec in turn.calls), self._domain.run
        )
        gold = self._domain.tables.fresh()
        verifier.replay(gold, _gold_calls(self._task), self._domain.run)
        replies = [reply for turn in trajectory.turns for reply in turn.replies]
        return verifier.verdict(final, gold, self._task.metadata["outputs"], replies)


def _gold_calls(task: Task) -> list[ToolCall]:
    return [call for turn in task.gold for call in turn]


def _with_rejected_gold_calls(task: Task, domain: Domain) -> Task:
    """Record the gold actions that the tools reject (a data quirk of the source, e.g. paying with a gift
    card whose balance is too small). Such a task stays solvable: the reward compares with the gold
    replay, in which the rejected call changed nothing."""
    calls = _gold_calls(task)
    rejected = verifier.replay(domain.tables.fresh(), calls, domain.run)
    notes = [{"index": index, "name": call.name, "error": error} for index, call, error in rejected]
    return replace(task, metadata={**task.metadata, "gold_rejected_calls": notes})


class TauBenchSource(EnvironmentSource):
    """Options: ``data_dir``, the folder holding ``retail/`` and ``airline/`` (default:
    ``$ENVSCHED_TAU_BENCH_DIR`` or ``../shared/data/tau_bench`` beside the repository).

    The database, tool specs and tasks are read once per source instance; each environment gets a
    copy-on-write view of the database (see ``db.py``)."""

    domain: str

    def __init__(self, data_dir: str | Path | None = None):
        self.data_dir = Path(data_dir) if data_dir else default_data_dir()
        self.name = f"tau_bench_{self.domain}"
        self._domain: Domain | None = None

    @property
    def folder(self) -> Path:
        return self.data_dir / self.domain

    def load(self) -> SourceCatalog:
        domain = self.domain_data()  # reads and validates the database too: a bad file fails the load
        catalog = load_domain(self.name, self.domain, self.folder, domain.specs)
        tasks = [_with_rejected_gold_calls(task, domain) for task in catalog.tasks]
        return SourceCatalog(self.name, catalog.environments, tasks)

    def domain_data(self) -> Domain:
        if self._domain is None:
            self._domain = Domain(
                self.domain,
                load_tables(self.domain, self.folder),
                load_tool_specs(self.domain, self.folder),
                DOMAINS[self.domain].TOOLS,
            )
        return self._domain

    def make_environment(self, task: Task) -> Environment:
        return TauBenchEnvironment(self.domain_data())


class TauBenchRetailSource(TauBenchSource):
    domain = "retail"


class TauBenchAirlineSource(TauBenchSource):
    domain = "airline"
