"""Shared test set-up: offline model loading, a private bfcl-eval project root, a temp ENVSCHED_HOME."""

import contextlib
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _bfcl_project_root(tmp_path_factory):
    os.environ["BFCL_PROJECT_ROOT"] = str(tmp_path_factory.mktemp("bfcl_root"))


@pytest.fixture(autouse=True)
def _no_inherited_dagster_state_storage():
    """Each test starts with no Dagster defs-state storage in the context. A Dagster instance entered and never
    exited (Dagster's ExitStacks do not close when collected) leaves its storage there; once that instance is
    collected, every later `dg.materialize` fails with "undefined DagsterInstance weakref". Seen once in CI,
    order- and GC-dependent, leaker not found; this keeps one test's leak out of the others."""
    if "dagster" not in sys.modules:
        yield
        return
    from dagster._core.storage.defs_state.base import set_defs_state_storage

    with set_defs_state_storage(None):
        yield


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh ENVSCHED_HOME for one test."""
    monkeypatch.setenv("ENVSCHED_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def duckdb_reader():
    """A context manager: another process (a notebook, say) holding a read-only connection to a DuckDB
    file until the block ends; yields that process, already connected."""

    @contextlib.contextmanager
    def hold(path):
        reader = subprocess.Popen(
            [sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(path)!r}, read_only=True);"
             " print('ready', flush=True); time.sleep(60)"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert reader.stdout.readline().strip() == "ready"
            yield reader
        finally:
            reader.kill()
            reader.wait()

    return hold
