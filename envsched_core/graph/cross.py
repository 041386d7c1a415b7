"""Cross-environment edges X (EnvSched, Yang et al., 2026, "Cross-environment edges").

k_X nearest neighbours in *other* environments by cosine of a standardised signature of abstract execution
and reward topology: the catalogue's static part (log tool count, turns, gold calls, effect mix, call-motif
histogram, verifier kind, reward kind) and, once a task is observed, its reward profile (mu_i, m_i, trend).

Two phases, so a refresh is cheap: :func:`cross_candidates` finds candidate_factor * k_X candidates per
task in other environments (exact up to ``cross_exact_max`` tasks, else pynndescent over random
environment bipartitions, which guarantees every candidate is in another environment), and
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
from .relation import edges_to_frame, top_k_per_source

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


def _exact_candidates(x: np.ndarray, env: np.ndarray, n_candidates: int):
    srcs, dsts = [], []
    for lo in range(0, len(x), EXACT_BLOCK):
        block = np.arange(lo, min(lo + EXACT_BLOCK, len(x)))
        s = x[block] @ x.T
        s[env[block][:, None] == env[None, :]] = -np.inf  # other environments only
        c = min(n_candidates, s.shape[1])
        nn = np.argpartition(-s, c - 1, axis=1)[:, :c]
        ok = np.isfinite(s[np.arange(len(block))[:, None], nn])
        srcs.append(np.repeat(block, c)[ok.ravel()])
        dsts.append(nn.ravel()[ok.ravel()])
    return np.concatenate(srcs), np.concatenate(dsts)


def _approximate_candidates(x: np.ndarray, env: np.ndarray, n_candidates: int, partitions: int, seed: int):
    from pynndescent import NNDescent  # JIT-compiles on first use; only large catalogues need it

    rng = np.random.default_rng(seed)
    srcs, dsts = [], []
    for _ in range(partitions):
        side = rng.integers(0, 2, size=env.max() + 1)[env].astype(bool)  # random env bipartition
        for query_side in (False, True):
            queries, base = np.flatnonzero(side == query_side), np.flatnonzero(side != query_side)
            if len(queries) == 0 or len(base) < 2:
                continue
            c = min(n_candidates, len(base) - 1)
            index = NNDescent(
                x[base], metric="cosine", n_neighbors=max(c, 2), random_state=int(rng.integers(1 << 30))
            )
            nn, _ = index.query(x[queries], k=c)
            srcs.append(np.repeat(queries, c))
            dsts.append(base[nn.ravel()])
    return np.concatenate(srcs), np.concatenate(dsts)


def cross_candidates(
    catalog: TaskCatalog, cfg: SchedulerConfig, signature: np.ndarray | None = None, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) candidate pairs, up to candidate_factor * k_X per task, all in other environments."""
    x = cross_signature(catalog, cfg) if signature is None else signature
    n_candidates = cfg.candidate_factor * cfg.k_cross
    if catalog.n_envs < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if len(catalog) <= cfg.cross_exact_max:
        src, dst = _exact_candidates(x, catalog.env, n_candidates)
    else:
        src, dst = _approximate_candidates(x, catalog.env, n_candidates, cfg.cross_partitions, seed)
    return src.astype(np.int64), dst.astype(np.int64)


def rank_cross_edges(src: np.ndarray, dst: np.ndarray, signature: np.ndarray, k: int):
    """Keep each task's k candidates of highest signature cosine: (src, dst, similarity)."""
    sim = np.einsum("ij,ij->i", signature[src], signature[dst]) if len(src) else np.zeros(0, np.float32)
    return top_k_per_source(src, dst, sim.astype(np.float32), k)


def cross_edge_arrays(
    catalog: TaskCatalog, cfg: SchedulerConfig, stats: TaskStats | None = None, seed: int = 0
):
    """Full rebuild of X under the current reward profiles: (src, dst, similarity) over catalogue rows."""
    x = cross_signature(catalog, cfg, stats)
    src, dst = cross_candidates(catalog, cfg, x, seed)
    return rank_cross_edges(src, dst, x, cfg.k_cross)


def build_cross_edges(
    catalog: TaskCatalog, stats: TaskStats | None = None, cfg: SchedulerConfig | None = None, seed: int = 0
) -> pd.DataFrame:
    """Cross-environment edges as a frame (src, dst, similarity) of task ids."""
    return edges_to_frame(catalog, *cross_edge_arrays(catalog, cfg or SchedulerConfig(), stats, seed))


def build_cross_candidates(
    catalog: TaskCatalog, cfg: SchedulerConfig | None = None, seed: int = 0
) -> pd.DataFrame:
    """The candidate pairs that refreshes re-rank (candidate_factor * k_X per task) with their static
    signature cosine, as a frame (src, dst, similarity) of task ids; what `EnvSched(cross_edges=...)`
    takes, so the pipeline can persist the graph once and reuse it."""
    cfg = cfg or SchedulerConfig()
    signature = cross_signature(catalog, cfg)
    src, dst = cross_candidates(catalog, cfg, signature, seed)
    return edges_to_frame(catalog, *rank_cross_edges(src, dst, signature, cfg.candidate_factor * cfg.k_cross))
