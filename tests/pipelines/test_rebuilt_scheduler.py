"""Campaigns whose saved scheduler state no longer fits, rebuilt from their own history on their own clock:
`refresh_catalog` retires and adds tasks while they run (retired tasks dropped, added ones unseen), the
catalogue is re-embedded at another dimension, or a newer release resumes a campaign an earlier one started."""

import json
import logging

import pandas as pd
import pytest

from campaign.config import CampaignConfig
from envsched_core import EnvSched, StateMismatch
from envsched_core.graph.relation import edges_to_frame
from pipelines.campaign import build_scheduler, campaign_catalog, campaign_tasks, restore_scheduler
from pipelines.driver import run_campaign
from warehouse.store import SchedulerState, _save_state

STEPS = 4


def _config(scheduler: str, name: str = "refreshed") -> CampaignConfig:
    return CampaignConfig(
        campaign_id=f"{name}-{scheduler}",
        splits=["base"],
        batch_size=12,
        group_size=4,
        steps=STEPS,
        eval_every=0,
        scheduler=scheduler,
    )


def _rebuild_lines(instance) -> list[tuple[str, str]]:
    """(asset, message) of each "rebuilt" line in the Dagster event logs of the instance's runs."""
    return [
        (event.step_key, event.user_message)
        for run in instance.get_runs()
        for event in instance.all_logs(run.run_id)
        if "Rebuilt from its history" in event.user_message and event.level == logging.WARNING
    ]


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
    # Each rebuild is in the event log of the run that made it (the UI's run view), naming the campaign.
    lines = _rebuild_lines(driver.instance)
    assert lines and all(f"campaign '{config.campaign_id}'" in message for _, message in lines)
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
    if scheduler == "greso":  # rebuilt before step 2's training, it still refilled step 2 by its rule
        first = landed[landed["task_id"].isin(first_round) & ~landed["task_id"].isin(unrolled)]
        informative = int((first.groupby("task_id")["reward"].std(ddof=0) > 0).sum())
        refilled = len(store.batch(config.campaign_id, 2)) > len(first_round)
        assert refilled == (informative < config.batch_size), (informative, refilled)
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


class Stopped(Exception):
    """The process running the campaign went away."""


def _as_earlier_release(store, config: CampaignConfig) -> None:
    """Rewrite what the campaign has stored as an earlier release wrote it: a config without the fields added
    since, and scheduler states in another format. EnvSched's also hold other cross edges (an earlier ranking),
    and so does the warehouse, as one release wrote both."""
    campaign_id = config.campaign_id
    with store.transaction() as conn:
        (text,) = conn.execute("SELECT config FROM campaigns WHERE campaign_id = ?", [campaign_id]).fetchone()
        older = {k: v for k, v in json.loads(text).items() if k not in ("template", "continue_from")}
        conn.execute(
            "UPDATE campaigns SET config = ? WHERE campaign_id = ?", [json.dumps(older), campaign_id]
        )
    catalog = campaign_catalog(store, config)
    saved = store.query("SELECT step, phase FROM scheduler_states WHERE campaign_id = ?", [campaign_id])
    for step, phase in zip(saved["step"].astype(int), saved["phase"], strict=True):
        state = store.scheduler_state(campaign_id, step, phase)
        if "version" in state:  # EnvSched's
            state["version"] -= 1
            state["cross_edges"] = tuple(a[::2] for a in state["cross_edges"])
            if phase == "observed":
                version = store.scalar(
                    "SELECT max(graph_version) FROM edges_cross WHERE campaign_id = ?", [campaign_id]
                )
                store.replace_edges(
                    "edges_cross", edges_to_frame(catalog, *state["cross_edges"]), version, campaign_id
                )
        else:  # a baseline's, saved before one of its fields existed
            del state[next(k for k in state if k not in ("rng", "n_tasks", "catalog_digest", "sampler"))]
        with store.transaction() as conn:
            _save_state(conn, campaign_id, step, phase, SchedulerState.of(state))


@pytest.mark.parametrize("scheduler", ["envsched", "dps"])
def test_a_newer_release_resumes_the_campaign(driver, scheduler):
    store, config = driver.store, _config(scheduler, "upgraded")

    def stop(step: int) -> None:
        raise Stopped

    with pytest.raises(Stopped):
        run_campaign(config, driver, on_step=stop)
    assert store.progress(config.campaign_id)["observed"] == 1
    _as_earlier_release(store, config)
    fresh, _ = build_scheduler(store, config)
    with pytest.raises(StateMismatch):  # what the earlier release saved does not load into this one
        fresh.load_state_dict(store.scheduler_state(config.campaign_id, 1, "observed"))

    assert not _rebuild_lines(driver.instance)
    run_campaign(config, driver)  # registers the stored config again, then carries on

    assert store.campaign(config.campaign_id)["status"] == "completed"
    assert len(_rebuild_lines(driver.instance)) == 1  # rebuilt once, then served from the process's cache
    assert len(store.rollouts(config.campaign_id)) == STEPS * config.batch_size * config.group_size
    after, catalog = restore_scheduler(store, config, STEPS, "observed")  # saved by this release: loads
    if scheduler != "envsched":
        return
    # Rebuilt from the rollouts of the steps the earlier release ran, then carried on: what a fresh scheduler
    # warm-started on the campaign's rollouts holds.
    replayed, _ = build_scheduler(store, config, catalog=catalog)
    replayed.warm_start(store.rollouts(config.campaign_id)[["task_id", "step", "reward"]], step_offset=0)
    assert isinstance(after, EnvSched)
    pd.testing.assert_frame_equal(after.predict(STEPS + 1), replayed.predict(STEPS + 1))
    # The earlier release's cross edges were replaced, not patched as if they were the rebuilt scheduler's.
    stored = store.query("SELECT src, dst FROM edges_cross WHERE campaign_id = ?", [config.campaign_id])
    assert set(zip(stored.src, stored.dst, strict=True)) == set(
        zip(*(after.cross_edges_frame()[c] for c in ("src", "dst")), strict=True)
    )
