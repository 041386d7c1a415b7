"""Ingesting landing files into a real DuckDB warehouse: every bad file quarantined with a reason that
names the problem, loaded history immutable, odd entries under landing/ skipped, the ledger relocatable."""

import os
import shutil
import struct

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import warehouse.store as store_module
from warehouse.ingest import IngestRefused, Quarantined, ingest_file
from warehouse.landing import LandingFile, NotALandingFile, scan, step_path, write_step_file
from warehouse.migrations import apply_migrations, discover
from warehouse.store import SqlRefused, Warehouse, WarehouseLockedError

G = 4
TASKS = ["t/a", "t/b", "t/c"]


def _rows(campaign_id="c", step=1, tasks=TASKS, **changes) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "campaign_id": campaign_id,
            "step": step,
            "task_id": [t for t in tasks for _ in range(G)],
            "rollout_idx": [i for _ in tasks for i in range(G)],
            "reward": [(i % 3) / 2 for i in range(len(tasks) * G)],
            "n_turns": 2,
            "n_tool_calls": 3,
            "tools_used": [["ls", "cd"]] * (len(tasks) * G),
            "status": "ok",
            "error": None,
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "wall_time_s": 0.5,
        }
    )
    return frame.assign(**changes)


class Home:
    """A data folder with a warehouse holding campaign(s) with a scheduled batch."""

    def __init__(self, root):
        self.root = root
        self.landing = root / "landing"
        self.landing.mkdir(parents=True)
        self.store = Warehouse(root / "warehouse.duckdb")

    def campaign(self, campaign_id="c", steps=(1,)):
        self.store.create_campaign(campaign_id, {"group_size": G, "steps": 5}, "random")
        self.store.set_campaign_status(campaign_id, "running")
        for step in steps:
            batch = pd.DataFrame(
                {"task_id": TASKS, "env_id": "e", "role": "coverage", "predicted_variance": None}
            )
            self.store.save_batch(campaign_id, step, batch, b"state")
        return self

    def deliver(self, rows, campaign_id="c", step=1):
        return write_step_file(self.landing, rows, campaign_id, step)

    def ingest(self, path, campaign_id="c"):
        return ingest_file(self.store, self.landing, str(path), campaign_id)

    def count(self, table, campaign_id="c"):
        return self.store.scalar(f"SELECT count(*) FROM {table} WHERE campaign_id = ?", [campaign_id])

    def ledger(self, campaign_id="c"):
        return self.store.query(
            "SELECT path, status, reason, n_rows FROM ingested_files WHERE campaign_id = ? ORDER BY ingested_at",
            [campaign_id],
        )


@pytest.fixture
def home(tmp_path):
    return Home(tmp_path / "home").campaign()


def _write(path, table, **options):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **options)
    return path


def test_ingest_good_file_loads_every_row_once_keyed_by_relative_path(home):
    path = home.deliver(_rows())
    done = home.ingest(path)
    assert (done.inserted, done.relpath) == (12, "landing/c/step=1/rollouts.parquet")
    assert home.ingest(path).duplicate and home.count("rollouts") == 12
    assert home.ledger()["path"].tolist() == ["landing/c/step=1/rollouts.parquet"]
    assert set(home.store.query("SELECT source_file FROM rollouts")["source_file"]) == {done.relpath}


def _drop(frame, rows):
    return frame.drop(index=rows).reset_index(drop=True)


@pytest.mark.parametrize(
    "rows, reason",
    [
        # (the delivered rows, what the reason must say): the incomplete-file family
        (_rows().iloc[[0]], "the file has 1: 11 missing over 3 task(s) (e.g. task 't/b' has 0 of 4)"),
        (_drop(_rows(), [1, 2, 3]), "3 missing over 1 task(s) (e.g. task 't/a' has 1 of 4)"),
        (_drop(_rows(), [0, 1, 4, 5, 8, 9]), "6 missing over 3 task(s)"),
        (pd.concat([_rows(), _rows().iloc[[0]]]), "1 extra: 1 duplicating (task_id, rollout_idx), first row 12"),
        (_rows().assign(rollout_idx=[0, 1, 2, 4] * 3), "3 missing over 3 task(s) (e.g. task 't/a' has 3 of 4); "
         "3 extra: 3 with rollout_idx outside 0..3"),
        (_rows(tasks=["t/a", "t/b", "t/c", "t/zzz"]), "4 extra: 4 of a task not in the scheduled batch (unknown task id)"),
        (_rows().iloc[0:0], "the file has 0"),
    ],
    ids=["one_of_32", "partial_task", "half_groups", "duplicate", "idx_out_of_range", "unknown_task", "empty"],
)  # fmt: skip
def test_ingest_incomplete_step_file_is_quarantined_with_missing_and_extra_counts(home, rows, reason):
    path = home.deliver(rows.reset_index(drop=True))
    with pytest.raises(Quarantined, match="exactly G=4 rollouts for each of its 3 batch tasks") as info:
        home.ingest(path)
    assert reason in str(info.value)
    assert home.count("rollouts") == 0 and not path.exists() and info.value.target.exists()
    assert home.ledger()["status"].tolist() == ["quarantined"]
    assert home.store.campaign("c")["status"] == "failed"  # the step it waits for cannot be trained on


