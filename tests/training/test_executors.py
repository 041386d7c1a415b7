"""Rollout executors: in-process, a local process pool and Ray give the same results for the same seed."""

import importlib.util

import numpy as np
import pandas as pd
import pytest

from training.engines.skill import SkillEngine
from training.executors import InProcessExecutor, chunked, make_executor
from training.policies.skill import RolloutRequest, SkillConfig, SkillWorkerSpec, rollout_seed

BFCL = "bfcl_v3_multi_turn"
SPEC = SkillWorkerSpec(sources=(BFCL,))
HAS_RAY = importlib.util.find_spec("ray") is not None


def test_executors_chunked_keeps_every_item_in_order():
    items = list(range(10))
    chunks = chunked(items, 4)
    assert [len(c) for c in chunks] == [3, 3, 2, 2]
    assert [x for c in chunks for x in c] == items
    assert chunked(items[:2], 8) == [[0], [1]]  # never an empty chunk


@pytest.fixture(scope="module")
def world():
    from training.executors import built_worker

    return built_worker(SPEC).world


@pytest.fixture(scope="module")
def tasks(world):
    ids = [t for t in world.resolver.task_ids() if world.resolver.task(t).split == "base"][:24]
    frame = pd.DataFrame(
        {"task_id": ids, "env_id": [world.resolver.task(t).env_id for t in ids], "source": BFCL}
    )
    return frame.iloc[:16].reset_index(drop=True), frame.iloc[16:].reset_index(drop=True)


def _requests(world, n=24):
    ids = world.resolver.task_ids()[:n]
    return [RolloutRequest(t, j, rollout_seed(0, 0, 1, t, j)) for t in ids for j in range(2)]


def _key(episode):
    return (
        episode.task_id,
        episode.rollout_idx,
        episode.reward,
        episode.reason,
        episode.n_tool_calls,
        tuple(episode.tools_used),
        tuple(episode.kinds.tolist()),
    )


def test_executors_results_do_not_depend_on_request_order(world):
    theta = world.initial_theta(SkillConfig(initial_success=0.2), 0, world.resolver.task_ids()[:24])
    requests = _requests(world)
    forward = InProcessExecutor().run(SPEC, theta, requests)
    backward = InProcessExecutor().run(SPEC, theta, requests[::-1])
    assert [_key(e) for e in forward] == [_key(e) for e in backward[::-1]]
    assert len({e.reward for e in forward}) == 2  # passes and failures both present


def _campaign(tasks, steps=2, **options):
    """Two steps of a skill engine on the given executor: landing rows, metrics and final theta."""
    train, heldout = tasks
    engine = SkillEngine(train, 4, seed=1, heldout=heldout, eval_every=1, initial_success=0.2, **options)
    out = []
    try:
        for step in range(1, steps + 1):
            batch = train.iloc[(step - 1) * 8 : step * 8].assign(role="coverage")
            rows, metrics = engine.run_step(batch, step)
            out.append(
                (rows.drop(columns=["wall_time_s"]), {k: v for k, v in metrics.items() if "second" not in k})
            )
        return out, engine.policy.theta.copy()
    finally:
        engine.close()


def _assert_same(a, b):
    (steps_a, theta_a), (steps_b, theta_b) = a, b
    for (rows_a, metrics_a), (rows_b, metrics_b) in zip(steps_a, steps_b, strict=True):
        pd.testing.assert_frame_equal(rows_a, rows_b)
        assert metrics_a == metrics_b
    np.testing.assert_array_equal(theta_a, theta_b)


def test_executors_process_pool_matches_in_process(tasks):
    reference = _campaign(tasks)
    assert reference[0][0][0]["reward"].nunique() == 2
    _assert_same(_campaign(tasks, executor="process", workers=2), reference)


@pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (the `ray` extra): pip install ray")
def test_executors_ray_local_cluster_matches_in_process(tasks):
    import ray

    reference = _campaign(tasks)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        _assert_same(_campaign(tasks, executor="ray"), reference)
    finally:
        ray.shutdown()


def test_executors_unknown_name_is_rejected():
    with pytest.raises(ValueError, match="unknown rollout executor"):
        make_executor("threads")
