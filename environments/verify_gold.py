"""Replay every task's gold solution in a fresh environment and check that the verifier passes it."""

from __future__ import annotations

from dataclasses import dataclass, field

from environments.base import EnvironmentSource, replay_gold


@dataclass
class GoldReport:
    source: str
    total: int = 0
    passed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (task_id, reason)

    def summary(self) -> str:
        lines = [f"passed {self.passed}/{self.total}"]
        lines += [f"  FAIL {task_id}: {reason}" for task_id, reason in self.failures]
        return "\n".join(lines)


def verify_gold(source: EnvironmentSource, limit: int | None = None) -> GoldReport:
    catalog = source.load()
    report = GoldReport(source.name)
    for task in catalog.tasks[:limit]:
        env = source.make_environment(task)
        verdict = env.verify(replay_gold(env, task))
        report.total += 1
        if verdict.passed:
            report.passed += 1
        else:
            report.failures.append((task.task_id, verdict.reason))
    return report
