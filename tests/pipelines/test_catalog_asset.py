"""The catalogue assets through Dagster's own `materialize`, on a real DuckDB file."""

import shutil
from pathlib import Path

import dagster as dg
import pytest

from assets.catalog import catalog_checks, environment_catalog
from environments.base import EnvironmentInfo, EnvironmentSource, SourceCatalog, Task, ToolSpec
from environments.bfcl.data import default_data_dir
from environments.registry import register_source
from pipelines.resources import WarehouseResource
from warehouse.store import Warehouse


def _materialize(warehouse_path: Path, sources=("bfcl_v3_multi_turn",), options=None, raise_on_error=True):
    return dg.materialize(
        [environment_catalog, *catalog_checks],
        resources={"warehouse": WarehouseResource(path=str(warehouse_path))},
        run_config={
            "ops": {
                "environment_catalog": {"config": {"sources": list(sources), "source_options": options or {}}}
            }
        },
        raise_on_error=raise_on_error,
    )


def _counts(store: Warehouse) -> tuple:
    return tuple(store.scalar(f"SELECT count(*) FROM {t}") for t in ("environments", "tools", "tasks"))


def test_catalog_asset_loads_bfcl_and_checks_pass(tmp_path):
    result = _materialize(tmp_path / "w.duckdb")
    assert result.success
    store = Warehouse(tmp_path / "w.duckdb")
    assert store.scalar("SELECT count(*) FROM tasks WHERE source = 'bfcl_v3_multi_turn'") == 800
    checks = result.get_asset_check_evaluations()
    assert len(checks) == len(catalog_checks) and all(c.passed for c in checks)
    materializations = {m.asset_key.to_user_string(): m for m in result.get_asset_materialization_events()}
    assert set(materializations) == {"environments", "tools", "tasks"}
    tasks_meta = materializations["tasks"].materialization.metadata
    assert tasks_meta["rows"].value == 800
    assert tasks_meta["by_source"].value["bfcl_v3_multi_turn"]["inserted"] == 800


def test_catalog_asset_rematerialising_adds_no_rows(tmp_path):
    _materialize(tmp_path / "w.duckdb")
    store = Warehouse(tmp_path / "w.duckdb")
    before = store.query("SELECT task_id, content_hash, loaded_at FROM tasks ORDER BY task_id")
    counts = _counts(store)
    result = _materialize(tmp_path / "w.duckdb")
    meta = {m.asset_key.to_user_string(): m for m in result.get_asset_materialization_events()}
    assert meta["tasks"].materialization.metadata["by_source"].value["bfcl_v3_multi_turn"]["unchanged"] == 800
    assert _counts(store) == counts
    assert store.query("SELECT task_id, content_hash, loaded_at FROM tasks ORDER BY task_id").equals(before)


def _bfcl_copy(tmp_path: Path) -> Path:
    src, dst = default_data_dir(), tmp_path / "bfcl_data"
    shutil.copytree(src / "multi_turn_func_doc", dst / "multi_turn_func_doc")
    (dst / "possible_answer").mkdir(parents=True)
    for category in ("base", "miss_func", "miss_param", "long_context"):
        name = f"BFCL_v4_multi_turn_{category}.json"
        shutil.copy(src / name, dst / name)
        shutil.copy(src / "possible_answer" / name, dst / "possible_answer" / name)
    return dst


