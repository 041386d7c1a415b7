"""A prepared warehouse (BFCL base tasks, embedded, both graphs built) copied into each test's home."""

import os
import shutil

import dagster as dg
import pytest

from pipelines.definitions import defs
from pipelines.driver import DriverContext
from pipelines.jobs import catalog_run_config
from pipelines.paths import Paths
from warehouse.store import Warehouse

BFCL_BASE = catalog_run_config(["bfcl_v3_multi_turn"], {"bfcl_v3_multi_turn": {"categories": ["base"]}})


@pytest.fixture(scope="session")
def prepared_warehouse(tmp_path_factory):
    home = Paths(tmp_path_factory.mktemp("prepared")).ensure()
    previous = os.environ.get("ENVSCHED_HOME")
    os.environ["ENVSCHED_HOME"] = str(home.home)  # the code location's resources resolve it at run time
    try:
        with dg.instance_for_test() as instance:
            for job, config in (("refresh_catalog", BFCL_BASE), ("build_graph", None)):
                assert (
                    defs.resolve_job_def(job).execute_in_process(instance=instance, run_config=config).success
                )
    finally:
        if previous is None:
            os.environ.pop("ENVSCHED_HOME")
        else:
            os.environ["ENVSCHED_HOME"] = previous
    return home.warehouse


@pytest.fixture
def driver(tmp_path, monkeypatch, prepared_warehouse):
    """A DriverContext over a fresh home holding a copy of the prepared warehouse."""
    home = Paths(tmp_path / "home").ensure()
    monkeypatch.setenv("ENVSCHED_HOME", str(home.home))
    shutil.copy(prepared_warehouse, home.warehouse)
    with dg.instance_for_test() as instance:
        yield DriverContext(defs=defs, instance=instance, store=Warehouse(home.warehouse))


CAMPAIGN_TABLE_QUERIES = (
    "SELECT step, task_id, role FROM batches WHERE campaign_id = ? ORDER BY step, position",
    "SELECT step, task_id, rollout_idx, reward FROM rollouts WHERE campaign_id = ? ORDER BY ALL",
    "SELECT step, task_id, predicted_variance FROM predictions WHERE campaign_id = ? ORDER BY ALL",
)


@pytest.fixture
def campaign_tables():
    """What a campaign must reproduce exactly after a kill or a re-delivery: its batches, rollouts and
    predictions, as `campaign_tables(store, campaign_id)`."""

    def tables(store: Warehouse, campaign_id: str):
        return [store.query(sql, [campaign_id]).reset_index(drop=True) for sql in CAMPAIGN_TABLE_QUERIES]

    return tables
