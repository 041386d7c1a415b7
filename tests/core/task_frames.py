"""Small hand-made task catalogues and rollouts for the envsched_core tests (given embeddings, no model)."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd


def make_tasks(n_envs: int = 6, per_env: int = 12, dim: int = 8, seed: int = 0) -> pd.DataFrame:
    """Tasks whose embeddings cluster by environment; tools, effects and sizes vary per task."""
    rng = np.random.default_rng(seed)
    rows = []
    for e in range(n_envs):
        centre = rng.normal(size=dim)
        tools = [f"env{e}.tool{t}" for t in range(5)]
        for j in range(per_env):
            used = list(rng.choice(tools, size=1 + j % 3, replace=False))
            rows.append(
                {
                    "task_id": f"e{e}-t{j}",
                    "env_id": f"env{e}",
                    "text": f"task {j} of environment {e}",
                    "tools": used,
                    "tool_effects": ["read" if k % 2 == 0 else "write" for k in range(len(used))],
                    "state_fields": [f"field{j % 2}"],
                    "turns": 1 + j % 4,
                    "gold_calls": len(used) + j % 2,
                    "verifier": "state_match" if e % 2 == 0 else "partial_checks",
                    "embedding": centre + 0.3 * rng.normal(size=dim),
                }
            )
    return pd.DataFrame(rows)


def rollouts_for(
    batch: pd.DataFrame, step: int, p: dict[str, float] | float = 0.5, group_size: int = 8, seed: int = 0
) -> pd.DataFrame:
    """G Bernoulli(p) rewards per batch task; p per task_id or one for all."""
    rng = np.random.default_rng([seed, step])
    ids = batch["task_id"].to_numpy()
    probs = np.array([p.get(t, 0.0) if isinstance(p, dict) else p for t in ids])
    reward = (rng.random((len(ids), group_size)) < probs[:, None]).astype(float)
    return pd.DataFrame({"task_id": np.repeat(ids, group_size), "step": step, "reward": reward.ravel()})


def run_steps(sched, success, steps: int, first: int = 1, returned=None) -> list[pd.DataFrame]:
    """Steps of select -> observe on `rollouts_for` rewards; ``returned(rollouts)`` is the mask of the rows the
    trainer hands back (None: all of them). The batches."""
    batches = []
    for step in range(first, first + steps):
        batch = sched.select(step)
        rollouts = rollouts_for(batch, step, success)
        sched.observe(rollouts if returned is None else rollouts[returned(rollouts)])
        batches.append(batch)
    return batches


def assert_resumes_exactly(make, run) -> dict:
    """A scheduler from ``make(seed)`` run 3 steps by ``run(sched, steps, first)``, its state loaded into one made
    with another seed: the next 4 batches of both are the same. The saved state (a deep copy)."""
    original = make(3)
    run(original, 3, 1)
    state = copy.deepcopy(original.state_dict())
    resumed = make(99)
    resumed.load_state_dict(state)
    for a, b in zip(run(original, 4, 4), run(resumed, 4, 4), strict=True):
        pd.testing.assert_frame_equal(a, b)
    return state


def group(task_id: str, step: int, rewards: list[float]) -> pd.DataFrame:
    """One task's rollouts at one step with the given rewards."""
    return pd.DataFrame({"task_id": task_id, "step": step, "reward": rewards})


def observe_groups(model, rows, step: int, successes, g: int = 8) -> None:
    """Fold one step's binary groups (``successes`` of ``g`` per task row) into an OutcomeModel."""
    mean = np.asarray(successes, dtype=float) / g
    model.update(np.asarray(rows), step, mean, mean * (1 - mean), np.full(len(rows), float(g)))
