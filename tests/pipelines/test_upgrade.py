"""A campaign stopped mid-way and resumed by a newer release: the campaign row and the scheduler states it
finds were written by the earlier one. The config still registers, and a state the new scheduler cannot
load (another state format) is rebuilt from the campaign's rollouts instead of failing the campaign."""

import json

import pandas as pd
import pytest

from campaign.config import CampaignConfig
from envsched_core import EnvSched, StateMismatch
from envsched_core.graph.relation import edges_to_frame
from pipelines.campaign import build_scheduler, campaign_catalog, restore_scheduler
from pipelines.driver import run_campaign
from warehouse.store import SchedulerState, _save_state

STEPS = 4


class Stopped(Exception):
    """The process running the campaign went away."""


def _config(scheduler: str) -> CampaignConfig:
    return CampaignConfig(
        campaign_id=f"upgraded-{scheduler}",
        splits=["base"],
        batch_size=12,
        group_size=4,
        steps=STEPS,
        eval_every=0,
        scheduler=scheduler,
    )


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
    store, config = driver.store, _config(scheduler)

    def stop(step: int) -> None:
        raise Stopped

    with pytest.raises(Stopped):
        run_campaign(config, driver, on_step=stop)
    assert store.progress(config.campaign_id)["observed"] == 1
    _as_earlier_release(store, config)
    fresh, _ = build_scheduler(store, config)
    with pytest.raises(StateMismatch):  # what the earlier release saved does not load into this one
        fresh.load_state_dict(store.scheduler_state(config.campaign_id, 1, "observed"))

    run_campaign(config, driver)  # registers the stored config again, then carries on

    assert store.campaign(config.campaign_id)["status"] == "completed"
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
