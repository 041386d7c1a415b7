"""What keeps a step cheap at scale: the per-process scheduler cache, exact resume from typed-array
state, incremental task_stats, and build_graph keeping graphs whose inputs did not change."""

import dagster as dg
import numpy as np
import pandas as pd

from envsched_core.embedding import resolve_backend
from pipelines import scheduler_cache
from pipelines.campaign import CampaignConfig, dump_state, restore_scheduler
from pipelines.driver import _execute, run_campaign
from warehouse.store import _save_state


def _config(campaign_id: str, steps: int = 3) -> CampaignConfig:
    return CampaignConfig(campaign_id=campaign_id, splits=["base"], batch_size=12, group_size=4, steps=steps)


def _assert_states_equal(a, b):
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_states_equal(a[k], b[k])
    elif isinstance(a, list | tuple):
        for x, y in zip(a, b, strict=True):
            _assert_states_equal(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


def test_scheduler_cache_serves_the_committed_scheduler_which_equals_a_rebuild(driver):
    config = _config("cached")
    run_campaign(config, driver)
    store = driver.store
    cached, _ = scheduler_cache.restore(store, config, 3, "observed")
    scheduler_cache.keep(store, config, cached, 3, "observed")
    again, _ = scheduler_cache.restore(store, config, 3, "observed")
    assert again is cached  # nothing changed: the same object, no rebuild

    rebuilt, _ = restore_scheduler(store, config, 3, "observed")  # what a fresh process does
    assert rebuilt is not cached
    _assert_states_equal(cached.state_dict(), store.scheduler_state("cached", 3, "observed"))
    _assert_states_equal(rebuilt.state_dict(), cached.state_dict())
    pd.testing.assert_frame_equal(rebuilt.select(4), cached.select(4))  # exact resume


def test_scheduler_cache_rebuilds_when_another_process_rewrote_the_state(driver):
    config = _config("foreign", steps=2)
    run_campaign(config, driver)
    store = driver.store
    cached, _ = scheduler_cache.restore(store, config, 2, "observed")
    scheduler_cache.keep(store, config, cached, 2, "observed")
    other, _ = restore_scheduler(store, config, 2, "observed")
    other.select(3)  # moves its RNG: a different state for the same step and phase
    with store.transaction() as conn:
        _save_state(conn, "foreign", 2, "observed", dump_state(other))
    served, _ = scheduler_cache.restore(store, config, 2, "observed")
    assert served is not cached
    _assert_states_equal(served.state_dict(), other.state_dict())


def test_task_stats_incremental_equals_recompute_from_history(driver):
    from envsched_core import TaskStats

    config = _config("stats", steps=4)
    run_campaign(config, driver)
    store = driver.store
    catalog = scheduler_cache.catalog(store, config)
    history = store.rollouts("stats")[["task_id", "step", "reward"]]
    full = TaskStats.from_rollouts(history, catalog, gamma=0.8).to_frame(catalog)
    stored = store.task_stats("stats")
    assert set(stored["step"]) == {4}
    merged = full.merge(stored, on="task_id", suffixes=("", "_stored"))
    assert len(merged) == len(full) == len(stored)
    for column in ("n", "m", "mu", "trend", "last_step"):
        np.testing.assert_array_equal(merged[column].to_numpy(), merged[f"{column}_stored"].to_numpy())


def test_build_graph_keeps_graphs_whose_catalogue_and_embeddings_are_unchanged(driver):
    store = driver.store
    before = (store.edge_version("edges_within"), store.edge_version("edges_cross"))
    _execute(driver, "build_graph")
    assert (store.edge_version("edges_within"), store.edge_version("edges_cross")) == before
    forced = {"ops": {name: {"config": {"force": True}} for name in ("within_env_edges", "cross_env_edges")}}
    _execute(driver, "build_graph", run_config=forced)
    assert store.edge_version("edges_within") != before[0] and store.edge_version("edges_cross") != before[1]
    assert store.scalar("SELECT count(*) FROM edges_within") > 0


def test_campaign_cross_edges_written_as_changes_equal_the_schedulers_edges(driver):
    config = _config("crossdelta", steps=3)
    run_campaign(config, driver)
    store = driver.store
    scheduler, _ = restore_scheduler(store, config, 3, "observed")
    expected = scheduler.cross_edges_frame().sort_values(["src", "dst"]).reset_index(drop=True)
    stored = store.query(
        "SELECT src, dst, similarity FROM edges_cross WHERE campaign_id = 'crossdelta' ORDER BY src, dst"
    )
    assert len(expected) > 0
    pd.testing.assert_frame_equal(stored, expected, check_dtype=False)


def test_task_embeddings_reembeds_only_missing_rows_and_names_the_backend_that_ran(driver):
    store = driver.store
    gone = store.query("SELECT task_id, embedding FROM task_embeddings ORDER BY task_id LIMIT 5")
    with store.transaction() as conn:
        conn.execute(
            "DELETE FROM task_embeddings WHERE task_id IN (SELECT unnest(?))", [gone.task_id.tolist()]
        )
    _execute(driver, "build_graph")
    event = driver.instance.get_latest_materialization_event(dg.AssetKey("task_embeddings"))
    metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    assert metadata["embedded"] == 5 and metadata["cpu_seconds"] > 0
    assert metadata["backend"].startswith(resolve_backend("auto", "auto")[0])  # e.g. "openvino (bf16)"
    again = store.query("SELECT task_id, embedding FROM task_embeddings ORDER BY task_id LIMIT 5")
    cosine = np.sum(np.stack(again.embedding) * np.stack(gone.embedding), axis=1)
    assert again.task_id.tolist() == gone.task_id.tolist() and cosine.min() >= 0.999
