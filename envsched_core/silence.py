"""Silent tasks (`SchedulerConfig.silence_backoff`): selected, and no group of theirs ever came back.

A trainer may drop a group instead of scoring it: every rollout hung past the timeout, a sandbox crashed, a
filter of the trainer's own threw the samples away. The scheduler then observes nothing of that
task. To coverage it stays unvisited and to exploitation as promising as its neighbours say, so without this
rule it is picked again and again: in the `lost` stress worlds, where a tenth of the tasks never answer, 12% of
EnvSched's batch went to them, more than random's 10% (docs/scheduler.md, "Attack: groups that never come back").

A selection at step s is *silent* once rewards of a later step have arrived and none of its task's. Each silent
selection counts as a coverage visit (so an environment whose every task is silent looks visited). After k >= 2
silent selections in a row a task is not selected for ``backoff * 2^(k-2)`` steps from the last one; one alone
blocks nothing, since a transient timeout drops a group once and the task answers at its next pick (in the
`dropped` stress worlds, a tenth of all groups dropped at random, blocking from the first silence cost 0.8 steps;
docs/scheduler.md). Any reward of the task clears its count, including a late one from a step judged silent.
"""

from __future__ import annotations

import numpy as np

CONFIRMING_SILENCES = 2
"""Silent selections in a row before a task is held back: one can be a transient timeout."""


class SilentTasks:
    """Per task: the step of its oldest selection still unanswered, its silent selections in a row, the last."""

    def __init__(self, n_tasks: int, backoff: int):
        self.backoff = int(backoff)
        self.pending = np.full(n_tasks, -1, dtype=np.int32)  # oldest unanswered selection's step; -1 none
        self.silences = np.zeros(n_tasks, dtype=np.int32)
        self.last_silent = np.full(n_tasks, -1, dtype=np.int32)
        self.latest_observed = -1

    def selected(self, step: int, rows: np.ndarray) -> None:
        """``rows`` were handed out at ``step``; an older unanswered selection keeps its step. Off (backoff 0):
        nothing is tracked, so no selection is ever silent."""
        if self.backoff <= 0:
            return
        rows = np.asarray(rows, dtype=np.int64)
        fresh = rows[self.pending[rows] < 0]
        self.pending[fresh] = int(step)

    def observed(self, step: int, rows: np.ndarray) -> None:
        """Groups of ``rows`` came back from ``step``: they answered; then every selection older than ``step``
        still unanswered is silent."""
        rows = np.asarray(rows, dtype=np.int64)
        answered = rows[self.pending[rows] <= step]
        self.pending[answered] = -1
        self.silences[rows] = 0
        self.latest_observed = max(self.latest_observed, int(step))
        silent = np.flatnonzero((self.pending >= 0) & (self.pending < self.latest_observed))
        self.silences[silent] += 1
        self.last_silent[silent] = self.pending[silent]
        self.pending[silent] = -1

    def blocked(self, step: int) -> np.ndarray:
        """(N,) tasks not to select at ``step``: within their back-off after a silent selection."""
        out = np.zeros(len(self.silences), dtype=bool)
        if self.backoff <= 0:
            return out
        # only the few silent tasks: the back-off over 1M tasks took 20 ms
        rows = np.flatnonzero(self.silences >= CONFIRMING_SILENCES)
        wait = self.backoff * 2.0 ** (self.silences[rows] - CONFIRMING_SILENCES)
        out[rows] = step < self.last_silent[rows] + wait
        return out

    def state_dict(self) -> dict:
        """Only the tasks with an unanswered or a silent selection (a batch or two, not the catalogue)."""
        rows = np.flatnonzero((self.pending >= 0) | (self.silences > 0))
        return {
            "rows": rows,
            "pending": self.pending[rows],
            "silences": self.silences[rows],
            "last_silent": self.last_silent[rows],
            "latest_observed": self.latest_observed,
        }

    def load_state_dict(self, state: dict) -> None:
        n = len(self.pending)
        self.pending, self.last_silent = np.full(n, -1, np.int32), np.full(n, -1, np.int32)
        self.silences = np.zeros(n, np.int32)
        rows = np.asarray(state["rows"], dtype=np.int64)
        for name in ("pending", "silences", "last_silent"):
            getattr(self, name)[rows] = state[name]
        self.latest_observed = int(state["latest_observed"])
