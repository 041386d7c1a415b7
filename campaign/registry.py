"""The names a campaign config may use: schedulers (``envsched_core.schedulers``) and rollout engines
(``training.engines``), and the check of an engine's options against its constructor."""

import importlib
import inspect
from dataclasses import fields
from typing import Any

from envsched_core.schedulers import SCHEDULERS, Scheduler, scheduler_config, scheduler_spec
from training.engines.base import ENGINES, make_engine

# Engine classes by name, imported only to read their constructor's options (hf and vllm: their options
# dataclass instead, since importing the engines loads torch).
ENGINE_CLASSES = {
    "simulated": "training.engines.simulated:SimulatedEngine",
    "skill": "training.engines.skill:SkillEngine",
    "hf": "training.engines.hf:HFEngine",
    "vllm": "training.engines.vllm:VLLMEngine",
}
# Arguments make_engine fills in itself.
_SUPPLIED = {"self", "tasks", "group_size", "seed", "heldout", "eval_every"}


def engine_option_names(engine: str) -> list[str] | None:
    """Every option the engine takes; None where it takes any. The hf and vllm engines' options are read from
    ``training.engines.options`` (importing the engines would load torch)."""
    if engine in ("hf", "vllm"):
        from training.engines.options import HFEngineOptions, VLLMEngineOptions

        return [f.name for f in fields(HFEngineOptions if engine == "hf" else VLLMEngineOptions)]
    if engine == "skill":  # its executor's options, then the skill policy's
        from training.engines.skill import EXECUTOR_OPTIONS
        from training.policies.skill import SkillConfig

        return [*EXECUTOR_OPTIONS, *(f.name for f in fields(SkillConfig))]
    module, _, name = ENGINE_CLASSES[engine].partition(":")
    parameters = inspect.signature(getattr(importlib.import_module(module), name).__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return None
    return [p for p in parameters if p not in _SUPPLIED]


def check_engine_options(engine: str, options: dict[str, Any]) -> None:
    """Raise ValueError naming options the engine does not take (their values are checked when it starts)."""
    if engine not in ENGINE_CLASSES or not options:
        return
    known = engine_option_names(engine)
    unknown = sorted(set(options) - set(known)) if known is not None else []
    if unknown:
        raise ValueError(
            f"engine_options: the {engine} engine takes no option(s) {unknown}; it takes {sorted(known)}"
        )


__all__ = [
    "ENGINES",
    "SCHEDULERS",
    "Scheduler",
    "check_engine_options",
    "make_engine",
    "scheduler_config",
    "scheduler_spec",
]
