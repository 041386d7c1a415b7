"""House rules that a grep can prove."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_CORE = re.compile(r"^\s*(import|from)\s+(dagster|duckdb|mlflow|torch|vllm)\b", re.M)


def test_layout_core_imports_no_infrastructure():
    offenders = [
        p.name for p in (ROOT / "envsched_core").rglob("*.py") if FORBIDDEN_IN_CORE.search(p.read_text())
    ]
    assert offenders == []


def test_layout_asset_modules_stay_thin():
    long = {p.name: n for p in (ROOT / "assets").glob("*.py") if (n := len(p.read_text().splitlines())) > 250}
    assert long == {}


def test_layout_environments_do_not_import_pipeline_code():
    pattern = re.compile(r"^\s*(import|from)\s+(dagster|duckdb|assets|pipelines|warehouse|training)\b", re.M)
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "environments").rglob("*.py")
        if pattern.search(p.read_text())
    ]
    assert offenders == []
