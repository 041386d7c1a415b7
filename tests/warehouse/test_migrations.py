"""The migration runner on in-memory and file databases."""

import duckdb
import pytest

from warehouse.migrations import SchemaDriftError, apply_migrations, discover

TABLES = {
    "environments", "tools", "tasks", "task_embeddings", "edges_within", "edges_cross", "campaigns",
    "batches", "rollouts", "ingested_files", "task_stats", "predictions", "checkpoints", "step_metrics",
}  # fmt: skip


def test_migrations_create_every_table_of_the_data_flow():
    conn = duckdb.connect(":memory:")
    applied = apply_migrations(conn)
    assert applied == [m.version for m in discover()]
    tables = {r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert TABLES <= tables
    assert {"source_summary", "environment_summary", "task_tools", "campaign_steps"} <= tables


def test_migrations_twice_is_a_no_op(tmp_path):
    path = str(tmp_path / "w.duckdb")
    conn = duckdb.connect(path)
    apply_migrations(conn)
    conn.execute("INSERT INTO step_metrics VALUES ('c', 1, 'rollout/reward_mean', 0.5)")
    before = conn.execute("SELECT version, checksum, applied_at FROM schema_migrations ORDER BY 1").fetchall()
    conn.close()
    conn = duckdb.connect(path)
    assert apply_migrations(conn) == []
    after = conn.execute("SELECT version, checksum, applied_at FROM schema_migrations ORDER BY 1").fetchall()
    assert after == before
    assert conn.execute("SELECT count(*) FROM step_metrics").fetchone()[0] == 1


def test_migrations_refuse_an_edited_applied_migration(tmp_path):
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "001_first.sql").write_text("CREATE TABLE a (x INTEGER);")
    conn = duckdb.connect(":memory:")
    assert apply_migrations(conn, folder) == [1]
    (folder / "001_first.sql").write_text("CREATE TABLE a (x INTEGER, y INTEGER);")
    with pytest.raises(SchemaDriftError, match="001_first.sql changed"):
        apply_migrations(conn, folder)


def test_migrations_roll_back_a_failing_file(tmp_path):
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "001_ok.sql").write_text("CREATE TABLE a (x INTEGER);")
    (folder / "002_bad.sql").write_text("CREATE TABLE b (x INTEGER); CREATE TABLE broken (;")
    conn = duckdb.connect(":memory:")
    with pytest.raises(duckdb.Error):
        apply_migrations(conn, folder)
    tables = {r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert "a" in tables and "b" not in tables
    assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == 1


def test_migrations_reject_badly_named_files(tmp_path):
    (tmp_path / "first.sql").write_text("SELECT 1;")
    with pytest.raises(ValueError, match="NNN_what.sql"):
        discover(tmp_path)
