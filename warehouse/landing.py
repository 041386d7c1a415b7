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

Files are written to a temporary name and renamed, so a watcher never sees half a file.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
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
STATUSES = frozenset({"ok", "error", "timeout", "truncated"})
FILE_NAME = "rollouts.parquet"
QUARANTINE = "_quarantine"
_STEP_DIR = re.compile(r"^step=(\d+)$")


class ContractError(ValueError):
    """A landing file breaks the contract; the message says which column / row / value."""


@dataclass(frozen=True)
class LandingFile:
    path: Path
    campaign_id: str
    step: int
    content_hash: str

    @property
    def run_key(self) -> str:
        return f"{self.path}:{self.content_hash}"

    @classmethod
    def from_path(cls, path: str | Path) -> LandingFile:
        """Campaign and step from ``.../<campaign_id>/step=<t>/<file>``; ContractError if misplaced."""
        path = Path(path)
        match = _STEP_DIR.match(path.parent.name)
        if not match or path.parent.parent.name in ("", QUARANTINE):
            raise ContractError(f"{path}: not under <landing>/<campaign_id>/step=<t>/")
        if not path.is_file():
            raise ContractError(f"{path}: file not found")
        return cls(path, path.parent.parent.name, int(match.group(1)), file_hash(path))

    def quarantine_path(self, landing: Path) -> Path:
        return (
            landing
            / QUARANTINE
            / self.campaign_id
            / f"step={self.step}"
            / f"{self.content_hash}-{self.path.name}"
        )


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:32]


def step_path(landing: Path, campaign_id: str, step: int) -> Path:
    return landing / campaign_id / f"step={step}" / FILE_NAME


def write_step_file(landing: Path, rollouts: pd.DataFrame, campaign_id: str, step: int) -> Path:
    """Write one step's rollouts atomically (temp file + rename)."""
    frame = rollouts.copy()
    for column in OPTIONAL:
        if column not in frame.columns:
            frame[column] = None
    schema = pa.schema([(name, kind) for name, kind in {**REQUIRED, **OPTIONAL}.items()])
    table = pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
    path = step_path(landing, campaign_id, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path


def discover(landing: Path) -> list[LandingFile]:
    """Every step file under ``landing`` (quarantine and temp files excluded), oldest first."""
    found = []
    if not landing.exists():
        return found
    for path in landing.glob(f"*/step=*/{FILE_NAME}"):
        campaign_dir, step_dir = path.parent.parent.name, path.parent.name
        match = _STEP_DIR.match(step_dir)
        if campaign_dir == QUARANTINE or not match:
            continue
        found.append((path.stat().st_mtime_ns, LandingFile.from_path(path)))
    return [f for _, f in sorted(found, key=lambda item: (item[0], str(item[1].path)))]


def read_and_validate(landing_file: LandingFile, batch_task_ids: set[str], group_size: int) -> pd.DataFrame:
    """The file's rows, or ContractError naming the first problem found. Nothing is loaded here."""
    path = landing_file.path
    try:
        # ParquetFile, not read_table: the `step=<t>` folder must not be read as a hive partition column.
        table = pq.ParquetFile(path).read()
    except (pa.ArrowException, OSError) as exc:
        raise ContractError(f"{path}: not a readable Parquet file ({exc})") from None
    missing = [c for c in REQUIRED if c not in table.column_names]
    if missing:
        raise ContractError(f"{path}: missing required column(s) {missing}")
    for name, kind in {**REQUIRED, **OPTIONAL}.items():
        if name in table.column_names and not _compatible(table.schema.field(name).type, kind):
            raise ContractError(
                f"{path}: column '{name}' has type {table.schema.field(name).type}, expected {kind}"
            )
    frame = table.to_pandas()
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
    _expect(
        frame,
        (frame["rollout_idx"] < 0) | (frame["rollout_idx"] >= group_size),
        path,
        "rollout_idx",
        f"outside 0..{group_size - 1}",
    )
    _expect(frame, ~frame["status"].isin(STATUSES), path, "status", f"not one of {sorted(STATUSES)}")
    _expect(
        frame,
        ~frame["task_id"].isin(batch_task_ids),
        path,
        "task_id",
        f"not in the scheduled batch of step {landing_file.step} (unknown task id)",
    )
    _expect(
        frame,
        frame.duplicated(["task_id", "rollout_idx"]),
        path,
        "rollout_idx",
        "duplicates (task_id, rollout_idx)",
    )
    if frame.empty:
        raise ContractError(f"{path}: no rows")
    return frame


def _compatible(actual: pa.DataType, expected: pa.DataType) -> bool:
    if pa.types.is_null(actual):
        return True  # an all-null optional column
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


def _first(mask: pd.Series) -> int:
    return int(mask.to_numpy().nonzero()[0][0])


def _expect(frame: pd.DataFrame, bad: pd.Series, path: Path, column: str, problem: str) -> None:
    if bad.any():
        row = _first(bad)
        raise ContractError(
            f"{path}: column '{column}' {problem} in {int(bad.sum())} row(s), first row {row} "
            f"(value {frame[column].iloc[row]!r})"
        )
