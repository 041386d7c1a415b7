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
from environments.tau_bench.data import (
    default_data_dir,
    domain_module,
    load_domain,
    load_tables,
    load_tool_specs,
)
from environments.tau_bench.db import BaseTables, Database
from environments.tau_bench.toolkit import TERMINAL_TOOL, Tool, execute, execute_original

EPISODE_ENDED = f"Error: the episode ended at {TERMINAL_TOOL}; this call was not run"


@dataclass(frozen=True)
class Domain:
    """A domain's data as loaded once per source; shared read-only by its environments."""

    name: str
    tables: BaseTables
    specs: dict[str, ToolSpec]
    tools: dict[str, Tool]
    semantics: str = "original"

    @property
    def original(self) -> bool:
        return self.semantics == "original"

    def run(self, db: Database, call: ToolCall) -> ToolResult:
        if self.original:
            return execute_original(db, self.tools, call.name, call.arguments)
        return execute(db, self.specs, self.tools, call.name, call.arguments)


def _until_transfer(trajectory: Trajectory) -> tuple[list[ToolCall], list[str]]:
    """What tau-bench scores: the calls up to the first ``transfer_to_human_agents`` (it ends the
    episode), and the replies of the turns before the transfer's turn (a turn's reply follows its
    calls; text sent with the transfer call itself is not a reply in tau-bench)."""
    calls, replies = [], []
    for turn in trajectory.turns:
        for record in turn.calls:
            calls.append(record.call)
            if record.call.name == TERMINAL_TOOL:
                return calls, replies
        replies.extend(turn.replies)
    return calls, replies


class TauBenchEnvironment(Environment):
    """One rollout: a copy-on-write view of the domain database, the domain's tools, the reward.

    ``verify`` is a pure function of the trajectory: it replays the trajectory's calls and the gold
    actions, each on a fresh copy, and compares the two databases (tools are deterministic, so the
    replay ends where the rollout did). In the ``original`` mode the episode ends at
    ``transfer_to_human_agents``: later calls are refused and not scored, as in tau-bench."""

    def __init__(self, domain: Domain):
        self._domain = domain
        self._task: Task | None = None
        self._ended = False
        self.db: Database | None = None

    def reset(self, task: Task) -> list[ToolSpec]:
        self._task = task
        self._ended = False
        self.db = self._domain.tables.fresh()
        return self.tools(0)

    def tools(self, turn: int) -> list[ToolSpec]:
        return list(self._domain.specs.values())

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if self.db is None:
            return ToolResult("Error: environment not reset", is_error=True)
        if self._ended:
            return ToolResult(EPISODE_ENDED, is_error=True)
        self._ended = self._domain.original and name == TERMINAL_TOOL
        return self._domain.run(self.db, ToolCall(name, arguments))

    def verify(self, trajectory: Trajectory) -> Verdict:
        if self._task is None:
            raise RuntimeError("call reset(task) first")
        if self._domain.original:
            calls, replies = _until_transfer(trajectory)
            gold_calls = [c for c in _gold_calls(self._task) if c.name != TERMINAL_TOOL]
        else:
            calls = [rec.call for turn in trajectory.turns for rec in turn.calls]
            replies = [reply for turn in trajectory.turns for reply in turn.replies]
            gold_calls = _gold_calls(self._task)
        final = self._domain.tables.fresh()
        verifier.replay(final, calls, self._domain.run)
        gold = self._domain.tables.fresh()
        verifier.replay(gold, gold_calls, self._domain.run)
        outputs = self._task.metadata["outputs"]
        return verifier.verdict(final, gold, outputs, replies, strip_output_commas=not self._domain.original)


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
    ``$ENVSCHED_TAU_BENCH_DIR`` or ``../shared/data/tau_bench`` beside the repository);
    ``semantics``, ``original`` (default: tau-bench's own tool behaviour and reward) or ``policy``
    (the tools also enforce policy.md's hard limits and keep seat counts).

    The database, tool specs and tasks are read once per source instance; each environment gets a
    copy-on-write view of the database (see ``db.py``)."""

    domain: str

    def __init__(self, data_dir: str | Path | None = None, semantics: str = "original"):
        self.data_dir = Path(data_dir) if data_dir else default_data_dir()
        self.name = f"tau_bench_{self.domain}"
        self.module = domain_module(self.domain, semantics)  # rejects an unknown mode, naming it
        self.semantics = semantics
        self._domain: Domain | None = None

    @property
    def folder(self) -> Path:
        return self.data_dir / self.domain

    def load(self) -> SourceCatalog:
        domain = self.domain_data()  # reads and validates the database too: a bad file fails the load
        catalog = load_domain(self.name, self.domain, self.folder, domain.specs, self.semantics)
        tasks = [_with_rejected_gold_calls(task, domain) for task in catalog.tasks]
        return SourceCatalog(self.name, catalog.environments, tasks)

    def domain_data(self) -> Domain:
        if self._domain is None:
            self._domain = Domain(
                self.domain,
                load_tables(self.domain, self.folder),
                load_tool_specs(self.domain, self.folder, self.semantics),
                self.module.TOOLS,
                self.semantics,
            )
        return self._domain

    def make_environment(self, task: Task) -> Environment:
        return TauBenchEnvironment(self.domain_data())


class TauBenchRetailSource(TauBenchSource):
    domain = "retail"


class TauBenchAirlineSource(TauBenchSource):
    domain = "airline"
