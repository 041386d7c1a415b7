"""The rollout-results contract: one Parquet file per training step, validated before loading.

A step writes ``<home>/landing/<campaign_id>/step=<t>/rollouts.parquet`` with one row per rollout:

| column | type | required | meaning |
|---|---|---|---|
| campaign_id | string | yes | must equal the folder's campaign |
| step | int | yes | must equal the folder's step |
| task_id | string | yes | a task of the step's scheduled batch |
| rollout_idx | int | yes | 0..G-1 within the task's group; (task_id, rollout_idx) unique |
| reward | float | yes | in [0, 1], not null |
| n_turns | int | yes | turns the episode ran |
| n_tool_calls | int | yes | tool calls made |
| tools_used | list<string> | yes | tool names called |
| status | string | yes | `ok`, `error`, `timeout` or `truncated` |
| error | string | yes (nullable) | what went wrong, when status is not ok |
| prompt_tokens, completion_tokens | int | no | token counts |
| wall_time_s | float | no | wall-clock seconds of the rollout |

Files are written to a temporary name and renamed, so a watcher never sees half a file, with Parquet
page checksums, which the reader verifies (a flipped bit is a quarantine, not a silently wrong reward).

A file is accepted only if it holds exactly G rollouts for every task of the step's batch, fits the
warehouse's types (int64 columns are BIGINT there) and passes the value checks below; the row count
and the decoded size are checked from the Parquet metadata before anything is decoded.
The ledger keys a file by its path relative to the data folder (``landing/<campaign>/step=<t>/...``)
plus its content hash, so a moved data folder re-ingests nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REQUIRED = {
    "campaign_id": pa.string(),
    "step": pa.int64(),
    "task_id": pa.string(),
    "rollout_idx": pa.int64(),
    "reward": pa.float64(),
    "n_turns": pa.int64(),
    "n_tool_calls": pa.int64(),
    "tools_used": pa.list_(pa.string()),
    "status": pa.string(),
    "error": pa.string(),
}
OPTIONAL = {"prompt_tokens": pa.int64(), "completion_tokens": pa.int64(), "wall_time_s": pa.float64()}
COLUMNS = {**REQUIRED, **OPTIONAL}
STATUSES = frozenset({"ok", "error", "timeout", "truncated"})
NON_NEGATIVE = ("n_turns", "n_tool_calls", "prompt_tokens", "completion_tokens", "wall_time_s")
FILE_NAME = "rollouts.parquet"
QUARANTINE = "_quarantine"
LANDING_DIR = "landing"  # the landing folder's name inside the data folder (``Paths.landing``)
# Canonical step folders only: `step=01` would be a second name for step 1; 9 digits fit INTEGER.
_STEP_DIR = re.compile(r"step=(0|[1-9][0-9]{0,8})")
_CAMPAIGN_DIR = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# Guards checked from the Parquet metadata before decoding: a highly compressible file must not
# decode to gigabytes. A rollout row is a few hundred bytes; 64 KiB per row is generous.
MAX_BYTES_PER_ROW = 64 * 1024
MIN_BYTE_BUDGET = 16 * 1024 * 1024
_STRINGS = [name for name, kind in COLUMNS.items() if pa.types.is_string(kind)]


class ContractError(ValueError):
    """A landing file breaks the contract; the message says which column / row / value."""


class NotALandingFile(ValueError):
    """An entry under landing/ that is not a step file (a directory, FIFO, symlink, misnamed folder)."""


@dataclass(frozen=True)
class LandingEntry:
    """A step file as ``scan`` sees it: from the directory entry only (no read, no hash)."""

    path: Path
    campaign_id: str
    step: int
    fingerprint: str  # size, mtime and inode: changes whenever the file is rewritten or replaced

    @property
    def relpath(self) -> str:
        return relative_path(self.campaign_id, self.step, self.path.name)


@dataclass(frozen=True)
class LandingFile:
    path: Path
    campaign_id: str
    step: int
    content_hash: str

    @property
    def relpath(self) -> str:
        """The ledger key: the path relative to the data folder, the same wherever the folder lives."""
        return relative_path(self.campaign_id, self.step, self.path.name)

    @property
    def run_key(self) -> str:
        return f"{self.relpath}:{self.content_hash}"

    @classmethod
    def from_path(cls, path: str | Path) -> LandingFile:
        """Campaign and step from ``.../<campaign_id>/step=<t>/rollouts.parquet``, and the content hash.

        NotALandingFile if the path is misplaced, missing, or not a regular file reached without
        symlinks (a FIFO would block the hash; a symlinked folder would let quarantine move the target).
        """
        path = Path(path)
        campaign_id, step = parse_location(path)
        problem = _entry_problem(path)
        if problem:
            raise NotALandingFile(f"{path}: {problem}")
        return cls(path, campaign_id, step, file_hash(path))

    def quarantine_path(self, landing: Path) -> Path:
        """Always under the file's own campaign (never the partition a run was launched for)."""
        return (
            landing
            / QUARANTINE
            / self.campaign_id
            / f"step={self.step}"
            / f"{self.content_hash}-{self.path.name}"
        )


