"""Environment calibration (`SchedulerConfig.env_calibration`): how much of the variance the outcome model
promised an environment's groups came back.

The outcome model's prediction for a task whose environment keeps failing stays near p (1 - p) ~ 0.05: all-fail
groups only bound a logit from above, the global model's environment weight stays near 0 (each task's own
residual absorbs its environment's level first), and E[p (1 - p)] under a posterior several logits wide is about
the same wherever its mean sits. The dispersion ratio c_e cannot see it either: an all-equal group has mean
(1 - mean) = 0 and adds nothing to it. In the `settled` stress worlds (nine environments in ten 6 logits easier or
harder from the start) a fifth of EnvSched's late exploitation picks went to environments out of reach
(docs/scheduler.md, "Settled environments").

Per environment, the realised group variance R_e and the variance the outcome model predicted for the same groups
just before their visit (its visit prior, with the dispersion and (G - 1)/G), P_e, both summed over groups and
forgotten at ``decay`` per step as the outcome model forgets its residuals. A task's value is weighed by

    k_e = (R_e + k v) / (P_e + k v),     v = sum_e P_e / (groups observed, forgotten alike),

k = ``prior`` pseudo-groups at the mean prediction: 1 for an environment not yet observed, below 1 where the
promised spread did not come back, above 1 where more came back than was promised.
"""

from __future__ import annotations

import numpy as np


class EnvironmentCalibration:
    """Per environment: forgotten sums of realised and predicted group variance, and of groups."""

    def __init__(self, n_envs: int, prior: float, decay: float):
        self.prior, self.decay = float(prior), float(decay)
        self.realised = np.zeros(n_envs)
        self.predicted = np.zeros(n_envs)
        self.groups = np.zeros(n_envs)
        self.last_step = 0  # the step the sums are forgotten to

    def update(self, env: np.ndarray, step: int, realised: np.ndarray, predicted: np.ndarray) -> None:
        """One step's groups: their environments, realised variances and the variances predicted before them."""
        kept = self.decay ** max(step - self.last_step, 0)
        self.last_step = max(self.last_step, step)
        n = len(self.realised)
        self.realised = self.realised * kept + np.bincount(env, weights=realised, minlength=n)
        self.predicted = self.predicted * kept + np.bincount(env, weights=predicted, minlength=n)
        self.groups = self.groups * kept + np.bincount(env, minlength=n)

    def factor(self) -> np.ndarray | float:
        """(n_envs,) weight of each environment's tasks; 1.0 (a scalar) before anything was predicted."""
        total = self.predicted.sum()
        if total <= 0:
            return 1.0
        pseudo = self.prior * total / self.groups.sum()
        return (self.realised + pseudo) / (self.predicted + pseudo)

    def state_dict(self) -> dict:
        return {
            "realised": self.realised.copy(),
            "predicted": self.predicted.copy(),
            "groups": self.groups.copy(),
            "last_step": self.last_step,
        }

    def load_state_dict(self, state: dict) -> None:
        self.realised = np.array(state["realised"], dtype=float)
        self.predicted = np.array(state["predicted"], dtype=float)
        self.groups = np.array(state["groups"], dtype=float)
        self.last_step = int(state["last_step"])
