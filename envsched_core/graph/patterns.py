"""Interaction patterns: k-means clusters of the static cross-env signature.

The scheduler's coverage score counts visits per pattern (N_pattern), so a batch spreads over kinds of
interaction (read-heavy lookups, long write chains, ...) and not only over environments
(EnvSched, Yang et al., 2026, "Scheduler").
"""

from __future__ import annotations

import numpy as np

FIT_SAMPLE = 20_000  # rows used to fit the centroids; all rows are then assigned
ASSIGN_BLOCK = 65_536


def _nearest(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    out = np.empty(len(x), dtype=np.int32)
    c2 = (centroids**2).sum(axis=1)
    for lo in range(0, len(x), ASSIGN_BLOCK):
        block = x[lo : lo + ASSIGN_BLOCK]
        out[lo : lo + ASSIGN_BLOCK] = np.argmin(c2[None, :] - 2.0 * block @ centroids.T, axis=1)
    return out


def signature_patterns(
    signature: np.ndarray, n_patterns: int, seed: int = 0, iterations: int = 25
) -> np.ndarray:
    """(N,) pattern label per task: Lloyd's k-means (k-means++ seeding) on a sample, then nearest centroid."""
    rng = np.random.default_rng(seed)
    x = np.asarray(signature, dtype=np.float32)
    unique = np.unique(x, axis=0) if len(x) <= FIT_SAMPLE else x
    k = min(n_patterns, len(unique))
    sample = x[rng.choice(len(x), size=min(FIT_SAMPLE, len(x)), replace=False)]
    centroids = [sample[rng.integers(len(sample))]]
    d2 = ((sample - centroids[0]) ** 2).sum(axis=1)
    for _ in range(1, k):  # k-means++: next centroid drawn proportional to squared distance
        if d2.sum() <= 0:
            break
        centroids.append(sample[rng.choice(len(sample), p=d2 / d2.sum())])
        d2 = np.minimum(d2, ((sample - centroids[-1]) ** 2).sum(axis=1))
    centroids = np.array(centroids)
    for _ in range(iterations):
        label = _nearest(sample, centroids)
        counts = np.bincount(label, minlength=len(centroids))
        sums = np.zeros_like(centroids)
        np.add.at(sums, label, sample)
        moved = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], centroids)
        if np.allclose(moved, centroids):
            break
        centroids = moved
    return _nearest(x, centroids)
