"""Warehouse.session: one connection for a block; reads and transactions inside reuse it."""

import subprocess
import sys
import threading

import pandas as pd
import pytest

from warehouse.store import Warehouse


def _store(tmp_path) -> Warehouse:
    store = Warehouse(tmp_path / "w.duckdb")
    with store.transaction() as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    return store


def test_session_reads_and_transactions_use_the_session_connection(tmp_path):
    store = _store(tmp_path)
    with store.session():
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
            with store.reader() as inner:
                assert inner is conn  # same connection: it sees the open transaction's row
                assert inner.execute("SELECT count(*) FROM t").fetchone()[0] == 1
        with store.reader() as again:
            assert again is conn
    assert store.scalar("SELECT sum(x) FROM t") == 1  # committed, and the file is free again


def test_session_transaction_that_fails_rolls_back_and_the_session_goes_on(tmp_path):
    store = _store(tmp_path)
    with store.session():
        with pytest.raises(ZeroDivisionError), store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
            raise ZeroDivisionError
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (2)")
    assert store.query("SELECT x FROM t")["x"].tolist() == [2]


def test_session_other_thread_reads_through_a_cursor(tmp_path):
    store = _store(tmp_path)
    seen = []
    with store.session():
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (5)")
        reader = threading.Thread(target=lambda: seen.append(store.scalar("SELECT sum(x) FROM t")))
        reader.start()
        reader.join()
    assert seen == [5]


def test_session_read_only_refuses_a_write_and_writes_nothing(tmp_path):
    store = _store(tmp_path)
    with store.session(read_only=True):
        assert store.scalar("SELECT count(*) FROM t") == 0
        with pytest.raises(RuntimeError, match="a write inside a read-only session"):
            with store.transaction() as conn:
                conn.execute("INSERT INTO t VALUES (1)")
    assert store.scalar("SELECT count(*) FROM t") == 0


def test_session_read_only_on_a_missing_file_holds_nothing(tmp_path):
    store = Warehouse(tmp_path / "missing.duckdb")
    with store.session(read_only=True):
        assert store.campaign_statuses() == {}
    assert not store.path.exists()


def test_session_holds_the_file_lock_only_for_the_block(tmp_path):
    store = _store(tmp_path)
    probe = [sys.executable, "-c", f"import duckdb; duckdb.connect({str(store.path)!r}, read_only=True)"]
    with store.session():
        assert subprocess.run(probe, capture_output=True).returncode != 0  # another process: locked out
    assert subprocess.run(probe, capture_output=True).returncode == 0


def test_session_memo_lives_for_the_session_and_a_catalogue_write_empties_it(tmp_path):
    store = _store(tmp_path)
    assert store.session_memo() is None  # no session: nothing may be remembered
    with store.session():
        store.session_memo()["pool"] = "fingerprint"
        assert store.session_memo() == {"pool": "fingerprint"}
        embedding = {
            "task_id": "t1",
            "model_name": "m",
            "dim": 2,
            "text_hash": "h",
            "embedding": [[0.1, 0.2]],
        }
        store.upsert_embeddings(pd.DataFrame(embedding))
        assert store.session_memo() == {}
    with store.session():
        assert store.session_memo() == {}  # a new session starts empty
