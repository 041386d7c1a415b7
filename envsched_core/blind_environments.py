"""BlindEnvironments: the chance that an environment's rewards do not move however much its tasks are trained.

A coin-flip verifier, a policy-blind judge or a nondeterministic environment gives groups that look maximally
informative to a variance ranker, and it re-picks them every step: in worlds where little else is mixed, EnvSched
spent 60-90% of its picks there and missed random's score (the wild worlds, docs/scheduler.md). Such a task's
success stays where it was; a learnable task's rises as it is trained. One task's record is short, but every task
of a broken environment is broken, so the test pools an environment's tasks.

The test reads every visit: y_it, the group's mean reward, against x_it, the variance task i had been trained on
before that visit (0 at its first). With m_i the outcome model's prediction before the first visit,

    y_it = m_i + a_i + r_e x_it + noise,    a_i ~ N(0, TAU^2),  noise ~ N(0, S2 / G),

a random intercept per task and one rate r_e per environment. A likelihood is not biased by which tasks the
scheduler chose to revisit, since that choice depends only on outcomes already in it; moment estimates (a revisited
task's latest mean minus an earlier one, ``learnability``) are, as the revisited learnable tasks moved least.
With a_i integrated out, environment e's log-likelihood is quadratic in r_e with sufficient statistics
A_e = sum_i x_i' S_i^-1 x_i and B_e = sum_i x_i' S_i^-1 (y_i - m_i), so its log-likelihood ratio of rate R
against rate 0 is R B_e - R^2 A_e / 2. Environments are a mixture: blind (r = 0) with share pi, learnable at one
common rate R. R is the grid point maximising the marginal likelihood (EM alone stalls at its fixed point R = 0,
where every environment looks alike), pi is fitted by EM with ``PRIOR_ENVS`` pseudo-environments at the
configured prior, and what a task of e may teach is weighed by P(e learnable). An environment no visit was
compared in has factor 1; while the best R is 0 (nothing moves anywhere, or nothing yet), and in a catalogue of
fewer than ``MIN_CATALOGUE_ENVS`` environments, every factor is 1.
Rewards that fall for other reasons (forgetting, drift, an environment update) read as r_e < 0, evidence for
blind: the likely source of the step or two the field costs in some worlds where nothing is blind.

What it pools is a sandbox (``sandboxes``): the namespace of a task's tools where they carry one (``env3`` of
``env3.get_order``, the convention the outcome model's tool base names read), else its environment id. Where a
catalogue registers a benchmark whole under one id, or a sandbox per task, the namespaces still name the
environments whose tasks break together; where ids and namespaces agree nothing changes, and where they cross
(neither nests in the other) the ids stay.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .catalog import tool_name_parts

TAU = 0.2  # prior sd of a task's intercept about the outcome model's first prediction (mean-reward scale)
S2 = 0.25  # a group mean's variance times G: the Bernoulli bound at p = 1/2
PRIOR_ENVS = 10.0  # pseudo-environments of the Beta prior on the blind share
RATES = np.geomspace(0.003, 2.0, 30)  # candidate common rates R (mean reward per unit of trained variance)
EM_STEPS = 10  # EM iterations of the blind share per candidate rate
MIN_ENVS = 3  # environments with a compared visit before the mixture is fitted
# a catalogue of fewer environments is left alone: the blind share is fitted across environments, and with eight
# (`few-large`) one misread environment, an eighth of the catalogue, cost 1.6-2.8 steps (docs/scheduler.md)
MIN_CATALOGUE_ENVS = 10
FLOOR = 0.05  # smallest factor: a blind environment still ranks among its kind
STATE_KEYS = ("first_prediction", "visits", "sum_x", "sum_xx", "sum_y", "sum_xy", "trained")


def sandboxes(env: np.ndarray, tools, tool_names: np.ndarray) -> tuple[np.ndarray, int]:
    """(code per task, count): the unit the test pools, a task's tool namespaces (the part of each tool's name
    before its last '.') where it has any, else its environment; codes in order of first appearance, so where
    the two agree they are ``env``'s own. The environments themselves unless the namespaces nest with them, one
    way or the other (``env``: environment codes; ``tools``: (N, T) incidence)."""
    n_envs = int(env.max()) + 1 if len(env) else 0
    namespace, _ = tool_name_parts(tool_names)
    space, spaces = pd.factorize(np.where(namespace != "", namespace, None))  # -1: a tool with no namespace
    if not len(spaces):
        return env, n_envs
    tools = tools.tocsr()
    task = np.repeat(np.arange(tools.shape[0]), np.diff(tools.indptr))  # ascending
    named = space[tools.indices] >= 0
    task, own = task[named], space[tools.indices][named]
    low = np.full(tools.shape[0], len(spaces), np.int64)
    high = np.full(tools.shape[0], -1, np.int64)
    np.minimum.at(low, task, own)
    np.maximum.at(high, task, own)
    # one namespace: its code; none: past the namespaces, by environment; several: past those, by the set
    key = np.where(high < 0, len(spaces) + env.astype(np.int64), low)
    several = np.flatnonzero((high >= 0) & (low != high))
    if len(several):
        bounds = zip(
            np.searchsorted(task, several), np.searchsorted(task, several, side="right"), strict=True
        )
        sets = pd.Series([tuple(np.unique(own[start:end]).tolist()) for start, end in bounds], dtype=object)
        key[several] = len(spaces) + n_envs + pd.factorize(sets)[0]
    code, units = pd.factorize(key)
    # the two must nest (ids per benchmark, or per task); where they cross (tools shuffled between environments,
    # shared utility tools) which one names the sandbox is not known, and the ids are what the user registered
    pairs = len(np.unique(code.astype(np.int64) * n_envs + env))
    if pairs not in (len(units), n_envs):
        return env, n_envs
    return code.astype(env.dtype), len(units)


class BlindEnvironments:
    """Per environment, the posterior chance its rewards move with training; ``factor()`` per task."""

    def __init__(self, env: np.ndarray, n_envs: int, group_size: int, prior: float):
        n_tasks = len(env)
        self.env, self.n_envs, self.prior = env, n_envs, float(prior)
        self.noise = S2 / group_size
        self.first_prediction = np.full(n_tasks, np.nan)  # m_i
        self.visits = np.zeros(n_tasks)
        self.sum_x, self.sum_xx = np.zeros(n_tasks), np.zeros(n_tasks)
        self.sum_y, self.sum_xy = np.zeros(n_tasks), np.zeros(n_tasks)  # y: mean reward - m_i
        self.trained = np.zeros(n_tasks)  # x for the next visit: the variance of the task's groups so far
        self.rate, self.share = 0.0, self.prior
        self._factor: np.ndarray | None = None

    def update(self, rows: np.ndarray, mean: np.ndarray, variance: np.ndarray, predicted: np.ndarray) -> None:
        """Fold one step's groups in (unique task rows); ``predicted``: the outcome model's mean reward for each
        before the visit (``OutcomeModel.visit_prior``), kept for the task's first."""
        first = np.isnan(self.first_prediction[rows])
        self.first_prediction[rows[first]] = predicted[first]
        x, y = self.trained[rows], mean - self.first_prediction[rows]
        self.visits[rows] += 1
        self.sum_x[rows] += x
        self.sum_xx[rows] += x * x
        self.sum_y[rows] += y
        self.sum_xy[rows] += x * y
        self.trained[rows] += variance
        self._factor = None

    def evidence(self) -> tuple[np.ndarray, np.ndarray]:
        """(A_e, B_e): the curvature and the slope of each environment's rate log-likelihood at 0."""
        # a task's first visit has x = 0, so only tasks visited twice add anything (a few of 1M: the sums over
        # every task took 25 ms of select there); the same terms in the same order, so the same sums
        rows = np.flatnonzero(self.visits >= 2)
        # x's and y's sums shrink by the shared intercept
        shrink = TAU**2 / (self.noise + self.visits[rows] * TAU**2)
        sum_x = self.sum_x[rows]
        a = (self.sum_xx[rows] - shrink * sum_x**2) / self.noise
        b = (self.sum_xy[rows] - shrink * sum_x * self.sum_y[rows]) / self.noise
        env = self.env[rows]
        return np.bincount(env, a, self.n_envs), np.bincount(env, b, self.n_envs)

    def learnable(self) -> np.ndarray:
        """Per environment: P(its rewards move with training) (1 where no visit was compared)."""
        out = np.ones(self.n_envs)
        self.rate, self.share = 0.0, self.prior
        if self.n_envs < MIN_CATALOGUE_ENVS:  # before summing the tasks: nothing to fit here
            return out
        curvature, slope = self.evidence()
        compared = curvature > 1e-9
        if compared.sum() < MIN_ENVS:
            return out
        best = self._prior_loglik(self.prior)  # the marginal log-likelihood at R = 0: every ratio 1
        for rate in RATES:
            ratio = np.clip(rate * slope[compared] - rate**2 * curvature[compared] / 2, -50.0, 50.0)
            share = self.prior
            for _ in range(EM_STEPS):
                moves = 1.0 / (1.0 + np.exp(np.log(share / (1 - share)) - ratio))
                share = (PRIOR_ENVS * self.prior + np.sum(1 - moves)) / (PRIOR_ENVS + compared.sum())
            fit = np.logaddexp(np.log1p(-share) + ratio, np.log(share)).sum() + self._prior_loglik(share)
            if fit > best:
                best, self.rate, self.share = fit, float(rate), float(share)
                out[compared] = moves
        return out

    def _prior_loglik(self, share: float) -> float:
        """log of the Beta prior on the blind share (PRIOR_ENVS pseudo-environments at the configured prior)."""
        return PRIOR_ENVS * (self.prior * np.log(share) + (1 - self.prior) * np.log1p(-share))

    def factor(self) -> np.ndarray:
        """Per task: P(its environment's rewards move with training), at least FLOOR."""
        if self._factor is None:
            self._factor = np.maximum(self.learnable(), FLOOR)[self.env]
        return self._factor

    def state_dict(self) -> dict:
        return {key: getattr(self, key).copy() for key in STATE_KEYS}

    def load_state_dict(self, state: dict) -> None:
        for key in STATE_KEYS:
            setattr(self, key, np.array(state[key], dtype=float, copy=True))
        self._factor = None
