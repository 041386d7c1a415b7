"""Edge lists -> propagation matrices, and the per-source top-k helper both relations share.

An edge list is three aligned arrays (src, dst, similarity) over catalogue rows. The propagation
matrix of a relation is the sparse (N, N) matrix of weights w_ij = softmax_j(sim_ij / tau) over i's
neighbours (EnvSched, Yang et al., 2026, "Prediction").
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..catalog import TaskCatalog

EDGE_COLUMNS = ("src", "dst", "similarity")


def top_k_per_source(src: np.ndarray, dst: np.ndarray, sim: np.ndarray, k: int):
    """Keep each source's k most similar (deduplicated) destinations; returns (src, dst, sim) sorted by src."""
    order = np.lexsort((-sim, dst, src))
    src, dst, sim = src[order], dst[order], sim[order]
    fresh = np.ones(len(src), dtype=bool)  # drop repeated (src, dst) pairs, keeping the first
    fresh[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
    src, dst, sim = src[fresh], dst[fresh], sim[fresh]
    order = np.lexsort((-sim, src))
    src, dst, sim = src[order], dst[order], sim[order]
    starts = np.flatnonzero(np.r_[True, src[1:] != src[:-1]]) if len(src) else np.zeros(0, np.int64)
    rank = np.arange(len(src)) - np.repeat(starts, np.diff(np.r_[starts, len(src)]))
    keep = rank < k
    return src[keep], dst[keep], sim[keep]


def concatenated_ranges(start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """start[0], ..., start[0] + count[0] - 1, then start[1], ...: the slots of a few rows (or columns) in a CSR
    layout, where each one's entries are contiguous."""
    return np.repeat(start - (np.cumsum(count) - count), count) + np.arange(count.sum())


def propagation_matrix(
    src: np.ndarray, dst: np.ndarray, sim: np.ndarray, n_tasks: int, temperature: float
) -> sp.csr_matrix:
    """CSR (N, N) matrix with rows w_i. = softmax(sim_i. / temperature) over i's neighbours."""
    if len(src) == 0:
        return sp.csr_matrix((n_tasks, n_tasks))
    order = np.argsort(src, kind="stable")
    src, dst, logits = src[order], dst[order], sim[order] / temperature
    starts = np.flatnonzero(np.r_[True, src[1:] != src[:-1]])
    counts = np.diff(np.r_[starts, len(src)])
    logits = logits - np.repeat(np.maximum.reduceat(logits, starts), counts)  # stable softmax
    e = np.exp(logits)
    w = e / np.repeat(np.add.reduceat(e, starts), counts)
    return sp.csr_matrix((w, (src, dst)), shape=(n_tasks, n_tasks))


def edge_changes(old, new, n_tasks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What turns edge list ``old`` into ``new`` (both (src, dst, similarity), pairs unique): positions in
    ``new`` of pairs that are new or whose similarity changed, and the (src, dst) of old pairs now gone.
    Lets a store rewrite only what a re-rank changed."""
    key_old = np.asarray(old[0], np.int64) * n_tasks + np.asarray(old[1], np.int64)
    key_new = np.asarray(new[0], np.int64) * n_tasks + np.asarray(new[1], np.int64)
    _, at_old, at_new = np.intersect1d(key_old, key_new, assume_unique=True, return_indices=True)
    changed = np.ones(len(key_new), dtype=bool)
    changed[at_new] = np.asarray(old[2])[at_old] != np.asarray(new[2])[at_new]
    gone = np.setdiff1d(key_old, key_new, assume_unique=True)
    return np.flatnonzero(changed), gone // n_tasks, gone % n_tasks


def edges_to_frame(catalog: TaskCatalog, src: np.ndarray, dst: np.ndarray, sim: np.ndarray) -> pd.DataFrame:
    """Edge arrays as a warehouse-ready frame (src, dst, similarity) of task ids."""
    return pd.DataFrame(
        {
            "src": catalog.task_ids[src],
            "dst": catalog.task_ids[dst],
            "similarity": np.asarray(sim, dtype=float),
        }
    )


def edges_from_frame(catalog: TaskCatalog, edges: pd.DataFrame, name: str = "edges"):
    """(src, dst, similarity) task-id frame -> index arrays; raises ValueError on bad columns or ids."""
    missing = [c for c in EDGE_COLUMNS if c not in edges.columns]
    if missing:
        raise ValueError(f"{name}: missing column(s) {missing}; required: {list(EDGE_COLUMNS)}.")
    src = catalog.indices_of(edges["src"].astype(str).to_numpy(dtype=object), what=f"{name} src")
    dst = catalog.indices_of(edges["dst"].astype(str).to_numpy(dtype=object), what=f"{name} dst")
    sim = pd.to_numeric(edges["similarity"], errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(sim).all():
        raise ValueError(
            f"{name}: similarity must be finite (row {int(np.flatnonzero(~np.isfinite(sim))[0])})."
        )
    return src.astype(np.int64), dst.astype(np.int64), sim