def _uint64_turns(path):
    table = pa.Table.from_pandas(_rows(), preserve_index=False)
    table = table.set_column(
        table.schema.get_field_index("n_turns"), "n_turns", pa.array([2**63 + 5] * 12, pa.uint64())
    )
    _write(path, table)


def _two_reward_columns(path):
    table = pa.Table.from_pandas(_rows(), preserve_index=False)
    _write(
        path,
        pa.Table.from_arrays([*table.columns, pa.array([0.5] * 12)], names=[*table.column_names, "reward"]),
    )


def _bit_flip(path):
    pq.write_table(
        pa.Table.from_pandas(_rows(), preserve_index=False),
        path,
        compression="NONE",
        write_page_checksum=True,
    )
    data = bytearray(path.read_bytes())
    rewards = struct.pack("<3d", 0.0, 0.5, 1.0)  # the first plain-encoded reward values
    data[data.index(rewards) + 12] ^= 0x10  # a bit inside the value page: 0.5 becomes another number
    path.write_bytes(bytes(data))


def _compressible_bomb(path):
    error = "x" * 3_000_000  # 12 rows x 3 MB: a few kB on disk, 36 MB decoded
    rows = _rows(status="error", error=error)
    pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), path, compression="zstd")


def _many_rows(path):
    rows = pd.concat([_rows()] * 200, ignore_index=True)
    pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), path)


@pytest.mark.parametrize(
    "damage, reason",
    [
        # (how the file is made, what the reason must say)
        (_uint64_turns, "column 'n_turns': uint64 values do not convert to int64"),
        (_two_reward_columns, "column(s) ['reward'] appear more than once"),
        (lambda p: _write(p, pa.Table.from_pandas(_rows(n_turns=-1), preserve_index=False)), "'n_turns' is negative"),
        (
            lambda p: _write(p, pa.Table.from_pandas(_rows(status="error"), preserve_index=False)),
            "'error' is empty although status is not 'ok'",
        ),
        (lambda p: _write(p, pa.Table.from_pandas(_rows(status=1), preserve_index=False)), "'status' has type int64"),
        (_bit_flip, "checksum"),
        (_compressible_bomb, "over the limit"),
        (_many_rows, "2400 rows, but step 1 needs exactly 3 tasks x G=4 = 12 rollouts (not decoded)"),
        (lambda p: p.write_bytes(b"PAR1 not really"), "not a readable Parquet file"),
    ],
    ids=["uint64_overflow", "two_reward_columns", "negative_count", "error_without_message", "status_int",
         "bit_flip", "decode_bomb", "row_count_guard", "garbage"],
)  # fmt: skip
def test_ingest_unreadable_or_invalid_file_is_quarantined_never_raised(home, damage, reason):
    path = step_path(home.landing, "c", 1)
    path.parent.mkdir(parents=True)
    damage(path)
    with pytest.raises(Quarantined) as info:
        home.ingest(path)
    assert reason in str(info.value)
    assert home.count("rollouts") == 0 and home.ledger()["status"].tolist() == ["quarantined"]


def test_ingest_int64_counts_beyond_int32_load_as_bigint(home):
    path = home.deliver(_rows(n_turns=2**40, prompt_tokens=3_000_000_000))
    assert home.ingest(path).inserted == 12
    row = home.store.query("SELECT max(n_turns) AS t, max(prompt_tokens) AS p FROM rollouts").iloc[0]
    assert (int(row.t), int(row.p)) == (2**40, 3_000_000_000)


