"""Shared test set-up: offline model loading, a private bfcl-eval project root, a temp ENVSCHED_HOME."""

import os

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
