"""The ``hf`` engine: rollouts with Hugging Face ``transformers`` ``generate`` (CPU or GPU) in the
real environments, then one GRPO step on the same model.

A step (``run_step``): for each task of the batch, G episodes of the agent loop
(``training.agent_loop``) in fresh environments from the ``TaskResolver``; every round of the loop,
the prompts of all unfinished episodes are generated together (left-padded, sorted by length,
``generation_batch_size`` at a time). The finished samples are then scored by a teacher-forced
forward pass of the policy (``score_samples``: log-softmax of logits / temperature, the same
``training.grpo.token_logprobs`` the update uses, as TRL computes its old log-probs), so the PPO
ratio starts at exactly the sampling policy's probabilities without keeping (T, vocabulary) logits
of every generated token. Then ``training.grpo.grpo_update`` takes one optimiser step.

Which groups are trained: all of them; when the batch holds ``oversample`` rows (DAPO dynamic
sampling), the first B groups with reward variance, B = the batch's non-oversample rows (as the
simulated engine does).

Sampling is reproducible: the torch RNG is reseeded from (seed, step) before each step's rollouts,
so a resumed campaign samples what an uninterrupted one would. Options: :class:`HFEngineOptions`.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from envsched_core.dynamic_sampling import rollout_rounds
from training.agent_loop import (
    AgentLoopConfig,
    ChatFormat,
    Episode,
    Generation,
    GenerationRequest,
    Rollout,
    run_episodes,
)
from training.engines.base import Refill, RolloutEngine
from training.engines.options import DTYPE_NAMES, HFEngineOptions
from training.grpo import (
    GRPOConfig,
    bf16_autocast,
    grpo_update,
    make_optimizer,
    pad_samples,
    token_logprobs,
)
from training.samples import Sample
from training.tasks import TaskResolver
from training.training_state import load_training_state, save_training_state

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}


def stop_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """EOS ids of the model's generation config and the tokenizer (Qwen lists <|im_end|> and
    <|endoftext|>)."""
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [ids] if isinstance(ids, int) else list(ids or [])
    if tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
    return list(dict.fromkeys(ids))


class HFGenerator:
    """``GenerateFn`` over ``model.generate`` with sampling; returns no log-probs (see score_samples)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        stop_ids: Sequence[int],
        temperature: float = 1.0,
        top_p: float = 1.0,
        batch_size: int = 16,
        autocast: bool = False,
    ):
        from transformers import GenerationConfig

        self.model, self.stop_ids = model, list(stop_ids)
        self.autocast = autocast  # bf16 autocast on CUDA, as scoring and the update
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_ids[0]
        self.batch_size = batch_size
        self.config = GenerationConfig(
            do_sample=True,
            temperature=temperature,
            top_p=top_p,
            top_k=0,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad_id,
        )
        self.generated_tokens = 0
        # ``generate`` fills every setting this config leaves unset from the model's generation_config (a
        # checkpoint's repetition_penalty, say), and GRPO would then score tokens from another distribution.
        # transformers 4.5x takes use_model_defaults=False against it; 5.x takes no such argument (and vLLM
        # >= 0.25 needs 5.x beside this engine), so there the model lends this config for the call.
        self.takes_model_defaults = "use_model_defaults" in inspect.signature(model.generate).parameters

    @torch.no_grad()
    def __call__(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out: list[Generation | None] = [None] * len(requests)
        order = sorted(range(len(requests)), key=lambda i: len(requests[i].prompt_ids))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            for i, generation in zip(chunk, self._generate([requests[i] for i in chunk]), strict=True):
                out[i] = generation
        return out  # type: ignore[return-value]

    @contextmanager
    def _only_these_settings(self) -> Iterator[dict[str, Any]]:
        """Sample with this config and transformers' neutral defaults, never the model's own settings."""
        if self.takes_model_defaults:
            yield {"use_model_defaults": False}
            return
        own, self.model.generation_config = self.model.generation_config, self.config
        try:
            yield {}
        finally:
            self.model.generation_config = own

    def _generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        device = next(self.model.parameters()).device
        width = max(len(r.prompt_ids) for r in requests)
        input_ids = torch.full((len(requests), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(requests), width), dtype=torch.long)
        for row, request in enumerate(requests):  # left padding: every prompt ends at column width-1
            input_ids[row, width - len(request.prompt_ids) :] = torch.tensor(request.prompt_ids)
            attention_mask[row, width - len(request.prompt_ids) :] = 1
        self.model.eval()
        with bf16_autocast(device, self.autocast), self._only_these_settings() as extra:
            sequences = self.model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                generation_config=self.config,
                max_new_tokens=max(r.max_new_tokens for r in requests),
                **extra,
            )
        generated = sequences[:, width:].tolist()  # (B, L)
        results = []
        for request, tokens in zip(requests, generated, strict=True):
            tokens = tokens[: request.max_new_tokens]
            stop = next((k for k, t in enumerate(tokens) if t in self.stop_ids), None)
            if stop is not None:
                tokens = tokens[: stop + 1]
            self.generated_tokens += len(tokens)
            results.append(Generation(tokens, None, stopped=stop is not None))
        return results


