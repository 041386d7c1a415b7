"""The original ACEBench's recorded behaviour, and replaying it through this project's environment.

``tests/data/acebench_original/recorded.jsonl.gz`` holds, per trajectory (a task and its calls grouped
into batches, one agent message each), what ACEBench @e6db74b returned for every batch, its end state,
verdict and process score (see that folder's README). The parity bench and the regression tests both
replay it with :func:`replay` and compare against :func:`expected_results`.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from environments.acebench.source import AceBenchAgentSource
from environments.base import (
    CallRecord,
    Environment,
    Task,
    ToolCall,
    ToolResult,
    Trajectory,
    TurnRecord,
    Verdict,
)

RECORDED = Path(__file__).resolve().parents[2] / "tests/data/acebench_original/recorded.jsonl.gz"


def load_recorded(path: Path = RECORDED) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def replay(
    source: AceBenchAgentSource, tasks: dict[str, Task], record: dict[str, Any]
) -> tuple[Environment, list[list[ToolResult]], Verdict]:
    """Run a recorded trajectory (batches of [name, arguments]) in a fresh rollout: the environment,
    its results per batch and the verdict."""
    task = tasks[record["task"]]
    env = source.make_environment(task)
    env.reset(task)
    turn = TurnRecord()
    results = []
    for batch in record["batches"]:
        calls = [ToolCall(name, arguments) for name, arguments in batch]
        out = env.call_batch(calls)
        turn.calls += [CallRecord(call, result) for call, result in zip(calls, out, strict=True)]
        results.append(out)
    return env, results, env.verify(Trajectory(task.task_id, [turn]))


def expected_results(record: dict[str, Any]) -> list[list[str]]:
    """The original's reply per call: a batch that stopped (multi-turn) gives its one reply to every call."""
    return [
        [reply["batch"]] * len(batch) if isinstance(reply, dict) else reply
        for batch, reply in zip(record["batches"], record["results"], strict=True)
    ]
