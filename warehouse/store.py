"""All reads and writes of the DuckDB warehouse.

DuckDB lets one process write a file at a time (other processes may only read, and only while no
writer holds it). So connections are short-lived: a writer opens, applies pending migrations, runs
one transaction and closes; readers open ``read_only``. Opening retries for a while when another
process holds the lock, instead of failing a run. In Dagster every writing asset also sits in one
concurrency pool of size 1 (see ``pipelines/definitions.py``).

An asset that holds the pool slot anyway opens one connection for its whole body
(:meth:`Warehouse.session`): every read and transaction inside reuses it, so a step pays one open,
one migration check and one checkpoint per asset instead of one per query (each open of a large file
plus its close cost tens of milliseconds).
"""

from __future__ import annotations

import json
import pickle
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from warehouse.migrations import apply_migrations
from warehouse.state_codec import decode_state, encode_state, manifest_holds

_LOCK_WAIT_S = 60.0
_SQL_DIR = Path(__file__).parent / "sql"


def _sql(name: str) -> str:
    """The query in ``warehouse/sql/<name>.sql``."""
    return (_SQL_DIR / f"{name}.sql").read_text()


class ConflictingDelivery(ValueError):
    """A file for a step whose rollouts are already loaded, with different rows: quarantined, not loaded."""


class SqlRefused(ValueError):
    """A user query that is not a single read-only SELECT, or that DuckDB rejected (message says why)."""


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


class WarehouseLockedError(RuntimeError):
    """Another process held the warehouse's lock for the whole wait; retryable once it lets go."""


def lock_holder(message: str) -> str:
    """``PID n (command line)`` of the process DuckDB names in a lock conflict, or what it said."""
    match = re.search(r"PID (\d+)", message)
    if not match:
        return "another process"
    pid = int(match.group(1))
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        command = ""
    return f"PID {pid}" + (f" ({command[:160]})" if command else "")


@dataclass
class _Session:
    """One connection held open by :meth:`Warehouse.session` (per warehouse file, per process)."""

    conn: duckdb.DuckDBPyConnection
    thread: int
    read_only: bool
    depth: int = 1
    in_transaction: bool = False
    memo: dict = field(default_factory=dict)


_sessions: dict[str, _Session] = {}
_sessions_lock = threading.Lock()