@pytest.mark.parametrize(
    "corruption, message",
    [
        # (file to damage, line to write, error expected) -- one row per kind of damage
        (
            ("BFCL_v4_multi_turn_miss_param.json", 17, '{"id": "multi_turn_miss_param_16", "quest'),
            "line 17: invalid JSON",
        ),
        (
            ("possible_answer/BFCL_v4_multi_turn_base.json", 3, '{"id": "multi_turn_base_2"}'),
            "no ground_truth",
        ),
        (
            (
                "BFCL_v4_multi_turn_base.json",
                5,
                '{"id": "x", "question": [], "involved_classes": ["NoSuchAPI"]}',
            ),
            "unknown API class",
        ),
    ],
)
def test_catalog_asset_corrupt_source_file_fails_clearly_and_changes_nothing(tmp_path, corruption, message):
    warehouse_path = tmp_path / "w.duckdb"
    data_dir = _bfcl_copy(tmp_path)
    _materialize(warehouse_path, options={"bfcl_v3_multi_turn": {"data_dir": str(data_dir)}})
    store = Warehouse(warehouse_path)
    before = store.query("SELECT task_id, content_hash FROM tasks ORDER BY task_id")

    name, line_no, text = corruption
    path = data_dir / name
    lines = path.read_text().splitlines()
    lines[line_no - 1] = text
    path.write_text("\n".join(lines) + "\n")
    result = _materialize(
        warehouse_path, options={"bfcl_v3_multi_turn": {"data_dir": str(data_dir)}}, raise_on_error=False
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    error_text = failure.step_failure_data.error.to_string()
    assert message in error_text and name.split("/")[-1] in error_text
    assert store.query("SELECT task_id, content_hash FROM tasks ORDER BY task_id").equals(before)


class _TinySource(EnvironmentSource):
    """A user's own source, registered by name: one environment, two tasks, one with empty text."""

    name = "tiny_test_source"

    def load(self) -> SourceCatalog:
        tool = ToolSpec("ping", "Answer pong.", {"type": "object", "properties": {}}, "read")
        env = EnvironmentInfo("tiny/env", self.name, "env", "a tiny environment", (tool,))
        tasks = [
            Task(f"tiny/{i}", "tiny/env", self.name, "train", (text,), (), ("ping",), (), "none")
            for i, text in enumerate(["ping it", "   "])
        ]
        return SourceCatalog(self.name, [env], tasks)

    def make_environment(self, task):
        raise NotImplementedError


def test_catalog_check_blocks_a_task_with_empty_text(tmp_path):
    register_source("tiny_test_source", _TinySource)
    result = _materialize(tmp_path / "w.duckdb", sources=("tiny_test_source",), raise_on_error=False)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not evaluations["check_task_text_not_empty"].passed
    assert evaluations["check_task_text_not_empty"].metadata["violations"].value == 1
    assert evaluations["check_task_tools_exist"].passed


ALL_SOURCES = ("bfcl_v3_multi_turn", "tau_bench_retail", "tau_bench_airline", "acebench_agent", "synthetic")


def test_catalog_asset_loads_every_source_idempotently_and_views_show_verifiers(tmp_path):
    options = {"synthetic": {"envs": 6, "tasks_per_env": 10}}
    assert _materialize(tmp_path / "w.duckdb", sources=ALL_SOURCES, options=options).success
    store = Warehouse(tmp_path / "w.duckdb")
    summary = store.query("SELECT source, tasks, verifiers FROM source_summary ORDER BY source").set_index(
        "source"
    )
    assert summary["tasks"].to_dict() == {
        "acebench_agent": 50,
        "bfcl_v3_multi_turn": 800,
        "synthetic": 60,
        "tau_bench_airline": 50,
        "tau_bench_retail": 635,
    }
    assert summary["verifiers"].notna().all()
    before = store.query("SELECT task_id, content_hash, loaded_at FROM tasks ORDER BY task_id")
    again = _materialize(tmp_path / "w.duckdb", sources=ALL_SOURCES, options=options)
    counts = {m.asset_key.to_user_string(): m for m in again.get_asset_materialization_events()}
    by_source = counts["tasks"].materialization.metadata["by_source"].value
    assert all(c["inserted"] == c["updated"] == 0 for c in by_source.values())
    assert store.query("SELECT task_id, content_hash, loaded_at FROM tasks ORDER BY task_id").equals(before)
    per_env = store.query("SELECT source, count(*) AS envs FROM environment_summary GROUP BY source")
    assert set(per_env["source"]) == set(ALL_SOURCES)
