"""Numbered SQL migrations (``migrations/NNN_what.sql``) applied in order, each recorded once.

``schema_migrations`` holds the version, name and checksum of every applied file, so re-running is
a no-op, and an applied file that was edited afterwards is refused (schema drift) instead of being
silently ignored.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import duckdb

_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


class SchemaDriftError(RuntimeError):
    """The database records a migration whose file has since changed or disappeared."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]


def discover(folder: Path | None = None) -> list[Migration]:
    folder = Path(folder) if folder else Path(str(resources.files("warehouse") / "migrations"))
    found = []
    for path in sorted(folder.glob("*.sql")):
        match = _NAME.match(path.name)
        if not match:
            raise ValueError(f"{path}: migration files must be named NNN_what.sql")
        found.append(Migration(int(match.group(1)), match.group(2), path.read_text()))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"{folder}: two migrations share a version number: {versions}")
    return found


def apply_migrations(conn: duckdb.DuckDBPyConnection, folder: Path | None = None) -> list[int]:
    """Apply every pending migration, each in its own transaction; returns the versions applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, checksum VARCHAR NOT NULL,"
        " applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)"
    )
    applied = dict(conn.execute("SELECT version, checksum FROM schema_migrations").fetchall())
    migrations = {m.version: m for m in discover(folder)}
    for version, checksum in applied.items():
        if version not in migrations:
            raise SchemaDriftError(
                f"database has migration {version:03d}, which no longer exists in the code"
            )
        if migrations[version].checksum != checksum:
            raise SchemaDriftError(
                f"migration {version:03d}_{migrations[version].name}.sql changed after it was applied; "
                "add a new migration instead of editing an applied one"
            )
    done = []
    for version in sorted(set(migrations) - set(applied)):
        migration = migrations[version]
        conn.execute("BEGIN TRANSACTION")
        try:
            conn.execute(migration.sql)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (?, ?, ?)",
                [version, migration.name, migration.checksum],
            )
            conn.execute("COMMIT")
        except Exception:
            conn.execute("ROLLBACK")
            raise
        done.append(version)
    return done