class Warehouse:
    """The warehouse file at ``path``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def _session(self) -> _Session | None:
        return _sessions.get(str(self.path.resolve()))

    def session_memo(self) -> dict | None:
        """A dict for values derived from the catalogue and the global graph (tasks, task_embeddings,
        edges_within, global edges_cross) while this thread's session holds the file: no other process
        can write it meanwhile, and this process's writers of those tables empty it. None outside one."""
        session = self._session()
        return session.memo if session is not None and session.thread == threading.get_ident() else None

    def _catalog_or_graph_changes(self) -> None:
        session = self._session()
        if session is not None:
            session.memo.clear()

    @contextmanager
    def session(self, read_only: bool = False) -> Iterator[Warehouse]:
        """Hold one connection for the block: every ``reader`` and ``transaction`` of this file in this
        process reuses it (another thread gets a cursor of it). A writer session locks the file against
        other processes for the block, so only code that holds the warehouse pool opens one; a
        ``read_only`` session refuses transactions (and holds nothing while the file does not exist).
        Sessions nest (the outer one owns the connection)."""
        key = str(self.path.resolve())
        with _sessions_lock:
            held = _sessions.get(key)
            if held is not None:
                if held.read_only and not read_only:
                    raise RuntimeError(f"warehouse {self.path}: a writer session inside a read-only one")
                held.depth += 1
        if held is not None:
            try:
                yield self
            finally:
                with _sessions_lock:
                    held.depth -= 1
            return
        if read_only and not self.path.exists():
            yield self  # nothing to hold: each read says the warehouse is missing, as without a session
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._open(read_only=read_only)
        try:
            if not read_only:
                apply_migrations(conn)
            with _sessions_lock:
                _sessions[key] = _Session(conn, threading.get_ident(), read_only)
            try:
                yield self
            finally:
                with _sessions_lock:
                    _sessions.pop(key, None)
        finally:
            conn.close()

    # -- connections -------------------------------------------------------------------------
    def _open(self, read_only: bool, config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + _LOCK_WAIT_S
        delay = 0.05
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only, config=config or {})
            except duckdb.IOException as exc:
                if not _is_lock_conflict(exc):
                    raise
                if time.monotonic() > deadline:
                    raise WarehouseLockedError(
                        f"warehouse {self.path} is locked by {lock_holder(str(exc))} for more than "
                        f"{_LOCK_WAIT_S:.0f} s; close that connection (a notebook or a DuckDB shell "
                        "keeps it while open) or wait for it to finish, then retry"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    @contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        session = self._session()
        if session is not None:
            if session.thread == threading.get_ident():
                yield session.conn
                return
            cursor = session.conn.cursor()  # another thread: its own connection to the same database
            try:
                yield cursor
            finally:
                cursor.close()
            return
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
        session = self._session()
        if session is not None:
            if session.read_only:
                raise RuntimeError(f"warehouse {self.path}: a write inside a read-only session")
            if session.thread != threading.get_ident():
                raise RuntimeError(f"warehouse {self.path}: a write from another thread during a session")
            if session.in_transaction:  # nested: part of the outer transaction
                yield session.conn
                return
            session.in_transaction = True
            try:
                yield from _in_transaction(session.conn)
            finally:
                session.in_transaction = False
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._open(read_only=False)
        try:
            apply_migrations(conn)
            yield from _in_transaction(conn)
        finally:
            conn.close()

    def migrate(self) -> None:
        with self.transaction():
            pass

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        """Run a read-only query and return a DataFrame."""
        with self.reader() as conn:
            return conn.execute(sql, params or []).df()

    def safe_query(self, sql: str) -> pd.DataFrame:
        """A user's query (``envsched sql``): one SELECT (or EXPLAIN), on a read-only connection with
        external access disabled and the configuration locked, so it can neither write the database
        nor read or write any file (COPY, EXPORT DATABASE, ATTACH, read_csv, ...)."""
        try:
            statements = duckdb.connect(":memory:").extract_statements(sql)
        except duckdb.Error as exc:
            raise SqlRefused(f"SQL does not parse: {' '.join(str(exc).split())}") from None
        if len(statements) != 1:
            raise SqlRefused(f"one statement at a time, got {len(statements)}")
        kind = statements[0].type
        if kind not in (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN):
            raise SqlRefused(f"only SELECT (or EXPLAIN) queries are allowed here, not {kind.name}")
        if not self.path.exists():
            raise WarehouseMissingError(f"no warehouse at {self.path}; run `make run` first")
        conn = self._open(read_only=True, config={"enable_external_access": False})
        try:
            conn.execute("SET lock_configuration = true")
            return conn.execute(sql).df()
        except duckdb.Error as exc:
            raise SqlRefused(" ".join(str(exc).split())) from None
        finally:
            conn.close()

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
        self._catalog_or_graph_changes()
        # The rows carry the name the source was selected by (`module:Class`, an entry point, a registered name),
        # whatever the source object calls itself: campaigns filter on it and every process resolves it.
        environments, tools, tasks = (frame.assign(source=source) for frame in (environments, tools, tasks))
        with self.transaction() as conn:
            return {
                "environments": _upsert_by_hash(conn, "environments", ["env_id"], source, environments),
                "tools": _upsert_by_hash(conn, "tools", ["env_id", "tool_name"], source, tools),
                "tasks": _upsert_by_hash(conn, "tasks", ["task_id"], source, tasks),
            }

    # -- graph -------------------------------------------------------------------------------
    def embedding_status(self) -> pd.DataFrame:
        """Active tasks with their text hash and the hash/model their stored embedding was made from."""
        return self.query(
            "SELECT t.task_id, t.text, t.text_hash, e.text_hash AS embedded_hash, e.model_name "
            "FROM tasks t LEFT JOIN task_embeddings e USING (task_id) WHERE t.active ORDER BY t.task_id"
        )

    def upsert_embeddings(self, rows: pd.DataFrame) -> int:
        """rows: task_id, model_name, dim, text_hash, embedding (list of floats)."""
        self._catalog_or_graph_changes()
        rows = rows.assign(computed_at=_now())
        with self.transaction() as conn:
            updates = ", ".join(f"{c} = excluded.{c}" for c in rows.columns if c != "task_id")
            _insert(conn, "task_embeddings", rows, f"ON CONFLICT (task_id) DO UPDATE SET {updates}")
            return len(rows)

    def graph_inputs_fingerprint(self) -> str:
        """A fingerprint of the active tasks and their embeddings (what both graphs are built from)."""
        return self.scalar(_sql("graph_inputs_fingerprint"))

    def edge_version(self, table: str) -> str | None:
        """The graph_version of the stored edges of ``table`` (global cross edges for edges_cross)."""
        if table not in ("edges_within", "edges_cross"):
            raise ValueError(f"not an edge table: {table}")
        scope = " WHERE campaign_id = ''" if table == "edges_cross" else ""
        return self.scalar(f"SELECT max(graph_version) FROM {table}{scope}")

    def replace_edges(
        self, table: str, edges: pd.DataFrame, graph_version: str, campaign_id: str | None = None
    ) -> int:
        """Swap one graph (all within edges, or one campaign's cross edges) for a new version."""
        self._catalog_or_graph_changes()
        if table not in ("edges_within", "edges_cross"):
            raise ValueError(f"not an edge table: {table}")
        rows = edges[["src", "dst", "similarity"]].assign(graph_version=graph_version)
        with self.transaction() as conn:
            if table == "edges_cross":
                rows = rows.assign(campaign_id=campaign_id or "")
                conn.execute("DELETE FROM edges_cross WHERE campaign_id = ?", [campaign_id or ""])
            else:
                conn.execute("DELETE FROM edges_within")
            return _insert(conn, table, rows)

    # -- campaigns ---------------------------------------------------------------------------
    def create_campaign(self, campaign_id: str, config: dict[str, Any], scheduler: str) -> bool:
        """Register a campaign; True if new. Re-creating with the same config is a no-op."""
        text = json.dumps(config, sort_keys=True)
        with self.transaction() as conn:
            row = conn.execute("SELECT config FROM campaigns WHERE campaign_id = ?", [campaign_id]).fetchone()
            if row is not None:
                saved = json.loads(row[0])
                if saved != config:
                    changed = sorted(k for k in saved.keys() | config.keys() if saved.get(k) != config.get(k))
                    raise ValueError(
                        f"campaign '{campaign_id}' exists with a different config (fields {changed}); "
                        "pick a new campaign id"
                    )
                return False
            now = _now()
            conn.execute(
                "INSERT INTO campaigns VALUES (?, ?, ?, 'created', NULL, ?, ?)",
                [campaign_id, text, scheduler, now, now],
            )
            return True

    def campaign(self, campaign_id: str) -> dict[str, Any]:
        with self.reader() as conn:
            row = conn.execute(
                "SELECT config, scheduler, status, status_reason FROM campaigns WHERE campaign_id = ?",
                [campaign_id],
            ).fetchone()
        if row is None:
            raise KeyError(f"unknown campaign '{campaign_id}'")
        return {"config": json.loads(row[0]), "scheduler": row[1], "status": row[2], "status_reason": row[3]}

    def set_campaign_status(self, campaign_id: str, status: str, reason: str | None = None) -> None:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE campaigns SET status = ?, status_reason = ?, updated_at = ? WHERE campaign_id = ?",
                [status, reason, _now(), campaign_id],
            )

    def progress(self, campaign_id: str) -> dict[str, int]:
        """Last step with a scheduled batch, with loaded rollouts, and with an observed scheduler state."""
        with self.reader() as conn:
            return {
                name: conn.execute(sql, [campaign_id]).fetchone()[0] or 0
                for name, sql in {
                    "scheduled": "SELECT max(step) FROM batches WHERE campaign_id = ?",
                    "loaded": "SELECT max(step) FROM ingested_files WHERE campaign_id = ? AND status = 'loaded'",
                    "observed": "SELECT max(step) FROM scheduler_states WHERE campaign_id = ? AND phase = 'observed'",
                }.items()
            }

    def catalog_readiness(self) -> tuple[set[str], int, int]:
        """(active sources, active tasks whose embedding is missing or stale, within-edge count)."""
        with self.reader() as conn:
            sources = {
                r[0] for r in conn.execute("SELECT DISTINCT source FROM tasks WHERE active").fetchall()
            }
            stale = conn.execute(_sql("stale_embeddings")).fetchone()[0]
            edges = conn.execute("SELECT count(*) FROM edges_within").fetchone()[0]
        return sources, int(stale), int(edges)

    def campaigns_in_progress(self) -> pd.DataFrame:
        """Created or running campaigns with their config (a dict) and progress (scheduled, loaded,
        observed), oldest first; empty before the warehouse exists."""
        if not self.path.exists():
            return pd.DataFrame(
                columns=["campaign_id", "config", "status", "updated_at", "scheduled", "loaded", "observed"]
            )
        frame = self.query(_sql("campaigns_in_progress"))
        frame["config"] = [json.loads(c) for c in frame["config"]]
        return frame

    def campaign_overview(self, campaign_id: str | None = None) -> pd.DataFrame:
        """Per campaign: scheduler, status, observed step of the configured steps, template, reason."""
        return self.query(_sql("campaign_overview"), [campaign_id, campaign_id])

    def latest_template_campaign(self, template: str, starting: str) -> str | None:
        """The newest campaign of ``template`` other than ``starting`` that saved a checkpoint."""
        return self.scalar(_sql("latest_template_campaign"), [template, starting])

    def template_history(self, template: str, upto_campaign: str) -> pd.DataFrame:
        """Rollouts (campaign_id, step, task_id, reward) of ``template``'s campaigns created up to
        ``upto_campaign``, oldest campaign first."""
        return self.query(_sql("template_history"), [template, upto_campaign])

    def last_checkpoint(self, campaign_id: str) -> tuple[int, str] | None:
        """(step, uri) of the campaign's newest checkpoint."""
        with self.reader() as conn:
            row = conn.execute(
                "SELECT step, uri FROM checkpoints WHERE campaign_id = ? ORDER BY step DESC LIMIT 1",
                [campaign_id],
            ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def scheduler_state(self, campaign_id: str, step: int, phase: str) -> Any | None:
        """The scheduler's ``state_dict`` saved after ``phase`` of ``step`` (None if there is none)."""
        with self.reader() as conn:
            row = conn.execute(_sql("scheduler_state"), [campaign_id, step, phase]).fetchone()
            if row is None:
                return None
            blob = bytes(row[0])
            if blob[:1] == b"\x80":  # saved before migration 030: a pickle of the whole state
                return pickle.loads(blob)
            if blob[:1] != b"{":
                raise ValueError(
                    f"scheduler state of {campaign_id!r} step {step} ({phase}) is not a manifest"
                )
            return decode_state(blob.decode(), lambda digests: _fetch_arrays(conn, digests))

    def scheduler_state_part(self, campaign_id: str, step: int, phase: str, key: str) -> Any | None:
        """A saved state's top-level ``key`` (e.g. its cross edges), decoding only that key's arrays; None when
        the state or the key is absent, or the state is a pickle saved before migration 030."""
        with self.reader() as conn:
            row = conn.execute(_sql("scheduler_state"), [campaign_id, step, phase]).fetchone()
            if row is None or bytes(row[0])[:1] != b"{":
                return None
            node = json.loads(bytes(row[0]).decode()).get("d", {}).get(key)
            if node is None:
                return None
            return decode_state(json.dumps(node), lambda digests: _fetch_arrays(conn, digests))

    def scheduler_state_holds(self, campaign_id: str, step: int, phase: str, key: str, value: Any) -> bool:
        """Whether a saved state's top-level ``key`` is exactly ``value`` (e.g. the cross edges a step's
        observation wrote), without decoding its arrays; False when the state is absent or a pickle."""
        blob = self.scalar(_sql("scheduler_state"), [campaign_id, step, phase])
        if blob is None or bytes(blob)[:1] != b"{":  # none, or saved as a pickle before migration 030
            return False
        return manifest_holds(bytes(blob).decode(), key, value)

    def scheduler_state_manifest(self, campaign_id: str, step: int, phase: str) -> str | None:
        """A digest of a saved state's manifest (it names every array by digest): what a cache compares."""
        return self.scalar(
            "SELECT md5(state) FROM scheduler_states WHERE campaign_id = ? AND step = ? AND phase = ?",
            [campaign_id, step, phase],
        )

    def save_batch(
        self, campaign_id: str, step: int, batch: pd.DataFrame, state: SchedulerState | bytes
    ) -> int:
        """The batch of ``step`` and the scheduler state that chose it, together; 0 if already saved."""
        rows = batch[["task_id", "env_id", "role", "predicted_variance"]].assign(
            campaign_id=campaign_id, step=step, position=range(len(batch)), created_at=_now()
        )
        with self.transaction() as conn:
            # A batch, once saved, is what the engine trains on: never re-selected (a re-run of the
            # asset for an existing step keeps the saved batch and its state).
            if conn.execute(
                "SELECT count(*) FROM batches WHERE campaign_id = ? AND step = ?", [campaign_id, step]
            ).fetchone()[0]:
                return 0
            _save_state(conn, campaign_id, step, "selected", state)
            return _insert(conn, "batches", rows)

    def save_refill(
        self, campaign_id: str, step: int, rounds: list[pd.DataFrame], state: SchedulerState | bytes
    ) -> int:
        """The refill rounds of ``step`` (dynamic sampling; round 1, 2, ... after the scheduled batch)
        and the scheduler state after the last one (phase 'refilled'), together. Replaces earlier
        refill rows of the step, so a re-run training step writes the same rows once."""
        first = self.scalar(
            "SELECT count(*) FROM batches WHERE campaign_id = ? AND step = ? AND coalesce(round, 0) = 0",
            [campaign_id, step],
        )
        parts = [
            frame[["task_id", "env_id", "role", "predicted_variance"]].assign(round=r)
            for r, frame in enumerate(rounds, start=1)
        ]
        rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        with self.transaction() as conn:
            conn.execute(
                "DELETE FROM batches WHERE campaign_id = ? AND step = ? AND coalesce(round, 0) > 0",
                [campaign_id, step],
            )
            _save_state(conn, campaign_id, step, "refilled", state)
            if rows.empty:
                return 0
            rows = rows.assign(
                campaign_id=campaign_id,
                step=step,
                position=range(first, first + len(rows)),
                created_at=_now(),
            )
            return _insert(conn, "batches", rows)

    def batch(self, campaign_id: str, step: int, first_round: bool = False) -> pd.DataFrame:
        """The tasks of ``step`` in generation order: the scheduled batch and its refill rounds (only
        the scheduled batch with ``first_round``)."""
        only = " AND coalesce(round, 0) = 0" if first_round else ""
        return self.query(
            "SELECT task_id, env_id, role, predicted_variance FROM batches WHERE campaign_id = ? AND step = ?"
            f"{only} ORDER BY position",
            [campaign_id, step],
        )

    def rollouts(self, campaign_id: str, step: int | None = None) -> pd.DataFrame:
        where, params = "campaign_id = ?", [campaign_id]
        if step is not None:
            where, params = where + " AND step = ?", params + [step]
        return self.query(f"SELECT * FROM rollouts WHERE {where} ORDER BY step, task_id, rollout_idx", params)

    # -- ingestion ---------------------------------------------------------------------------
    # The ledger key is the path relative to the data folder (``LandingFile.relpath``) + content hash.
    def is_ingested(self, relpath: str, content_hash: str) -> bool:
        """True once this content of this file is loaded (a quarantined version can be delivered again)."""
        return (relpath, content_hash) in self.loaded_files([(relpath, content_hash)])

    def loaded_files(self, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of these (relpath, content hash) pairs are loaded; one query however many."""
        if not keys or not self.path.exists():
            return set()
        wanted = pd.DataFrame(list(keys), columns=["path", "content_hash"])
        with self.reader() as conn:
            conn.register("_wanted", wanted)
            rows = conn.execute(
                "SELECT path, content_hash FROM ingested_files JOIN _wanted USING (path, content_hash) "
                "WHERE status = 'loaded'"
            ).fetchall()
        return {(r[0], r[1]) for r in rows}

    def loaded_step_file(self, campaign_id: str, step: int) -> tuple[str, str] | None:
        """(relpath, content hash) of the file whose rows are the step's rollouts, if loaded."""
        with self.reader() as conn:
            row = conn.execute(
                "SELECT path, content_hash FROM ingested_files WHERE campaign_id = ? AND step = ? "
                "AND status = 'loaded' ORDER BY ingested_at LIMIT 1",
                [campaign_id, step],
            ).fetchone()
        return None if row is None else (row[0], row[1])

    def load_rollouts(
        self, relpath: str, content_hash: str, campaign_id: str, step: int, rows: pd.DataFrame
    ) -> int:
        """Load one validated landing file exactly once; returns rows inserted (0 on re-delivery).

        A step's rollouts are immutable once loaded: another file for the same step with the same rows
        is recorded as a duplicate (0 rows); with different rows it raises ConflictingDelivery and
        nothing changes."""
        from warehouse.landing import COLUMNS

        rows = rows[[c for c in COLUMNS if c in rows.columns]].assign(source_file=relpath)
        with self.transaction() as conn:
            seen = conn.execute(
                "SELECT n_rows FROM ingested_files WHERE path = ? AND content_hash = ? AND status = 'loaded'",
                [relpath, content_hash],
            ).fetchone()
            if seen is not None:
                return 0
            existing = conn.execute(
                "SELECT * EXCLUDE (source_file) FROM rollouts WHERE campaign_id = ? AND step = ? "
                "ORDER BY task_id, rollout_idx",
                [campaign_id, step],
            ).df()
            if len(existing):
                differing = _differing_rows(existing, rows)
                if differing:
                    loaded = conn.execute(
                        "SELECT path FROM ingested_files WHERE campaign_id = ? AND step = ? AND status = 'loaded'",
                        [campaign_id, step],
                    ).fetchone()
                    raise ConflictingDelivery(
                        f"{relpath}: conflicting re-delivery of step {step}: {differing} of its rollouts "
                        f"differ from those already loaded from {loaded[0] if loaded else 'an earlier file'}; "
                        "loaded rollouts are immutable, so this file is not loaded"
                    )
                inserted = 0
            else:
                try:
                    inserted = _insert(conn, "rollouts", rows)
                except (duckdb.ConversionException, duckdb.ConstraintException) as exc:
                    raise ConflictingDelivery(
                        f"{relpath}: rows do not fit the rollouts table: {exc}"
                    ) from None
            conn.execute(
                "INSERT INTO ingested_files VALUES (?, ?, ?, ?, 'loaded', ?, ?, ?)",
                [
                    relpath,
                    content_hash,
                    campaign_id,
                    step,
                    None if inserted else "same rollouts as the file already loaded",
                    inserted,
                    _now(),
                ],
            )
            return inserted

    def record_quarantine(
        self,
        relpath: str,
        content_hash: str,
        campaign_id: str,
        step: int,
        reason: str,
        fail_campaign: bool = True,
    ) -> None:
        """A rejected file: recorded with its reason, nothing loaded; the campaign is stopped only when
        the file was the one its current step waits for (a stray past or future file stops nothing)."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO ingested_files VALUES (?, ?, ?, ?, 'quarantined', ?, 0, ?) ON CONFLICT DO NOTHING",
                [relpath, content_hash, campaign_id, step, reason, _now()],
            )
            if fail_campaign:
                conn.execute(
                    "UPDATE campaigns SET status = 'failed', status_reason = ?, updated_at = ? "
                    "WHERE campaign_id = ?",
                    [f"step {step}: rollout file quarantined: {reason}", _now(), campaign_id],
                )

    def campaign_statuses(self) -> dict[str, str]:
        if not self.path.exists():
            return {}
        with self.reader() as conn:
            return dict(conn.execute("SELECT campaign_id, status FROM campaigns").fetchall())

    # -- what the scheduler derived ------------------------------------------------------------
    def replace_task_stats(self, campaign_id: str, step: int, stats: pd.DataFrame) -> int:
        """The campaign's discounted per-task statistics as of ``step`` (observed tasks only)."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM task_stats WHERE campaign_id = ?", [campaign_id])
            return _insert(conn, "task_stats", stats.assign(campaign_id=campaign_id, step=step))

    def task_stats(self, campaign_id: str) -> pd.DataFrame:
        """The campaign's stored task statistics (task_id, step, n, m, mu, trend, last_step)."""
        return self.query(
            "SELECT task_id, step, n, m, mu, trend, last_step FROM task_stats WHERE campaign_id = ?",
            [campaign_id],
        )

    def fold_task_stats(self, campaign_id: str, step: int, changed: pd.DataFrame) -> int:
        """Incremental ``replace_task_stats``: upsert the rows of the tasks ``step`` observed, and mark
        every row of the campaign as valid for ``step``; returns the campaign's row count."""
        rows = changed[["task_id", "n", "m", "mu", "trend", "last_step"]].assign(
            campaign_id=campaign_id, step=step
        )
        with self.transaction() as conn:
            conn.register("_task_stats_rows", rows)
            try:
                conn.execute(_sql("task_stats_upsert"))
            finally:
                conn.unregister("_task_stats_rows")
            conn.execute(
                "UPDATE task_stats SET step = ? WHERE campaign_id = ? AND step != ?",
                [step, campaign_id, step],
            )
            return conn.execute(
                "SELECT count(*) FROM task_stats WHERE campaign_id = ?", [campaign_id]
            ).fetchone()[0]

    def has_campaign_cross_edges(self, campaign_id: str) -> bool:
        return bool(
            self.scalar("SELECT EXISTS (SELECT 1 FROM edges_cross WHERE campaign_id = ?)", [campaign_id])
        )

    def save_observation(
        self,
        campaign_id: str,
        step: int,
        state: SchedulerState | bytes,
        predictions: pd.DataFrame,
        cross_edges: pd.DataFrame,
        graph_version: str,
        metrics: dict[str, float],
        cross_removed: pd.DataFrame | None = None,
    ) -> int:
        """After folding step ``step``'s rollouts into the scheduler: its state, its predictions, the
        campaign's re-ranked cross edges and the batch metrics, all in one transaction.

        ``cross_removed`` given: ``cross_edges`` are only the new or changed edges and ``cross_removed``
        the (src, dst) pairs gone (a re-rank changes few rows; rewriting 8 N rows per step does not scale).
        """
        with self.transaction() as conn:
            _save_state(conn, campaign_id, step, "observed", state)
            conn.execute("DELETE FROM predictions WHERE campaign_id = ? AND step = ?", [campaign_id, step])
            if cross_removed is not None:
                _update_cross_edges(conn, campaign_id, cross_edges, cross_removed, graph_version)
            elif len(cross_edges):
                conn.execute("DELETE FROM edges_cross WHERE campaign_id = ?", [campaign_id])
                _insert(
                    conn,
                    "edges_cross",
                    cross_edges[["src", "dst", "similarity"]].assign(
                        campaign_id=campaign_id, graph_version=graph_version
                    ),
                )
            _upsert_metrics(conn, campaign_id, step, metrics)
            return _insert(conn, "predictions", predictions.assign(campaign_id=campaign_id, step=step))

    def record_checkpoint(
        self,
        campaign_id: str,
        step: int,
        uri: str,
        metrics: dict[str, float],
        mlflow_run_id: str | None = None,
    ) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?) ON CONFLICT (campaign_id, step) DO UPDATE SET "
                "uri = excluded.uri, mlflow_run_id = excluded.mlflow_run_id, created_at = excluded.created_at",
                [campaign_id, step, uri, mlflow_run_id, _now()],
            )
            _upsert_metrics(conn, campaign_id, step, metrics)

    def step_metrics(self, campaign_id: str) -> pd.DataFrame:
        """One row per step, one column per metric name."""
        long = self.query("SELECT step, name, value FROM step_metrics WHERE campaign_id = ?", [campaign_id])
        return long.pivot(index="step", columns="name", values="value").sort_index() if len(long) else long


