"""The shipped embedding model through each backend: same neighbours as fp32, order kept, progress."""

import numpy as np
import pytest

from envsched_core.embedding import SentenceTransformerEmbedder, onnx_available


@pytest.fixture(scope="module")
def texts():
    from environments.frames import catalog_frames
    from environments.registry import get_source

    tasks = catalog_frames(get_source("synthetic", envs=2, tasks_per_env=40).load()).tasks
    return tasks["text"].astype(str).tolist()


@pytest.fixture(scope="module")
def fp32(texts):
    return SentenceTransformerEmbedder(backend="torch")(texts)


def test_embedder_length_sorted_chunks_keep_input_order_and_report_progress(texts, fp32):
    from sentence_transformers import SentenceTransformer

    seen = []
    embedder = SentenceTransformerEmbedder(
        backend="torch", chunk_size=16, progress=lambda d, t, r: seen.append((d, t))
    )
    vectors = embedder(texts)
    direct = SentenceTransformer(embedder.model_path, device="cpu").encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(vectors, direct, atol=1e-5)
    assert [d for d, _ in seen] == list(range(16, len(texts), 16)) + [len(texts)] and seen[-1][1] == len(
        texts
    )


@pytest.mark.skipif(not onnx_available(), reason="onnxruntime / optimum not installed")
@pytest.mark.parametrize("backend, min_cosine", [("onnx", 0.9999), ("onnx-int8", 0.95)])
def test_embedder_onnx_backends_give_the_fp32_neighbours(texts, fp32, backend, min_cosine, tmp_path_factory):
    embedder = SentenceTransformerEmbedder(backend=backend)
    assert embedder.backend == backend
    vectors = embedder(texts)
    assert (vectors * fp32).sum(axis=1).min() >= min_cosine
    top = np.argsort(-(vectors @ vectors.T), axis=1)[:, 1:4]
    reference = np.argsort(-(fp32 @ fp32.T), axis=1)[:, 1:4]
    recall = np.mean([len(set(a) & set(b)) / 3 for a, b in zip(top, reference, strict=True)])
    assert recall >= 0.8


def test_embedder_names_an_unknown_backend():
    with pytest.raises(ValueError, match="embedding backend 'fast' unknown"):
        SentenceTransformerEmbedder(backend="fast")
