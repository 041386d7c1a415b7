"""TaskCatalog: the graph's nodes, (environment, task) pairs, as arrays the algorithm can vectorise over.

Built once from a DataFrame with columns ``task_id, env_id, text, tools`` and optional
``embedding, state_fields, turns, gold_calls, tool_effects, verifier, reward_kind``.
Holds unit text embeddings, sparse tool / state-field incidence matrices (for Jaccard overlap) and the
static part of the cross-environment signature (EnvSched, Yang et al., 2026, "Cross-environment edges").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .embedding import Embedder, SentenceTransformerEmbedder, normalise_rows

REQUIRED_COLUMNS = ("task_id", "env_id", "text", "tools")
MUTATING_EFFECTS = ("write", "create", "delete")
EFFECTS = ("read",) + MUTATING_EFFECTS
MAX_CATEGORIES = 16  # verifier / reward kinds beyond the most common 16 share one "other" column


def ids_digest(task_ids) -> str:
    """A fingerprint of task ids in order (``TaskCatalog.digest``; the baselines' states carry it too)."""
    return hashlib.blake2b("\n".join(map(str, task_ids)).encode(), digest_size=16).hexdigest()


def _is_list_like(value) -> bool:
    return isinstance(value, list | tuple | np.ndarray | set | frozenset)


def _list_column(df: pd.DataFrame, name: str) -> list[list[str]]:
    """A column of string lists; a missing column or a null cell is an empty list."""
    if name not in df.columns:
        return [[] for _ in range(len(df))]
    out = []
    for row, value in zip(df["task_id"], df[name], strict=True):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            out.append([])
        elif _is_list_like(value):
            out.append([str(v) for v in value])
        else:
            raise ValueError(
                f"TaskCatalog: column '{name}' of task_id={row!r} must be a list of strings, got {value!r}."
            )
    return out


def incidence_matrix(sets: Sequence[Sequence[str]]) -> tuple[sp.csr_matrix, np.ndarray]:
    """Binary (N, V) CSR matrix of set membership and the vocabulary of its columns."""
    lengths = np.fromiter((len(set(s)) for s in sets), dtype=np.int64, count=len(sets))
    flat = [v for s in sets for v in dict.fromkeys(s)]  # dedupe within a row, keep order
    codes, vocabulary = pd.factorize(pd.Series(flat, dtype=object)) if flat else (np.zeros(0, np.int64), [])
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    data = np.ones(len(flat), dtype=np.float32)
    matrix = sp.csr_matrix((data, np.asarray(codes), indptr), shape=(len(sets), len(vocabulary)))
    return matrix, np.asarray(vocabulary, dtype=object)


def tool_name_parts(tool_names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(namespace, base name) of each tool: the parts of its name before and after its last '.' (namespace ''
    where there is none), so "env3.get_order" and "env9.get_order" share the base name under two namespaces."""
    parts = np.array([str(name).rpartition(".") for name in tool_names], dtype=object).reshape(-1, 3)
    return parts[:, 0], parts[:, 2]


def _numeric_column(df: pd.DataFrame, name: str) -> np.ndarray:
    if name not in df.columns:
        return np.zeros(len(df))
    values = pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=float)
    if np.any(values[~np.isnan(values)] < 0):
        raise ValueError(f"TaskCatalog: column '{name}' must be >= 0.")
    return np.nan_to_num(values, nan=0.0)


def _one_hot(df: pd.DataFrame, name: str) -> np.ndarray:
    """One-hot of a categorical column, the MAX_CATEGORIES most common values plus "other"."""
    if name not in df.columns:
        return np.zeros((len(df), 0))
    values = df[name].fillna("").astype(str)
    common = values.value_counts().index[:MAX_CATEGORIES]
    codes = pd.Categorical(
        values.where(values.isin(common), "__other__"), categories=list(common) + ["__other__"]
    ).codes
    out = np.zeros((len(df), len(common) + 1))
    out[np.arange(len(df)), codes] = 1.0
    return out


def effect_features(effects: Sequence[Sequence[str]]) -> np.ndarray:
    """Per task: read/write/create/delete mix (4 shares) and call-motif histogram (4 bigram shares).

    Motifs are bigrams over the effect sequence with alphabet {read, mutate}: rr, rm, mr, mm. They tell
    a read-then-write task from a write-then-read one even when the effect mix is equal.
    """
    out = np.zeros((len(effects), len(EFFECTS) + 4))
    for i, seq in enumerate(effects):
        seq = [e.lower() for e in seq]
        if not seq:
            continue
        for k, effect in enumerate(EFFECTS):
            out[i, k] = seq.count(effect) / len(seq)
        mutates = [e in MUTATING_EFFECTS for e in seq]
        pairs = list(zip(mutates[:-1], mutates[1:], strict=True))
        for a, b in pairs:
            out[i, len(EFFECTS) + 2 * a + b] += 1.0 / len(pairs)
    return out


def standardise(x: np.ndarray) -> np.ndarray:
    """Column z-scores; constant columns become 0 so they do not move any cosine."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[1] == 0:
        return x.astype(np.float32)
    std = x.std(axis=0)
    z = (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)
    z[:, std == 0] = 0.0
    return z.astype(np.float32)


@dataclass
class TaskCatalog:
    """Nodes of the dual-relation graph; row i of every array is task ``task_ids[i]``."""

    task_ids: np.ndarray  # (N,) object
    env: np.ndarray  # (N,) int32 environment code
    env_ids: np.ndarray  # (E,) object, env_ids[env[i]] is task i's environment
    embeddings: np.ndarray  # (N, d) float32, unit rows
    tools: sp.csr_matrix  # (N, T) binary
    tool_names: np.ndarray  # (T,)
    state_fields: sp.csr_matrix  # (N, S) binary
    signature: np.ndarray  # (N, s) float32 standardised static cross-env signature
    gold_calls: np.ndarray | None = None  # (N,) float64 gold tool calls per task (0 where unknown)
    # (N,) int code of the task's verifier (else its reward_kind); None when the catalogue has neither column
    verifier_kind: np.ndarray | None = None

    def __post_init__(self) -> None:
        self._index = pd.Index(self.task_ids)

    def __len__(self) -> int:
        return len(self.task_ids)

    @cached_property
    def digest(self) -> str:
        """A fingerprint of the task ids in row order: a saved state's rows are this catalogue's when it matches."""
        return ids_digest(self.task_ids)

    @property
    def n_envs(self) -> int:
        return len(self.env_ids)

    @property
    def tasks(self) -> pd.DataFrame:
        """The task table (task_id, env_id), catalogue order; what the baseline schedulers read."""
        return pd.DataFrame({"task_id": self.task_ids, "env_id": self.env_ids[self.env]})

    def indices_of(self, task_ids, what: str = "task_id") -> np.ndarray:
        """Row indices of ``task_ids``; raises ValueError naming the ids this catalogue does not know."""
        idx = self._index.get_indexer(pd.Index(np.asarray(task_ids, dtype=object)))
        if np.any(idx < 0):
            unknown = pd.unique(np.asarray(task_ids, dtype=object)[idx < 0])
            raise ValueError(
                f"unknown {what}(s) not in the catalogue: {list(unknown[:5])}"
                f"{' ...' if len(unknown) > 5 else ''} ({len(unknown)} in all)."
            )
        return idx

    @classmethod
    def from_frame(cls, df: pd.DataFrame, embedder: Embedder | None = None) -> TaskCatalog:
        """Validate ``df`` and build the catalogue; embeds ``text`` with ``embedder`` (default: the shipped
        sentence-transformers model) unless an ``embedding`` column is given."""
        missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
        if missing:
            raise ValueError(f"TaskCatalog: missing column(s) {missing}; required: {list(REQUIRED_COLUMNS)}.")
        if len(df) == 0:
            raise ValueError("TaskCatalog: the task frame is empty.")
        df = df.reset_index(drop=True)
        for column in ("task_id", "env_id", "text"):
            if df[column].isna().any():
                row = int(np.flatnonzero(df[column].isna().to_numpy())[0])
                raise ValueError(f"TaskCatalog: column '{column}' is null in row {row}.")
        task_ids = df["task_id"].astype(str).to_numpy(dtype=object)
        duplicated = pd.Index(task_ids).duplicated()
        if duplicated.any():
            raise ValueError(
                f"TaskCatalog: duplicate task_id(s) {list(pd.unique(task_ids[duplicated])[:5])}."
            )
        env, env_ids = pd.factorize(df["env_id"].astype(str))

        if "embedding" in df.columns:
            embeddings = _stack_embeddings(df)
        else:
            embedder = embedder or SentenceTransformerEmbedder()
            embeddings = np.asarray(embedder(df["text"].astype(str).tolist()), dtype=np.float32)
            if embeddings.ndim != 2 or len(embeddings) != len(df):
                raise ValueError(
                    f"TaskCatalog: embedder returned shape {embeddings.shape}, expected ({len(df)}, d)."
                )

        tool_lists = _list_column(df, "tools")
        tools, tool_names = incidence_matrix(tool_lists)
        state_fields, _ = incidence_matrix(_list_column(df, "state_fields"))
        effects = _list_column(df, "tool_effects")
        raw_signature = np.column_stack(
            [
                np.log1p([len(set(t)) for t in tool_lists]),  # log tool count
                np.log1p(_numeric_column(df, "turns")),
                np.log1p(_numeric_column(df, "gold_calls")),
                effect_features(effects),  # effect mix + call-motif histogram
                _one_hot(df, "verifier"),
                _one_hot(df, "reward_kind"),
            ]
        )
        return cls(
            task_ids=task_ids,
            env=env.astype(np.int32),
            env_ids=np.asarray(env_ids, dtype=object),
            embeddings=normalise_rows(embeddings),
            tools=tools,
            tool_names=tool_names,
            state_fields=state_fields,
            signature=standardise(raw_signature),
            gold_calls=_numeric_column(df, "gold_calls").astype(np.float64),
            verifier_kind=_verifier_kind(df),
        )


def _verifier_kind(df: pd.DataFrame) -> np.ndarray | None:
    """Per task, an int code of how it is rewarded: its ``verifier`` column, else ``reward_kind``; None with
    neither (EnvSched then reads each environment's kind from its rewards, `reward_kind.py`)."""
    for name in ("verifier", "reward_kind"):
        if name in df.columns:
            return pd.factorize(df[name].fillna("").astype(str))[0].astype(np.int32)
    return None


def _stack_embeddings(df: pd.DataFrame) -> np.ndarray:
    rows = df["embedding"].tolist()
    for i, row in enumerate(rows):
        if not _is_list_like(row):
            raise ValueError(
                f"TaskCatalog: 'embedding' of task_id={df['task_id'].iloc[i]!r} is not a vector."
            )
    dims = {len(r) for r in rows}
    if len(dims) != 1:
        raise ValueError(f"TaskCatalog: 'embedding' vectors have different lengths {sorted(dims)[:5]}.")
    x = np.asarray(rows, dtype=np.float32)
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
        raise ValueError(
            f"TaskCatalog: 'embedding' of task_id={df['task_id'].iloc[bad]!r} has NaN/inf values."
        )
    return x