def _in_transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    conn.execute("BEGIN TRANSACTION")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


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


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _insert(conn: duckdb.DuckDBPyConnection, table: str, rows: pd.DataFrame, conflict: str = "") -> int:
    """Insert a DataFrame by column name; ``conflict`` is an optional ON CONFLICT clause."""
    if rows.empty:
        return 0
    columns = ", ".join(f'"{c}"' for c in rows.columns)
    before = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    conn.register("_rows", rows)
    try:
        conn.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM _rows {conflict}")
    finally:
        conn.unregister("_rows")
    return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] - before


def _update_cross_edges(
    conn: duckdb.DuckDBPyConnection,
    campaign_id: str,
    changed: pd.DataFrame,
    removed: pd.DataFrame,
    graph_version: str,
) -> None:
    if len(removed):
        conn.register("_cross_removed", removed[["src", "dst"]])
        try:
            conn.execute(
                "DELETE FROM edges_cross USING _cross_removed r WHERE edges_cross.campaign_id = ? "
                "AND edges_cross.src = r.src AND edges_cross.dst = r.dst",
                [campaign_id],
            )
        finally:
            conn.unregister("_cross_removed")
    rows = changed[["src", "dst", "similarity"]].assign(campaign_id=campaign_id, graph_version=graph_version)
    _insert(
        conn,
        "edges_cross",
        rows,
        "ON CONFLICT (campaign_id, src, dst) DO UPDATE SET similarity = excluded.similarity, "
        "graph_version = excluded.graph_version",
    )


