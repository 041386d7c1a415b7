"""OutcomeModel: predicts every task's success rate, and from it its GRPO-group reward variance.

EnvSched's predictor (DESIGN.md, "Prediction"). The paper's predictor averages each task's noisy
observed group variance; this one models the outcome that causes the variance, with dynamics:

    z_i(t) = f_t(x_i) + b_i,      p_i = sigmoid(z_i),      v_hat_i = c_e(i) (G - 1)/G E[p_i (1 - p_i)]

* f_t, the global model: an online ridge logistic regression over task features x_i (intercept,
  environment, tools, tool base names, the standardised cross-env signature, the text embedding),
  refit after every step on the recent groups of *all* tasks, each weighted global_decay^age. It
  tracks the moving policy: what one task's rollouts teach about its environment, tools and kind of
  interaction reaches every task that shares them, seen or not.
* b_i, the task's own residual: a Gaussian posterior N(m_i, 1/P_i) over how much easier or harder
  the task is than f predicts, updated by a Laplace (Newton) step on each visit's binomial
  likelihood, its precision forgotten at residual_decay per step of age (the policy moves).
* Empirical Bayes (fit_residual_prior, default): after each update the propagation weights a_W, a_X and
  the residuals' prior sd tau maximise the marginal likelihood of every recorded first visit's outcome
  under the prediction made before it, int Binomial(k; G, sigmoid(f + b)) N(b; b0, 1/Q0) db (16-point
  Gauss-Hermite). A world whose tasks share little with their neighbours learns small a_* and a wide
  tau, so one all-pass group already says "all-pass"; one with shared structure learns the opposite.
  (adapt_residual_prior, the older EM step for tau alone, runs only when this fit is off.)
* Propagation (the dual-relation graph): an unseen or stale task's residual prior is the
  precision-weighted residual of its neighbours along W and X,
      b0_i = (a_W sum_j w_ij P_j m_j + a_X sum_j x_ij P_j m_j) / (a_W N_W + a_X N_X + P_0),
  with N_r = sum_j w_ij P_j, so a task moves toward its observed neighbours, not across unrelated ones.
  Its prior precision is P_0 + a_W N_W + a_X N_X (P_0 = tau^-2).
* c_e, the dispersion of environment e: realised group variance / (mean (1 - mean)) over its groups,
  shrunk to the global ratio; 1 for binary rewards, about 1/K for K equally weighted partial checks.
  This is "variance from the success rate, corrected for graded rewards".
* E[p(1 - p)] integrates over the posterior of z (5-point Gauss-Hermite), so an uncertain prediction
  is not taken at face value; the optimistic variance used by coverage moves z toward 0 (the most
  informative logit) by ``optimism`` posterior standard deviations.

Everything is a few sparse mat-vecs over the catalogue, so predicting 1M tasks stays well under a
second; the refit touches only the last ``global_window`` groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import minimize

from .catalog import TaskCatalog, tool_name_parts
from .config import SchedulerConfig
from .environment_level import EnvironmentLevel
from .graph import concatenated_ranges
from .reward_kind import ObservedRewardKind
from .state_fit import StateMismatch

# Gauss-Hermite (probabilists') nodes and weights for E over z ~ N(mean, sd^2), 5 points, in float32.
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(5)
_GH_NODES, _GH_WEIGHTS = _GH_NODES.astype(np.float32), (_GH_WEIGHTS / _GH_WEIGHTS.sum()).astype(np.float32)
NEWTON_STEPS = 8  # Newton iterations of a visit's Laplace update (all-pass under a wide prior needs ~6)
MIN_PRECISION = 1e-9  # floor of a visit's message precision (an extreme all-pass group carries almost none)
# Gauss-Hermite nodes for the marginal likelihood of a first visit (binomial x normal prior), 16 points.
_ML_NODES, _ML_WEIGHTS = np.polynomial.hermite_e.hermegauss(16)
_ML_LOG_WEIGHTS = np.log(_ML_WEIGHTS / _ML_WEIGHTS.sum())
# E_mean, E_var: the environment level's posterior before the visit (environment_level; 0, 0 without it), last so
# that older 7-column records pad with zeros
FIRST_VISIT_FIELDS = ("f", "N_W", "S_W", "N_X", "S_X", "mean", "trials", "E_mean", "E_var")
PRIOR_FIT_LOG_SD = 1.0  # sd (log scale) of the pull of fitted (a_W, a_X, tau) toward the configured values
DENSE_BLOCK = 65_536  # rows per block of f's dense part: a float64 copy of one block, not of all N rows
SPARSE_OPERAND_SHARE = 0.25  # below this share of seen tasks, propagation sums only the edges into seen ones
PRIOR_FIT_BOUNDS = np.array([(1e-3, 20.0), (1e-3, 20.0), (0.1, 8.0)])  # a_W, a_X, tau (logits)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free logistic


def bernoulli_variance(z: np.ndarray) -> np.ndarray:
    """p (1 - p) at logit z as sigmoid(z) sigmoid(-z): stays > 0 where 1 - sigmoid(z) rounds to 0."""
    return sigmoid(z) * sigmoid(-z)


def _bernoulli_variance32(x: np.ndarray) -> np.ndarray:
    """p (1 - p) at float32 logits x, in place, as e^-|x| / (1 + e^-|x|)^2: stays > 0 to |x| ~ 87, where
    1 - sigmoid(x) would round to 0. Float32 because these are the largest blocks of a prediction (at 1M tasks
    the 5-point block took 0.3 s of select's 0.6 s budget in float64 tanh, 0.09 s like this); relative error
    ~1e-6."""
    np.abs(x, out=x)
    np.negative(x, out=x)
    np.exp(x, out=x)
    denominator = 1.0 + x
    denominator *= denominator
    x /= denominator
    return x


def expected_bernoulli_variance(z: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """E[p (1 - p)] over logit ~ N(z, sd^2), 5-point Gauss-Hermite."""
    x = z.astype(np.float32)[:, None] + sd.astype(np.float32)[:, None] * _GH_NODES[None, :]
    return (_bernoulli_variance32(x) @ _GH_WEIGHTS).astype(float)


def bernoulli_variance_fast(z: np.ndarray) -> np.ndarray:
    """p (1 - p) at logits z, float64 out, computed in float32 (for whole-catalogue vectors)."""
    return _bernoulli_variance32(z.astype(np.float32)).astype(float)


class ColumnIndex:
    """Where each column's entries sit in a fixed CSR matrix, to find the edges into a few columns without
    reading every edge's column (at 1M tasks that read took 30 ms of select per relation)."""

    def __init__(self, W: sp.csr_matrix):
        self.nnz = W.nnz
        self.order = np.argsort(W.indices, kind="stable").astype(np.int64 if W.nnz >= 2**31 else np.int32)
        self.ptr = np.r_[0, np.cumsum(np.bincount(W.indices, minlength=W.shape[1]))]

    def entries(self, cols: np.ndarray) -> np.ndarray | None:
        """Positions of the entries in ``cols``, ascending; None where they are many (a full read is as fast)."""
        start, count = self.ptr[cols], self.ptr[cols + 1] - self.ptr[cols]
        if count.sum() > self.nnz // 8:
            return None
        return np.sort(self.order[concatenated_ranges(start, count)])


def _sum_over_nonzero_columns(
    W: sp.csr_matrix, P: np.ndarray, Pm: np.ndarray, into: ColumnIndex | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(W @ P, W @ Pm) for P zero outside the seen tasks (Pm zero where P is), summing only the edges into seen
    tasks: at 1M tasks a few thousand are seen, and the full mat-vec walked 8M edges per relation. The same
    float64 products added in the same order as csr_matvec's (the skipped terms are 0), so the same sums.
    ``into``: W's column index, which finds those edges without reading every edge's column."""
    hit = None if into is None else into.entries(np.flatnonzero(P != 0))
    if hit is None:
        hit = np.flatnonzero((P != 0)[W.indices])
    row = np.searchsorted(W.indptr, hit, side="right") - 1
    weight, col = W.data[hit].astype(float), W.indices[hit]
    n = W.shape[0]
    return (
        np.bincount(row, weights=weight * P[col], minlength=n),
        np.bincount(row, weights=weight * Pm[col], minlength=n),
    )


def task_features(catalog: TaskCatalog) -> sp.csr_matrix:
    """(N, F) sparse part of x_i: intercept, environment one-hot, tools and tool base names (row shares).

    A tool's base name is the part after its last '.', so "env3.get_order" and "env9.get_order" share
    one (the same operation offered by two environments); a task's tool columns sum to 1.
    """
    n = len(catalog)
    intercept = sp.csr_matrix(np.ones((n, 1)))
    env = sp.csr_matrix((np.ones(n), (np.arange(n), catalog.env)), shape=(n, catalog.n_envs))
    _, base_names = tool_name_parts(catalog.tool_names)
    base_code, base_vocab = pd.factorize(base_names) if len(base_names) else (np.zeros(0, np.int64), [])
    to_base = sp.csr_matrix(
        (np.ones(len(base_code)), (np.arange(len(base_code)), base_code)),
        shape=(len(catalog.tool_names), len(base_vocab)),
    )
    tools = catalog.tools.astype(np.float64)
    count = np.asarray(tools.getnnz(axis=1), dtype=float)
    share = sp.diags(np.divide(1.0, count, out=np.zeros(n), where=count > 0))
    base = (tools @ to_base).minimum(1.0)
    return sp.hstack([intercept, env, share @ tools, share @ base], format="csr")


@dataclass
class Prediction:
    """Per-task outputs of the outcome model at one step (all arrays aligned with the catalogue)."""

    z: np.ndarray  # posterior mean logit f + b
    sd: np.ndarray  # posterior sd of the residual (the logit's uncertainty)
    v_hat: np.ndarray  # expected group variance
    v_opt: np.ndarray  # optimistic expected group variance (coverage)
    own_sd: np.ndarray  # sd of the own-history message (inf where never seen)
    b_W: np.ndarray  # within-propagated residual (NaN without evidence)
    b_X: np.ndarray  # cross-propagated residual
    f: np.ndarray  # global-model logit
    frontier: np.ndarray  # E[p (1 - p)] under the posterior (d E[reward] / dz), no dispersion


def environment_verifier_kind(catalog: TaskCatalog) -> np.ndarray:
    """Per environment, the verifier kind most of its tasks have, numbered 0..K-1 (all 0 when there is one kind)."""
    kinds = catalog.verifier_kind
    if kinds is None or len(kinds) == 0:
        return np.zeros(catalog.n_envs, dtype=np.int64)
    counts = sp.csr_matrix(
        (np.ones(len(kinds)), (catalog.env, kinds)), shape=(catalog.n_envs, int(kinds.max()) + 1)
    ).toarray()
    # renumbered 0..K-1, so "several kinds" is exactly max() > 0
    return np.unique(counts.argmax(axis=1), return_inverse=True)[1].astype(np.int64)


class OutcomeModel:
    """Global online logistic model + per-task residual posteriors + residual propagation along W and X."""

    def __init__(self, catalog: TaskCatalog, cfg: SchedulerConfig, W_within, W_cross):
        self.catalog, self.cfg = catalog, cfg
        self.W_within = W_within if cfg.use_within_edges else None
        self.W_cross = W_cross if cfg.use_cross_edges else None
        # W_within is fixed (W_cross is re-ranked as rewards come in): index its columns once
        self._within_columns = ColumnIndex(self.W_within) if self.W_within is not None else None
        n = len(catalog)
        self.features = task_features(catalog)  # (N, F) sparse part of x_i
        self.n_sparse = self.features.shape[1]
        n_tools = len(catalog.tool_names)
        shared = np.r_[
            np.arange(1, 1 + catalog.n_envs), np.arange(1 + catalog.n_envs + n_tools, self.n_sparse)
        ]
        self._shared_features = self.features[:, shared].tocsr()  # environment and tool base names
        sizes = np.bincount(catalog.env, minlength=catalog.n_envs).astype(float)
        # transfer_per_environment: each environment's frontier mass per task of it (mean size / its size)
        self._env_mass_scale = sizes.mean() / np.maximum(sizes, 1) if cfg.transfer_per_environment else None
        dense = (catalog.signature.shape[1], catalog.embeddings.shape[1]) if cfg.use_global_model else (0, 0)
        self.n_dense = dense
        self.w = np.zeros(self.n_sparse + sum(dense))  # global weights, intercept first
        self.w_trend = np.zeros(1 + catalog.n_envs)  # slopes per step of age (global, per environment)
        self.m = np.zeros(n)  # own residual message mean
        self.P = np.zeros(n)  # own residual message precision, as of last_step
        self.last_step = np.full(n, -1, dtype=np.int64)
        n_env = catalog.n_envs
        self.disp_num = np.zeros(n_env)  # sum of realised variances per environment
        self.disp_den = np.zeros(n_env)  # sum of mean (1 - mean) per environment
        self.disp_groups = np.zeros(n_env)  # groups with mean in (0, 1) per environment
        self.env_kind = (
            environment_verifier_kind(catalog) if cfg.dispersion_by_verifier else np.zeros(n_env, int)
        )
        # a catalogue that does not say how its tasks are rewarded: each environment's rewards say it
        self.reward_kind = (
            ObservedRewardKind(n_env)
            if cfg.dispersion_by_verifier and catalog.verifier_kind is None
            else None
        )
        # recent groups for the global refit: task row, step, mean reward, trials
        self.buffer = np.zeros((0, 4))
        # (logit, sd) each row of the last update was expected at: the shared part refit, its own prior
        self.visit_prior = (np.zeros(0), np.zeros(0))
        self.n_fits = 0
        self.tau = float(cfg.residual_prior_sd)  # prior sd of b_i, re-estimated online (empirical Bayes)
        self.a_W, self.a_X = float(cfg.a_within), float(cfg.a_cross)  # propagation weights, fitted online
        # the environment level u_e of b_i = u_e + d_i (environment_level); None: the residual's prior is N(0, tau^2)
        self.level = (
            EnvironmentLevel(catalog.env, catalog.n_envs, cfg.environment_prior_sd)
            if cfg.environment_level
            else None
        )
        # first visits (prediction inputs before the visit, outcome) for the marginal-likelihood fit
        self.first_visits = np.zeros((0, len(FIRST_VISIT_FIELDS)))
        self._f: np.ndarray | None = None  # f(x_i) of every task under the current weights

    @property
    def prior_sd(self) -> float:
        """sd of the residual of a task nothing is known about: tau, and the environment level's tau_env."""
        return float(np.hypot(self.tau, self.level.tau_env)) if self.level is not None else self.tau

    def set_cross(self, W_cross) -> None:
        self.W_cross = W_cross if self.cfg.use_cross_edges else None

    # --- global model ---------------------------------------------------------------------------
    def _dense(self, rows: np.ndarray | None) -> np.ndarray:
        sig, emb = self.catalog.signature, self.catalog.embeddings
        if rows is not None:
            sig, emb = sig[rows], emb[rows]
        return sig, emb

    def global_logit(self, rows: np.ndarray | None = None, w: np.ndarray | None = None) -> np.ndarray:
        """f(x_i) for ``rows`` (default: every task)."""
        if rows is None and w is None:  # every task: cached until the weights change (the next refit)
            if self._f is None:
                self._f = self._logit(None, self.w)
            return self._f
        return self._logit(rows, self.w if w is None else w)

    def _logit(self, rows: np.ndarray | None, w: np.ndarray) -> np.ndarray:
        X = self.features if rows is None else self.features[rows]
        f = np.asarray(X @ w[: self.n_sparse], dtype=float)
        if self.cfg.use_global_model:
            sig, emb = self._dense(rows)
            k = self.n_sparse
            w_sig, w_emb = w[k : k + self.n_dense[0]], w[k + self.n_dense[0] :]
            for lo in range(0, len(f), DENSE_BLOCK):  # float32 @ float64 copies its operand as float64
                block = slice(lo, lo + DENSE_BLOCK)
                f[block] = f[block] + sig[block] @ w_sig + emb[block] @ w_emb
        return f

    def _fit_global(self, step: int) -> None:
        """Ridge logistic regression of the buffered groups' mean rewards on x_i, offset by b_i."""
        if len(self.buffer) == 0:
            return
        rows = self.buffer[:, 0].astype(np.int64)
        age = np.maximum(step - self.buffer[:, 1], 0)
        y, trials = self.buffer[:, 2], self.buffer[:, 3]
        weight = trials * self.cfg.global_decay**age
        X = self.features[rows]
        if not self.cfg.use_global_model:  # intercept + environment only
            keep = np.zeros(self.n_sparse, dtype=bool)
            keep[: 1 + self.catalog.n_envs] = True
            X = X[:, np.flatnonzero(keep)]
            n_w = X.shape[1]
            dense = np.zeros((len(rows), 0))
        else:
            sig, emb = self._dense(rows)
            dense = np.hstack([sig, emb]).astype(float)
            n_w = self.n_sparse
        offset = self.residual_mean(step, rows)
        n_base, n_trend = n_w, (len(self.w_trend) if self.cfg.global_trend else 0)
        if n_trend:  # -age x (intercept, environment), X's first columns: zero at prediction time (age 0)
            trend = (sp.diags(-age) @ X[:, :n_trend]).tocsr().sorted_indices()  # sorted: sums in column order
            X = sp.hstack([X, trend], format="csr")
        n_w = n_base + n_trend
        ridge = np.full(n_w + dense.shape[1], self.cfg.global_ridge)
        ridge[0] = 1e-6  # the intercept is barely penalised
        start = np.concatenate([self.w[:n_base], self.w_trend[:n_trend], self.w[self.n_sparse :]])
        XT, denseT = X.T.tocsr(), np.ascontiguousarray(dense.T)  # transposed once, not per evaluation

        def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
            z = X @ w[:n_w] + dense @ w[n_w:] + offset
            nll = np.sum(weight * (np.logaddexp(0.0, z) - y * z))
            r = weight * (sigmoid(z) - y)
            grad = np.concatenate([XT @ r, denseT @ r]) + ridge * w
            return nll + 0.5 * np.sum(ridge * w * w), grad

        fit = minimize(loss, start, jac=True, method="L-BFGS-B", options={"maxiter": self.cfg.global_iters})
        self._f = None
        self.w[:n_base] = fit.x[:n_base]
        self.w_trend[:n_trend] = fit.x[n_base:n_w]
        self.w[self.n_sparse :] = fit.x[n_w:]
        self.n_fits += 1

    # --- residuals ------------------------------------------------------------------------------
    def own_precision(self, step: int, rows: np.ndarray | None = None) -> np.ndarray:
        """P_i forgotten to ``step``: P_i residual_decay^(step - last_step_i); 0 for unseen tasks."""
        P, last = (self.P, self.last_step) if rows is None else (self.P[rows], self.last_step[rows])
        out = np.zeros(len(P))
        seen = np.flatnonzero(last >= 0)  # few at 1M tasks: decay only those
        out[seen] = P[seen] * self.cfg.residual_decay ** np.maximum(step - last[seen], 0)
        return out

    def _propagate(self, W, Pm: np.ndarray, P: np.ndarray, rows, into=None) -> tuple[np.ndarray, np.ndarray]:
        if W is None:
            size = len(P) if rows is None else len(rows)
            return np.zeros(size), np.zeros(size)
        if rows is None and np.count_nonzero(P) < SPARSE_OPERAND_SHARE * len(P):
            return _sum_over_nonzero_columns(W, P, Pm, into)
        W_rows = W if rows is None else W[rows]
        both = W_rows @ np.column_stack([P, Pm])  # one pass over the matrix for N_r and N_r b_r
        return both[:, 0], both[:, 1]

    def _environment_prior(self, rows) -> tuple[np.ndarray, np.ndarray]:
        """(E_mean, E_var) of the environment level u_e per task of ``rows``; zeros without ``environment_level``."""
        if self.level is None:
            size = len(self.m) if rows is None else len(rows)
            return np.zeros(size), np.zeros(size)
        return self.level.prior(rows)

    def _level_prior(self, E_mean: np.ndarray, E_var: np.ndarray, tau: float):
        """(precision, precision x mean) of a task's residual before its neighbours: N(0, tau^2) without an
        environment level, else N(E_mean, E_var + tau^2), the level's posterior widened by d_i's tau^2."""
        if self.level is None:
            return np.full(len(E_mean), tau**-2), np.zeros(len(E_mean))
        precision = 1.0 / (E_var + tau**2)
        return precision, precision * E_mean

    def residual_prior(self, step: int, rows: np.ndarray | None = None, P: np.ndarray | None = None):
        """(b0, prior precision, N_W, S_W, N_X, S_X, E_mean, E_var) of the residual from its environment level and
        its neighbours along W and X. ``P``: every task's own precision at ``step`` when the caller has it already."""
        P = self.own_precision(step) if P is None else P
        Pm = P * self.m
        N_W, S_W = self._propagate(self.W_within, Pm, P, rows, self._within_columns)
        N_X, S_X = self._propagate(self.W_cross, Pm, P, rows)
        E_mean, E_var = self._environment_prior(rows)
        P0, P0_b = self._level_prior(E_mean, E_var, self.tau)
        a_W, a_X = self.a_W, self.a_X
        precision = P0 + a_W * N_W + a_X * N_X
        return (P0_b + a_W * S_W + a_X * S_X) / precision, precision, N_W, S_W, N_X, S_X, E_mean, E_var

    def residual_mean(self, step: int, rows: np.ndarray | None = None) -> np.ndarray:
        b0, Q0, *_ = self.residual_prior(step, rows)
        P = self.own_precision(step, rows)
        m = self.m if rows is None else self.m[rows]
        return (Q0 * b0 + P * m) / (Q0 + P)

    # --- dispersion -------------------------------------------------------------------------------
    def dispersion(self) -> np.ndarray:
        """c_e per environment: realised variance / mean (1 - mean), shrunk to its verifier kind's pooled ratio
        by dispersion_prior_groups pseudo-groups of the typical group's mean (1 - mean); a kind's ratio is shrunk
        the same way to the ratio pooled over every kind, which itself starts at 1 (binary rewards)."""
        k = self.cfg.dispersion_prior_groups
        n_groups = self.disp_groups.sum()
        unit = self.disp_den.sum() / n_groups if n_groups > 0 else 0.25  # one group's mean (1 - mean)
        pooled = (self.disp_num.sum() + k * unit) / (self.disp_den.sum() + k * unit)
        prior = np.full(len(self.disp_num), pooled)
        kind = self.env_kind if self.reward_kind is None else self.reward_kind.kinds()
        if kind.max(initial=0) > 0:  # several kinds: each environment shrinks to its kind's ratio
            kind_num = np.bincount(kind, weights=self.disp_num)
            kind_den = np.bincount(kind, weights=self.disp_den)
            prior = ((kind_num + k * unit * pooled) / (kind_den + k * unit))[kind]
        return (self.disp_num + k * unit * prior) / (self.disp_den + k * unit)

    # --- prediction -------------------------------------------------------------------------------
    def predict(self, step: int) -> Prediction:
        cfg = self.cfg
        f = self.global_logit()
        P = self.own_precision(step)
        b0, Q0, N_W, S_W, N_X, S_X, *_ = self.residual_prior(step, P=P)
        Q = Q0 + P
        z = f + (Q0 * b0 + P * self.m) / Q
        sd = Q**-0.5
        c = self.group_scale()
        frontier = expected_bernoulli_variance(z, sd)  # how fast the expected reward moves with z
        v_hat = c * frontier
        z_opt = np.sign(z) * np.maximum(np.abs(z) - cfg.optimism * sd, 0.0)
        v_opt = c * bernoulli_variance_fast(z_opt)
        ratio = lambda s, n: np.divide(s, n, out=np.full(len(n), np.nan), where=n > 0)  # noqa: E731
        own_sd = np.divide(1.0, np.sqrt(P), out=np.full(len(P), np.inf), where=P > 0)
        return Prediction(z, sd, v_hat, v_opt, own_sd, ratio(S_W, N_W), ratio(S_X, N_X), f, frontier)

    def frontier_transfer(self, v: np.ndarray) -> np.ndarray:
        """T_i = sum over i's shared features (its environment, its tools' base names) of the predicted variance
        of every catalogue task on that feature, each task weighted by its share of the feature (x_i . X^T v);
        with ``transfer_per_environment`` an environment's mass is scaled by mean environment size / its size.
        A group's GRPO push moves every skill the task loads on, and what it gains elsewhere is large where many
        tasks at the frontier (p (1 - p) large) load on the same skills; a task's own residual does not transfer."""
        X = self._shared_features
        mass = X.T @ v
        if self._env_mass_scale is not None:  # the environment columns come first
            mass[: self.catalog.n_envs] *= self._env_mass_scale
        return np.asarray(X @ mass, dtype=float)

    def group_scale(self, rows: np.ndarray | None = None) -> np.ndarray:
        """c_e (G - 1)/G per task of ``rows`` (default: every task): a group's variance per unit of p (1 - p)."""
        g = self.cfg.group_size
        env = self.catalog.env if rows is None else self.catalog.env[rows]
        return self.dispersion()[env] * (g - 1) / g

    def visit_variance(self, rows: np.ndarray) -> np.ndarray:
        """The variance predicted for the last update's groups (``rows``) just before their visit: c_e (G - 1)/G
        E[p (1 - p)] under ``visit_prior``."""
        z, sd = self.visit_prior
        return self.group_scale(rows) * expected_bernoulli_variance(z, sd)

    def variance_at(self, z: np.ndarray) -> np.ndarray:
        """Expected group variance at logit z (no posterior spread), per task."""
        return self.group_scale() * bernoulli_variance_fast(z)

    # --- learning ---------------------------------------------------------------------------------
    def read_rewards(self, env: np.ndarray, reward: np.ndarray) -> None:
        """Rollouts of environments ``env`` returned ``reward`` (floors read away): each environment's reward kind,
        where the catalogue names none (``reward_kind``)."""
        if self.reward_kind is not None:
            self.reward_kind.update(env, reward)

    def update(self, rows: np.ndarray, step: int, mean: np.ndarray, variance: np.ndarray, trials: np.ndarray):
        """Fold one step's groups (unique task rows) into the global model, then residuals and dispersion.

        The global model is refit first, so a first visit's outcome is explained by what the task shares
        with others before the rest is attributed to the task itself (its residual).
        """
        if self.cfg.fit_residual_prior:
            self._record_first_visits(rows, step, mean, trials)
        fresh = np.column_stack([rows, np.full(len(rows), step), mean, trials]).astype(float)
        self.buffer = np.vstack([self.buffer, fresh])[-self.cfg.global_window :]
        self._fit_global(step)
        if self.level is not None:
            self._refresh_level(step)
        f = self.global_logit(rows)
        b0, Q0, *_ = self.residual_prior(step, rows)
        P = self.own_precision(step, rows)
        Qp = Q0 + P  # prior of this visit: neighbours + own history so far
        mu = (Q0 * b0 + P * self.m[rows]) / Qp
        self.visit_prior = (f + mu, Qp**-0.5)
        b = mu.copy()
        for _ in range(
            NEWTON_STEPS
        ):  # MAP of N(b; mu, 1/Qp) x Binomial(mean * trials; trials, sigmoid(f + b))
            p = sigmoid(f + b)
            grad = trials * (mean - p) - Qp * (b - mu)
            b = b + grad / (trials * bernoulli_variance(f + b) + Qp)
        Q = Qp + trials * bernoulli_variance(f + b)  # Laplace posterior precision
        P_new = np.maximum(Q - Q0, MIN_PRECISION)  # the own-history message: posterior / neighbour prior
        self.m[rows] = (Q * b - Q0 * b0) / P_new
        self.P[rows] = P_new
        self.last_step[rows] = np.maximum(self.last_step[rows], step)
        np.add.at(self.disp_num, self.catalog.env[rows], variance)
        np.add.at(self.disp_den, self.catalog.env[rows], mean * (1.0 - mean))
        np.add.at(self.disp_groups, self.catalog.env[rows], (mean > 0) & (mean < 1))
        if self.cfg.fit_residual_prior:
            self._fit_residual_prior()
        elif self.cfg.adapt_residual_prior:
            self._update_tau(step)
        self.global_logit()  # f of every task under the new weights, computed here so that select is cheap

    def _record_first_visits(self, rows: np.ndarray, step: int, mean: np.ndarray, trials: np.ndarray) -> None:
        """Keep what predicted each never-seen task before its first visit (f, neighbour sums), and the outcome."""
        new = self.last_step[rows] < 0
        if not new.any():
            return
        first = rows[new]
        _, _, N_W, S_W, N_X, S_X, E_mean, E_var = self.residual_prior(step, first)
        f = self.global_logit(first)
        record = np.column_stack([f, N_W, S_W, N_X, S_X, mean[new], trials[new], E_mean, E_var])
        self.first_visits = np.vstack([self.first_visits, record])[-self.cfg.prior_fit_window :]

    def first_visit_log_likelihood(self, a_W: float, a_X: float, tau: float) -> float:
        """sum over recorded first visits of log int Binomial(outcome; sigmoid(f + b)) N(b; b0, 1/Q0) db, with
        the prior b0, Q0 of `residual_prior` under (a_W, a_X, tau) (16-point Gauss-Hermite); the environment
        level's posterior is the one recorded before the visit."""
        f, N_W, S_W, N_X, S_X, mean, trials, E_mean, E_var = self.first_visits.T
        P0, P0_b = self._level_prior(E_mean, E_var, tau)
        Q0 = P0 + a_W * N_W + a_X * N_X
        z = (f + (P0_b + a_W * S_W + a_X * S_X) / Q0)[:, None] + Q0[:, None] ** -0.5 * _ML_NODES[None, :]
        successes = (mean * trials)[:, None]
        log_lik = successes * z - trials[:, None] * np.logaddexp(0.0, z)  # binomial, up to a constant
        log_lik += _ML_LOG_WEIGHTS[None, :]
        top = log_lik.max(axis=1)
        return float(np.sum(top + np.log(np.exp(log_lik - top[:, None]).sum(axis=1))))

    def _prior_fit_ready(self) -> bool:
        """Enough first visits for the empirical-Bayes fits: prior_fit_min_visits, or half a smaller catalogue."""
        needed = max(1, min(self.cfg.prior_fit_min_visits, len(self.catalog) // 2))
        return self.cfg.fit_residual_prior and len(self.first_visits) >= needed

    def _refresh_level(self, step: int) -> None:
        """The environment level's posteriors from the buffered groups at the current f; tau_env is refit when the
        other empirical-Bayes weights are."""
        rows = self.buffer[:, 0].astype(np.int64)
        weight = self.cfg.residual_decay ** np.maximum(step - self.buffer[:, 1], 0)
        mean, trials = self.buffer[:, 2], self.buffer[:, 3]
        f = self.global_logit()[rows]
        self.level.refresh(rows, weight, mean * trials, trials, f, self.tau, fit=self._prior_fit_ready())

    def _fit_residual_prior(self) -> None:
        """Empirical Bayes for how much a task shares with its neighbours: (a_W, a_X, tau) maximise the
        marginal likelihood of the first visits' outcomes under the predictions made before them (a log-normal
        pull toward the configured values keeps them put while there are few visits)."""
        if not self._prior_fit_ready():
            return
        use = np.array([self.W_within is not None, self.W_cross is not None, True])
        start = np.log([self.cfg.a_within, self.cfg.a_cross, self.cfg.residual_prior_sd])
        current = np.log(np.maximum([self.a_W, self.a_X, self.tau], 1e-6))

        def objective(x: np.ndarray) -> float:
            theta = start.copy()
            theta[use] = x
            penalty = 0.5 * np.sum(((x - start[use]) / PRIOR_FIT_LOG_SD) ** 2)
            return penalty - self.first_visit_log_likelihood(*np.exp(theta))

        bounds = [(np.log(lo), np.log(hi)) for lo, hi in PRIOR_FIT_BOUNDS[use]]
        fit = minimize(
            objective, np.clip(current[use], *np.array(bounds).T), method="L-BFGS-B", bounds=bounds
        )
        theta = np.log(np.maximum([self.a_W, self.a_X, self.tau], 1e-6))
        theta[use] = fit.x
        self.a_W, self.a_X, self.tau = (float(v) for v in np.exp(theta))

    def _update_tau(self, step: int) -> None:
        """EM step for the residuals' prior variance: tau^2 = mean over seen tasks of E[b_i^2] (posterior mean^2
        + posterior variance), with the configured sd worth residual_prior_tasks pseudo-tasks."""
        seen = np.flatnonzero(self.last_step >= 0)
        b0, Q0, *_ = self.residual_prior(step, seen)
        P = self.own_precision(step, seen)
        Q = Q0 + P
        b = (Q0 * b0 + P * self.m[seen]) / Q
        k0 = self.cfg.residual_prior_tasks
        tau2 = (k0 * self.cfg.residual_prior_sd**2 + np.sum(b * b + 1.0 / Q)) / (k0 + len(seen))
        self.tau = float(np.sqrt(tau2))

    # --- persistence -------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "w": self.w.copy(),
            "w_trend": self.w_trend.copy(),
            "m": self.m.copy(),
            "P": self.P.copy(),
            "last_step": self.last_step.copy(),
            "disp_num": self.disp_num.copy(),
            "disp_den": self.disp_den.copy(),
            "disp_groups": self.disp_groups.copy(),
            "buffer": self.buffer.copy(),
            "n_fits": self.n_fits,
            "tau": self.tau,
            "a_W": self.a_W,
            "a_X": self.a_X,
            "first_visits": self.first_visits.copy(),
            # flat, like every other key: the state is plain arrays and scalars
            **(
                {f"level_{k}": v for k, v in self.level.state_dict().items()}
                if self.level is not None
                else {}
            ),
            **(
                {f"reward_kind_{k}": v for k, v in self.reward_kind.state_dict().items()}
                if self.reward_kind is not None
                else {}
            ),
        }

    def check_state(self, state: dict) -> None:
        """Raise StateMismatch unless ``state`` is over these tasks and these features (a catalogue
        re-embedded at another dimension, or with tools or environments added, has other features)."""
        if len(state["m"]) != len(self.m) or len(state["w"]) != len(self.w):
            raise StateMismatch(
                f"OutcomeModel: state has {len(state['m'])} tasks / {len(state['w'])} weights, "
                f"this catalogue {len(self.m)} / {len(self.w)}."
            )

    def load_state_dict(self, state: dict) -> None:
        self.check_state(state)
        for key in ("w", "m", "P", "last_step", "disp_num", "disp_den"):
            setattr(self, key, np.array(state[key], copy=True))
        # states saved before disp_groups existed: count every group as one (the old prior's unit)
        self.disp_groups = np.array(state.get("disp_groups", self.disp_den), dtype=float, copy=True)
        self.w_trend = np.array(state.get("w_trend", np.zeros(len(self.w_trend))), dtype=float, copy=True)
        self._f = None
        self.buffer = np.array(state["buffer"], dtype=float, copy=True).reshape(-1, 4)
        self.n_fits = int(state["n_fits"])
        self.tau = float(state["tau"])
        # states saved before the marginal-likelihood fit existed start it from the configured weights
        self.a_W = float(state.get("a_W", self.cfg.a_within))
        self.a_X = float(state.get("a_X", self.cfg.a_cross))
        visits = np.array(
            state.get("first_visits", np.zeros((0, len(FIRST_VISIT_FIELDS)))), dtype=float, copy=True
        )
        visits = visits.reshape(len(visits), -1) if visits.size else np.zeros((0, len(FIRST_VISIT_FIELDS)))
        # records saved before the environment level existed have no E_mean, E_var: no environment evidence
        pad = np.zeros((len(visits), len(FIRST_VISIT_FIELDS) - visits.shape[1]))
        self.first_visits = np.hstack([visits, pad])
        if self.level is not None and "level_tau_env" in state:
            self.level.load_state_dict(
                {k.removeprefix("level_"): v for k, v in state.items() if k.startswith("level_")}
            )
        # a state saved before kinds were read from rewards starts them unread
        if self.reward_kind is not None:
            self.reward_kind = ObservedRewardKind(self.catalog.n_envs)
            kinds = {
                k.removeprefix("reward_kind_"): v for k, v in state.items() if k.startswith("reward_kind_")
            }
            if kinds:
                self.reward_kind.load_state_dict(kinds)