def relative_path(campaign_id: str, step: int, name: str = FILE_NAME) -> str:
    return f"{LANDING_DIR}/{campaign_id}/step={step}/{name}"


def parse_location(path: Path) -> tuple[str, int]:
    match = _STEP_DIR.fullmatch(path.parent.name)
    campaign_id = path.parent.parent.name
    if path.name != FILE_NAME or not match or campaign_id == QUARANTINE:
        raise NotALandingFile(
            f"{path}: not a step file; expected <landing>/<campaign_id>/step=<t>/{FILE_NAME} "
            "(t without leading zeros, at most 9 digits)"
        )
    if not _CAMPAIGN_DIR.fullmatch(campaign_id):
        raise NotALandingFile(f"{path}: '{campaign_id}' is not a valid campaign id")
    return campaign_id, int(match.group(1))


def _entry_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a step file, or None. Checks the file and its two folders."""
    for entry, what in ((path.parent.parent, "campaign folder"), (path.parent, "step folder")):
        try:
            mode = entry.lstat().st_mode
        except OSError:
            return f"{what} {entry.name} not found"
        if stat.S_ISLNK(mode):
            return f"{what} {entry.name} is a symlink (not followed)"
    try:
        mode = path.lstat().st_mode
    except OSError:
        return "file not found"
    if stat.S_ISLNK(mode):
        return "is a symlink, not a regular file (not followed)"
    if not stat.S_ISREG(mode):
        kind = (
            "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        )
        return f"is {kind}, not a regular file"
    return None


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:32]


def step_path(landing: Path, campaign_id: str, step: int) -> Path:
    return landing / campaign_id / f"step={step}" / FILE_NAME


def write_step_file(landing: Path, rollouts: pd.DataFrame, campaign_id: str, step: int) -> Path:
    """Write one step's rollouts atomically (temp file + rename), with page checksums."""
    frame = rollouts.copy()
    for column in OPTIONAL:
        if column not in frame.columns:
            frame[column] = None
    schema = pa.schema(list(COLUMNS.items()))
    table = pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
    path = step_path(landing, campaign_id, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, write_page_checksum=True)
    os.replace(tmp, path)
    return path


def scan(landing: Path) -> tuple[list[LandingEntry], dict[str, str]]:
    """Every step file under ``landing`` from directory entries alone (one ``lstat`` each, no reads),
    oldest first, and every other entry with why it is not one (path relative to the data folder ->
    reason). Hidden names (temp files) and the quarantine are skipped; nothing here raises for an
    odd entry, so one stray directory, FIFO or symlink cannot stop a tick."""
    found: list[tuple[int, LandingEntry]] = []
    bad: dict[str, str] = {}
    for campaign in _entries(landing):
        rel = f"{LANDING_DIR}/{campaign.name}"
        if campaign.name == QUARANTINE or campaign.name.startswith("."):
            continue
        if campaign.is_symlink() or not campaign.is_dir(follow_symlinks=False):
            bad[rel] = "not a campaign folder (a file, or a symlink, which is not followed)"
            continue
        if not _CAMPAIGN_DIR.fullmatch(campaign.name):
            bad[rel] = "folder name is not a valid campaign id"
            continue
        for step_dir in _entries(Path(campaign.path)):
            srel = f"{rel}/{step_dir.name}"
            if step_dir.name.startswith("."):
                continue
            match = _STEP_DIR.fullmatch(step_dir.name)
            if not match or step_dir.is_symlink() or not step_dir.is_dir(follow_symlinks=False):
                bad[srel] = "not a step folder (expected a real folder step=<t>, t without leading zeros)"
                continue
            for entry in _entries(Path(step_dir.path)):
                erel = f"{srel}/{entry.name}"
                if entry.name.startswith("."):
                    continue
                if entry.name != FILE_NAME:
                    bad[erel] = f"unexpected entry; only {FILE_NAME} is read"
                    continue
                problem = _entry_problem(Path(entry.path))
                if problem:
                    bad[erel] = problem
                    continue
                info = entry.stat(follow_symlinks=False)
                fingerprint = f"{info.st_size}:{info.st_mtime_ns}:{info.st_ino}"
                landing_entry = LandingEntry(
                    Path(entry.path), campaign.name, int(match.group(1)), fingerprint
                )
                found.append((info.st_mtime_ns, landing_entry))
    return [e for _, e in sorted(found, key=lambda item: (item[0], str(item[1].path)))], bad


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


