"""A complete environment source of your own: key-value stores whose tasks ask the agent to write keys.

Select it by module path, from the repository root (the module must be importable by every process that
runs campaign steps, hence PYTHONPATH):

    PYTHONPATH=. .venv/bin/envsched envs verify-gold --source examples.kv_store:KeyValueSource
    PYTHONPATH=. .venv/bin/envsched campaign run --source examples.kv_store:KeyValueSource --engine skill --steps 3

The warehouse records its rows under the name you selected it by (`examples.kv_store:KeyValueSource`), so
campaigns, the engines and the UI find it again by that name.
"""

from __future__ import annotations

import json
from typing import Any

from environments.base import (
    Environment,
    EnvironmentInfo,
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

VERIFIER = "kv_state_match"  # one name per reward scheme: the scheduler learns a variance correction per name


def _tools() -> list[ToolSpec]:
    """Built per call, so no environment shares (and could mutate) another's tool specs."""
    key = {"type": "string", "description": "The key."}
    return [
        ToolSpec("get", "Read the value stored under a key.", _schema(key=key), "read"),
        ToolSpec("set", "Store a value under a key.", _schema(key=key, value={"type": "string"}), "write"),
        ToolSpec("delete", "Remove a key.", _schema(key=key), "write"),
    ]


def _schema(**properties: dict) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


class KeyValueStore(Environment):
    """One rollout's store. All state lives on the instance and `reset` rebuilds it."""

    def reset(self, task: Task) -> list[ToolSpec]:
        self.task = task
        self.store: dict[str, str] = dict(task.metadata.get("initial", {}))
        return _tools()

    def tools(self, turn: int) -> list[ToolSpec]:
        return _tools()

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Never raises for a bad call: the agent sees an error result instead."""
        args = private_arguments(arguments)  # the caller's objects never become environment state
        if not isinstance(args, dict) or not isinstance(args.get("key"), str):
            return ToolResult(f"{name}: arguments must be an object with a string 'key'", is_error=True)
        key = args["key"]
        if name == "get":
            return ToolResult(json.dumps(self.store.get(key)))
        if name == "set" and isinstance(args.get("value"), str):
            self.store[key] = args["value"]
            return ToolResult("ok")
        if name == "delete" and key in self.store:
            del self.store[key]
            return ToolResult("ok")
        return ToolResult(f"{name}: cannot do that with {args}", is_error=True)

    def verify(self, trajectory: Trajectory) -> Verdict:
        """Binary: the store ends exactly as the gold solution leaves it."""
        expected = self.task.metadata["expected"]
        if self.store == expected:
            return Verdict(1.0, "the store matches")
        return Verdict(0.0, f"the store is {self.store}, expected {expected}")


class KeyValueSource(EnvironmentSource):
    """`envs` stores of 12 tasks each; a task writes 1 to 3 keys, one per turn, and may delete a stale one."""

    name = "kv_store"

    def __init__(self, envs: int = 4):
        self.envs = int(envs)

    def load(self) -> SourceCatalog:
        environments, tasks = [], []
        for e in range(self.envs):
            env_id = f"kv_store/store{e}"
            tools = tuple(_tools())
            environments.append(EnvironmentInfo(env_id, self.name, f"store {e}", "A key-value store.", tools))
            for t in range(12):
                tasks.append(self._task(env_id, e, t))
        return SourceCatalog(self.name, environments, tasks)

    def _task(self, env_id: str, e: int, t: int) -> Task:
        initial = {"stale": "old"}
        writes = [(f"item{j}", f"value-{e}-{t}-{j}") for j in range(1 + t % 3)]
        turns = [f"Store '{value}' under the key '{key}'." for key, value in writes]
        gold = [(ToolCall("set", {"key": key, "value": value}),) for key, value in writes]
        expected = {**initial, **dict(writes)}
        if t % 4 == 3:  # every fourth task also cleans up
            turns.append("Then remove the key 'stale'.")
            gold.append((ToolCall("delete", {"key": "stale"}),))
            del expected["stale"]
        tools = tuple(sorted({call.name for turn in gold for call in turn}))
        return Task(
            task_id=f"{env_id}/task{t}",
            env_id=env_id,
            source=self.name,
            split="train",
            user_turns=tuple(turns),
            gold=tuple(gold),
            tools=tools,
            state_fields=tuple(sorted(expected)),
            verifier=VERIFIER,
            metadata={"initial": initial, "expected": expected},
        )

    def make_environment(self, task: Task) -> Environment:
        return KeyValueStore()
