"""EnvironmentLevel: the part of a task's residual its whole environment shares (``environment_level``).

The outcome model's residual becomes b_i = u_e + d_i: u_e an environment's level, d_i the task's own deviation
(prior sd tau). One all-fail group only bounds a logit from above, so a Gaussian message per group (what the
residual update keeps per task) says little, and W's neighbour average says no more. Ten tasks of one
environment failing every rollout do say it: under u_e = -2 each all-fail group of 8 has probability ~0.5, ten of
them ~0.001. So u_e's posterior is computed on a grid from the recent groups' exact binomial likelihoods, each
with the task's deviation integrated out and its weight forgotten at residual_decay per step of age, under a
N(0, tau_env^2) prior; tau_env is the empirical-Bayes maximiser of the environments' marginal likelihood. A task
whose own groups are in those sums gets the level without them (leave-one-out), so its own rollouts count once.
Each group draws its deviation afresh: a task failing ten times counts a little as ten hints about its environment,
not as one hard task. Integrating a task's deviation once over all its groups measured the same on the tuning
worlds (docs/scheduler.md, "Settled environments"), so the simpler per-group form stays.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize_scalar

# grid over u_e: 1.5 sinh(x) for x in [-3, 3], spacing ~0.15 logits near 0 and ~2 at +-15
_X = np.linspace(-3.0, 3.0, 61)
GRID = 1.5 * np.sinh(_X)
_LOG_DU = np.log(1.5 * np.cosh(_X) * (_X[1] - _X[0]))  # trapezoid-free Riemann weights of the grid
# Gauss-Hermite (probabilists') nodes over the task's deviation d ~ N(0, tau^2), 5 points
_D_NODES, _D_WEIGHTS = np.polynomial.hermite_e.hermegauss(5)
_D_LOG_WEIGHTS = np.log(_D_WEIGHTS / _D_WEIGHTS.sum())
FIT_LOG_SD = 1.0  # sd (log scale) of the pull of the fitted tau_env toward the configured value
FIT_BOUNDS = (0.01, 8.0)  # tau_env (logits)


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    top = a.max(axis=axis, keepdims=True)
    return np.squeeze(top, axis=axis) + np.log(np.exp(a - top).sum(axis=axis))


def _group_log_likelihood(f: np.ndarray, successes: np.ndarray, trials: np.ndarray, tau: float) -> np.ndarray:
    """(groups, grid): log int Binomial(successes; trials, sigmoid(f + u + d)) N(d; 0, tau^2) dd at each grid u,
    up to a constant. Float32, in place: the (groups, grid, nodes) block is the level's whole cost (4096 groups:
    0.04 s, against 0.2 s with float64 logaddexp); the error, ~1e-5 per group, is far below what moves a posterior."""
    f32 = np.float32
    z = (
        f.astype(f32)[:, None, None]
        + GRID.astype(f32)[None, :, None]
        + f32(tau) * _D_NODES.astype(f32)[None, None, :]
    )
    softplus = np.abs(z)  # log(1 + e^z) = max(z, 0) + log1p(e^-|z|)
    np.negative(softplus, out=softplus)
    np.exp(softplus, out=softplus)
    np.log1p(softplus, out=softplus)
    softplus += np.maximum(z, 0)
    log_lik = successes.astype(f32)[:, None, None] * z
    log_lik -= trials.astype(f32)[:, None, None] * softplus
    log_lik += _D_LOG_WEIGHTS.astype(f32)
    top = log_lik.max(axis=2, keepdims=True)
    log_lik -= top
    np.exp(log_lik, out=log_lik)
    return top[..., 0].astype(float) + np.log(log_lik.sum(axis=2, dtype=float))


class EnvironmentLevel:
    """Per environment, the posterior (mean, variance) of u_e; per recently visited task, the same without its
    own groups."""

    def __init__(self, env: np.ndarray, n_envs: int, prior_sd: float):
        self.env, self.n_envs = env, n_envs
        self.prior_sd = float(prior_sd)  # configured tau_env: the fit's starting value and pull
        self.tau_env = float(prior_sd)
        self.mean, self.var = np.zeros(n_envs), np.full(n_envs, self.tau_env**2)
        self.loo_rows = np.zeros(0, dtype=np.int64)  # sorted task rows with groups in the sums
        self.loo_mean, self.loo_var = np.zeros(0), np.zeros(0)

    def prior(self, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(mean, variance) of u_e for each task of ``rows`` (default: every task), without its own groups."""
        if rows is None:  # every task: the visited ones are loo_rows themselves
            mean, var = self.mean[self.env], self.var[self.env]
            mean[self.loo_rows], var[self.loo_rows] = self.loo_mean, self.loo_var
            return mean, var
        idx = np.asarray(rows)
        mean, var = self.mean[self.env[idx]], self.var[self.env[idx]]
        if len(self.loo_rows):
            at = np.minimum(np.searchsorted(self.loo_rows, idx), len(self.loo_rows) - 1)
            own = self.loo_rows[at] == idx
            mean[own], var[own] = self.loo_mean[at[own]], self.loo_var[at[own]]
        return mean, var

    def refresh(self, rows, weight, successes, trials, f, tau: float, fit: bool) -> None:
        """Recompute the posteriors from groups (task ``rows``, likelihood ``weight``, ``successes`` of ``trials``)
        at global logits ``f``, deviations of sd ``tau``; with ``fit``, first refit tau_env."""
        # a task's repeated groups with the same outcome share one likelihood row (f is the task's): count it once
        keys, inverse = np.unique(np.column_stack([rows, successes, trials]), axis=0, return_inverse=True)
        inverse = inverse.ravel()
        weight = np.bincount(inverse, weights=weight, minlength=len(keys))
        rows, successes, trials = keys[:, 0].astype(np.int64), keys[:, 1], keys[:, 2]
        f_unique = np.empty(len(keys))
        f_unique[inverse] = f
        group = weight[:, None] * _group_log_likelihood(f_unique, successes, trials, tau)  # (groups, grid)
        tasks, task_of = np.unique(rows, return_inverse=True)
        by_task = sp.csr_matrix(
            (np.ones(len(rows)), (task_of, np.arange(len(rows)))), shape=(len(tasks), len(rows))
        )
        task_ll = by_task @ group  # (visited tasks, grid)
        task_env = self.env[tasks]
        to_env = sp.csr_matrix(
            (np.ones(len(tasks)), (task_env, np.arange(len(tasks)))), shape=(self.n_envs, len(tasks))
        )
        env_ll = to_env @ task_ll  # (environments, grid); 0 where no group
        if fit:
            self._fit(env_ll[np.unique(task_env)])
        self.mean, self.var = self._moments(env_ll)
        self.loo_rows = tasks
        self.loo_mean, self.loo_var = self._moments(env_ll[task_env] - task_ll)

    def _log_prior(self, tau_env: float) -> np.ndarray:
        return -0.5 * (GRID / tau_env) ** 2 - np.log(tau_env) + _LOG_DU  # up to a constant

    def _moments(self, ll: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        log_post = ll + self._log_prior(self.tau_env)[None, :]
        post = np.exp(log_post - log_post.max(axis=1, keepdims=True))
        post /= post.sum(axis=1, keepdims=True)
        mean = post @ GRID
        return mean, np.maximum(post @ GRID**2 - mean**2, 1e-6)

    def _fit(self, env_ll: np.ndarray) -> None:
        """tau_env maximising sum_e log int prod_g L_g(u) N(u; 0, tau_env^2) du, pulled toward the configured."""

        def objective(log_tau: float) -> float:
            marginal = _logsumexp(env_ll + self._log_prior(np.exp(log_tau))[None, :], axis=1).sum()
            return 0.5 * ((log_tau - np.log(self.prior_sd)) / FIT_LOG_SD) ** 2 - marginal

        fit = minimize_scalar(objective, bounds=np.log(FIT_BOUNDS), method="bounded")
        self.tau_env = float(np.exp(fit.x))

    def state_dict(self) -> dict:
        return {
            "tau_env": self.tau_env,
            "mean": self.mean.copy(),
            "var": self.var.copy(),
            "loo_rows": self.loo_rows.copy(),
            "loo_mean": self.loo_mean.copy(),
            "loo_var": self.loo_var.copy(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.tau_env = float(state["tau_env"])
        for key in ("mean", "var", "loo_mean", "loo_var"):
            setattr(self, key, np.array(state[key], dtype=float, copy=True))
        self.loo_rows = np.array(state["loo_rows"], dtype=np.int64, copy=True)