def discover(landing: Path) -> list[LandingFile]:
    """Every step file under ``landing``, hashed, oldest first (entries ``scan`` rejects are skipped)."""
    files = []
    for entry in scan(landing)[0]:
        try:
            files.append(LandingFile.from_path(entry.path))
        except (NotALandingFile, OSError):
            continue  # removed or replaced since the scan
    return files


def read_and_validate(landing_file: LandingFile, batch_task_ids: set[str], group_size: int) -> pd.DataFrame:
    """The file's rows in the contract's columns and types, or ContractError naming the first problem.
    Nothing is loaded here. Any failure to read or decode the file is a ContractError too."""
    try:
        return _read_and_validate(landing_file, batch_task_ids, group_size)
    except ContractError:
        raise
    except MemoryError:
        raise ContractError(f"{landing_file.path}: too large to decode") from None
    except Exception as exc:  # whatever pyarrow or pandas raises on a malformed file is a bad file
        raise ContractError(
            f"{landing_file.path}: cannot be read: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        ) from None


def _read_and_validate(landing_file: LandingFile, batch_task_ids: set[str], group_size: int) -> pd.DataFrame:
    path = landing_file.path
    expected_rows = len(batch_task_ids) * group_size
    try:
        # ParquetFile, not read_table: the `step=<t>` folder must not be read as a hive partition column.
        # Strings stay dictionary-encoded until their decoded size is known (a repeated long value
        # takes little room in the file and the dictionary, but a copy per row once decoded).
        parquet = pq.ParquetFile(path, page_checksum_verification=True, read_dictionary=_STRINGS)
        names = parquet.schema_arrow.names
    except (pa.ArrowException, OSError) as exc:
        raise ContractError(f"{path}: not a readable Parquet file ({exc})") from None
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ContractError(f"{path}: column(s) {twice} appear more than once")
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise ContractError(f"{path}: missing required column(s) {missing}")
    metadata = parquet.metadata
    if metadata.num_rows > max(2 * expected_rows, expected_rows + 1024):  # far too many to be worth decoding
        raise ContractError(
            f"{path}: {metadata.num_rows} rows, but step {landing_file.step} needs exactly "
            f"{len(batch_task_ids)} tasks x G={group_size} = {expected_rows} rollouts (not decoded)"
        )
    budget = max(MIN_BYTE_BUDGET, expected_rows * MAX_BYTES_PER_ROW)
    columns = [c for c in COLUMNS if c in names]  # extra columns are never read
    size = sum(
        metadata.row_group(g).column(i).total_uncompressed_size
        for g in range(metadata.num_row_groups)
        for i in range(metadata.num_columns)
        if metadata.schema.column(i).path.split(".")[0] in columns
    )
    if size > budget:
        raise ContractError(f"{path}: {size} bytes uncompressed, over the limit of {budget} (not decoded)")
    table = parquet.read(columns=columns)
    decoded = sum(_decoded_bytes(table.column(c)) for c in columns if c in _STRINGS)
    if decoded > budget:
        raise ContractError(f"{path}: string columns decode to {decoded} bytes, over the limit of {budget}")
    table = pa.table({c: _to_contract_type(path, c, table.column(c)) for c in columns})
    frame = table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    for column in [c for c in REQUIRED if c != "error"]:
        if frame[column].isna().any():
            raise ContractError(f"{path}: column '{column}' is null in row {_first(frame[column].isna())}")
    _expect(
        frame,
        frame["campaign_id"] != landing_file.campaign_id,
        path,
        "campaign_id",
        f"differs from the folder's campaign '{landing_file.campaign_id}'",
    )
    _expect(
        frame,
        frame["step"] != landing_file.step,
        path,
        "step",
        f"differs from the folder's step {landing_file.step}",
    )
    _expect(frame, ~frame["reward"].between(0.0, 1.0), path, "reward", "outside [0, 1]")
    for column in NON_NEGATIVE:
        if column in frame.columns:
            _expect(frame, frame[column].fillna(0) < 0, path, column, "is negative")
    _expect(frame, ~frame["status"].isin(STATUSES), path, "status", f"not one of {sorted(STATUSES)}")
    no_error = frame["error"].isna() | (frame["error"] == "")
    _expect(
        frame, (frame["status"] != "ok") & no_error, path, "error", "is empty although status is not 'ok'"
    )
    _expect(frame, (frame["status"] == "ok") & ~no_error, path, "error", "is set although status is 'ok'")
    _check_complete(frame, path, landing_file.step, batch_task_ids, group_size)
    return frame.sort_values(["task_id", "rollout_idx"]).reset_index(drop=True)


def _decoded_bytes(column: pa.ChunkedArray) -> int:
    total = 0
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            lengths = pc.binary_length(chunk.dictionary).fill_null(0)
            total += int(pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0)
        else:
            total += chunk.nbytes
    return total


def _to_contract_type(path: Path, name: str, column: pa.ChunkedArray) -> pa.ChunkedArray:
    """The column in the contract's type; ContractError names the column and the conversion that failed."""
    expected = COLUMNS[name]
    actual = column.type
    if pa.types.is_dictionary(actual):
        column = pa.chunked_array([c.dictionary_decode() for c in column.chunks], type=actual.value_type)
        actual = actual.value_type
    if not _compatible(actual, expected):
        raise ContractError(f"{path}: column '{name}' has type {actual}, expected {expected}")
    try:
        return column.cast(expected, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ContractError(
            f"{path}: column '{name}': {actual} values do not convert to {expected} ({exc})"
        ) from None


def _compatible(actual: pa.DataType, expected: pa.DataType) -> bool:
    if pa.types.is_null(actual):
        return True  # an all-null column (nulls in required columns are reported by name later)
    if pa.types.is_integer(expected):
        return pa.types.is_integer(actual)
    if pa.types.is_floating(expected):
        return pa.types.is_floating(actual) or pa.types.is_integer(actual)
    if pa.types.is_string(expected):
        return pa.types.is_string(actual) or pa.types.is_large_string(actual)
    if pa.types.is_list(expected):
        return (pa.types.is_list(actual) or pa.types.is_large_list(actual)) and _compatible(
            actual.value_type, expected.value_type
        )
    return actual == expected


def _check_complete(frame: pd.DataFrame, path: Path, step: int, batch: set[str], group_size: int) -> None:
    """Exactly G rollouts (rollout_idx 0..G-1) for every task of the batch, nothing else."""
    key = list(zip(frame["task_id"], frame["rollout_idx"].astype(int), strict=True))
    wanted = {(t, i) for t in batch for i in range(group_size)}
    duplicate = frame.duplicated(["task_id", "rollout_idx"]).to_numpy()
    unknown = ~frame["task_id"].isin(batch).to_numpy()
    out_of_range = ((frame["rollout_idx"] < 0) | (frame["rollout_idx"] >= group_size)).to_numpy() & ~unknown
    missing = sorted(wanted - set(key))
    extra = int((duplicate | unknown | out_of_range).sum())
    if not missing and not extra:
        return
    parts = []
    if missing:
        per_task = pd.Series([t for t, _ in missing]).value_counts()
        task, gap = per_task.index[0], int(per_task.iloc[0])
        parts.append(
            f"{len(missing)} missing over {len(per_task)} task(s) (e.g. task '{task}' has "
            f"{group_size - gap} of {group_size})"
        )
    if extra:
        kinds = []
        for mask, what in (
            (unknown, "of a task not in the scheduled batch (unknown task id)"),
            (out_of_range, f"with rollout_idx outside 0..{group_size - 1}"),
            (duplicate & ~unknown & ~out_of_range, "duplicating (task_id, rollout_idx)"),
        ):
            if mask.any():
                row = _first(pd.Series(mask))
                kinds.append(
                    f"{int(mask.sum())} {what}, first row {row} "
                    f"({frame['task_id'].iloc[row]!r}, {int(frame['rollout_idx'].iloc[row])})"
                )
        parts.append(f"{extra} extra: " + "; ".join(kinds))
    raise ContractError(
        f"{path}: step {step} must hold exactly G={group_size} rollouts for each of its {len(batch)} batch "
        f"tasks ({len(wanted)}), the file has {len(frame)}: " + "; ".join(parts)
    )


def _first(mask: pd.Series) -> int:
    return int(mask.to_numpy().nonzero()[0][0])


def _expect(frame: pd.DataFrame, bad: pd.Series, path: Path, column: str, problem: str) -> None:
    bad = bad.fillna(True) if hasattr(bad, "fillna") else bad
    if bad.any():
        row = _first(bad)
        raise ContractError(
            f"{path}: column '{column}' {problem} in {int(bad.sum())} row(s), first row {row} "
            f"(value {frame[column].iloc[row]!r})"
        )
