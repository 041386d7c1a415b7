"""Groups already observed, so that a re-delivered step is observed once (``EnvSched.observe``).

A trainer or a queue that delivers at least once (a retried upload, a resumed worker that sends its last
step again) hands ``observe`` rollouts it has seen before. Counted twice they would weigh that step double in
every model. A (step, task) group is observed once, whole: a group delivered again with the same rewards (its
size, mean and variance) is dropped; one delivered again with other rewards is an error, since which of the
two is right cannot be told from here.
"""

from __future__ import annotations

import numpy as np

SAME = 1e-9
"""Tolerance on a group's mean and variance under which a second delivery is the first one again."""
DELIVERED_COLUMNS = ("step", "idx", "size", "mean", "variance")
"""The columns of ``stats.group_outcomes`` a group is recorded by, in the order ``repeated`` / ``record`` take."""


class DeliveredGroups:
    """Per step observed: its groups' task rows (sorted) and their size, mean and variance."""

    def __init__(self) -> None:
        self.steps: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}

    def repeated(
        self, step: np.ndarray, rows: np.ndarray, size: np.ndarray, mean: np.ndarray, variance: np.ndarray
    ) -> tuple[np.ndarray, int | None]:
        """For groups (step, task row, size, mean, variance): the mask of those observed before, and the
        position of the first one observed before with other rewards (None when there is none)."""
        seen = np.zeros(len(rows), dtype=bool)
        clash: int | None = None
        for s in np.unique(step):
            if int(s) not in self.steps:
                continue
            known, *before = self.steps[int(s)]
            at = np.flatnonzero(step == s)
            pos = np.minimum(np.searchsorted(known, rows[at]), len(known) - 1)
            hit = known[pos] == rows[at]
            seen[at[hit]] = True
            same = (before[0][pos] == size[at]) & (np.abs(before[1][pos] - mean[at]) <= SAME)
            same &= np.abs(before[2][pos] - variance[at]) <= SAME
            other = at[hit & ~same]
            if len(other) and (clash is None or other[0] < clash):
                clash = int(other[0])
        return seen, clash

    def earlier(self, step: int, row: int) -> tuple[int, float]:
        """(size, mean) of the group of task ``row`` observed at ``step``."""
        known, size, mean, _ = self.steps[step]
        at = int(np.searchsorted(known, row))
        return int(size[at]), float(mean[at])

    def record(
        self, step: np.ndarray, rows: np.ndarray, size: np.ndarray, mean: np.ndarray, variance: np.ndarray
    ) -> None:
        """Remember groups observed for the first time (one sort, then a slice per step: a whole saved state loads
        in O(K log K))."""
        if len(step) == 0:
            return
        order = np.lexsort((rows, step))
        step, rows, size, mean, variance = (np.asarray(a)[order] for a in (step, rows, size, mean, variance))
        steps, starts = np.unique(step, return_index=True)
        for s, part in zip(steps, np.split(np.arange(len(step)), starts[1:]), strict=True):
            parts = [rows[part], size[part], mean[part], variance[part]]
            if int(s) in self.steps:
                parts = [
                    np.concatenate([old, new]) for old, new in zip(self.steps[int(s)], parts, strict=True)
                ]
                by_row = np.argsort(parts[0], kind="stable")
                parts = [p[by_row] for p in parts]
            self.steps[int(s)] = tuple(parts)

    def state_dict(self) -> dict:
        """Flat arrays, one entry per group observed."""
        steps = sorted(self.steps)
        flat = [np.concatenate([self.steps[s][k] for s in steps]) if steps else np.zeros(0) for k in range(4)]
        counts = [len(self.steps[s][0]) for s in steps]
        return {
            "step": np.repeat(np.asarray(steps, dtype=np.int64), counts),
            "rows": flat[0].astype(np.int64),
            "size": flat[1].astype(np.int64),
            "mean": flat[2].astype(float),
            "variance": flat[3].astype(float),
        }

    def load_state_dict(self, state: dict) -> None:
        self.steps = {}
        self.record(*(np.asarray(state[k]) for k in ("step", "rows", "size", "mean", "variance")))
