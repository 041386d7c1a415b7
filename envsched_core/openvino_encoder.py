"""The sentence-transformers pipeline (tokenise, transformer, pooling, normalise) run by OpenVINO on a CPU.

Why: on a CPU with native bf16 (AVX512_BF16 or AMX) OpenVINO's default inference precision is bf16, which
about doubles the fp32 ONNX Runtime rate while keeping the fp32 neighbours (all-MiniLM-L6-v2, 5k synthetic
tasks: cosine to fp32 >= 0.9999, within-environment top-8 recall 0.99; ``bench/pipeline_cost.py
--embedding``). Elsewhere OpenVINO runs fp32, still faster than ONNX Runtime here. Dynamic int8 was faster
than fp32 but lost 12% of the neighbours, so it is not used.

The model is the fp32 ONNX export of ``envsched_core.embedding.onnx_export``, converted once to OpenVINO IR
in ``<export>/openvino/`` together with what the pipeline around the transformer does (``encoder.json``:
max sequence length, pooling, normalisation), read from the sentence-transformers model itself. Only mean
or CLS pooling is supported; another layout raises, and the caller falls back to ONNX Runtime.

Batches run as OpenVINO throughput streams of one thread each (one per core by default), fed
asynchronously: the next batch is tokenised while the others run, so one process keeps every core busy.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

IR_FOLDER = "openvino"
POOLING_MODES = ("mean", "cls")


def cpu_cores() -> int:
    """Cores this process may run on (the affinity mask, which containers and `taskset` narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _pipeline_config(onnx_folder: str, onnx_file: str) -> dict:
    """max_seq_length, pooling and normalisation of the sentence-transformers model in ``onnx_folder``."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(
        onnx_folder, backend="onnx", device="cpu", model_kwargs={"file_name": onnx_file}
    )
    kinds = [type(module).__name__ for module in model]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise ValueError(
            f"openvino backend: model layout {kinds} unsupported (Transformer, Pooling[, Normalize])"
        )
    pooling = model[1].get_config_dict().get("pooling_mode")
    if pooling not in POOLING_MODES:
        raise ValueError(
            f"openvino backend: pooling {pooling!r} unsupported; supported: {list(POOLING_MODES)}"
        )
    return {"max_seq_length": model.max_seq_length, "pooling": pooling, "normalize": len(kinds) == 3}


def openvino_export(onnx_folder: str, onnx_file: str = "onnx/model.onnx") -> Path:
    """``<onnx_folder>/openvino`` (IR + encoder.json); converted from the fp32 ONNX file on first use.
    Written to a scratch folder and renamed, so concurrent processes agree on one copy."""
    import openvino as ov

    target = Path(onnx_folder) / IR_FOLDER
    if (target / "encoder.json").exists():
        return target
    scratch = Path(tempfile.mkdtemp(prefix=".openvino-", dir=onnx_folder))
    try:
        config = _pipeline_config(onnx_folder, onnx_file)  # first: it refuses what the encoder cannot run
        ov.save_model(ov.convert_model(str(Path(onnx_folder) / onnx_file)), str(scratch / "model.xml"), False)
        (scratch / "encoder.json").write_text(json.dumps(config))
        try:
            os.replace(scratch, target)
        except OSError:  # another process renamed its copy first
            pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


class OpenVINOEncoder:
    """``encode(texts)`` like a SentenceTransformer's, over the OpenVINO IR in ``ir_folder``.

    ``precision``: ``None`` = OpenVINO's default for this CPU (bf16 where it is native, else f32), or
    ``"f32"``. ``threads``: cores to use (default: all this process may run on), one stream each.
    """

    def __init__(self, ir_folder: str | Path, precision: str | None = None, threads: int | None = None):
        import openvino as ov
        from transformers import AutoTokenizer

        ir_folder = Path(ir_folder)
        self.config = json.loads((ir_folder / "encoder.json").read_text())
        self.tokenizer = AutoTokenizer.from_pretrained(str(ir_folder.parent))
        streams = max(1, int(threads or cpu_cores()))
        options = {"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": str(streams)}
        options["INFERENCE_NUM_THREADS"] = str(streams)
        if precision:
            options["INFERENCE_PRECISION_HINT"] = precision
        self.model = ov.Core().compile_model(str(ir_folder / "model.xml"), "CPU", options)
        self.precision = self.model.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        self.input_names = [port.get_any_name() for port in self.model.inputs]
        self.requests = ov.AsyncInferQueue(self.model, streams)

    def encode(
        self, texts: Sequence[str], batch_size: int = 32, normalize_embeddings: bool = True, **_ignored
    ) -> np.ndarray:
        """(N, d) float32 sentence embeddings; batches hold texts of similar length (little padding)."""
        texts = [str(t) for t in texts]
        order = np.argsort(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), kind="stable")
        pooled: list[tuple[np.ndarray, np.ndarray]] = []
        errors: list[BaseException] = []

        def finished(request, rows: np.ndarray) -> None:  # runs on an OpenVINO thread
            try:
                hidden = request.get_output_tensor(0).data  # (B, T, d), reused by the next batch
                pooled.append((rows, self._pool(hidden, request.get_tensor("attention_mask").data)))
            except BaseException as exc:  # raised again in the caller's thread
                errors.append(exc)

        self.requests.set_callback(finished)
        for lo in range(0, len(texts), batch_size):
            rows = order[lo : lo + batch_size]
            tokens = self.tokenizer(
                [texts[i] for i in rows],
                padding=True,
                truncation=True,
                max_length=self.config["max_seq_length"],
                return_tensors="np",
            )
            self.requests.start_async(
                {name: tokens[name].astype(np.int64) for name in self.input_names}, rows
            )
        self.requests.wait_all()
        if errors:
            raise errors[0]
        out = np.zeros((len(texts), self.model.outputs[0].get_partial_shape()[2].get_length()), np.float32)
        for rows, vectors in pooled:
            out[rows] = vectors
        if normalize_embeddings or self.config["normalize"]:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self.config["pooling"] == "cls":
            return np.array(hidden[:, 0], dtype=np.float32)
        weights = mask[..., None].astype(np.float32)  # (B, T, 1): padding counts for nothing
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
