"""envsched_core: the EnvSched algorithm as a pure library (EnvSched, Yang et al., 2026).

    from envsched_core import TaskCatalog, EnvSched, SchedulerConfig
    catalog = TaskCatalog.from_frame(tasks)
    sched = EnvSched(catalog, SchedulerConfig(batch_size=64, group_size=8), seed=0)
    batch = sched.select(step); sched.observe(rollouts); sched.predict()

Imports no dagster, duckdb, mlflow or torch.
"""

from .catalog import TaskCatalog
from .config import SchedulerConfig
from .graph import build_cross_edges, build_within_edges, cross_signature, signature_patterns
from .metrics import batch_metrics
from .predictor import VariancePredictor
from .scheduler import EnvSched
from .state_fit import StateMismatch
from .stats import TaskStats

__all__ = [
    "EnvSched",
    "SchedulerConfig",
    "StateMismatch",
    "TaskCatalog",
    "TaskStats",
    "VariancePredictor",
    "batch_metrics",
    "build_cross_edges",
    "build_within_edges",
    "cross_signature",
    "signature_patterns",
]
