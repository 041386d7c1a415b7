"""The suite's campaign on a world whose environments join late: started over the first pool, rebuilt at the
join step from the campaign's history (bench/scheduler_suite.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from bench.scheduler_suite import make_world, run_scheduler, run_world
from envsched_core.worlds import ALL_REGIMES

LATE = replace(
    ALL_REGIMES["late-envs"],
    config=replace(ALL_REGIMES["late-envs"].config, n_envs=12, tasks_per_env=8, heldout_per_env=2),
    late_step=4,
    batch_size=8,
)


def test_a_late_world_starts_over_the_first_pool_and_picks_the_new_environments_from_the_join_step():
    world = make_world(LATE, seed=1, quick=True)
    late_ids = set(np.asarray(world.sim.task_ids)[world.sim.late_tasks])
    assert len(world.first_catalog) == len(world.catalog) - len(late_ids) > 0
    for name in ("random", "dps", "envsched"):
        metrics, picks = run_scheduler(world, name, 8, 0, 0, {"late": late_ids})
        assert picks["late"][:3] == [0.0, 0.0, 0.0]  # steps 1-3: not in the pool
        assert sum(picks["late"][3:]) > 0 and len(metrics) == 8  # rebuilt over the whole catalogue at step 4
    per_world = run_world(world, ["random", "envsched"], horizon=8, target_step=6)
    assert 0 < per_world["envsched"]["late"] <= 1  # the share from the join step on is reported
