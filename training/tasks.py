"""Full task objects (gold, metadata) and fresh environments for task ids of the warehouse."""

from __future__ import annotations

from typing import Any

from environments.base import Environment, EnvironmentInfo, EnvironmentSource, Task
from environments.registry import get_source


class TaskResolver:
    """Loads the named sources once and makes a fresh environment per rollout of a task id."""

    def __init__(self, sources: list[str], source_options: dict[str, dict[str, Any]] | None = None):
        self._sources: dict[str, EnvironmentSource] = {}
        self._tasks: dict[str, tuple[str, Task]] = {}
        self._environments: dict[str, EnvironmentInfo] = {}
        for name in sources:
            source = get_source(name, **(source_options or {}).get(name, {}))
            self._sources[name] = source
            catalog = source.load()
            for task in catalog.tasks:
                self._tasks[task.task_id] = (name, task)
            for info in catalog.environments:
                self._environments[info.env_id] = info

    def task(self, task_id: str) -> Task:
        try:
            return self._tasks[task_id][1]
        except KeyError:
            raise KeyError(f"task id {task_id!r} is not in sources {sorted(self._sources)}") from None

    def task_ids(self) -> list[str]:
        """Every task id of the loaded sources, sorted."""
        return sorted(self._tasks)

    def environment_info(self, env_id: str) -> EnvironmentInfo:
        """The catalogue row of an environment (its tools with their effects)."""
        try:
            return self._environments[env_id]
        except KeyError:
            raise KeyError(f"environment {env_id!r} is not in sources {sorted(self._sources)}") from None

    def environment(self, task_id: str) -> Environment:
        source_name, task = self._tasks[task_id]
        return self._sources[source_name].make_environment(task)
