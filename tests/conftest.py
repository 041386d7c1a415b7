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
