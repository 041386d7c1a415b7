"""Catalogue upserts: idempotent, change-aware, all-or-nothing."""

import pandas as pd
import pytest

from environments.frames import catalog_frames
from environments.registry import get_source
from warehouse.store import Warehouse, WarehouseMissingError


@pytest.fixture(scope="module")
def frames():
    return catalog_frames(get_source("bfcl_v3_multi_turn", categories=["base"]).load())


def _snapshot(store: Warehouse) -> dict[str, list]:
    return {
        t: store.query(f"SELECT * EXCLUDE (loaded_at) FROM {t} ORDER BY ALL").astype(str).values.tolist()
        for t in ("environments", "tools", "tasks")
    }


def test_store_upsert_twice_adds_no_rows(tmp_path, frames):
    store = Warehouse(tmp_path / "w.duckdb")
    first = store.upsert_catalog("bfcl_v3_multi_turn", frames.environments, frames.tools, frames.tasks)
    assert first["tasks"].inserted == 200
    snapshot = _snapshot(store)
    second = store.upsert_catalog("bfcl_v3_multi_turn", frames.environments, frames.tools, frames.tasks)
    assert second["tasks"].inserted == second["tasks"].updated == 0
    assert second["tasks"].unchanged == 200
    assert _snapshot(store) == snapshot


def test_store_upsert_updates_changed_rows_and_deactivates_vanished_ones(tmp_path, frames):
    store = Warehouse(tmp_path / "w.duckdb")
    store.upsert_catalog("bfcl_v3_multi_turn", frames.environments, frames.tools, frames.tasks)
    tasks = frames.tasks.copy()
    tasks.loc[0, "text"] = "changed text"
    tasks.loc[0, "content_hash"] = "different"
    counts = store.upsert_catalog("bfcl_v3_multi_turn", frames.environments, frames.tools, tasks.iloc[:-1])
    assert (counts["tasks"].updated, counts["tasks"].deactivated, counts["tasks"].inserted) == (1, 1, 0)
    assert store.scalar("SELECT text FROM tasks WHERE task_id = ?", [tasks.task_id[0]]) == "changed text"
    assert store.scalar("SELECT count(*) FROM tasks WHERE active") == 199
    assert store.scalar("SELECT count(*) FROM tasks") == 200


def test_store_failed_upsert_leaves_warehouse_unchanged(tmp_path, frames):
    store = Warehouse(tmp_path / "w.duckdb")
    store.upsert_catalog("bfcl_v3_multi_turn", frames.environments, frames.tools, frames.tasks)
    snapshot = _snapshot(store)
    envs = frames.environments.copy()
    envs["content_hash"] = "new"  # environments would be rewritten ...
    tools = frames.tools.copy()
    tools.loc[0, ["effect", "content_hash"]] = ["explode", "new"]  # ... but a tool breaks a CHECK
    with pytest.raises(Exception, match="(?i)check"):
        store.upsert_catalog("bfcl_v3_multi_turn", envs, tools, frames.tasks)
    assert _snapshot(store) == snapshot


def test_store_rejects_duplicate_keys_in_one_load(tmp_path, frames):
    store = Warehouse(tmp_path / "w.duckdb")
    tasks = pd.concat([frames.tasks, frames.tasks.iloc[:1]])
    with pytest.raises(ValueError, match="duplicate keys"):
        store.upsert_catalog("bfcl_v3_multi_turn", frames.environments, frames.tools, tasks)
    assert store.scalar("SELECT count(*) FROM tasks") == 0


def test_store_reader_names_a_missing_warehouse(tmp_path):
    with pytest.raises(WarehouseMissingError, match="no warehouse at"):
        Warehouse(tmp_path / "absent.duckdb").query("SELECT 1")
