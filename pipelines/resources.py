"""Dagster resources: where the data folder is, and the warehouse inside it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from pipelines.paths import Paths
from warehouse.store import Warehouse


class PathsResource(dg.ConfigurableResource):
    """The data folder; empty means ``ENVSCHED_HOME`` (default ``./var``)."""

    home: str = ""

    def paths(self) -> Paths:
        return (Paths(Path(self.home).resolve()) if self.home else Paths.from_env()).ensure()


class WarehouseResource(dg.ConfigurableResource):
    """The DuckDB warehouse; empty path means ``<home>/warehouse.duckdb``."""

    path: str = ""

    def warehouse(self) -> Warehouse:
        return Warehouse(self.path or Paths.from_env().ensure().warehouse)

    @contextmanager
    def session(self, read_only: bool = False) -> Iterator[Warehouse]:
        """The warehouse with one connection held for the block (``Warehouse.session``): for an asset
        that holds the `warehouse` pool slot, or a sensor tick (``read_only``)."""
        with self.warehouse().session(read_only=read_only) as store:
            yield store
