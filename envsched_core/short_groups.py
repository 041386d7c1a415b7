"""Short groups (`SchedulerConfig.short_group_prior`): tasks whose groups come back with fewer than G rewards.

A runner may lose single rollouts instead of scoring them: a long-horizon task whose rollouts often run past the
timeout, a sandbox that crashes now and then. Such a task's group comes back short, and a short group teaches
less: a group of one has no advantage at all, and the population variance of n rewards is (n - 1) / n of the
reward's variance in expectation. Without this rule EnvSched valued a task by its predicted variance alone, and in
the `slow-tasks` stress worlds (a fifth of the tasks lose each rollout with chance 0.75) it picked those tasks as
often as random did: 0.24 of each batch (docs/scheduler.md, "Attack: groups that come back short").

Per task, the share of its rollouts that came back, y = (returned + k * y_all) / (handed out + k), where G per
observed group counts as handed out, y_all is the share over every observed group and k (``prior``, in rollouts)
is how much that population share weighs against the task's own. A task's value is weighed by
(n - 1) / n at n = y * G rewards, relative to a full group's (G - 1) / G. Groups that never came back at all are
the silence rule's (`silence.py`), not this one's. Where every group came back whole the factor is exactly 1.
"""

from __future__ import annotations

import numpy as np


class ShortGroups:
    """Per task: rollouts handed out (G per observed group) and rollouts that came back."""

    def __init__(self, n_tasks: int, group_size: int, prior: float):
        self.group_size, self.prior = int(group_size), float(prior)
        self.handed = np.zeros(n_tasks)
        self.returned = np.zeros(n_tasks)

    def update(self, rows: np.ndarray, sizes: np.ndarray) -> None:
        """One step's groups of ``rows`` came back with ``sizes`` rewards each (more than G counts as G)."""
        sizes = np.minimum(np.asarray(sizes, dtype=float), self.group_size)
        np.add.at(self.handed, rows, self.group_size)
        np.add.at(self.returned, rows, sizes)

    def factor(self) -> np.ndarray | float:
        """(N,) weight of each task's value: its expected group's (n - 1) / n over a full group's; 1.0 (a
        scalar) while no group has come back short, or with G = 1 (where no group has an advantage anyway)."""
        g = self.group_size
        short = self.handed.sum() - self.returned.sum()
        if short <= 0 or g <= 1:
            return 1.0
        share_all = self.returned.sum() / self.handed.sum()
        share = (self.returned + self.prior * share_all) / (self.handed + self.prior)
        n = share * g
        return np.clip((n - 1) / np.maximum(n, 1e-12), 0.0, None) / ((g - 1) / g)

    def state_dict(self) -> dict:
        """Only the tasks observed (a visited few, not the catalogue)."""
        rows = np.flatnonzero(self.handed > 0)
        return {"rows": rows, "handed": self.handed[rows], "returned": self.returned[rows]}

    def load_state_dict(self, state: dict) -> None:
        self.handed, self.returned = np.zeros(len(self.handed)), np.zeros(len(self.returned))
        rows = np.asarray(state["rows"], dtype=np.int64)
        self.handed[rows], self.returned[rows] = state["handed"], state["returned"]