def test_ingest_dictionary_strings_and_extra_columns_are_read_by_contract(home):
    table = pa.Table.from_pandas(_rows(), preserve_index=False)
    for name in ("task_id", "status", "campaign_id"):
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, table.column(name).dictionary_encode())
    table = table.append_column("debug_blob", pa.array(["x"] * 12))
    path = _write(step_path(home.landing, "c", 1), table)
    assert home.ingest(path).inserted == 12
    assert "debug_blob" not in home.store.query("SELECT * FROM rollouts LIMIT 1").columns


def test_ingest_late_conflicting_redelivery_is_quarantined_and_history_kept(home):
    home.store.save_batch("c", 2, pd.DataFrame({"task_id": TASKS, "env_id": "e", "role": "exploit",
                                                 "predicted_variance": 0.1}), b"state2")  # fmt: skip
    path = home.deliver(_rows())
    home.ingest(path)
    before = home.store.rollouts("c")
    rewritten = home.deliver(_rows(reward=1.0))  # same path, different rewards, after step 2 was scheduled
    with pytest.raises(
        Quarantined, match="conflicting re-delivery of step 1: 8 of its rollouts differ"
    ) as info:
        home.ingest(rewritten)
    assert not info.value.campaign_failed and home.store.campaign("c")["status"] == "running"
    pd.testing.assert_frame_equal(home.store.rollouts("c"), before)
    assert home.store.batch("c", 2)["role"].tolist() == ["exploit"] * 3
    # A batch once saved is never re-selected: saving step 2 again keeps the first one.
    other = pd.DataFrame({"task_id": ["t/x"], "env_id": "e", "role": "coverage", "predicted_variance": None})
    assert home.store.save_batch("c", 2, other, b"other") == 0
    assert home.store.batch("c", 2)["task_id"].tolist() == TASKS
    # The same rows in different bytes are a duplicate, not a conflict.
    same = pa.Table.from_pandas(_rows(), preserve_index=False)
    _write(step_path(home.landing, "c", 1), same, compression="gzip", row_group_size=5)
    assert home.ingest(step_path(home.landing, "c", 1)).inserted == 0
    assert home.count("rollouts") == 12


def test_ingest_wrong_partition_and_future_step_touch_no_other_campaign(home):
    home.campaign("d")
    path = home.deliver(_rows())
    with pytest.raises(IngestRefused, match="launch ingest_rollouts for partition 'c'"):
        home.ingest(path, campaign_id="d")
    assert path.exists() and home.store.scalar("SELECT count(*) FROM ingested_files") == 0
    assert {home.store.campaign(c)["status"] for c in "cd"} == {"running"}
    assert home.ingest(path).inserted == 12  # the right file can still be delivered
    future = home.deliver(_rows(step=7), step=7)
    with pytest.raises(Quarantined, match="no scheduled batch for step 7") as info:
        home.ingest(future)
    assert info.value.target.parent.parent.name == "c"  # quarantined under its own campaign
    assert home.store.campaign("c")["status"] == "running"


def test_ingest_loaded_step_needs_no_landing_file_to_resume(home):
    path = home.deliver(_rows())
    home.ingest(path)
    path.unlink()
    done = home.ingest("landing/c/step=1/rollouts.parquet")
    assert done.duplicate and "gone" in done.note


def test_ingest_ledger_survives_moving_the_data_folder(home, tmp_path):
    home.ingest(home.deliver(_rows()))
    moved = tmp_path / "elsewhere"
    shutil.move(home.root, moved)
    again = Home.__new__(Home)
    again.root, again.landing, again.store = moved, moved / "landing", Warehouse(moved / "warehouse.duckdb")
    assert again.ingest(step_path(again.landing, "c", 1)).duplicate
    assert again.count("rollouts") == 12


