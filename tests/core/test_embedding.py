"""The shipped embedding model through each backend: same neighbours as fp32, order kept, progress."""

import numpy as np
import pytest

from envsched_core.embedding import (
    SentenceTransformerEmbedder,
    onnx_available,
    openvino_available,
    resolve_backend,
)

needs_onnx = pytest.mark.skipif(not onnx_available(), reason="onnxruntime / optimum not installed")
needs_openvino = pytest.mark.skipif(
    not (onnx_available() and openvino_available()), reason="openvino (or the ONNX exporter) not installed"
)


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


@pytest.mark.parametrize(
    "backend, min_cosine",
    [
        pytest.param("onnx", 0.9999, marks=needs_onnx),
        pytest.param("onnx-int8", 0.95, marks=needs_onnx),
        pytest.param("openvino", 0.999, marks=needs_openvino),  # bf16 where the CPU has it: ~0.99997
        pytest.param("openvino-fp32", 0.9999, marks=needs_openvino),
    ],
)
def test_embedder_fast_backends_give_the_fp32_neighbours(texts, fp32, backend, min_cosine):
    embedder = SentenceTransformerEmbedder(backend=backend)
    assert embedder.backend == backend
    vectors = embedder(texts)
    assert embedder.running.startswith(backend.split("-")[0])  # it ran, no silent fallback
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (vectors * fp32).sum(axis=1).min() >= min_cosine
    top = np.argsort(-(vectors @ vectors.T), axis=1)[:, 1:4]
    reference = np.argsort(-(fp32 @ fp32.T), axis=1)[:, 1:4]
    recall = np.mean([len(set(a) & set(b)) / 3 for a, b in zip(top, reference, strict=True)])
    assert recall >= 0.8


def test_embedder_names_an_unknown_backend():
    with pytest.raises(ValueError, match="embedding backend 'fast' unknown"):
        SentenceTransformerEmbedder(backend="fast")


@needs_openvino
def test_embedder_openvino_keeps_input_order_reports_progress_and_repeats_itself(texts, fp32):
    seen = []
    embedder = SentenceTransformerEmbedder(
        backend="openvino", batch_size=8, chunk_size=24, progress=lambda d, t, r: seen.append((d, t, r))
    )
    shuffled = np.random.default_rng(0).permutation(len(texts))
    vectors = embedder([texts[i] for i in shuffled])
    assert (vectors * fp32[shuffled]).sum(axis=1).min() >= 0.999  # row i is text i, whatever the batching
    assert [d for d, _, _ in seen] == list(range(24, len(texts), 24)) + [len(texts)]
    assert all(t == len(texts) and r > 0 for _, t, r in seen)
    np.testing.assert_array_equal(embedder([texts[i] for i in shuffled]), vectors)  # deterministic


@needs_openvino
def test_resolve_backend_auto_picks_openvino_on_a_cpu():
    assert resolve_backend("auto", "cpu") == ("openvino", "cpu")


@needs_openvino
def test_openvino_export_names_an_unsupported_pooling_and_leaves_no_partial_ir(tmp_path):
    import json
    import shutil
    from pathlib import Path

    from envsched_core.embedding import onnx_export, shipped_model_path
    from envsched_core.openvino_encoder import openvino_export

    folder, file_name = onnx_export(shipped_model_path(), int8=False)
    copy = tmp_path / "max-pooled"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("onnx", "openvino"))
    (copy / "onnx").mkdir()
    (copy / file_name).symlink_to(Path(folder) / file_name)
    pooling = copy / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({**json.loads(pooling.read_text()), "pooling_mode": "max"}))
    with pytest.raises(ValueError, match="pooling 'max' unsupported"):
        openvino_export(str(copy), file_name)
    assert not (copy / "openvino").exists() and not list(copy.glob(".openvino-*"))
