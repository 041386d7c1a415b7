"""The simulated engine's checkpoint across a refreshed pool: what the policy learned carries over by skill."""

import numpy as np
import pandas as pd

from training.engines.simulated import SimulatedEngine


def _tasks(n_envs: int, per_env: int, prefix: str = "") -> pd.DataFrame:
    rows = [
        {
            "task_id": f"{prefix}e{e}-t{j}",
            "env_id": f"env{e}",
            "tools": [f"env{e}.read{j % 2}", f"env{e}.write"],
            "tool_effects": ["read", "write"],
            "turns": 1 + j % 3,
            "gold_calls": 2,
        }
        for e in range(n_envs)
        for j in range(per_env)
    ]
    return pd.DataFrame(rows)


def test_checkpoint_of_another_pool_carries_what_was_learned_by_skill_name(tmp_path):
    old = _tasks(3, 6)
    engine = SimulatedEngine(old, group_size=4, seed=0)
    for step in (1, 2, 3):
        engine.run_step(pd.DataFrame({"task_id": old["task_id"], "role": "exploit"}), step)
    engine.save(tmp_path)
    learned = dict(zip(engine.sim.skill_names, engine.sim.learned(), strict=True))
    assert any(abs(v) > 0 for v in learned.values())

    # A refresh retired env0's tasks, added env3 and two tasks of env1.
    new = pd.concat(
        [old[old["env_id"] != "env0"], _tasks(4, 6).query("env_id == 'env3'"), _tasks(2, 2, "new-")]
    )
    new = new[~new["task_id"].isin(["new-e0-t0", "new-e0-t1"])].reset_index(drop=True)
    fresh = SimulatedEngine(new, group_size=4, seed=0)
    theta0 = fresh.sim.theta.copy()
    fresh.load(tmp_path)
    for name, value, start in zip(fresh.sim.skill_names, fresh.sim.theta, theta0, strict=True):
        assert np.isclose(value, start + learned.get(name, 0.0)), name
    assert not any(n.startswith("env:env0") for n in fresh.sim.skill_names)
    assert "env:env3" in set(fresh.sim.skill_names) and "env:env3" not in learned  # added: a fresh start

    same = SimulatedEngine(old, group_size=4, seed=0)  # the same pool: the checkpoint exactly
    same.load(tmp_path)
    np.testing.assert_array_equal(same.sim.theta, engine.sim.theta)
