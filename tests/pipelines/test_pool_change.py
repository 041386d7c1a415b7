"""A campaign running while `refresh_catalog` retires and adds tasks: it carries on over the new pool, its
scheduler rebuilt from its own history (retired tasks dropped, added ones unseen), on its own clock."""

import pandas as pd
import pytest

from campaign.config import CampaignConfig
from envsched_core import EnvSched
from pipelines.campaign import build_scheduler, campaign_tasks, restore_scheduler
from pipelines.driver import run_campaign

STEPS = 4


def _config(scheduler: str) -> CampaignConfig:
    return CampaignConfig(
        campaign_id=f"refreshed-{scheduler}",
        splits=["base"],
        batch_size=12,
        group_size=4,
        steps=STEPS,
        eval_every=0,
        scheduler=scheduler,
    )


def _set_active(store, task_ids, active: bool) -> None:
    with store.transaction() as conn:
        conn.execute(
            "UPDATE tasks SET active = ? WHERE list_contains(?, task_id)", [active, sorted(task_ids)]
        )


@pytest.mark.parametrize("scheduler", ["envsched", "dps", "greso"])
def test_campaign_carries_on_over_a_refreshed_pool(driver, scheduler, monkeypatch):
    from warehouse.store import Warehouse

    store, config = driver.store, _config(scheduler)
    # 6 tasks join the pool once step 2 is scheduled
    added = set(campaign_tasks(store, config)["task_id"].iloc[-6:])
    _set_active(store, added, False)
    unrolled: set[str] = set()  # retired between step 2's scheduling and its training
    landed_then_retired: set[str] = set()  # retired after step 2 was rolled out, before it was ingested
    save_batch = Warehouse.save_batch

    def refresh_after_scheduling(self, campaign_id, step, batch, state):
        saved = save_batch(self, campaign_id, step, batch, state)
        if step == 2 and not unrolled:
            unrolled.update(batch["task_id"].iloc[:2])
            _set_active(store, unrolled, False)
            _set_active(store, added, True)
        return saved

    def refresh_after_training(step: int) -> None:  # step 1 observed, step 2 scheduled and trained
        if step == 1:
            in_flight = store.batch(config.campaign_id, 2)["task_id"]
            seen_only = sorted(set(store.batch(config.campaign_id, 1)["task_id"]) - set(in_flight))
            landed_then_retired.update([*in_flight[2:4], *seen_only[:2]])
            _set_active(store, landed_then_retired, False)

    monkeypatch.setattr(Warehouse, "save_batch", refresh_after_scheduling)
    run_campaign(config, driver, on_step=refresh_after_training)

    retired = unrolled | landed_then_retired
    assert store.campaign(config.campaign_id)["status"] == "completed"
    assert len(unrolled) == 2 and len(retired) == 6
    # Step 2's batch keeps its rows (the landing contract), but the tasks retired before its training were not
    # rolled out; later batches never pick a retired task.
    landed = store.rollouts(config.campaign_id, 2)
    first_round = store.batch(config.campaign_id, 2, first_round=True)["task_id"]
    assert set(landed["task_id"]) >= set(first_round) and (landed.groupby("task_id").size() == 4).all()
    skipped = landed[landed["status"] == "error"]
    assert set(skipped["task_id"]) == unrolled and len(skipped) == 2 * 4
    assert (skipped["reward"] == 0).all() and skipped["error"].str.contains("retired by a catalogue").all()
    assert (landed.loc[~landed["task_id"].isin(unrolled), "status"] == "ok").all()
    later = pd.concat([store.batch(config.campaign_id, s) for s in range(3, STEPS + 1)])
    assert not set(later["task_id"]) & retired
    assert not set(store.task_stats(config.campaign_id)["task_id"]) & retired
    # The scheduler is over the new pool: what a fresh one gets from the campaign's rollouts of pool tasks.
    after, catalog = restore_scheduler(store, config, STEPS, "observed")
    pool = set(catalog.task_ids)
    assert added <= pool and not retired & pool
    if scheduler != "envsched":
        return
    assert store.scheduler_state(config.campaign_id, STEPS, "observed")["catalog_digest"] == catalog.digest
    replayed, _ = build_scheduler(store, config, catalog=catalog)
    history = store.rollouts(config.campaign_id)
    replayed.warm_start(
        history.loc[history["task_id"].isin(pool), ["task_id", "step", "reward"]], step_offset=0
    )
    assert isinstance(after, EnvSched) and after.step_offset == 0
    pd.testing.assert_frame_equal(after.predict(STEPS + 1), replayed.predict(STEPS + 1))
    predicted = store.query(
        "SELECT task_id FROM predictions WHERE campaign_id = ? AND step = ?", [config.campaign_id, STEPS]
    )
    assert added <= set(predicted["task_id"]) and not retired & set(predicted["task_id"])
    # The campaign's re-ranked cross edges were rewritten on the new pool, not patched from the old one.
    stored = store.query("SELECT src, dst FROM edges_cross WHERE campaign_id = ?", [config.campaign_id])
    assert set(zip(stored.src, stored.dst, strict=True)) == set(
        zip(*(after.cross_edges_frame()[c] for c in ("src", "dst")), strict=True)
    )


def test_campaign_carries_on_after_its_catalogue_is_re_embedded_at_another_dimension(driver):
    """Same tasks, new embedding model of another dimension: the saved state's outcome-model weights no longer
    fit (StateMismatch), so the scheduler is rebuilt from the campaign's rollouts on the new features."""
    store, config = driver.store, _config("envsched")

    def re_embed(step: int) -> None:
        if step == 1:
            with store.transaction() as conn:
                conn.execute(
                    "UPDATE task_embeddings SET embedding = embedding[1:16], dim = 16, model_name = 'other-16', "
                    "computed_at = now()"
                )

    run_campaign(config, driver, on_step=re_embed)

    assert store.campaign(config.campaign_id)["status"] == "completed"
    after, catalog = restore_scheduler(store, config, STEPS, "observed")
    assert catalog.embeddings.shape[1] == 16
    replayed, _ = build_scheduler(store, config, catalog=catalog)
    replayed.warm_start(store.rollouts(config.campaign_id)[["task_id", "step", "reward"]], step_offset=0)
    pd.testing.assert_frame_equal(after.predict(STEPS + 1), replayed.predict(STEPS + 1))
    stored = store.query("SELECT src, dst FROM edges_cross WHERE campaign_id = ?", [config.campaign_id])
    assert set(zip(stored.src, stored.dst, strict=True)) == set(
        zip(*(after.cross_edges_frame()[c] for c in ("src", "dst")), strict=True)
    )
