"""Dynamic sampling through Dagster: the training step rolls out, observes and refills until the
scheduler's rule stops; every rollout of every round is in the landing file, ingested and spent."""

import pandas as pd
import pytest

from envsched_core.graph.relation import edges_to_frame
from pipelines.campaign import CampaignConfig, campaign_catalog
from pipelines.driver import CampaignFailed, run_campaign
from warehouse.store import Warehouse

B, G = 12, 4


def _config(campaign_id: str, scheduler: str, steps: int, **settings) -> CampaignConfig:
    return CampaignConfig(
        campaign_id=campaign_id,
        splits=["base"],
        scheduler=scheduler,
        batch_size=B,
        group_size=G,
        steps=steps,
        scheduler_config=settings,
    )


def _rounds(store: Warehouse, campaign_id: str) -> pd.DataFrame:
    return store.query(
        "SELECT step, coalesce(round, 0) AS round, count(*) AS tasks FROM batches WHERE campaign_id = ? "
        "GROUP BY ALL ORDER BY step, round",
        [campaign_id],
    )


# dapo-1x rolls out B tasks a round and most early groups all fail, so it refills (cap 4); GRESO's
# first round is 1.5 B and refills by its estimate; EnvSched with refill_rounds refills by its predictions.
@pytest.mark.parametrize(
    ("scheduler", "settings"), [("dapo-1x", {}), ("greso", {}), ("envsched", {"refill_rounds": 3})]
)
def test_campaign_dynamic_sampling_refills_in_the_training_step_and_spends_every_rollout(
    driver, scheduler, settings
):
    campaign_id = f"refill-{scheduler}"
    config = _config(campaign_id, scheduler, steps=2, **settings)
    run_campaign(config, driver)
    store = driver.store
    assert store.campaign(campaign_id)["status"] == "completed"
    rounds = _rounds(store, campaign_id)
    assert (rounds["round"] > 0).any()  # at least one step refilled
    per_step = rounds.groupby("step")["tasks"].sum()
    rollouts = store.query(
        "SELECT step, count(*) AS n, count(DISTINCT task_id) AS tasks FROM rollouts WHERE campaign_id = ? "
        "GROUP BY step ORDER BY step",
        [campaign_id],
    ).set_index("step")
    # every task of every round was rolled out G times and ingested
    assert (rollouts["tasks"] == per_step).all() and (rollouts["n"] == per_step * G).all()
    metrics = store.step_metrics(campaign_id)
    assert (metrics["schedule/rollouts_spent"] == rollouts["n"]).all()
    assert (metrics["rollout/refill_rounds"] == rounds.groupby("step")["round"].max()).all()
    # the batch metrics describe the groups trained on: DS keeps only informative ones
    assert (metrics["schedule/zero_variance_groups"] == 0).all()
    assert (metrics["schedule/trained_groups"] <= B).all()
    for step in (1, 2):
        assert store.scheduler_state(campaign_id, step, "refilled") is not None
    if scheduler == "envsched":
        # the re-ranked cross edges were patched from the selected state's: none stale
        catalog = campaign_catalog(store, config)
        edges = store.scheduler_state(campaign_id, 2, "observed")["cross_edges"]
        stored = store.query(
            "SELECT src, dst, similarity FROM edges_cross WHERE campaign_id = ?", [campaign_id]
        )
        expected = edges_to_frame(catalog, *edges)
        assert len(stored) == len(expected) > 0
        merged = stored.merge(expected, on=["src", "dst"], suffixes=("", "_state"))
        assert len(merged) == len(expected)
        assert (merged["similarity"] - merged["similarity_state"]).abs().max() < 1e-6


def test_campaign_refill_after_a_crash_in_the_training_step_writes_the_same_rounds_once(driver, monkeypatch):
    import assets.training

    real = assets.training.save_checkpoint
    calls = {"n": 0}

    def crash_once_at_step_2(engine, root, campaign_id, step, keep=0):
        if step == 2 and calls["n"] == 0:
            calls["n"] += 1
            raise RuntimeError("killed after the refill rounds were saved")
        return real(engine, root, campaign_id, step, keep=keep)

    monkeypatch.setattr(assets.training, "save_checkpoint", crash_once_at_step_2)
    # The step's error fails the campaign with its reason; resuming it (--force) re-runs the step.
    with pytest.raises(
        CampaignFailed, match="training_step of step 2: RuntimeError: killed after the refill"
    ):
        run_campaign(_config("crashed", "greso", steps=2), driver)
    assert calls["n"] == 1
    assert (_rounds(driver.store, "crashed")["step"] == 2).any()  # step 2's rounds were saved
    run_campaign(_config("crashed", "greso", steps=2), driver, force=True)
    run_campaign(_config("clean", "greso", steps=2), driver)
    for sql in (
        "SELECT step, position, task_id, role, round FROM batches WHERE campaign_id = ? ORDER BY step, position",
        "SELECT step, task_id, rollout_idx, reward FROM rollouts WHERE campaign_id = ? ORDER BY ALL",
    ):
        crashed = driver.store.query(sql, ["crashed"]).reset_index(drop=True)
        clean = driver.store.query(sql, ["clean"]).reset_index(drop=True)
        assert len(crashed) > 0 and crashed.equals(clean)


def test_campaign_over_sampled_first_round_is_one_pass_trained_on_b_groups_and_spent(driver):
    config = _config("oversampled", "envsched", steps=3, oversample_factor=1.0)
    run_campaign(config, driver)
    store = driver.store
    assert store.campaign("oversampled")["status"] == "completed"
    assert (_rounds(store, "oversampled")["round"] == 0).all()  # one generation pass a step
    roles = store.query(
        "SELECT step, count(*) FILTER (role <> 'oversample') AS primary_tasks, "
        "count(*) FILTER (role = 'oversample') AS extra FROM batches WHERE campaign_id = ? GROUP BY step ORDER BY step",
        ["oversampled"],
    ).set_index("step")
    assert (roles["primary_tasks"] == B).all()
    assert roles.loc[1, "extra"] == 0 and (roles.loc[2:, "extra"] > 0).all()  # sized once rewards came back
    rollouts = store.query(
        "SELECT step, count(*) AS n, count(DISTINCT task_id) AS tasks FROM rollouts WHERE campaign_id = ? "
        "GROUP BY step ORDER BY step",
        ["oversampled"],
    ).set_index("step")
    assert (rollouts["tasks"] == roles["primary_tasks"] + roles["extra"]).all()
    metrics = store.step_metrics("oversampled")
    assert (metrics["schedule/rollouts_spent"] == rollouts["n"]).all()
    assert (metrics["schedule/trained_groups"] <= B).all()
