"""Environment sources by name.

Built-in sources are registered here; a user's own source is either registered in code
(``register_source("my_env", MySource)``), published as a ``envsched.environments`` entry point
(``my_env = "my_pkg.envs:MySource"`` in their pyproject), or named in config as ``"module:Class"``.
Options are passed to the source's constructor (e.g. ``data_dir``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from environments.base import EnvironmentSource

SourceFactory = Callable[..., EnvironmentSource]

_BUILTIN: dict[str, str] = {
    "bfcl_v3_multi_turn": "environments.bfcl:BfclMultiTurnSource",
    "tau_bench_retail": "environments.tau_bench:TauBenchRetailSource",
    "tau_bench_airline": "environments.tau_bench:TauBenchAirlineSource",
    "acebench_agent": "environments.acebench:AceBenchAgentSource",
    "synthetic": "environments.synthetic:SyntheticSource",
}
_registered: dict[str, SourceFactory] = {}


def register_source(name: str, factory: SourceFactory) -> None:
    _registered[name] = factory


def _import(target: str) -> SourceFactory:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError(f"source target {target!r} must look like 'package.module:ClassName'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"source {target!r}: cannot import {module_name!r} ({exc}); install its package or put it on "
            "PYTHONPATH for every process that runs campaign steps"
        ) from None
    if not hasattr(module, attr):
        raise ValueError(f"source {target!r}: module {module_name!r} has no {attr!r}")
    return getattr(module, attr)


def available_sources() -> list[str]:
    plugins = {ep.name for ep in entry_points(group="envsched.environments")}
    return sorted(set(_BUILTIN) | set(_registered) | plugins)


def get_source(name: str, **options: Any) -> EnvironmentSource:
    """Instantiate the source called ``name`` (or given as ``module:Class``) with ``options``."""
    if name in _registered:
        factory = _registered[name]
    elif name in _BUILTIN:
        factory = _import(_BUILTIN[name])
    elif ":" in name:
        factory = _import(name)
    else:
        plugins = {ep.name: ep for ep in entry_points(group="envsched.environments")}
        if name not in plugins:
            raise KeyError(f"unknown environment source {name!r}; available: {available_sources()}")
        factory = plugins[name].load()
    return factory(**options)
