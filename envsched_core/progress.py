"""LearningProgress: how much a task's success moves per unit of the variance trained on, pooled by task length.

EnvSched exploits by predicted group variance: a GRPO group with more reward spread gives a larger update. But
the update can teach the policy little: a long task's advantage is shared by every decision of a rollout, and
on tau-bench the variance of long tasks came from calls whose outcome the policy could not learn, so their
success hardly moved (bench/learning_signal_real.py). This module estimates, from the scheduler's own history,
the success gained per unit of variance trained on, for each length class (gold-call count), and turns it into
a factor on the exploitation score ("learning progress": Oudeyer et al. 2007; Portelas et al. 2019 rank
curriculum tasks by it; pooled here, because one task's progress is too noisy to rank it).

Per task i seen at least twice: d_i = (its latest group mean) - (its first group mean), V_i = the sum of the
variances of its groups before the latest (what it was trained on in between). A task is the unit: the
differences of consecutive visits telescope to d_i, so the noise is that of two group means, however many
visits lie between. Per length class c (floor(2 log2(1 + gold calls))):
    L_c = sum_i d_i / sum_i V_i,   se_c^2 = sum_i (d_i - L_c V_i)^2 / (sum_i V_i)^2   (ratio estimator),
the residual sum floored at the sampling noise of the d_i, sum_i (v_first,i + v_last,i) / G (two group means).
The classes' rates are then regressed on length (a weighted meta-regression, weights 1/se_c^2, its residual
spread beyond the sampling noise taken as overdispersion):
    L_c ~ a + b x_c,   x_c = mean log(1 + gold calls) of the class's revisited tasks,
    factor_c = max(a + b x_c, 0) / L,   L = the weighted mean rate.
One slope has far more power than comparing the classes one by one (on tau-bench it was significant from
about step 45, where a per-class heterogeneity test never fired within 80 steps). Every factor is exactly 1
unless the slope differs from 0 at level SLOPE_LEVEL (two-sided) and L > 0 (there is learning to tell apart):
where task length does not matter the term switches itself off by data, up to the test's level.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

N_CLASSES = 12  # floor(2 log2(1 + gold calls)): 0, 1, 2, 3-4, 5-6, 7-10, 11-14, 15-21, ..., >= 63
SLOPE_LEVEL = 0.05  # two-sided test of the length slope
MIN_TASKS = 5  # a class enters the pooled fit with this many revisited tasks (fewer: se too rough)


def length_class(gold_calls: np.ndarray) -> np.ndarray:
    """floor(2 log2(1 + gold calls)), capped at N_CLASSES - 1: classes twice as fine as doublings."""
    return np.minimum(np.floor(2 * np.log2(1.0 + np.maximum(gold_calls, 0.0)) + 1e-9), N_CLASSES - 1).astype(
        np.int64
    )


class LearningProgress:
    """Pooled learning progress per length class from revisits; ``factor()`` is 1 until the data say otherwise."""

    def __init__(self, gold_calls: np.ndarray | None, n_tasks: int, group_size: int):
        self.group_size = group_size
        self.cls = length_class(gold_calls) if gold_calls is not None else np.zeros(n_tasks, np.int64)
        log_length = np.log1p(np.maximum(gold_calls, 0.0)) if gold_calls is not None else np.zeros(n_tasks)
        count = np.bincount(self.cls, minlength=N_CLASSES)
        self.class_length = np.divide(  # x_c: mean log(1 + gold calls) of the class's tasks
            np.bincount(self.cls, weights=log_length, minlength=N_CLASSES),
            count,
            out=np.zeros(N_CLASSES),
            where=count > 0,
        )
        self.first_mean = np.full(n_tasks, np.nan)
        self.first_var = np.zeros(n_tasks)
        self.last_mean = np.full(n_tasks, np.nan)
        self.last_var = np.zeros(n_tasks)
        self.trained = np.zeros(n_tasks)  # V_i: variance of the groups before the latest
        self._factors: np.ndarray | None = None

    def update(self, rows: np.ndarray, mean: np.ndarray, variance: np.ndarray) -> None:
        """Fold one step's groups (unique task rows) in."""
        seen = ~np.isnan(self.last_mean[rows])
        self.trained[rows[seen]] += self.last_var[rows[seen]]
        self.first_mean[rows[~seen]] = mean[~seen]
        self.first_var[rows[~seen]] = variance[~seen]
        self.last_mean[rows] = mean
        self.last_var[rows] = variance
        self._factors = None

    def class_rates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rate L_c, its squared standard error, which classes enter the fit)."""
        again = np.flatnonzero(self.trained > 0)
        c, d, v = self.cls[again], (self.last_mean - self.first_mean)[again], self.trained[again]
        count = np.bincount(c, minlength=N_CLASSES)
        s_d, s_v = (np.bincount(c, weights=x, minlength=N_CLASSES) for x in (d, v))
        ok = (count >= MIN_TASKS) & (s_v > 0)
        rate = np.divide(s_d, s_v, out=np.zeros(N_CLASSES), where=ok)
        resid = np.bincount(c, weights=(d - rate[c] * v) ** 2, minlength=N_CLASSES)
        noise = np.bincount(c, weights=self.first_var[again] + self.last_var[again], minlength=N_CLASSES)
        resid = np.maximum(resid, noise / self.group_size)
        se2 = np.divide(resid, s_v * s_v, out=np.full(N_CLASSES, np.inf), where=ok)
        return rate, se2, ok & (se2 > 0)

    def class_factors(self) -> np.ndarray:
        """Per length class: the fitted rate over the mean rate (1 everywhere without evidence of a slope)."""
        if self._factors is not None:
            return self._factors
        rate, se2, ok = self.class_rates()
        out = np.ones(N_CLASSES)
        if ok.sum() >= 3:
            x = self.class_length
            w, y = 1.0 / se2[ok], rate[ok]
            X = np.column_stack([np.ones(len(y)), x[ok]])
            info = X.T @ (w[:, None] * X)
            coef = np.linalg.solve(info, X.T @ (w * y))
            overdispersion = (
                max(1.0, float(np.sum(w * (y - X @ coef) ** 2)) / (len(y) - 2)) if len(y) > 2 else 1.0
            )
            z = coef[1] / np.sqrt(np.linalg.inv(info)[1, 1] * overdispersion)
            mean_rate = float(np.sum(w * y) / w.sum())
            if mean_rate > 0 and abs(z) > norm.ppf(1.0 - SLOPE_LEVEL / 2):
                out = np.maximum(coef[0] + coef[1] * x, 0.0) / mean_rate
        self._factors = out
        return out

    def factor(self) -> np.ndarray:
        """Per task: its length class's factor."""
        return self.class_factors()[self.cls]

    def state_dict(self) -> dict:
        return {
            "first_mean": self.first_mean.copy(),
            "first_var": self.first_var.copy(),
            "last_mean": self.last_mean.copy(),
            "last_var": self.last_var.copy(),
            "trained": self.trained.copy(),
        }

    def load_state_dict(self, state: dict) -> None:
        for key in ("first_mean", "first_var", "last_mean", "last_var", "trained"):
            setattr(self, key, np.array(state[key], copy=True))
        self._factors = None
