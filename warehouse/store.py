"""All reads and writes of the DuckDB warehouse.

DuckDB lets one process write a file at a time (other processes may only read, and only while no
writer holds it). So connections are short-lived: a writer opens, applies pending migrations, runs
one transaction and closes; readers open ``read_only``. Opening retries for a while when another
process holds the lock, instead of failing a run. In Dagster every writing asset also sits in one
concurrency pool of size 1 (see ``pipelines/definitions.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from warehouse.migrations import apply_migrations

_LOCK_WAIT_S = 60.0


class WarehouseMissingError(FileNotFoundError):
    """A read was attempted before anything created the warehouse file."""


@dataclass(frozen=True)
class UpsertCounts:
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    deactivated: int = 0


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    text = str(exc)
    return "lock" in text.lower() and ("Conflicting" in text or "Could not set lock" in text)


class Warehouse:
    """The warehouse file at ``path``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    # -- connections -------------------------------------------------------------------------
    def _open(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + _LOCK_WAIT_S
        delay = 0.05
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.IOException as exc:
                if not _is_lock_conflict(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    @contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if not self.path.exists():
            raise WarehouseMissingError(
                f"no warehouse at {self.path}; run `make run` (or materialise environment_catalog) first"
            )
        conn = self._open(read_only=True)
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A write transaction: everything inside commits together or not at all."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._open(read_only=False)
        try:
            apply_migrations(conn)
            conn.execute("BEGIN TRANSACTION")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()

    def migrate(self) -> None:
        with self.transaction():
            pass

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        """Run a read-only query and return a DataFrame."""
        with self.reader() as conn:
            return conn.execute(sql, params or []).df()

    def scalar(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        with self.reader() as conn:
            row = conn.execute(sql, params or []).fetchone()
        return None if row is None else row[0]

    # -- catalogue ---------------------------------------------------------------------------
    def upsert_catalog(
        self, source: str, environments: pd.DataFrame, tools: pd.DataFrame, tasks: pd.DataFrame
    ) -> dict[str, UpsertCounts]:
        """Load one source's catalogue in one transaction.

        Rows are compared by ``content_hash``: new rows are inserted, changed ones replaced,
        identical ones untouched; rows of this source that are no longer delivered are marked
        inactive (rollouts may still reference them). A failure rolls everything back.
        """
        with self.transaction() as conn:
            return {
                "environments": _upsert_by_hash(conn, "environments", ["env_id"], source, environments),
                "tools": _upsert_by_hash(conn, "tools", ["env_id", "tool_name"], source, tools),
                "tasks": _upsert_by_hash(conn, "tasks", ["task_id"], source, tasks),
            }


def _upsert_by_hash(
    conn: duckdb.DuckDBPyConnection, table: str, keys: list[str], source: str, rows: pd.DataFrame
) -> UpsertCounts:
    if rows.duplicated(keys).any():
        dupes = rows.loc[rows.duplicated(keys, keep=False), keys].drop_duplicates().head(5)
        raise ValueError(
            f"{table}: duplicate keys {keys} in the rows to load, e.g. {dupes.to_dict('records')}"
        )
    key_list = ", ".join(keys)
    existing = conn.execute(
        f"SELECT {key_list}, content_hash, active FROM {table} WHERE source = ?", [source]
    ).df()
    merged = rows[keys + ["content_hash"]].merge(
        existing, on=keys, how="left", suffixes=("", "_old"), indicator=True
    )
    is_new = (merged["_merge"] == "left_only").to_numpy()
    is_changed = (~is_new) & (
        (merged["content_hash"] != merged["content_hash_old"]).to_numpy()
        | merged["active"].eq(False).to_numpy()
    )
    to_write = rows.loc[is_new | is_changed].copy()
    if len(to_write):
        to_write["active"] = True
        to_write["loaded_at"] = datetime.now(UTC).replace(tzinfo=None)
        columns = list(to_write.columns)
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in keys)
        conn.register("_incoming", to_write)
        try:
            conn.execute(
                f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(columns)} FROM _incoming "
                f"ON CONFLICT ({key_list}) DO UPDATE SET {updates}"
            )
        finally:
            conn.unregister("_incoming")
    gone = existing[existing["active"]].merge(rows[keys], on=keys, how="left", indicator=True)
    gone = gone[gone["_merge"] == "left_only"][keys]
    if len(gone):
        conn.register("_gone", gone)
        try:
            match = " AND ".join(f"{table}.{k} = _gone.{k}" for k in keys)
            conn.execute(f"UPDATE {table} SET active = FALSE FROM _gone WHERE {match}")
        finally:
            conn.unregister("_gone")
    return UpsertCounts(
        inserted=int(is_new.sum()),
        updated=int(is_changed.sum()),
        unchanged=int(len(rows) - is_new.sum() - is_changed.sum()),
        deactivated=len(gone),
    )
