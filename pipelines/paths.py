"""Where everything lives: one data folder (``ENVSCHED_HOME``, default ``./var``) holds it all."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DAGSTER_YAML = """\
# Written by envsched on first use. Every asset that writes the DuckDB warehouse runs in the
# pool `warehouse`; DuckDB allows one writer process per file, so the pool holds one slot.
concurrency:
  pools:
    default_limit: 1
telemetry:
  enabled: false
nux:
  enabled: false  # no onboarding / newsletter dialog over the UI
"""


@dataclass(frozen=True)
class Paths:
    home: Path

    @classmethod
    def from_env(cls) -> Paths:
        return cls(Path(os.environ.get("ENVSCHED_HOME", "var")).resolve())

    @property
    def warehouse(self) -> Path:
        return self.home / "warehouse.duckdb"

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    @property
    def mlflow_db(self) -> Path:
        return self.home / "mlflow" / "mlflow.db"

    @property
    def mlflow_artifacts(self) -> Path:
        return self.home / "mlflow" / "artifacts"

    @property
    def checkpoints(self) -> Path:
        return self.home / "checkpoints"

    @property
    def landing(self) -> Path:
        return self.home / "landing"

    @property
    def ui_url(self) -> Path:
        """The URL of the last `envsched ui` started on this folder (the CLI submits campaigns to it)."""
        return self.home / "ui-url"

    def ensure(self) -> Paths:
        """Create the folders and the Dagster instance config (kept if the user edited it)."""
        for folder in (self.home, self.dagster_home, self.mlflow_artifacts, self.checkpoints, self.landing):
            folder.mkdir(parents=True, exist_ok=True)
        config = self.dagster_home / "dagster.yaml"
        if not config.exists():
            config.write_text(DAGSTER_YAML)
        return self
