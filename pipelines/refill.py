"""Dynamic sampling in the pipeline: the training step's refill rounds and the scheduler state they leave.

DAPO and GRESO decide after seeing a round's rewards whether to roll out another round, and so does EnvSched
with `refill_rounds` > 0 (``refills``). In the pipeline the training step does it: it restores the scheduler
as it was after choosing the step's batch, hands the engine a ``refill`` callback (observe the round, ask
`refill(step)`), and the engine rolls out every round before its one update. The rounds are saved as batch rows of round >= 1 and the
scheduler state after the last round as phase 'refilled', in one transaction; every rollout of every
round is in the landing file, so it is ingested and counted as spent. `variance_predictions` then
continues from the 'refilled' state (it has observed every round) instead of observing again.
Other schedulers run one round, as before. `observed_scheduler` and `cross_edge_update` give
`variance_predictions` the scheduler after a step and the cross-edge rows its re-rank changed;
`prepare_scheduler` restores the scheduler an asset needs before it takes the warehouse pool.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import pandas as pd

from envsched_core import TaskCatalog
from envsched_core.dynamic_sampling import scheduler_refill, uses_dynamic_sampling
from envsched_core.graph import edge_changes, edges_to_frame
from envsched_core.schedulers import scheduler_spec
from pipelines import scheduler_cache
from pipelines.campaign import CampaignConfig, dump_state
from pipelines.run_log import progress_to_run_log
from training.engines.base import RolloutEngine
from warehouse.store import Warehouse


def roll_out_and_train(
    store: Warehouse,
    config: CampaignConfig,
    engine: RolloutEngine,
    step: int,
    writing: Callable[[], AbstractContextManager] = nullcontext,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, float]]:
    """Roll out the scheduled batch of ``step`` (and, for DAPO / GRESO or a refilling EnvSched, the refill
    rounds its rule asks for) and update the policy once; tasks of the batch retired by a catalogue refresh
    since it was scheduled are not rolled out (``retired_rows``). Returns every round's batch rows, the landing rows and
    the step metrics (with ``rollout/refill_rounds`` for dynamic sampling)."""
    batch = store.batch(config.campaign_id, step, first_round=True)
    in_pool = batch["task_id"].isin(set(scheduler_cache.catalog(store, config).task_ids))
    live, retired = batch[in_pool].reset_index(drop=True), batch[~in_pool]
    if live.empty:  # every task of the batch retired by a refresh since it was scheduled: nothing to train
        return (
            batch,
            retired_rows(retired, step, config.group_size),
            {"rollout/retired_tasks": float(len(batch))},
        )
    if not refills(config):
        rows, metrics = engine.run_step(live, step)
        return batch, *_with_retired(rows, metrics, retired, step, config.group_size)
    scheduler, _ = scheduler_cache.restore(store, config, step, "selected")
    scheduler.resume_step(step, live["task_id"])  # rebuilt since it selected this batch: take the step up
    next_round = scheduler_refill(scheduler, step)
    rounds: list[pd.DataFrame] = []

    def refill(rows: pd.DataFrame) -> pd.DataFrame:
        extra = next_round(rows)
        if not extra.empty:
            rounds.append(extra)
        return extra

    rows, metrics = engine.run_step(live, step, refill=refill)
    with writing():  # the training step holds the warehouse pool only for its writes
        store.save_refill(config.campaign_id, step, rounds, dump_state(scheduler))
        scheduler_cache.keep(store, config, scheduler, step, "refilled")
    metrics["rollout/refill_rounds"] = float(len(rounds))
    return pd.concat([batch, *rounds], ignore_index=True), *_with_retired(
        rows, metrics, retired, step, config.group_size
    )


def refills(config: CampaignConfig) -> bool:
    """Whether the campaign's training steps may run refill rounds: a dynamic-sampling peer (DAPO, GRESO), or
    EnvSched with ``refill_rounds`` > 0 (whose first round is complete without them)."""
    if uses_dynamic_sampling(scheduler_spec(config.scheduler).cls):
        return True
    return getattr(config.scheduler_settings(), "refill_rounds", 0) > 0


def retired_rows(retired: pd.DataFrame, step: int, group_size: int) -> pd.DataFrame:
    """G landing rows for each task retired by a catalogue refresh after its batch was scheduled. It is not
    rolled out (it may be broken, or gone from its source): status 'error', reward 0. The landing contract
    wants every task of the batch; the scheduler and the statistics read only tasks of the pool."""
    ids = np.repeat(retired["task_id"].to_numpy(dtype=object), group_size)
    return pd.DataFrame(
        {
            "step": step,
            "task_id": ids,
            "rollout_idx": np.tile(np.arange(group_size), len(retired)),
            "reward": 0.0,
            "n_turns": 0,
            "n_tool_calls": 0,
            "tools_used": [[] for _ in ids],
            "status": "error",
            "error": "retired by a catalogue refresh after its batch was scheduled; not rolled out",
        }
    )


def _with_retired(rows, metrics, retired: pd.DataFrame, step: int, group_size: int):
    if retired.empty:
        return rows, metrics
    metrics["rollout/retired_tasks"] = float(len(retired))
    return pd.concat([rows, retired_rows(retired, step, group_size)], ignore_index=True), metrics


def observed_phase(store: Warehouse, config: CampaignConfig, step: int) -> str:
    """The saved state `variance_predictions` continues from: 'refilled' when the training step ran refill
    rounds (that state has observed them all), else 'selected'."""
    refilled = store.scheduler_state_manifest(config.campaign_id, step, "refilled") is not None
    return "refilled" if refilled else "selected"


def prepare_scheduler(context, store: Warehouse, progress: str) -> None:
    """Before `variance_predictions` (``progress`` 'loaded') or `scheduled_batch` ('observed') takes the
    warehouse pool: restore the scheduler it needs into the process's cache (``scheduler_cache.prepare``).
    Best effort: an error here is logged, and the asset's restore inside the pool meets it again and marks the
    campaign failed with it."""
    with progress_to_run_log(context):  # a rebuild's line reaches the run's log
        try:
            with store.session(read_only=True):  # the checks in one connection, closed before any long work
                config = CampaignConfig.from_dict(store.campaign(context.partition_key)["config"])
                step = store.progress(config.campaign_id)[progress]
                if progress == "loaded":
                    phase = observed_phase(store, config, step) if step > 0 else None
                else:
                    phase = "observed" if step < config.steps else None
                if phase is None or scheduler_cache.cached(store, config, step, phase):
                    return
            scheduler_cache.prepare(store, config, step, phase)
        except Exception as exc:  # the pooled part meets it again and reports it
            context.log.info(f"scheduler not prepared outside the pool: {type(exc).__name__}: {exc}")


def observed_scheduler(
    store: Warehouse, config: CampaignConfig, step: int, rollouts: pd.DataFrame
) -> tuple[Any, TaskCatalog, Any]:
    """The scheduler after folding in ``step``'s rollouts: the 'refilled' state when the training step
    ran the rounds (it observed them all), else the state after selection plus `observe(rollouts)`.
    Third: the cross edges before this step's observation (what the warehouse holds), None if unknown."""
    refilled = observed_phase(store, config, step) == "refilled"
    scheduler, catalog = scheduler_cache.restore(store, config, step, "refilled" if refilled else "selected")
    if refilled:
        # the rounds re-ranked them already; selecting re-ranks nothing, so before = the selected state's
        cross_before = store.scheduler_state_part(config.campaign_id, step, "selected", "cross_edges")
    else:
        cross_before = getattr(scheduler, "cross_edges", None)  # a re-rank replaces it, never mutates it
    # The stored cross edges are the last observed state's. A scheduler rebuilt since (another pool, release
    # or feature set) holds others: then replace them all.
    if cross_before is not None and not store.scheduler_state_holds(
        config.campaign_id, step - 1, "observed", "cross_edges", cross_before
    ):
        cross_before = None
    if not refilled:
        # a task retired while its step ran: dropped
        in_pool = rollouts["task_id"].isin(set(catalog.task_ids))
        scheduler.observe(rollouts.loc[in_pool, ["task_id", "step", "reward"]])
    return scheduler, catalog, cross_before


def cross_edge_update(store, campaign_id: str, catalog, before, scheduler):
    """(edges to write, pairs to delete or None = replace all) for the campaign's re-ranked cross edges.
    The stored rows equal ``before`` (same transaction as the state restored) once the campaign has any."""
    if not hasattr(scheduler, "cross_edges_frame"):
        return None, None
    if before is None or not store.has_campaign_cross_edges(campaign_id):
        return scheduler.cross_edges_frame(), None
    changed, gone_src, gone_dst = edge_changes(before, scheduler.cross_edges, len(catalog))
    removed = pd.DataFrame({"src": catalog.task_ids[gone_src], "dst": catalog.task_ids[gone_dst]})
    return edges_to_frame(catalog, *(a[changed] for a in scheduler.cross_edges)), removed
