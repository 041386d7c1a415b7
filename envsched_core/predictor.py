"""VariancePredictor: per-relation propagation and precision-weighted fusion (EnvSched, Yang et al., 2026,
"Prediction"). Read next to DESIGN.md; symbols as there:

    v_r(i) = sum_j w_ij n_j m_j / sum_j w_ij n_j        (r in {W, X}, w = softmax(sim / 0.1) over i's neighbours)
    N_r(i) = sum_j w_ij n_j                              (evidence of relation r)
    v_hat  = (n_i m_i + a_W N_W v_W + a_X N_X v_X + v_0) / (n_i + a_W N_W + a_X N_X + 1)
    u_i    = (1 + n_i + N_W + N_X)^(-1/2)

Both sums are one sparse mat-vec each over the (N, N) propagation matrices, so a prediction over 1M tasks
costs two SpMVs. Once ``refit_min_pairs`` (prediction, realised) pairs exist, a_W and a_X are refit online
by non-negative (bounded, a >= 0) least squares of v_hat(a) against the realised variances y.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import least_squares

from .config import SchedulerConfig
from .stats import TaskStats


@dataclass
class Components:
    """The terms of the fusion for a set of tasks (all arrays aligned)."""

    n: np.ndarray  # n_i, own visit weight (decayed)
    m: np.ndarray  # m_i, own discounted mean variance
    N_W: np.ndarray  # within evidence
    S_W: np.ndarray  # sum_j w_ij n_j m_j = N_W v_W
    N_X: np.ndarray  # cross evidence
    S_X: np.ndarray  # N_X v_X
    v0: float

    @staticmethod
    def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        """num / den, NaN where there is no evidence."""
        return np.divide(num, den, out=np.full_like(num, np.nan, dtype=float), where=den > 0)


class VariancePredictor:
    """Predicts each task's GRPO-group reward variance from its own history and its two neighbourhoods."""

    PAIR_FIELDS = ("n", "m", "N_W", "S_W", "N_X", "S_X", "v0", "y")

    def __init__(self, cfg: SchedulerConfig, W_within: sp.csr_matrix | None, W_cross: sp.csr_matrix | None):
        self.cfg = cfg
        self.W_within = W_within if cfg.use_within_edges else None
        self.W_cross = W_cross if cfg.use_cross_edges else None
        self.a_W = cfg.a_within
        self.a_X = cfg.a_cross
        self.pairs = np.zeros((0, len(self.PAIR_FIELDS)))  # (P, 8) recorded (components, realised) rows
        self.n_refits = 0

    def set_cross(self, W_cross: sp.csr_matrix | None) -> None:
        self.W_cross = W_cross if self.cfg.use_cross_edges else None

    # --- propagation and fusion -----------------------------------------------------------------
    def components(self, stats: TaskStats, step: int, rows: np.ndarray | None = None) -> Components:
        """Fusion terms at ``step`` for ``rows`` (default: every task)."""
        n_all = stats.n_at(step)
        nm_all = n_all * stats.m
        take = (lambda a: a) if rows is None else (lambda a: a[rows])

        def propagate(W: sp.csr_matrix | None) -> tuple[np.ndarray, np.ndarray]:
            if W is None:
                size = len(n_all) if rows is None else len(rows)
                return np.zeros(size), np.zeros(size)
            W_rows = W if rows is None else W[rows]
            return W_rows @ n_all, W_rows @ nm_all  # N_r, N_r v_r

        N_W, S_W = propagate(self.W_within)
        N_X, S_X = propagate(self.W_cross)
        return Components(take(n_all), take(stats.m), N_W, S_W, N_X, S_X, stats.v0())

    def fuse(self, c: Components) -> tuple[np.ndarray, np.ndarray]:
        """v_hat and uncertainty u from the fusion terms."""
        v_hat = (c.n * c.m + self.a_W * c.S_W + self.a_X * c.S_X + c.v0) / (
            c.n + self.a_W * c.N_W + self.a_X * c.N_X + 1.0
        )
        u = (1.0 + c.n + c.N_W + c.N_X) ** -0.5
        return v_hat, u

    def predict_frame(self, stats: TaskStats, step: int, task_ids: np.ndarray) -> pd.DataFrame:
        """Every task: task_id, predicted_variance, uncertainty, own, within, cross (NaN = no evidence)."""
        c = self.components(stats, step)
        v_hat, u = self.fuse(c)
        return pd.DataFrame(
            {
                "task_id": task_ids,
                "predicted_variance": v_hat,
                "uncertainty": u,
                "own": np.where(c.n > 0, c.m, np.nan),
                "within": Components.ratio(c.S_W, c.N_W),
                "cross": Components.ratio(c.S_X, c.N_X),
            }
        )

    # --- online refit of a_W, a_X ----------------------------------------------------------------
    def record(self, c: Components, realised: np.ndarray) -> None:
        """Store (fusion terms before the visit, realised variance) pairs for the refit."""
        rows = np.column_stack([c.n, c.m, c.N_W, c.S_W, c.N_X, c.S_X, np.full(len(c.n), c.v0), realised])
        self.pairs = np.vstack([self.pairs, rows])[-self.cfg.refit_window :]

    def refit(self) -> bool:
        """Bounded (a >= 0) least-squares refit of (a_W, a_X) once enough pairs exist; returns whether it ran.

        Minimises sum_k (v_hat_k(a) - y_k)^2 + ridge terms pulling a toward the configured start values.
        (Multiplying the fusion out would make it linear in a, but y then sits on both sides and its
        sampling noise biases a toward 0, so the residual is kept in its ratio form.)
        """
        if len(self.pairs) < self.cfg.refit_min_pairs:
            return False
        n, m, N_W, S_W, N_X, S_X, v0, y = self.pairs.T
        use = np.array([self.W_within is not None, self.W_cross is not None])
        if not use.any():
            return False
        a0 = np.array([self.cfg.a_within, self.cfg.a_cross])[use]
        N = np.column_stack([N_W, N_X])[:, use]  # (P, r) evidence per relation
        S = np.column_stack([S_W, S_X])[:, use]  # (P, r) N_r v_r
        own = n * m + v0

        def v_hat(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            denominator = n + N @ a + 1.0
            return (own + S @ a) / denominator, denominator

        def jacobian_scale(a: np.ndarray) -> np.ndarray:
            v, denominator = v_hat(a)
            J = (S - v[:, None] * N) / denominator[:, None]  # d v_hat / d a, (P, r)
            return np.sqrt(self.cfg.refit_ridge * np.maximum((J**2).mean(axis=0), 1e-12))

        ridge = jacobian_scale(a0)

        def residuals(a: np.ndarray) -> np.ndarray:
            return np.concatenate([v_hat(a)[0] - y, ridge * (a - a0)])

        start = np.array([self.a_W, self.a_X])[use]
        fit = least_squares(residuals, start, bounds=(0.0, np.inf), method="trf")
        values = np.array([self.a_W, self.a_X])
        values[use] = fit.x
        self.a_W, self.a_X = float(values[0]), float(values[1])
        self.n_refits += 1
        return True

    def state_dict(self) -> dict:
        return {"a_W": self.a_W, "a_X": self.a_X, "pairs": self.pairs.copy(), "n_refits": self.n_refits}

    def load_state_dict(self, state: dict) -> None:
        self.a_W, self.a_X = float(state["a_W"]), float(state["a_X"])
        self.pairs = np.array(state["pairs"], copy=True).reshape(-1, len(self.PAIR_FIELDS))
        self.n_refits = int(state["n_refits"])
