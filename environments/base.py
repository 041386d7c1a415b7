"""The environment protocol every source implements.

A *source* (BFCL-v3 multi-turn, tau-bench, ...) loads a catalogue of environments, their tools and
their tasks, and makes a fresh :class:`Environment` for each rollout. An environment exposes its
tools as JSON-schema function specs tagged with an effect (``read`` / ``write``), starts a task with
``reset``, executes tool calls with ``call`` (a bad call returns an error result, it never raises)
and scores a finished :class:`Trajectory` with ``verify`` (reward in [0, 1] plus a reason).

Isolation: all mutable state lives on the environment instance and is rebuilt by ``reset``; two
rollouts of the same task never share state, and sources keep no module-global instances. Tool code
may keep (and later mutate) the objects it is called with, so every source runs a call on a private
copy of its arguments (:func:`private_arguments`): neither the caller's objects nor ``task.gold``'s
are ever aliased into environment state, and a verdict depends only on the trajectory.

Arguments: ``call`` takes a JSON object as a dict, or as its JSON text (decoded as bfcl-eval's
function-calling path does); anything else is an error result that names the tool.
"""

from __future__ import annotations

import copy
import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Effect = Literal["read", "write"]


class SourceDataError(ValueError):
    """A source's data file is missing or malformed; the message names the file, row and field."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the agent sees it: an OpenAI-style function spec plus its effect on state."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments ({"type": "object", ...})
    effect: Effect

    def as_function(self) -> dict[str, Any]:
        """The spec in the `tools=` format of chat templates."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False


@dataclass
class CallRecord:
    call: ToolCall
    result: ToolResult


@dataclass
class TurnRecord:
    """What happened in one user turn: the tool calls made and what the agent said."""

    calls: list[CallRecord] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)


@dataclass
class Trajectory:
    task_id: str
    turns: list[TurnRecord] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)


@dataclass(frozen=True)
class Verdict:
    reward: float  # in [0, 1]
    reason: str
    # Secondary scores that do not enter the reward (e.g. ACEBench's milestone/process score).
    metrics: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.reward <= 1.0:
            raise ValueError(f"reward must be in [0, 1], got {self.reward}")

    @property
    def passed(self) -> bool:
        return self.reward >= 1.0


@dataclass(frozen=True)
class EnvironmentInfo:
    """A catalogue row for one environment."""

    env_id: str
    source: str
    name: str
    description: str
    tools: tuple[ToolSpec, ...]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    """A catalogue row for one task.

    ``user_turns`` holds one user message per turn (multi-turn tasks have several). ``gold`` is the
    reference solution, one list of calls per turn. ``tools`` are the tools the gold solution uses;
    ``state_fields`` the parts of state it changes or the verifier checks. ``gold_replies`` (optional,
    one tuple per turn) is what the gold solution says to the user, for verifiers that check replies.
    """

    task_id: str
    env_id: str
    source: str
    split: str
    user_turns: tuple[str, ...]
    gold: tuple[tuple[ToolCall, ...], ...]
    tools: tuple[str, ...]
    state_fields: tuple[str, ...]
    verifier: str
    metadata: dict[str, Any] = field(default_factory=dict)
    gold_replies: tuple[tuple[str, ...], ...] = ()

    @property
    def text(self) -> str:
        return "\n".join(t for t in self.user_turns if t)

    @property
    def gold_calls(self) -> int:
        return sum(len(turn) for turn in self.gold)


@dataclass
class SourceCatalog:
    """Everything a source contributes to the warehouse's catalogue tables."""

    source: str
    environments: list[EnvironmentInfo]
    tasks: list[Task]


class Environment(ABC):
    """One executable environment instance; ``reset`` gives it a fresh, isolated state."""

    @abstractmethod
    def reset(self, task: Task) -> list[ToolSpec]:
        """Start ``task`` from its initial state; returns the tools visible at turn 0."""

    @abstractmethod
    def tools(self, turn: int) -> list[ToolSpec]:
        """Tools visible to the agent at ``turn`` (some sources reveal tools later)."""

    @abstractmethod
    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Execute one tool call. Never raises for a bad call: returns ``ToolResult(is_error=True)``."""

    def call_batch(self, calls: list[ToolCall]) -> list[ToolResult]:
        """Execute the calls of one agent message, in order. Sources where a message is a unit (ACEBench
        stops a multi-turn message at its first exception) override this; the default calls one by one."""
        return [self.call(c.name, c.arguments) for c in calls]

    @abstractmethod
    def verify(self, trajectory: Trajectory) -> Verdict:
        """Score a finished trajectory of the current task."""


class EnvironmentSource(ABC):
    """A named provider of environments and tasks (registered in ``environments.registry``)."""

    name: str

    @abstractmethod
    def load(self) -> SourceCatalog:
        """Read the source's data; raises :class:`SourceDataError` naming the bad file/row/field."""

    @abstractmethod
    def make_environment(self, task: Task) -> Environment:
        """A new environment instance for one rollout of ``task`` (not yet reset)."""


def content_hash(value: Any) -> str:
    """Stable hash of a JSON-able value; catalogue upserts compare it to skip unchanged rows."""
    payload = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def private_arguments(arguments: Any) -> Any:
    """A call's arguments as this call's own objects: a deep copy of a dict, or a JSON object's text
    decoded. Anything else is returned as is, for the source to refuse with its own error result."""
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except ValueError:
            return arguments
        return decoded if isinstance(decoded, dict) else arguments
    return copy.deepcopy(arguments)


def as_agent_sends(call: ToolCall) -> ToolCall:
    """``call`` as an agent delivers it: arguments through ``json.dumps`` / ``json.loads``, so they are
    fresh objects with JSON types (tuples become lists), exactly what the agent loop passes to ``call``."""
    return ToolCall(call.name, json.loads(json.dumps(call.arguments)))


def replay_gold(env: Environment, task: Task) -> Trajectory:
    """Run the task's gold solution through ``env`` the way an agent would (each call's arguments
    JSON-encoded and decoded, never ``task.gold``'s own objects) and return the trajectory."""
    env.reset(task)
    trajectory = Trajectory(task_id=task.task_id)
    for turn, turn_calls in enumerate(task.gold):
        record = TurnRecord()
        for gold_call in turn_calls:
            call = as_agent_sends(gold_call)
            record.calls.append(CallRecord(call, env.call(call.name, call.arguments)))
        if turn < len(task.gold_replies):
            record.replies.extend(task.gold_replies[turn])
        trajectory.turns.append(record)
    return trajectory
