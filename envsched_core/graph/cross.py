"""Cross-environment edges X (EnvSched, Yang et al., 2026, "Cross-environment edges").

k_X nearest neighbours in *other* environments by cosine of a standardised signature of abstract execution
and reward topology: the catalogue's static part (log tool count, turns, gold calls, effect mix, call-motif
histogram, verifier kind, reward kind) and, once a task is observed, its reward profile (mu_i, m_i, trend).

Two phases, so a refresh is cheap: :func:`cross_candidates` finds candidate_factor * k_X candidates per
task in other environments (searching among *distinct* signatures, exactly up to ``cross_exact_max`` of
them, else with pynndescent), and
:func:`rank_cross_edges` keeps the k_X best under the current signature. EnvSched re-ranks at each
prediction refresh; :func:`build_cross_edges` does both phases from scratch.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..catalog import TaskCatalog, standardise
from ..config import SchedulerConfig
from ..embedding import normalise_rows
from ..stats import TaskStats
from .relation import edges_to_frame

EXACT_BLOCK = 1024  # query rows per block of the exact search


def cross_signature(catalog: TaskCatalog, cfg: SchedulerConfig, stats: TaskStats | None = None) -> np.ndarray:
    """(N, s) unit rows: static signature plus profile_weight * standardised (mu, m, trend) of observed tasks.

    Unobserved tasks get a zero profile, i.e. the observed tasks' mean, so they stay neutral in it.
    """
    signature = catalog.signature
    if stats is not None and stats.any_observed and cfg.profile_weight > 0:
        seen = stats.observed
        profile = np.zeros((len(catalog), 3), dtype=np.float32)
        profile[seen] = cfg.profile_weight * standardise(
            np.column_stack([stats.mu[seen], stats.m[seen], stats.trend[seen]])
        )
        signature = np.hstack([signature, profile])
    return normalise_rows(signature)


def _unique_neighbours(u: np.ndarray, k: int, exact_max: int, seed: int) -> np.ndarray:
    """(U, k) indices of each unique signature's k most similar unique signatures, itself first."""
    k = min(k, len(u))
    if len(u) <= exact_max:
        nn = np.empty((len(u), k), dtype=np.int64)
        for lo in range(0, len(u), EXACT_BLOCK):
            s = u[lo : lo + EXACT_BLOCK] @ u.T
            s[np.arange(len(s)), np.arange(lo, lo + len(s))] = np.inf  # itself first
            top = np.argpartition(-s, k - 1, axis=1)[:, :k]
            order = np.argsort(-np.take_along_axis(s, top, axis=1), axis=1, kind="stable")
            nn[lo : lo + len(s)] = np.take_along_axis(top, order, axis=1)
        return nn
    from pynndescent import NNDescent  # JIT-compiles on first use; only large, varied catalogues need it

    index = NNDescent(u, metric="cosine", n_neighbors=max(k, 2), random_state=seed)
    nn, _ = index.neighbor_graph
    return np.where(nn >= 0, nn, np.arange(len(u))[:, None])


