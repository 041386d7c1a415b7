"""Full task objects (gold, metadata) and fresh environments for task ids of the warehouse."""

from __future__ import annotations

from typing import Any

from environments.base import Environment, EnvironmentSource, Task
from environments.registry import get_source


class TaskResolver:
    """Loads the named sources once and makes a fresh environment per rollout of a task id."""

    def __init__(self, sources: list[str], source_options: dict[str, dict[str, Any]] | None = None):
        self._sources: dict[str, EnvironmentSource] = {}
        self._tasks: dict[str, tuple[str, Task]] = {}
        for name in sources:
            source = get_source(name, **(source_options or {}).get(name, {}))
            self._sources[name] = source
            for task in source.load().tasks:
                self._tasks[task.task_id] = (name, task)

    def task(self, task_id: str) -> Task:
        try:
            return self._tasks[task_id][1]
        except KeyError:
            raise KeyError(f"task id {task_id!r} is not in sources {sorted(self._sources)}") from None

    def environment(self, task_id: str) -> Environment:
        source_name, task = self._tasks[task_id]
        return self._sources[source_name].make_environment(task)
