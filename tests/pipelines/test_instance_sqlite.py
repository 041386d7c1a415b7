"""pipelines.instance_sqlite: the Dagster instance's SQLite files stay open between operations."""

import sqlite3

import sqlalchemy
from sqlalchemy.pool import NullPool

from pipelines import instance_sqlite


def _count(path, sql: str = "SELECT count(*) FROM t") -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def _write_once(path, value: int) -> None:
    """One operation the way Dagster's SQLite storages do it: a fresh engine, one commit, closed."""
    engine = sqlalchemy.create_engine(f"sqlite:///{path}", poolclass=NullPool)
    with engine.connect() as conn, conn.begin():
        conn.execute(sqlalchemy.text("CREATE TABLE IF NOT EXISTS t (x INTEGER)"))
        conn.execute(sqlalchemy.text("PRAGMA journal_mode=WAL"))
        conn.execute(sqlalchemy.text("INSERT INTO t VALUES (:x)"), {"x": value})
    engine.dispose()


def test_instance_sqlite_closing_an_instance_file_keeps_its_log_and_loses_no_commit(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    instance_sqlite.install()
    inside, outside = tmp_path / "dagster" / "runs.db", tmp_path / "other.db"
    try:
        for path in (inside, outside):
            for value in range(3):
                _write_once(path, value)
        # Inside the instance a kept connection holds the file: closing did not checkpoint and delete
        # the write-ahead log; outside nothing is kept, so the last close removed it.
        assert (tmp_path / "dagster" / "runs.db-wal").exists()
        assert not (tmp_path / "other.db-wal").exists()
        # Every commit is visible to another process's connection (here: a fresh one) all the same.
        assert _count(inside) == 3
    finally:
        instance_sqlite.release()
    assert not (tmp_path / "dagster" / "runs.db-wal").exists()  # let go: checkpointed into the file
    assert _count(inside, "SELECT sum(x) FROM t") == 3


def test_instance_sqlite_keeps_at_most_keep_files_open(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    instance_sqlite.install()
    try:
        for i in range(instance_sqlite.KEEP + 4):
            _write_once(tmp_path / f"run{i}.db", i)
            _write_once(tmp_path / f"run{i}.db", i)  # the first open made the file WAL; now it is kept
        kept = [p for p in instance_sqlite._kept if p.startswith(str(tmp_path))]
        assert len(kept) == instance_sqlite.KEEP
        assert not (tmp_path / "run0.db-wal").exists()  # the oldest was let go (and checkpointed)
    finally:
        instance_sqlite.release()