@dataclass(frozen=True)
class SchedulerState:
    """A scheduler's ``state_dict`` encoded once (``warehouse.state_codec``): manifest + arrays by digest."""

    manifest: str
    arrays: dict[str, tuple[str, tuple[int, ...], bytes]]

    @classmethod
    def of(cls, state: Any) -> SchedulerState:
        return cls(*encode_state(state))


def _fetch_arrays(conn: duckdb.DuckDBPyConnection, digests) -> dict[str, tuple[str, list[int], bytes]]:
    rows = conn.execute(_sql("state_arrays_fetch"), [list(digests)]).fetchall()
    return {digest: (dtype, shape, data) for digest, dtype, shape, data in rows}


def _save_state(
    conn: duckdb.DuckDBPyConnection, campaign_id: str, step: int, phase: str, state: SchedulerState | bytes
) -> None:
    """The state's manifest, plus those of its arrays the warehouse does not hold yet (``bytes``: an
    already encoded state, stored as it is)."""
    if isinstance(state, bytes | bytearray):
        conn.execute(_sql("save_scheduler_state"), [campaign_id, step, phase, bytes(state), _now()])
        return
    missing = [r[0] for r in conn.execute(_sql("state_arrays_missing"), [list(state.arrays)]).fetchall()]
    if missing:
        table = pa.table(
            {
                "digest": missing,
                "dtype": [state.arrays[d][0] for d in missing],
                "shape": pa.array([list(state.arrays[d][1]) for d in missing], pa.list_(pa.int64())),
                "data": pa.array([state.arrays[d][2] for d in missing], pa.large_binary()),
                "created_at": pa.array([_now()] * len(missing), pa.timestamp("us")),
            }
        )
        conn.register("_state_arrays", table)
        try:
            conn.execute("INSERT INTO scheduler_state_arrays SELECT * FROM _state_arrays")
        finally:
            conn.unregister("_state_arrays")
    conn.execute(_sql("save_scheduler_state"), [campaign_id, step, phase, state.manifest.encode(), _now()])


