"""Skill-engine campaigns through Dagster: real BFCL rollouts, held-out split, eval metrics in step_metrics."""

import pandas as pd
import pytest

from pipelines.campaign import CampaignConfig, campaign_heldout_tasks, campaign_tasks, heldout_by_hash
from pipelines.driver import run_campaign
from pipelines.paths import Paths

B, G = 12, 4


def test_campaign_skill_engine_runs_through_dagster_and_writes_heldout_score(driver):
    config = CampaignConfig(
        campaign_id="skill",
        splits=["base"],
        batch_size=B,
        group_size=G,
        steps=3,
        engine="skill",
        engine_options={"initial_success": 0.2},
        eval_every=1,
    )
    run_campaign(config, driver)
    store = driver.store
    metrics = store.step_metrics("skill")
    assert metrics.index.tolist() == [1, 2, 3]
    assert metrics["eval/heldout_score"].notna().all()
    assert metrics["eval/heldout_score"].between(0.0, 1.0).all()
    assert metrics.loc[1, "eval/initial_heldout_score"] >= 0.0
    assert (metrics["eval/heldout_tasks"] == len(campaign_heldout_tasks(store, config))).all()
    assert {"rollout/reward_mean", "train/trained_groups", "schedule/mean_variance"} <= set(metrics.columns)
    rollouts = store.rollouts("skill")
    assert len(rollouts) == B * G * 3 and rollouts["reward"].isin([0.0, 1.0]).all()
    bfcl_tools = {"cd", "ls", "mv", "cp", "mkdir", "touch", "echo", "cat", "grep", "sort", "diff"}
    assert bfcl_tools & {t for cell in rollouts["tools_used"] for t in cell}  # real BFCL calls were made
    held = set(campaign_heldout_tasks(store, config)["task_id"])
    scheduled = set(store.query("SELECT task_id FROM batches WHERE campaign_id = 'skill'")["task_id"])
    assert held and not held & scheduled  # held-out tasks are never trained on
    assert (Paths.from_env().checkpoints / "skill" / "step=3" / "skill_policy.pkl").exists()


def test_campaign_heldout_split_is_disjoint_hash_based_and_takes_whole_splits(driver):
    store = driver.store
    by_fraction = CampaignConfig(campaign_id="f", splits=["base"], heldout_fraction=0.2)
    train, held = campaign_tasks(store, by_fraction), campaign_heldout_tasks(store, by_fraction)
    assert not set(train["task_id"]) & set(held["task_id"])
    assert len(train) + len(held) == 200 and 25 <= len(held) <= 55  # ~20% of BFCL base
    again = campaign_heldout_tasks(store, CampaignConfig(campaign_id="g", splits=["base"], seed=7))
    assert again["task_id"].tolist() == held["task_id"].tolist()  # the rule does not depend on the seed
    none = CampaignConfig(campaign_id="n", splits=["base"], heldout_fraction=0.0)
    assert campaign_heldout_tasks(store, none).empty and len(campaign_tasks(store, none)) == 200


def test_campaign_heldout_by_hash_by_hand_and_config_checks():
    ids = pd.Series([f"t{i}" for i in range(2000)])
    held = heldout_by_hash(ids, 0.25)
    assert 0.22 < held.mean() < 0.28
    assert not heldout_by_hash(ids, 0.0).any()
    assert (heldout_by_hash(ids[:10], 0.25) == held[:10]).all()
    with pytest.raises(ValueError, match="both trained on and held out"):
        CampaignConfig(campaign_id="x", splits=["base"], heldout_splits=["base"])
    with pytest.raises(ValueError, match="heldout_fraction"):
        CampaignConfig(campaign_id="x", heldout_fraction=1.0)
    # a campaign stored before held-out splits existed keeps its whole pool on resume
    assert CampaignConfig.from_dict({"campaign_id": "old"}).heldout_fraction == 0.0
