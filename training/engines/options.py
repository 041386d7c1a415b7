"""The ``engine_options`` of the ``hf`` and ``vllm`` engines, importable without torch, so that a campaign's
config can check their names before anything is stored (``campaign.registry.check_engine_options``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training.agent_loop import AgentLoopConfig

DTYPE_NAMES = ("float32", "bfloat16", "float16")


@dataclass
class HFEngineOptions:
    """``engine_options`` of a campaign using the ``hf`` (or ``vllm``) engine."""

    model: str = ""
    """Local folder of a Hugging Face causal LM with a chat template that supports ``tools=``."""
    max_new_tokens: int = 512
    """Most tokens of one generation (one assistant message)."""
    max_total_tokens: int = 16384
    """Most tokens of a whole conversation (prompt, outputs, tool results, later user turns)."""
    max_calls_per_turn: int = 16
    """Most tool calls the model may make in one user turn before the rollout is truncated."""
    temperature: float = 1.0
    """Sampling temperature (the GRPO update scores tokens at the same temperature)."""
    top_p: float = 1.0
    """Nucleus sampling mass; 1.0 samples from the whole distribution."""
    sources: list[str] = field(default_factory=list)
    """Environment sources of the tasks; empty: the ``<source>/`` prefixes of the pool's task ids."""
    source_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Constructor options per source (e.g. {"synthetic": {"n_envs": 50}})."""
    device: str = ""
    """torch device; empty: ``cuda`` when available, else ``cpu``."""
    dtype: str = ""
    """dtype of the trainer's weights (float32, bfloat16, float16); empty: float32 on every device. On CUDA
    the forward passes (generation, scoring, the update) run under bf16 autocast (``grpo.bf16``) over these
    float32 master weights: AdamW steps of lr ~1e-6 are far below bf16's resolution, so bf16 weights round
    most of every update away (one step at lr 1e-6 moved 2.5% of the tiny test model's bf16 weights: docs/gpu.md)."""
    deterministic: bool = False
    """Deterministic kernels for the trainer (``torch.use_deterministic_algorithms``, process-wide; sets
    ``CUBLAS_WORKSPACE_CONFIG`` unless set, which cuBLAS reads only before the process's first CUDA matmul:
    export it before starting to be sure), so that a resumed ``hf`` campaign on CUDA repeats an uninterrupted
    one bit for bit, at some speed. CPU runs are bit-for-bit without it; on CUDA, without it, resumed weights
    differed by up to 7e-6 (docs/gpu.md). An op with no deterministic kernel then fails with torch's error.
    With the ``vllm`` engine it covers the trainer, not vLLM's sampling."""
    generation_batch_size: int = 16
    """Prompts generated together by ``generate`` (``hf`` engine only)."""
    system_prompt: str | None = None
    """Optional system message before the first user turn."""
    timeout_s: float | None = None
    """Wall-clock limit of one rollout (status ``timeout``); None: none."""
    grpo: dict[str, Any] = field(default_factory=dict)
    """Fields of ``training.grpo.GRPOConfig`` (learning_rate, epsilon_high, beta, ...); its temperature
    and seed come from this engine."""

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("engine_options.model is required: the folder of a local Hugging Face model")
        if not Path(self.model).is_dir():
            raise ValueError(f"engine_options.model {self.model!r} is not a folder (models load offline)")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 for GRPO sampling, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.dtype and self.dtype not in DTYPE_NAMES:
            raise ValueError(f"dtype {self.dtype!r} unknown; choose from {sorted(DTYPE_NAMES)}")
        if self.generation_batch_size < 1:
            raise ValueError("generation_batch_size must be >= 1")
        if "temperature" in self.grpo or "seed" in self.grpo:
            raise ValueError(
                "set temperature (and the campaign seed) on the engine, not in engine_options.grpo"
            )
        AgentLoopConfig(**self.loop_fields())  # validates the loop limits

    def loop_fields(self) -> dict[str, Any]:
        return {
            "max_new_tokens": self.max_new_tokens,
            "max_total_tokens": self.max_total_tokens,
            "max_calls_per_turn": self.max_calls_per_turn,
            "system_prompt": self.system_prompt,
            "timeout_s": self.timeout_s,
        }


@dataclass
class VLLMEngineOptions(HFEngineOptions):
    """``engine_options`` of the ``vllm`` engine: the ``hf`` engine's, plus vLLM's own."""

    gpu_memory_utilization: float = 0.4
    """Share of the GPU's memory vLLM may use for weights and KV cache (the trainer needs the rest)."""
    enable_sleep_mode: bool = True
    """Release vLLM's weights and KV cache during the GRPO update (sleep level 2)."""
    enforce_eager: bool = False
    """Disable CUDA graphs (slower decoding, faster start, less memory)."""
    max_num_seqs: int = 256
    """Most sequences vLLM decodes at once."""
    vllm_dtype: str = "bfloat16"
    """dtype of vLLM's copy of the weights (the trainer's is ``dtype``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.gpu_memory_utilization < 1.0:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1), got {self.gpu_memory_utilization}")
        if self.max_num_seqs < 1:
            raise ValueError("max_num_seqs must be >= 1")
