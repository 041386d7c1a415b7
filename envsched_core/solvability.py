"""TaskSolvability: the chance that a task can never be passed, from its groups that scored nothing.

Agent benchmarks ship tasks that no policy can pass: a wrong gold answer, a state check that rejects every
action (audits of agent benchmarks report such label errors). The outcome model cannot tell one from a hard
task. Each all-zero group pulls the task's residual down, but in a logistic model that evidence is weak (it
only bounds p by about 1/G), and as the task's environment improves the global model lifts it back toward the
frontier, so exploitation picks it again and again (the `broken` stress regime of `envsched_core.worlds`).

Two hypotheses per task: it is *learnable*, its groups drawn as the outcome model predicts, or it *never
passes*, every reward 0. A group with any reward above 0 settles it: learnable, for good. An all-zero group has
likelihood E[(1 - p)^G] under the learnable hypothesis, p over the logit the outcome model's residual update
starts the visit from (``OutcomeModel.visit_prior``: the shared model already refit on the step's groups, the
task's own prior). Refit first, because a model that has seen nothing expects p ~ 1/2 and would read every
all-zero group of a hard catalogue's first steps as proof (the fitted share went to ~0.4 at step 1 in every
world); the group's own weight in the refit makes the evidence, if anything, smaller. For rewards in [0, 1],
P(r > 0) >= E[r], so for a graded verifier (1 - p)^G bounds the chance of an all-zero group from above: the
evidence is never overstated. With l_i the sum of these log-likelihoods over the task's
all-zero groups, each forgotten by ``decay`` per step of age as the outcome model forgets its residuals,

    pi_i = pi / (pi + (1 - pi) exp(l_i)),

and what a visit may teach is weighed by 1 - pi_i (an unseen task: 1 - pi). pi, the share of tasks that never
pass, is fitted by EM over the seen tasks, pulled toward the configured prior by PRIOR_TASKS pseudo-tasks.
"""

from __future__ import annotations

import numpy as np

PRIOR_TASKS = 20.0  # pseudo-tasks of the Beta prior on the share of tasks that never pass
EM_STEPS = 30  # EM iterations of the share per update (a 1-D fixed point; converged well before)
STATE_KEYS = ("loglik", "last_step", "passed")
# Gauss-Hermite (probabilists') nodes and weights for E over logit ~ N(z, sd^2), 5 points, as the outcome model's
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(5)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def log_all_zero(z: np.ndarray, sd: np.ndarray, trials: np.ndarray) -> np.ndarray:
    """log E[(1 - sigmoid(logit))^trials] over logit ~ N(z, sd^2), 5-point Gauss-Hermite."""
    x = z[:, None] + sd[:, None] * _NODES[None, :]
    log_fail = -np.logaddexp(0.0, x) * trials[:, None]  # log (1 - sigmoid(x))^trials
    top = log_fail.max(axis=1, keepdims=True)
    return top[:, 0] + np.log(np.exp(log_fail - top) @ _WEIGHTS)


class TaskSolvability:
    """Per task, the posterior chance that it never passes; ``factor()`` = 1 - that chance."""

    def __init__(self, n_tasks: int, prior: float, decay: float):
        self.prior, self.decay = float(prior), float(decay)
        self.loglik = np.zeros(n_tasks)  # as of last_step; <= 0
        self.last_step = np.full(n_tasks, -1, dtype=np.int64)  # -1: never seen
        self.passed = np.zeros(n_tasks, dtype=bool)
        self.share = self.prior
        self._factor: tuple[int, np.ndarray] | None = None

    def _loglik_at(self, step: int, rows: np.ndarray) -> np.ndarray:
        """l_i of ``rows`` forgotten to ``step`` (0 for unseen tasks)."""
        last = self.last_step[rows]
        return np.where(last >= 0, self.loglik[rows] * self.decay ** np.maximum(step - last, 0), 0.0)

    def _suspects(self) -> np.ndarray:
        """Rows seen and never passed: the only tasks whose chance of never passing is their own (few at 1M)."""
        return np.flatnonzero((self.last_step >= 0) & ~self.passed)

    def update(
        self, rows: np.ndarray, step: int, mean: np.ndarray, z: np.ndarray, sd: np.ndarray, trials: np.ndarray
    ) -> None:
        """Fold one step's groups (unique task rows) in: their mean reward and the outcome model's posterior
        logit (z, sd) for them just before this visit."""
        current = self._loglik_at(step, rows)
        zero = mean <= 0
        self.loglik[rows] = np.where(zero, current + log_all_zero(z, sd, trials), current)
        self.passed[rows] |= ~zero
        self.last_step[rows] = np.maximum(self.last_step[rows], step)
        self._fit_share(step)
        self._factor = None

    def _fit_share(self, step: int) -> None:
        """EM for the share of tasks that never pass: each seen task's chance of it, then their mean."""
        n_seen = int(np.count_nonzero(self.last_step >= 0))
        likelihood = np.exp(self._loglik_at(step, self._suspects()))  # of the all-zero record if learnable
        a, b = PRIOR_TASKS * self.prior, PRIOR_TASKS * (1.0 - self.prior)
        share = self.share
        for _ in range(EM_STEPS):
            never = share / (share + (1.0 - share) * likelihood)
            share = (never.sum() + a) / (n_seen + a + b)
        self.share = float(share)

    def factor(self, step: int) -> np.ndarray:
        """1 - P(never passes) per task at ``step`` (cached per step until the next update)."""
        if self._factor is None or self._factor[0] != step:
            factor = np.where(self.passed, 1.0, 1.0 - self.share)  # an unseen task: the share's chance
            rows = self._suspects()
            likelihood = np.exp(self._loglik_at(step, rows))
            factor[rows] = 1.0 - self.share / (self.share + (1.0 - self.share) * likelihood)
            self._factor = (step, factor)
        return self._factor[1]

    def state_dict(self) -> dict:
        return {
            "loglik": self.loglik.copy(),
            "last_step": self.last_step.copy(),
            "passed": self.passed.copy(),
            "share": self.share,
        }

    def load_state_dict(self, state: dict) -> None:
        for key in STATE_KEYS:
            getattr(self, key)[:] = state[key]
        self.share = float(state["share"])
        self._factor = None