def test_migration_020_cuts_absolute_ledger_paths_to_relative(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    for migration in discover():
        if migration.version < 20:
            (old / f"{migration.version:03d}_{migration.name}.sql").write_text(migration.sql)
    conn = duckdb.connect(str(tmp_path / "w.duckdb"))
    apply_migrations(conn, old)
    conn.execute(
        "INSERT INTO ingested_files VALUES ('/data/var/landing/c/step=3/rollouts.parquet', 'h', 'c', 3, "
        "'loaded', NULL, 1, now())"
    )
    conn.execute(
        "INSERT INTO rollouts (campaign_id, step, task_id, rollout_idx, reward, status, source_file) "
        "VALUES ('c', 3, 't', 0, 0.5, 'ok', '/data/var/landing/c/step=3/rollouts.parquet')"
    )
    assert 20 in apply_migrations(conn)
    assert (
        conn.execute("SELECT path FROM ingested_files").fetchone()[0] == "landing/c/step=3/rollouts.parquet"
    )
    assert (
        conn.execute("SELECT source_file FROM rollouts").fetchone()[0] == "landing/c/step=3/rollouts.parquet"
    )
    conn.execute("UPDATE rollouts SET n_turns = 2 ** 40")  # BIGINT now


def test_scan_skips_and_names_every_odd_entry_without_raising(home, tmp_path):
    good = home.deliver(_rows())
    (home.landing / "c" / "step=2" / "rollouts.parquet").mkdir(parents=True)  # a directory
    (home.landing / "unregistered" / "step=1").mkdir(parents=True)
    os.mkfifo(home.landing / "unregistered" / "step=1" / "rollouts.parquet")  # a FIFO
    (home.landing / "c" / "step=3").mkdir()
    (home.landing / "c" / "step=3" / "rollouts.parquet").symlink_to("/dev/null")
    (home.landing / "c" / "step=01").mkdir()  # a second name for step 1
    (home.landing / "c" / "step=99999999999999999999").mkdir()
    outside = tmp_path / "outside" / "step=4"
    outside.mkdir(parents=True)
    shutil.copy(good, outside / "rollouts.parquet")
    (home.landing / "c" / "step=4").symlink_to(outside)  # a symlinked step folder
    (home.landing / "c" / "step=1" / "notes.txt").write_text("hi")
    entries, bad = scan(home.landing)
    assert [e.relpath for e in entries] == ["landing/c/step=1/rollouts.parquet"]
    assert set(bad) == {
        "landing/c/step=2/rollouts.parquet",
        "landing/unregistered/step=1/rollouts.parquet",
        "landing/c/step=3/rollouts.parquet",
        "landing/c/step=01",
        "landing/c/step=99999999999999999999",
        "landing/c/step=4",
        "landing/c/step=1/notes.txt",
    }
    assert "FIFO" in bad["landing/unregistered/step=1/rollouts.parquet"]
    assert "directory" in bad["landing/c/step=2/rollouts.parquet"]
    with pytest.raises(NotALandingFile, match="FIFO"):
        LandingFile.from_path(home.landing / "unregistered" / "step=1" / "rollouts.parquet")  # never blocks
    home.store.save_batch("c", 4, pd.DataFrame({"task_id": TASKS, "env_id": "e", "role": "exploit",
                                                 "predicted_variance": 0.1}), b"s")  # fmt: skip
    with pytest.raises(IngestRefused, match="symlink"):
        home.ingest(home.landing / "c" / "step=4" / "rollouts.parquet")
    assert (outside / "rollouts.parquet").exists()  # quarantine never follows the link


def test_campaign_id_with_trailing_newline_is_rejected():
    from pipelines.campaign import CampaignConfig

    with pytest.raises(ValueError, match="campaign_id"):
        CampaignConfig(campaign_id="run\n")


def test_safe_query_refuses_file_access_and_writes(home, tmp_path):
    home.ingest(home.deliver(_rows()))
    assert home.store.safe_query("SELECT count(*) AS n FROM rollouts")["n"][0] == 12
    for sql, message in [
        (f"COPY rollouts TO '{tmp_path}/out.csv'", "only SELECT"),
        (f"EXPORT DATABASE '{tmp_path}/dump'", "only SELECT"),
        ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
        (f"SELECT * FROM read_parquet('{home.landing}/c/step=1/rollouts.parquet')", "disabled"),
        (f"ATTACH '{tmp_path}/x.duckdb'", "only SELECT"),
        ("SET enable_external_access = true", "only SELECT"),
        ("DELETE FROM rollouts", "only SELECT"),
        ("SELECT 1; SELECT 2", "one statement at a time"),
    ]:
        with pytest.raises(SqlRefused, match=message):
            home.store.safe_query(sql)
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "dump").exists()
    assert home.count("rollouts") == 12


def test_warehouse_lock_error_names_the_holder_pid(home, monkeypatch, duckdb_reader):
    home.store.migrate()
    with duckdb_reader(home.store.path) as holder:
        monkeypatch.setattr(store_module, "_LOCK_WAIT_S", 0.3)
        with pytest.raises(WarehouseLockedError, match=f"locked by PID {holder.pid} \\(.*python.*\\)"):
            home.store.set_campaign_status("c", "running")
