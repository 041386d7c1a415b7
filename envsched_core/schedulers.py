"""The scheduler interface every task scheduler implements, and the registry of them by name.

``Scheduler`` is what a campaign drives: ``select(step)`` a batch (task_id, env_id, role,
predicted_variance), ``observe(rollouts)`` its rewards (task_id, step, reward), and ``state_dict`` /
``load_state_dict`` to resume bit for bit. Dynamic-sampling baselines (DAPO, GRESO) also answer
``refill(step)`` with more tasks to roll out in the same step (an empty frame when done); the others
answer it with an empty frame, and a scheduler may leave it out.

``SCHEDULERS`` maps a campaign's ``scheduler`` name to its class and its config class;
``scheduler_config`` builds that config from B, G and a campaign's overrides and rejects unknown
fields and bad values before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from .baselines import (
    DAPO1xConfig,
    DAPO1xDynamicSampling,
    DAPOConfig,
    DAPODynamicSampling,
    DPSConfig,
    DPSScheduler,
    GRESOConfig,
    GRESOScheduler,
    MoPPSConfig,
    MoPPSScheduler,
    RandomScheduler,
)
from .config import SchedulerConfig
from .dynamic_sampling import uses_dynamic_sampling
from .scheduler import EnvSched


@runtime_checkable
class Scheduler(Protocol):
    """What a campaign needs of a task scheduler (EnvSched and every baseline)."""

    def select(self, step: int) -> pd.DataFrame:
        """The batch of ``step``: task_id, env_id, role (exploit / coverage / oversample), predicted_variance."""

    def observe(self, rollouts: pd.DataFrame) -> None:
        """Fold rollouts (task_id, step, reward in [0, 1]) into the scheduler; bad input raises ValueError."""

    def state_dict(self) -> dict[str, Any]:
        """Everything that changes online."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned (same catalogue and config)."""


@dataclass(frozen=True)
class SchedulerSpec:
    """A registered scheduler: its class and the config dataclass it reads."""

    cls: type
    config_cls: type


SCHEDULERS: dict[str, SchedulerSpec] = {
    "envsched": SchedulerSpec(EnvSched, SchedulerConfig),
    "random": SchedulerSpec(RandomScheduler, SchedulerConfig),
    "dapo": SchedulerSpec(DAPODynamicSampling, DAPOConfig),
    "dapo-1x": SchedulerSpec(DAPO1xDynamicSampling, DAPO1xConfig),
    "greso": SchedulerSpec(GRESOScheduler, GRESOConfig),
    "mopps": SchedulerSpec(MoPPSScheduler, MoPPSConfig),
    "dps": SchedulerSpec(DPSScheduler, DPSConfig),
}

# SchedulerConfig fields that shape the stored within- / cross-environment graphs (built once by the
# `build_graph` job with the defaults); a campaign that changes one builds its own graph.
WITHIN_GRAPH_FIELDS = (
    "k_within",
    "candidate_factor",
    "weight_cosine",
    "weight_tools",
    "weight_state",
    "exact_knn_max",
)
CROSS_GRAPH_FIELDS = ("k_cross", "candidate_factor", "cross_exact_max")


def scheduler_spec(name: str) -> SchedulerSpec:
    if name not in SCHEDULERS:
        raise ValueError(f"scheduler {name!r} unknown; choose from {sorted(SCHEDULERS)}")
    return SCHEDULERS[name]


def refilling_schedulers(names: list[str]) -> list[str]:
    """The registry names among ``names`` whose scheduler refills a step after reading its rewards (DAPO,
    GRESO): they cannot run with rewards observed late (``dynamic_sampling.RewardFeed``)."""
    return [n for n in names if n in SCHEDULERS and uses_dynamic_sampling(SCHEDULERS[n].cls)]


def scheduler_config(name: str, batch_size: int, group_size: int, overrides: dict[str, Any]) -> Any:
    """The validated config of scheduler ``name``; raises ValueError naming the bad field."""
    config_cls = scheduler_spec(name).config_cls
    known = {f.name: f for f in fields(config_cls)}
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        settable = sorted(set(known) - {"batch_size", "group_size"})
        raise ValueError(f"scheduler_config: {name} has no field(s) {unknown}; its fields are {settable}")
    for key in ("batch_size", "group_size"):
        if key in overrides:
            raise ValueError(f"scheduler_config: set {key} on the campaign, not in scheduler_config")
    for key, value in overrides.items():
        default = known[key].default
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ValueError(f"scheduler_config: {name}.{key} must be true or false, got {value!r}")
        if isinstance(default, int | float) and not isinstance(default, bool):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"scheduler_config: {name}.{key} must be a number, got {value!r}")
            if isinstance(default, int) and not isinstance(default, bool) and value != int(value):
                raise ValueError(f"scheduler_config: {name}.{key} must be an integer, got {value!r}")
    typed = {
        k: int(v) if isinstance(known[k].default, int) and not isinstance(v, bool) else v
        for k, v in overrides.items()
    }
    return config_cls(batch_size=batch_size, group_size=group_size, **typed)


def graph_overrides(name: str, overrides: dict[str, Any]) -> tuple[bool, bool]:
    """(within, cross): whether the overrides change the stored within- / cross-environment graph."""
    if name != "envsched":
        return False, False
    defaults = SchedulerConfig()
    changed = {k for k, v in overrides.items() if getattr(defaults, k, v) != v}
    return bool(changed & set(WITHIN_GRAPH_FIELDS)), bool(changed & set(CROSS_GRAPH_FIELDS))


def fold_history(scheduler: Scheduler, history: pd.DataFrame, step_offset: int | None = None) -> None:
    """Fold earlier rollouts (task_id, step, reward) into a fresh scheduler, oldest step first: EnvSched
    through ``warm_start`` (exactly, its clock at ``step_offset``; default: the history's last step), a
    baseline through its own ``fold`` where its state follows step boundaries (GRESO's adaptive p), else
    through ``observe``, one step at a time (its statistics read no step, so each is fed as step 0)."""
    if isinstance(scheduler, EnvSched):
        scheduler.warm_start(history, step_offset=step_offset)
        return
    if hasattr(scheduler, "fold"):
        scheduler.fold(history)
        return
    for _, part in history.groupby("step", sort=True):
        scheduler.observe(part.assign(step=0))


def refill_of(scheduler: Scheduler):
    """The scheduler's ``refill`` (dynamic sampling), or None when it has none."""
    return getattr(scheduler, "refill", None)
