"""Group-relative advantages (GRPO: Shao et al., 2024, "DeepSeekMath", section 4.1.2).

Each task's G rewards form a group; a rollout's advantage is its reward minus the group mean,
divided by the group's standard deviation ("std") or not ("mean_only", as in Dr. GRPO, Liu et al.,
2025, which drops the std to avoid favouring low-variance groups). A group whose rewards are all
equal gets zero advantage: it teaches nothing, which is what the scheduler tries to avoid.
"""

from __future__ import annotations

import numpy as np

SCALES = ("std", "mean_only")


def group_advantages(rewards: np.ndarray, scale: str = "std", eps: float = 1e-6) -> np.ndarray:
    """rewards (n_groups, G) -> advantages (n_groups, G)."""
    rewards = np.asarray(rewards, dtype=np.float64)
    if rewards.ndim != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must be (n_groups, G) with G >= 2, got shape {rewards.shape}")
    centred = rewards - rewards.mean(axis=1, keepdims=True)
    if scale == "std":
        return centred / (rewards.std(axis=1, keepdims=True) + eps)
    if scale == "mean_only":
        return centred
    raise ValueError(f"advantage scale {scale!r} unknown; choose from {SCALES}")


def zero_variance_groups(rewards: np.ndarray) -> int:
    """How many groups have all-equal rewards (no learning signal)."""
    rewards = np.asarray(rewards, dtype=np.float64)
    return int((rewards.max(axis=1) - rewards.min(axis=1) == 0).sum())