@torch.no_grad()
def score_samples(
    model: Any, samples: Sequence[Sample], temperature: float, micro_batch_size: int, pad_id: int, bf16: bool
) -> None:
    """Fill each sample's ``old_logprobs`` (in place) with log pi_old(token | prefix) at ``temperature``
    where its loss mask is 1 (0.0 elsewhere), using the trainer's own forward (``token_logprobs``).
    Samples without policy tokens (a rollout that failed before the model spoke) are left as they are."""
    samples = [s for s in samples if any(s.loss_mask)]
    device = next(model.parameters()).device
    autocast = bf16_autocast(device, bf16)
    model.eval()
    for start in range(0, len(samples), micro_batch_size):
        micro = list(samples[start : start + micro_batch_size])
        batch = pad_samples(micro, pad_id)
        with autocast:
            logprobs = token_logprobs(
                model, batch["input_ids"].to(device), batch["attention_mask"].to(device), temperature
            )  # (B, T)
        logprobs = (logprobs.float().cpu() * batch["loss_mask"]).tolist()
        for sample, row in zip(micro, logprobs, strict=True):
            sample.old_logprobs = row[: len(sample.token_ids)]


class HFEngine(RolloutEngine):
    """Policy, optimiser and rollouts in one process (``transformers``); see the module docstring."""

    name = "hf"
    options_class: type[HFEngineOptions] = HFEngineOptions

    def __init__(self, tasks: pd.DataFrame, group_size: int, seed: int = 0, **options: Any):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.options = self.options_class(**options)
        self.group_size, self.seed = group_size, seed
        sources = self.options.sources or sorted({str(t).split("/")[0] for t in tasks["task_id"]})
        self.resolver = TaskResolver(sources, self.options.source_options)
        self.env_of = dict(zip(tasks["task_id"], tasks["env_id"], strict=True)) if "env_id" in tasks else {}
        self.device = torch.device(self.options.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if self.options.deterministic:
            # cuBLAS reads this before the process's first CUDA matmul (later it only satisfies torch's check)
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True)
        self.dtype = DTYPES[self.options.dtype or "float32"]
        self.tokenizer = AutoTokenizer.from_pretrained(self.options.model)
        self.model = AutoModelForCausalLM.from_pretrained(self.options.model, dtype=self.dtype).to(
            self.device
        )
        self.grpo = GRPOConfig(**self.options.grpo, temperature=self.options.temperature, seed=seed)
        self.optimizer = make_optimizer(self.model, self.grpo)
        self.ref_model = None
        if self.grpo.beta > 0:
            self.ref_model = AutoModelForCausalLM.from_pretrained(self.options.model, dtype=self.dtype)
            self.ref_model.to(self.device).eval().requires_grad_(False)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.chat = ChatFormat(self.tokenizer, stop_token_ids(self.model, self.tokenizer))
        self.loop_config = AgentLoopConfig(**self.options.loop_fields())
        self.last_rollouts: list[Rollout] = []  # the latest step's rollouts, for logging and inspection
        self.generator = HFGenerator(
            self.model,
            self.tokenizer,
            self.chat.stop_token_ids,
            self.options.temperature,
            self.options.top_p,
            self.options.generation_batch_size,
            autocast=self.grpo.bf16,
        )

    # ---- rollouts -------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """The engine's ``GenerateFn`` (the ``vllm`` engine overrides it)."""
        return self.generator(requests)

    def sample_episodes(self, episodes: list[Episode]) -> list[Rollout]:
        """Run the episodes to the end (the ``vllm`` engine wraps this in wake-up / sleep)."""
        return run_episodes(episodes, self.generate)

    def rollout(self, task_ids: Sequence[str], step: int) -> list[Rollout]:
        """G rollouts per task, consecutive per task, scored by the verifiers and the policy."""
        torch.manual_seed(self.seed * 1_000_003 + step)
        episodes = [
            Episode(self.resolver.task(t), self.resolver.environment(t), self.chat, self.loop_config, g)
            for t in task_ids
            for g in range(self.group_size)
        ]
        rollouts = self.sample_episodes(episodes)
        score_samples(
            self.model,
            [r.sample for r in rollouts],
            self.grpo.temperature,
            self.grpo.micro_batch_size,
            self.pad_id,
            self.grpo.bf16,
        )
        return rollouts

    def run_step(
        self, batch: pd.DataFrame, step: int, refill: Refill | None = None
    ) -> tuple[pd.DataFrame, dict[str, float]]:
        started = time.perf_counter()

        def roll(frame: pd.DataFrame) -> list[Rollout]:
            return self.rollout([str(t) for t in frame["task_id"]], step)

        def rows_of(part: list[Rollout]) -> pd.DataFrame:
            return pd.DataFrame([r.landing_row(step) for r in part])

        batch, parts = rollout_rounds(batch, roll, None if refill is None else (lambda p: refill(rows_of(p))))
        rollouts = self.last_rollouts = [r for part in parts for r in part]
        rollout_time = time.perf_counter() - started
        samples = self.training_samples(batch, rollouts)
        train = grpo_update(
            self.model, self.optimizer, samples, self.group_size, self.grpo, self.ref_model, self.pad_id
        )
        rows = pd.DataFrame([r.landing_row(step) for r in rollouts])
        metrics = {
            **train,
            **rollout_metrics(rollouts, batch, self.group_size, rollout_time, self.env_of),
            "train/trained_groups": float(len(samples) // self.group_size),
            "train/step_time_s": time.perf_counter() - started,
        }
        return rows, metrics

    def training_samples(self, batch: pd.DataFrame, rollouts: list[Rollout]) -> list[Sample]:
        """All groups, or with DAPO over-sampling the first B groups that have reward variance."""
        samples = [r.sample for r in rollouts]
        if "role" not in batch or not (batch["role"] == "oversample").any():
            return samples
        primary = int((batch["role"] != "oversample").sum())
        g = self.group_size
        groups = [samples[i : i + g] for i in range(0, len(samples), g)]
        informative = [grp for grp in groups if len({s.reward for s in grp}) > 1][:primary]
        return [s for grp in (informative or groups[:primary]) for s in grp]

    # ---- checkpoints ----------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        directory = Path(directory)
        save_training_state(
            directory,
            self.model,
            self.optimizer,
            extra={"engine": self.name, "grpo": asdict(self.grpo)},
        )
        self.tokenizer.save_pretrained(directory / "policy")  # the policy folder loads as a model

    def load(self, directory: Path) -> None:
        load_training_state(Path(directory), self.model, self.optimizer)


def rollout_metrics(
    rollouts: list[Rollout],
    batch: pd.DataFrame,
    group_size: int,
    rollout_time_s: float,
    env_of: dict[str, str],
) -> dict[str, float]:
    """Step metrics of the rollouts (every group of the batch, over-sampled ones included)."""
    rewards = np.array([r.sample.reward for r in rollouts]).reshape(-1, group_size)
    statuses = pd.Series([r.status for r in rollouts])
    completion = sum(r.completion_tokens for r in rollouts)
    env_ids = {env_of.get(str(t), str(t).rsplit("/", 1)[0]) for t in batch["task_id"]}
    metrics = {
        "rollout/count": float(len(rollouts)),
        "rollout/reward_mean": float(rewards.mean()),
        "rollout/reward_std": float(rewards.std()),
        "rollout/zero_variance_groups": float((rewards.max(axis=1) == rewards.min(axis=1)).sum()),
        "rollout/group_variance_mean": float(rewards.var(axis=1).mean()),
        "rollout/turns_mean": float(np.mean([r.n_turns for r in rollouts])),
        "rollout/tool_calls_mean": float(np.mean([r.n_tool_calls for r in rollouts])),
        "rollout/parse_errors": float(
            sum(r.sample.metrics.get("rollout/parse_errors", 0.0) for r in rollouts)
        ),
        "rollout/tools_per_batch": float(len({t for r in rollouts for t in r.tools_used})),
        "rollout/envs_per_batch": float(len(env_ids)),
        "rollout/prompt_tokens": float(sum(r.prompt_tokens for r in rollouts)),
        "rollout/completion_tokens": float(completion),
        "rollout/time_s": rollout_time_s,
        "rollout/completion_tokens_per_s": completion / max(rollout_time_s, 1e-9),
    }
    for status in ("ok", "truncated", "timeout", "error"):
        metrics[f"rollout/status_{status}"] = float((statuses == status).sum())
    return metrics
