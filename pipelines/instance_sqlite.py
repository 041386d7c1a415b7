"""Keep the Dagster instance's SQLite files open between operations, in processes that run our code.

Dagster's SQLite storages (run history, event logs: one file per run plus an index) open a connection
per operation and close it again, in WAL mode. Closing the last connection to a WAL database makes
SQLite checkpoint the log into the file and delete it, and the next write re-creates it: a few fsyncs
per operation, about 10 ms on this disk. A campaign step stores about 40 events and runs a few hundred
such operations, which made the instance's bookkeeping the largest single cost of a step (2-3 s of a
20k-task step, measured with ``bench/pipeline_cost.py``).

So, for the files of the instance (under ``DAGSTER_HOME``), this process keeps one idle connection
open to each recently used file. A per-operation connection closing is then not the last one, so
nothing is checkpointed or deleted on close; SQLite's automatic checkpoint (every 1000 log pages)
still runs, and a kept connection checkpoints when it is let go (least recently used beyond
``KEEP``, or at exit). These files also get ``synchronous=NORMAL``, WAL's documented setting: every
commit is in the log before it returns, so a killed process loses nothing it committed; only an OS
crash or power loss can undo Dagster's last few commits (never corrupt a file). That covers Dagster's
run and event history only, never the warehouse, and the sensors' run keys and the ingest ledger make
a re-launched run harmless.
"""

from __future__ import annotations

import atexit
import os
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path

import sqlalchemy

KEEP = 16  # files kept open: the instance's run, index and schedule files plus the latest run files

_kept: OrderedDict[str, sqlite3.Connection] = OrderedDict()
_inherited: list[sqlite3.Connection] = []  # a forked child's copies: never used, never closed
_lock = threading.Lock()
_installed = False


def _instance_file(dbapi_connection) -> str | None:
    """The database file of a new SQLite connection if it belongs to the instance, else None."""
    home = os.environ.get("DAGSTER_HOME")
    if not home or not isinstance(dbapi_connection, sqlite3.Connection):
        return None
    row = dbapi_connection.execute("PRAGMA database_list").fetchone()
    path = row[2] if row else ""
    if not path or not Path(path).resolve().is_relative_to(Path(home).resolve()):
        return None
    return path


def _keep_open(path: str) -> None:
    with _lock:
        if path in _kept:
            _kept.move_to_end(path)
            return
    keeper = sqlite3.connect(path, check_same_thread=False)
    try:
        # Only a connection that has read a WAL database holds it open; a file not yet in WAL mode
        # (being created) is left for the next connection to it.
        if keeper.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            keeper.close()
            return
        keeper.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        keeper.close()
        return
    with _lock:
        _kept[path] = keeper
        while len(_kept) > KEEP:
            _kept.popitem(last=False)[1].close()


def _on_connect(dbapi_connection, _record) -> None:
    try:
        path = _instance_file(dbapi_connection)
    except sqlite3.Error:
        return
    if path is not None:
        # WAL's documented setting: a commit survives the process being killed; only an OS crash or
        # power loss can undo the last commits (never corrupt the file). FULL fsyncs every commit.
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")
        _keep_open(path)


def release() -> None:
    """Close every kept connection (each checkpoints its file)."""
    with _lock:
        while _kept:
            _kept.popitem(last=False)[1].close()


def _forget_in_child() -> None:
    # A forked child must neither use nor close (checkpoint) its parent's SQLite connections.
    _inherited.extend(_kept.values())
    _kept.clear()


def install() -> None:
    """Keep instance files open from now on in this process (idempotent)."""
    global _installed
    if _installed:
        return
    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "connect", _on_connect)
    atexit.register(release)
    os.register_at_fork(after_in_child=_forget_in_child)
    _installed = True
