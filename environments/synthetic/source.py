"""The ``synthetic`` source: N generated environments of M tasks each, deterministic per seed."""

from __future__ import annotations

from typing import Any

from environments.base import (
    Environment,
    EnvironmentInfo,
    EnvironmentSource,
    SourceCatalog,
    Task,
    ToolResult,
    ToolSpec,
    Trajectory,
    Verdict,
)
from environments.synthetic import backend
from environments.synthetic.families import FAMILIES, build_world
from environments.synthetic.schema import State, World, copy_state
from environments.synthetic.tasks import SOURCE, generate_task
from environments.synthetic.toolspecs import tool_spec
from environments.synthetic.verifier import verify_state


class SyntheticEnvironment(Environment):
    """One rollout of a generated environment: a private copy of the world's initial state."""

    def __init__(self, world: World, specs: list[ToolSpec]):
        self._world, self._specs = world, specs
        self._task: Task | None = None
        self._state: State | None = None

    def reset(self, task: Task) -> list[ToolSpec]:
        if task.env_id != self._world.spec.env_id:
            raise ValueError(f"task {task.task_id} belongs to {task.env_id}, not {self._world.spec.env_id}")
        self._task, self._state = task, copy_state(self._world.initial)
        return self.tools(0)

    def tools(self, turn: int) -> list[ToolSpec]:
        return list(self._specs)

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if self._state is None:
            return ToolResult("Error: environment not reset", is_error=True)
        return backend.execute(self._world, self._state, name, arguments)

    @property
    def state(self) -> State:
        """This rollout's current state (read it, don't change it)."""
        if self._state is None:
            raise RuntimeError("call reset(task) first")
        return self._state

    def verify(self, trajectory: Trajectory) -> Verdict:
        """Replays the trajectory's calls on a fresh copy of the initial state, then compares the final
        state with the goal; so the verdict depends on the trajectory alone, not on this instance."""
        if self._task is None:
            raise RuntimeError("call reset(task) first")
        state = copy_state(self._world.initial)
        for turn in trajectory.turns:
            for record in turn.calls:
                backend.execute(self._world, state, record.call.name, record.call.arguments)
        return verify_state(self._world.initial, self._task.metadata["goal"], state)


class SyntheticSource(EnvironmentSource):
    """Options: ``envs`` (number of environments, default 50), ``tasks_per_env`` (default 40),
    ``seed`` (default 0) and ``families`` (names, a list or a comma-separated string; default all:
    ticketing, inventory, booking, ledger). Environment i belongs to ``families[i % len(families)]``."""

    name = SOURCE

    def __init__(
        self,
        envs: int = 50,
        tasks_per_env: int = 40,
        seed: int = 0,
        families: str | list[str] | tuple[str, ...] | None = None,
    ):
        for option, value in (("envs", envs), ("tasks_per_env", tasks_per_env)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"synthetic source: option {option} must be a positive integer, got {value!r}"
                )
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"synthetic source: option seed must be an integer, got {seed!r}")
        if families is None:
            families = tuple(FAMILIES)
        elif isinstance(families, str):
            families = tuple(f.strip() for f in families.split(",") if f.strip())
        unknown = sorted(set(families) - set(FAMILIES))
        if unknown or not families:
            raise ValueError(f"synthetic source: unknown families {unknown}; choose from {list(FAMILIES)}")
        self.envs, self.tasks_per_env, self.seed = envs, tasks_per_env, seed
        self.families = tuple(families)
        # Worlds are immutable and cheap to rebuild; the cache only saves regenerating them per rollout.
        self._worlds: dict[tuple[int, int, str], tuple[World, list[ToolSpec]]] = {}

    def env_id(self, index: int, family: str, seed: int | None = None) -> str:
        return f"{SOURCE}/s{self.seed if seed is None else seed}/{family}-{index:04d}"

    def world(self, index: int, family: str | None = None, seed: int | None = None) -> World:
        """Environment ``index`` (its family by default the round-robin one of this source's families)."""
        return self._world_and_specs(index, family, seed)[0]

    def _world_and_specs(
        self, index: int, family: str | None, seed: int | None
    ) -> tuple[World, list[ToolSpec]]:
        family = family or self.families[index % len(self.families)]
        seed = self.seed if seed is None else seed
        key = (seed, index, family)
        if key not in self._worlds:
            world = build_world(seed, index, family, self.env_id(index, family, seed))
            tables = world.tables_by_role
            self._worlds[key] = (world, [tool_spec(tool, tables) for tool in world.spec.tools])
        return self._worlds[key]

    def task(self, index: int, task_index: int) -> Task:
        """Task ``task_index`` of environment ``index``, generated on its own."""
        return generate_task(self.world(index), task_index)

    def environment_info(self, index: int) -> EnvironmentInfo:
        world, specs = self._world_and_specs(index, None, None)
        spec = world.spec
        sizes = {table.name: len(world.initial[table.name]) for table in spec.tables}
        description = (
            f"A synthetic {spec.family} environment set in a {spec.theme}: tables "
            + ", ".join(f"{name} ({n} records)" for name, n in sizes.items())
            + f"; {len(specs)} tools."
        )
        metadata = {
            "family": spec.family,
            "theme": spec.theme,
            "seed": spec.seed,
            "index": spec.index,
            "tables": sizes,
            "tool_roles": {tool.name: tool.role for tool in spec.tools},
        }
        return EnvironmentInfo(
            spec.env_id, SOURCE, f"{spec.theme} #{index}", description, tuple(specs), metadata
        )

    def load(self) -> SourceCatalog:
        environments, tasks = [], []
        for index in range(self.envs):
            environments.append(self.environment_info(index))
            world = self.world(index)
            tasks.extend(generate_task(world, t) for t in range(self.tasks_per_env))
        return SourceCatalog(SOURCE, environments, tasks)

    def make_environment(self, task: Task) -> Environment:
        meta = task.metadata
        return SyntheticEnvironment(*self._world_and_specs(meta["env_index"], meta["family"], meta["seed"]))
