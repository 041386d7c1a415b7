"""The rollout rounds of one training step: roll out the batch, observe, refill, until the rule stops.

Dynamic-sampling schedulers (DAPO, GRESO; `dynamic_sampling = True`) decide after seeing a round's
rewards whether to generate another round (`refill(step)` returns more tasks, or an empty frame when
the step is complete). Every other scheduler stops after the first round. The same loop runs in the
benchmark simulator (`simulator.run_campaign`), the real-environment benchmark
(`bench/campaign_real.py`) and the Dagster pipeline's training step, so every rollout of every round
is counted as spent in all three. The policy then trains on the first B informative groups (B = the
batch's non-'oversample' rows), the groups `metrics.trained_groups` describes.

An asynchronous trainer (:class:`RewardFeed` with a lag L > 0) chooses the next batch before the
current one's rewards are in: ``select(t)`` has seen the rewards of steps <= t - 1 - L only (after a
synchronous warm-up of ``sync_warmup`` steps, if any).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pandas as pd

Result = TypeVar("Result")
OBSERVED_COLUMNS = ["task_id", "step", "reward"]


def uses_dynamic_sampling(scheduler: Any) -> bool:
    """True for a scheduler (class or instance) that refills a step after seeing its rewards."""
    return bool(getattr(scheduler, "dynamic_sampling", False))


def rollout_rounds(
    first: pd.DataFrame,
    rollout: Callable[[pd.DataFrame], Result],
    next_round: Callable[[Result], pd.DataFrame | None] | None = None,
) -> tuple[pd.DataFrame, list[Result]]:
    """Roll out ``first``, then each frame ``next_round(latest result)`` returns, until it returns
    None or an empty frame. Returns every round's batch rows in generation order and the results of
    ``rollout`` (one per round). Raises ValueError when a round names a task an earlier one had."""
    frames, results = [first], [rollout(first)]
    seen = set(first["task_id"].astype(str))
    while next_round is not None:
        extra = next_round(results[-1])
        if extra is None or extra.empty:
            break
        repeated = seen & set(extra["task_id"].astype(str))
        if repeated:
            raise ValueError(
                f"refill round {len(frames)} repeats task(s) {sorted(repeated)[:5]} of this step"
            )
        seen |= set(extra["task_id"].astype(str))
        frames.append(extra)
        results.append(rollout(extra))
    return pd.concat(frames, ignore_index=True), results


def scheduler_refill(
    scheduler: Any, step: int, rows_of: Callable[[Any], pd.DataFrame] = lambda rows: rows
) -> Callable[[Any], pd.DataFrame]:
    """The ``next_round`` of a scheduler: observe the latest round's rollouts (``rows_of(result)``:
    task_id, step, reward), then ask ``refill(step)`` (an empty frame for schedulers that never refill)."""

    def next_round(result: Any) -> pd.DataFrame:
        scheduler.observe(rows_of(result)[OBSERVED_COLUMNS])
        refill = getattr(scheduler, "refill", None)
        return refill(step) if refill is not None else pd.DataFrame()

    return next_round


class RewardFeed:
    """How a campaign's rewards reach its scheduler: with lag 0 each round is observed at once (and a
    dynamic-sampling scheduler may refill); with lag L > 0 a step's rollouts are observed after L more
    steps were selected, as in an asynchronous trainer, except during the first ``sync_warmup`` steps,
    which are observed before the next step is selected. Dynamic-sampling schedulers need lag 0."""

    def __init__(self, scheduler: Any, lag: int = 0, sync_warmup: int = 0):
        if lag < 0 or sync_warmup < 0:
            raise ValueError(f"observe_lag and sync_warmup must be >= 0, got {lag} and {sync_warmup}")
        if lag and uses_dynamic_sampling(scheduler):
            raise ValueError(
                f"observe_lag={lag}: {type(scheduler).__name__} refills a step after reading its "
                "rewards, so it cannot run with delayed rewards"
            )
        self.scheduler, self.lag, self.sync_warmup = scheduler, lag, sync_warmup
        self.in_flight: list[pd.DataFrame] = []  # rollouts not observed yet, oldest first

    def next_round(
        self, step: int, rows_of: Callable[[Any], pd.DataFrame] = lambda rows: rows
    ) -> Callable[[Any], pd.DataFrame] | None:
        """``rollout_rounds``' next_round for this step: observe-and-refill at lag 0, else no refill."""
        return None if self.lag else scheduler_refill(self.scheduler, step, rows_of)

    def step_done(self, step: int, rollouts: pd.DataFrame) -> None:
        """After a step's rounds (``rollouts``: task_id, step, reward): observe what is now due."""
        if not self.lag:
            return
        self.in_flight.append(rollouts[OBSERVED_COLUMNS])
        self._observe_all_but(0 if step <= self.sync_warmup else self.lag)

    def flush(self) -> None:
        """Observe every step still in flight (the campaign's end)."""
        self._observe_all_but(0)

    def _observe_all_but(self, keep: int) -> None:
        """Observe the oldest steps in flight until ``keep`` remain."""
        while len(self.in_flight) > keep:
            self.scheduler.observe(self.in_flight.pop(0))
