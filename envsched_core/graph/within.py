"""Within-environment edges W (EnvSched, Yang et al., 2026, "Within-environment edges").

For each environment, k_W nearest neighbours among its own tasks by the combined similarity
    sim(i, j) = 0.5 cos(e_i, e_j) + 0.3 Jaccard(tools_i, tools_j) + 0.2 Jaccard(state_i, state_j).
Environments up to ``exact_knn_max`` tasks: exact, over the full combined similarity. Larger ones:
pynndescent on the embeddings gives candidate_factor * k_W candidates, re-ranked by the combined similarity.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..catalog import TaskCatalog
from ..config import SchedulerConfig
from .relation import edges_to_frame, top_k_per_source

PAIR_CHUNK = 1_000_000  # pairs per vectorised chunk, bounds the memory of the re-rank


def _jaccard_matrix(m: sp.csr_matrix) -> np.ndarray:
    """Dense pairwise Jaccard of the rows of a binary matrix (0 where both sets are empty)."""
    inter = (m @ m.T).toarray().astype(np.float32)
    size = np.asarray(m.getnnz(axis=1), dtype=np.float32)
    union = size[:, None] + size[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def _jaccard_pairs(m: sp.csr_matrix, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    inter = np.asarray(m[src].multiply(m[dst]).sum(axis=1), dtype=np.float32).ravel()
    size = np.asarray(m.getnnz(axis=1), dtype=np.float32)
    union = size[src] + size[dst] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def similarity_matrix(catalog: TaskCatalog, cfg: SchedulerConfig, rows: np.ndarray) -> np.ndarray:
    """Dense combined similarity among catalogue ``rows`` (also the scheduler's redundancy measure)."""
    e = catalog.embeddings[rows]
    s = cfg.weight_cosine * (e @ e.T)
    if cfg.weight_tools:
        s += cfg.weight_tools * _jaccard_matrix(catalog.tools[rows])
    if cfg.weight_state:
        s += cfg.weight_state * _jaccard_matrix(catalog.state_fields[rows])
    return s


def similarity_pairs(
    catalog: TaskCatalog, cfg: SchedulerConfig, src: np.ndarray, dst: np.ndarray
) -> np.ndarray:
    """Combined similarity of aligned row pairs, in chunks."""
    out = np.empty(len(src), dtype=np.float32)
    for lo in range(0, len(src), PAIR_CHUNK):
        a, b = src[lo : lo + PAIR_CHUNK], dst[lo : lo + PAIR_CHUNK]
        s = cfg.weight_cosine * np.einsum("ij,ij->i", catalog.embeddings[a], catalog.embeddings[b])
        if cfg.weight_tools:
            s += cfg.weight_tools * _jaccard_pairs(catalog.tools, a, b)
        if cfg.weight_state:
            s += cfg.weight_state * _jaccard_pairs(catalog.state_fields, a, b)
        out[lo : lo + PAIR_CHUNK] = s
    return out


def _exact_neighbours(catalog: TaskCatalog, cfg: SchedulerConfig, rows: np.ndarray, k: int):
    s = similarity_matrix(catalog, cfg, rows)
    np.fill_diagonal(s, -np.inf)  # a task is not its own neighbour
    nn = np.argpartition(-s, k - 1, axis=1)[:, :k]  # (n, k) local indices, unordered
    src = np.repeat(rows, k)
    return src, rows[nn.ravel()], s[np.arange(len(rows))[:, None], nn].ravel()


def _approximate_neighbours(catalog: TaskCatalog, cfg: SchedulerConfig, rows: np.ndarray, k: int, seed: int):
    # imported here: it JIT-compiles (~20 s) and small catalogues never need it
    from pynndescent import NNDescent

    n_candidates = min(cfg.candidate_factor * k + 1, len(rows) - 1)
    index = NNDescent(catalog.embeddings[rows], metric="cosine", n_neighbors=n_candidates, random_state=seed)
    nn, _ = index.neighbor_graph  # (n, n_candidates) local indices, self first; -1 where not found
    local_src = np.repeat(np.arange(len(rows)), nn.shape[1])
    local_dst = nn.ravel()
    keep = (local_dst >= 0) & (local_dst != local_src)
    src, dst = rows[local_src[keep]], rows[local_dst[keep]]
    return top_k_per_source(src, dst, similarity_pairs(catalog, cfg, src, dst), k)


def within_edge_arrays(catalog: TaskCatalog, cfg: SchedulerConfig, seed: int = 0):
    """(src, dst, similarity) arrays of W over catalogue rows, k_W per task (fewer in tiny environments)."""
    parts = []
    members = pd.Series(np.arange(len(catalog))).groupby(catalog.env).indices
    for env in sorted(members):
        rows = np.asarray(members[env], dtype=np.int64)
        k = min(cfg.k_within, len(rows) - 1)
        if k < 1:
            continue
        if len(rows) <= cfg.exact_knn_max:
            parts.append(_exact_neighbours(catalog, cfg, rows, k))
        else:
            parts.append(_approximate_neighbours(catalog, cfg, rows, k, seed + int(env)))
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    src, dst, sim = (np.concatenate(p) for p in zip(*parts, strict=True))
    return src.astype(np.int64), dst.astype(np.int64), sim.astype(np.float32)


def build_within_edges(
    catalog: TaskCatalog, cfg: SchedulerConfig | None = None, seed: int = 0
) -> pd.DataFrame:
    """Within-environment edges as a frame (src, dst, similarity) of task ids."""
    return edges_to_frame(catalog, *within_edge_arrays(catalog, cfg or SchedulerConfig(), seed))
