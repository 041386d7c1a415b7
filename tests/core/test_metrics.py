import numpy as np
import pandas as pd
import pytest
from task_frames import group, make_tasks

from envsched_core import TaskCatalog, batch_metrics
from envsched_core import metrics as M


def test_metrics_batch_hand_computed():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=3))
    batch = pd.DataFrame(
        {
            "task_id": ["e0-t0", "e0-t1", "e1-t0"],
            "env_id": ["env0", "env0", "env1"],
            "role": ["exploit", "exploit", "coverage"],
        }
    )
    rollouts = pd.concat(
        [
            group("e0-t0", 1, [1, 0, 1, 0]),  # variance 0.25, mean 0.5
            group("e0-t1", 1, [0, 0, 0, 0]),  # variance 0, mean 0
            group("e1-t0", 1, [1, 1, 1, 0]),  # variance 0.1875, mean 0.75
            group("e1-t2", 1, [1, 0, 0, 0]),  # not in the batch: ignored
        ],
        ignore_index=True,
    )
    out = batch_metrics(batch, rollouts, catalog)
    # No over-sampling: every group of the batch is in the GRPO batch, the zero-variance one included.
    assert out[M.MEAN_VARIANCE] == pytest.approx((0.25 + 0 + 0.1875) / 3)
    assert out[M.MEDIAN_VARIANCE] == pytest.approx(0.1875)
    assert out[M.MEDIAN_REWARD] == pytest.approx(0.5)
    assert out[M.ZERO_VARIANCE_GROUPS] == 1 and out[M.TRAINED_GROUPS] == 3
    assert out[M.ENVS_PER_BATCH] == 2
    rows = catalog.indices_of(["e0-t0", "e0-t1", "e1-t0"])
    assert out[M.TOOLS_PER_BATCH] == len(set(np.concatenate([catalog.tools[r].indices for r in rows])))
    # batch reference: 75th percentile of (0.25, 0, 0.1875) = 0.21875; e0-t0 hits, e0-t1 does not
    assert out[M.EXPLOIT_HIT_RATE] == pytest.approx(0.5)
    assert out[M.ROLLOUTS_SPENT] == 12


def test_metrics_describe_the_groups_dynamic_sampling_trains_on():
    # B = 3 (non-oversample rows); the first round's e0-t1 is all-fail and dropped, so the trained groups
    # are the first three informative ones in generation order: e0-t0, e1-t0 and the refill e1-t1.
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=3))
    batch = pd.DataFrame(
        {
            "task_id": ["e0-t0", "e0-t1", "e1-t0", "e1-t1", "e1-t2"],
            "env_id": ["env0", "env0", "env1", "env1", "env1"],
            "role": ["exploit", "exploit", "exploit", "oversample", "oversample"],
        }
    )
    rollouts = pd.concat(
        [
            group("e1-t2", 1, [1, 0, 0, 0]),  # informative, but the 4th: rolled out, not trained
            group("e0-t0", 1, [1, 0, 1, 0]),  # variance 0.25, mean 0.5
            group("e0-t1", 1, [0, 0, 0, 0]),
            group("e1-t0", 1, [1, 1, 1, 0]),  # variance 0.1875, mean 0.75
            group("e1-t1", 1, [1, 0, 0, 0]),  # variance 0.1875, mean 0.25
        ],
        ignore_index=True,
    )
    groups = M.trained_groups(batch, rollouts)
    assert groups.loc[groups["trained"], "task_id"].tolist() == ["e0-t0", "e1-t0", "e1-t1"]
    out = batch_metrics(batch, rollouts, catalog)
    assert out[M.MEAN_VARIANCE] == pytest.approx((0.25 + 0.1875 + 0.1875) / 3)
    assert out[M.ZERO_VARIANCE_GROUPS] == 0 and out[M.TRAINED_GROUPS] == 3
    assert out[M.MEDIAN_REWARD] == pytest.approx(0.5)
    # trained exploit picks e0-t0, e1-t0 against the trained variances' 75th percentile 0.21875
    assert out[M.EXPLOIT_HIT_RATE] == pytest.approx(0.5)
    assert out[M.ROLLOUTS_SPENT] == 20  # every rollout of every round is spent


def test_metrics_hit_rate_uses_reference_pool_and_tools_used_column():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=1, per_env=2))
    batch = pd.DataFrame({"task_id": ["e0-t0", "e0-t1"], "env_id": "env0", "role": ["exploit", "exploit"]})
    rollouts = pd.concat([group("e0-t0", 1, [1, 0]), group("e0-t1", 1, [1, 1, 1, 0])], ignore_index=True)
    rollouts["tools_used"] = [["a"], ["a", "b"], [], ["c"], ["a"], []]
    out = batch_metrics(batch, rollouts, catalog, reference_variance=np.array([0.0, 0.0, 0.0, 0.1]))
    assert out[M.EXPLOIT_HIT_RATE] == 1.0  # both realised variances exceed the pool's top-quartile cut
    assert out[M.TOOLS_PER_BATCH] == 3


def test_metrics_missing_column_raises():
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=1, per_env=2))
    with pytest.raises(ValueError, match="role"):
        batch_metrics(
            pd.DataFrame({"task_id": ["e0-t0"], "env_id": ["env0"]}), group("e0-t0", 1, [1]), catalog
        )


def test_metrics_hit_rate_cut_comes_from_coverage_picks_not_the_exploit_picks_themselves():
    # 4 exploit picks, all mixed, and 4 coverage picks (the pool sample), 3 of them all-fail.
    catalog = TaskCatalog.from_frame(make_tasks(n_envs=2, per_env=4))
    exploit_ids = ["e0-t0", "e0-t1", "e0-t2", "e0-t3"]
    coverage_ids = ["e1-t0", "e1-t1", "e1-t2", "e1-t3"]
    batch = pd.DataFrame(
        {
            "task_id": exploit_ids + coverage_ids,
            "env_id": ["env0"] * 4 + ["env1"] * 4,
            "role": ["exploit"] * 4 + ["coverage"] * 4,
        }
    )
    exploit_rewards = [[1, 0, 1, 0], [1, 0, 0, 0], [1, 1, 1, 0], [1, 0, 1, 0]]  # 0.25, 0.1875, 0.1875, 0.25
    coverage_rewards = [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]]  # 0, 0, 0, 0.1875
    pairs = zip(exploit_ids + coverage_ids, exploit_rewards + coverage_rewards, strict=True)
    rollouts = pd.concat([group(t, 1, r) for t, r in pairs], ignore_index=True)
    # pool cut = 75th percentile of the coverage variances (0, 0, 0, 0.1875) = 0.046875: every exploit pick hits
    assert batch_metrics(batch, rollouts, catalog)[M.EXPLOIT_HIT_RATE] == 1.0
    # with too few coverage picks the selected tasks are the reference (75th percentile 0.203125 here)
    few = batch[batch["role"] == "exploit"].iloc[:3]
    few = pd.concat([few, batch[batch["task_id"] == "e1-t3"]], ignore_index=True)
    assert batch_metrics(few, rollouts, catalog)[M.EXPLOIT_HIT_RATE] == pytest.approx(1 / 3)
