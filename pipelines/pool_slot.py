"""Hold a slot of a concurrency pool for part of a step, not all of it.

`training_step` rolls out and updates the policy for minutes on a GPU; `variance_predictions` and
`scheduled_batch` may first have to build the scheduler cold or replay a long rollout history (a
continuing campaign's first batch, a pool changed by a catalogue refresh). Holding the single-slot
`warehouse` pool all that time would stop every other campaign's ingestion and planning. So these assets
are outside the pool and take a slot only after that work (training_step: around its writes; the other
two: for the rest of the asset, with the scheduler prepared in the process's cache), through the same
instance concurrency bookkeeping Dagster's executor uses (so the UI shows the slot as held by the step,
and a killed process's slot is freed like any other: see `pipelines/crash_safety.py`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext

_POLL_S = 0.5


@contextmanager
def pool_slot(context: dg.AssetExecutionContext, pool: str, step_key: str) -> Iterator[None]:
    """Block until ``pool`` has a free slot for ``step_key`` of this run; free it on exit."""
    with InstanceConcurrencyContext(context.instance, context.run) as slots:
        waited = False
        while not slots.claim(pool, step_key):
            if not waited:
                context.log.info(f"{step_key}: waiting for a slot of pool '{pool}' to write")
                waited = True
            time.sleep(_POLL_S)
        try:
            yield
        finally:
            slots.free_step(step_key)