def _upsert_metrics(
    conn: duckdb.DuckDBPyConnection, campaign_id: str, step: int, metrics: dict[str, float]
) -> None:
    if not metrics:
        return
    rows = pd.DataFrame(
        {"campaign_id": campaign_id, "step": step, "name": list(metrics), "value": list(metrics.values())}
    )
    _insert(
        conn,
        "step_metrics",
        rows,
        "ON CONFLICT (campaign_id, step, name) DO UPDATE SET value = excluded.value",
    )


def _differing_rows(existing: pd.DataFrame, incoming: pd.DataFrame) -> int:
    """How many rollouts differ between two versions of a step (missing on either side counts)."""
    from warehouse.landing import COLUMNS

    def canonical(frame: pd.DataFrame) -> dict[tuple[str, int], str]:
        columns = [c for c in COLUMNS if c != "campaign_id"]
        out = {}
        for record in frame.reindex(columns=columns).to_dict("records"):
            values = []
            for name in columns:
                value = record[name]
                if value is None or (isinstance(value, float) and value != value) or value is pd.NA:
                    values.append(None)
                elif name == "tools_used":
                    values.append([str(v) for v in list(value)])
                elif isinstance(value, float) or name in ("reward", "wall_time_s"):
                    values.append(round(float(value), 12))
                elif name in (
                    "step",
                    "rollout_idx",
                    "n_turns",
                    "n_tool_calls",
                    "prompt_tokens",
                    "completion_tokens",
                ):
                    values.append(int(value))
                else:
                    values.append(str(value))
            out[(str(record["task_id"]), int(record["rollout_idx"]))] = json.dumps(values)
        return out

    old, new = canonical(existing), canonical(incoming)
    return sum(old.get(key) != new.get(key) for key in set(old) | set(new))
