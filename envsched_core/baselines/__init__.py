"""Baseline task schedulers with EnvSched's interface (`select`, `observe`, `refill`, `state_dict`).

Each takes `(catalog, config, seed=...)`: `catalog.tasks` is a DataFrame with task_id and env_id;
`config` is any object with `batch_size` and `group_size` (e.g. `SchedulerConfig`), and may carry the
baseline's own fields (see `DAPOConfig`, `GRESOConfig`, `MoPPSConfig`, `DPSConfig`); missing
fields take the defaults of the reference code's scripts (cited in each module).
`DAPO1xDynamicSampling` is DAPO with the MoPPS / DPS papers' DS setting (1x generation batch, cap 4).
"""

from .dapo import DAPO_1X, DAPO1xConfig, DAPO1xDynamicSampling, DAPOConfig, DAPODynamicSampling
from .dps import DPSConfig, DPSScheduler
from .greso import GRESOConfig, GRESOScheduler
from .mopps import MoPPSConfig, MoPPSScheduler
from .uniform import RandomScheduler

__all__ = [
    "RandomScheduler",
    "DAPODynamicSampling",
    "DAPOConfig",
    "DAPO1xDynamicSampling",
    "DAPO1xConfig",
    "DAPO_1X",
    "GRESOScheduler",
    "GRESOConfig",
    "MoPPSScheduler",
    "MoPPSConfig",
    "DPSScheduler",
    "DPSConfig",
]
