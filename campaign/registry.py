"""The names a campaign config may use: schedulers (``envsched_core.schedulers``) and rollout engines
(``training.engines``), and the check of an engine's options against its constructor."""

import importlib
import inspect
from typing import Any

from envsched_core.schedulers import SCHEDULERS, Scheduler, scheduler_config, scheduler_spec
from training.engines.base import ENGINES, make_engine

# Engine classes by name, imported only to read their constructor (hf and vllm import torch).
ENGINE_CLASSES = {
    "simulated": "training.engines.simulated:SimulatedEngine",
    "skill": "training.engines.skill:SkillEngine",
    "hf": "training.engines.hf:HFEngine",
    "vllm": "training.engines.vllm:VLLMEngine",
}
# Arguments make_engine fills in itself.
_SUPPLIED = {"self", "tasks", "group_size", "seed", "heldout", "eval_every"}


def check_engine_options(engine: str, options: dict[str, Any]) -> None:
    """Raise ValueError naming options the engine's constructor does not take. Engines that accept
    ``**options`` check them themselves when they start."""
    if engine not in ENGINE_CLASSES or not options:
        return
    if engine in ("hf", "vllm"):  # **options, checked by the engine; importing it would load torch
        return
    module, _, name = ENGINE_CLASSES[engine].partition(":")
    parameters = inspect.signature(getattr(importlib.import_module(module), name).__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    known = sorted(set(parameters) - _SUPPLIED)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(
            f"engine_options: the {engine} engine takes no option(s) {unknown}; it takes {known}"
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