def _candidates_by_unique_signature(
    x: np.ndarray, env: np.ndarray, n_candidates: int, exact_max: int, seed: int
):
    """Exact-up-to-ties candidates: many tasks share a signature, so search among distinct signatures only.

    Each distinct signature gets a list of member tasks of its nearest distinct signatures (members in random
    order, so ties are broken fairly); each task then keeps the first n_candidates of its signature's list
    that lie in another environment.
    """
    rng = np.random.default_rng(seed)
    u, inverse = np.unique(x, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    members_of = np.argsort(inverse[perm := rng.permutation(len(x))], kind="stable")
    members = perm[members_of]  # tasks grouped by distinct signature, random order inside a group
    starts = np.r_[0, np.cumsum(np.bincount(inverse, minlength=len(u)))]
    width = 4 * n_candidates  # room for same-environment members that are dropped later
    nn = _unique_neighbours(u, n_candidates, exact_max, seed)
    lists = np.full((len(u), width), -1, dtype=np.int64)
    for s in range(len(u)):  # a loop over distinct signatures, not tasks
        picked = np.concatenate([members[starts[g] : starts[g] + width] for g in nn[s]])[:width]
        lists[s, : len(picked)] = picked
    srcs, dsts = [], []
    for lo in range(0, len(x), 65_536):
        rows = np.arange(lo, min(lo + 65_536, len(x)))
        cand = lists[inverse[rows]]  # (rows, width)
        ok = (cand >= 0) & (env[np.maximum(cand, 0)] != env[rows][:, None])
        ok &= np.cumsum(ok, axis=1) <= n_candidates
        srcs.append(np.repeat(rows, width)[ok.ravel()])
        dsts.append(cand[ok])
    return np.concatenate(srcs), np.concatenate(dsts)


def cross_candidates(
    catalog: TaskCatalog, cfg: SchedulerConfig, signature: np.ndarray | None = None, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) candidate pairs, up to candidate_factor * k_X per task, all in other environments."""
    x = cross_signature(catalog, cfg) if signature is None else signature
    if catalog.n_envs < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    src, dst = _candidates_by_unique_signature(
        x, catalog.env, cfg.candidate_factor * cfg.k_cross, cfg.cross_exact_max, seed
    )
    # Padding of short neighbour lists can repeat a pair; an edge is a set member, keep it once.
    pairs = np.unique(src.astype(np.int64) * len(x) + dst.astype(np.int64))
    return pairs // len(x), pairs % len(x)


def candidate_matrix(src: np.ndarray, dst: np.ndarray, n_tasks: int) -> np.ndarray:
    """Candidate pairs as an (N, C) matrix of destinations per source, padded with -1 (fast to re-rank)."""
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order]
    counts = np.bincount(src, minlength=n_tasks)
    width = int(counts.max()) if len(src) else 0
    position = np.arange(len(src)) - np.repeat(np.cumsum(counts) - counts, counts)
    matrix = np.full((n_tasks, width), -1, dtype=np.int64)
    matrix[src, position] = dst
    return matrix


def rank_cross_edges(candidates: np.ndarray, signature: np.ndarray, k: int, rows: np.ndarray | None = None):
    """Keep each task's k candidates (rows of an (N, C) -1-padded matrix) of highest signature cosine.

    ``rows``: re-rank only these sources (ascending); each row's result is the one a full re-rank gives.
    Returns (src, dst, similarity) sorted by source.
    """
    sources = np.arange(len(candidates)) if rows is None else np.asarray(rows, dtype=np.int64)
    srcs, dsts, sims = [], [], []
    for lo in range(0, len(sources), EXACT_BLOCK * 16):
        block = sources[lo : lo + EXACT_BLOCK * 16]
        cand = candidates[block]
        s = np.einsum("rcd,rd->rc", signature[np.maximum(cand, 0)], signature[block])  # (rows, C) cosines
        s[cand < 0] = -np.inf
        if cand.shape[1] > k:
            top = np.argpartition(-s, k - 1, axis=1)[:, :k]
            cand, s = np.take_along_axis(cand, top, axis=1), np.take_along_axis(s, top, axis=1)
        ok = cand >= 0
        srcs.append(np.repeat(block, cand.shape[1])[ok.ravel()])
        dsts.append(cand[ok])
        sims.append(s[ok])
    if not srcs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    return np.concatenate(srcs), np.concatenate(dsts), np.concatenate(sims).astype(np.float32)


def rows_to_rerank(candidates: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Sources whose re-rank can differ between signatures ``old`` and ``new`` (same shape): those whose own
    signature row changed, and those with a changed candidate. Ascending row indices."""
    changed = np.zeros(len(new) + 1, dtype=bool)  # the last slot stands for the -1 padding
    changed[:-1] = np.any(old != new, axis=1)
    if not changed.any():
        return np.zeros(0, np.int64)
    hit = changed[:-1] | changed[candidates].any(axis=1)  # -1 indexes the padding slot
    return np.flatnonzero(hit)


def cross_edge_arrays(
    catalog: TaskCatalog, cfg: SchedulerConfig, stats: TaskStats | None = None, seed: int = 0
):
    """Full rebuild of X under the current reward profiles: (src, dst, similarity) over catalogue rows."""
    x = cross_signature(catalog, cfg, stats)
    src, dst = cross_candidates(catalog, cfg, x, seed)
    return rank_cross_edges(candidate_matrix(src, dst, len(catalog)), x, cfg.k_cross)


def build_cross_edges(
    catalog: TaskCatalog, stats: TaskStats | None = None, cfg: SchedulerConfig | None = None, seed: int = 0
) -> pd.DataFrame:
    """Cross-environment edges as a frame (src, dst, similarity) of task ids."""
    return edges_to_frame(catalog, *cross_edge_arrays(catalog, cfg or SchedulerConfig(), stats, seed))


def build_cross_candidates(
    catalog: TaskCatalog, cfg: SchedulerConfig | None = None, seed: int = 0
) -> pd.DataFrame:
    """The candidate pairs that refreshes re-rank (candidate_factor * k_X per task) with their static
    signature cosine, as a frame (src, dst, similarity) of task ids: what `EnvSched(cross_edges=...)`
    takes, so the pipeline can persist the graph once and reuse it."""
    cfg = cfg or SchedulerConfig()
    signature = cross_signature(catalog, cfg)
    src, dst = cross_candidates(catalog, cfg, signature, seed)
    width = cfg.candidate_factor * cfg.k_cross
    return edges_to_frame(
        catalog, *rank_cross_edges(candidate_matrix(src, dst, len(catalog)), signature, width)
    )
