"""GRPO on causal LMs: group-relative advantages, a token-level PPO-clip loss, one optimiser step.

The objective, for a batch of groups (G rollouts o_i of one task q) with policy tokens o_{i,t}::

    r_{i,t}(theta) = pi_theta(o_{i,t} | q, o_{i,<t}) / pi_old(o_{i,t} | q, o_{i,<t})
    A_i            = (R_i - mean(R_group)) / std(R_group)                          (or no std)
    L(theta)       = -1/N sum_{i,t} min(r_{i,t} A_i, clip(r_{i,t}, 1 - eps_low, 1 + eps_high) A_i)
                     + beta/N sum_{i,t} KL_k3(pi_theta || pi_ref)_{i,t}

with N the number of policy tokens in the whole batch. References: GRPO (Shao et al., 2024,
"DeepSeekMath", section 4.1: group advantages, KL to a reference inside the loss, the k3
estimator); PPO (Schulman et al., 2017: the clipped ratio); DAPO (Yu et al., 2025: clip-higher,
i.e. eps_high > eps_low, and token-level normalisation by N instead of a per-sequence mean);
Dr. GRPO (Liu et al., 2025: advantages without the std); k3 from J. Schulman, "Approximating KL
divergence" (2020). TRL's ``GRPOTrainer`` and veRL's ``core_algos`` compute the same quantities.

Only tokens the policy generated (``Sample.loss_mask``) are trained on; prompt, tool results and
later user turns are context. Samples arrive as consecutive groups of ``group_size`` rollouts of
one task; a group whose rewards are all equal has advantage 0 and adds no policy gradient — the
update counts such groups (``rollout/zero_variance_groups``), the number the scheduler exists to
reduce.

Use::

    config = GRPOConfig(learning_rate=1e-6, epsilon_high=0.28)
    optimizer = make_optimizer(model, config)
    metrics = grpo_update(model, optimizer, samples, group_size=8, config=config)
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from training.advantages import SCALES, group_advantages, zero_variance_groups
from training.samples import Sample

OLD_LOGPROBS = ("sampler", "recompute")


@dataclass
class GRPOConfig:
    """Hyper-parameters of the GRPO update (defaults: GRPO with DAPO's token-level loss)."""

    advantage_scale: str = field(
        default="std",
        metadata={
            "help": "How group advantages are scaled: 'std' divides the centred rewards by the group's "
            "std (GRPO, Shao et al., 2024); 'mean_only' keeps them centred only (Dr. GRPO, Liu et al., 2025)."
        },
    )
    epsilon_low: float = field(
        default=0.2,
        metadata={
            "help": "Lower clip range: the ratio is clipped at 1 - epsilon_low (PPO, Schulman et al., 2017)."
        },
    )
    epsilon_high: float = field(
        default=0.2,
        metadata={
            "help": "Upper clip range: the ratio is clipped at 1 + epsilon_high; set it above epsilon_low "
            "for clip-higher (DAPO, Yu et al., 2025, recommend 0.28)."
        },
    )
    beta: float = field(
        default=0.0,
        metadata={
            "help": "Weight of the k3 KL penalty to a frozen reference policy (GRPO, Shao et al., 2024); "
            "0 needs no reference model (DAPO, Yu et al., 2025, drop it)."
        },
    )
    learning_rate: float = field(
        default=1e-6,
        metadata={"help": "AdamW learning rate of the policy (DeepSeekMath's GRPO runs use 1e-6)."},
    )
    weight_decay: float = field(
        default=0.0,
        metadata={
            "help": "AdamW decoupled weight decay (Loshchilov & Hutter, 2019); 0 as in most GRPO recipes."
        },
    )
    micro_batch_size: int = field(
        default=4,
        metadata={
            "help": "Samples per forward/backward pass; gradients accumulate over the micro-batches of a step, "
            "which still takes exactly one optimiser step (TRL's gradient accumulation)."
        },
    )
    max_grad_norm: float = field(
        default=1.0,
        metadata={
            "help": "Clip the global gradient norm to this value before the step (Pascanu et al., 2013); "
            "math.inf only measures it."
        },
    )
    temperature: float = field(
        default=1.0,
        metadata={
            "help": "Sampling temperature of the rollouts: logits are divided by it before the log-softmax so "
            "the trainer scores tokens under the distribution they were sampled from (as TRL does)."
        },
    )
    old_logprobs: str = field(
        default="sampler",
        metadata={
            "help": "Denominator of the importance ratio: 'sampler' uses the rollout engine's log-probs "
            "(PPO's pi_old; corrects engine/trainer mismatch), 'recompute' uses the trainer's own detached "
            "log-probs (ratio 1 at the single step, as TRL with one iteration)."
        },
    )
    bf16: bool = field(
        default=True,
        metadata={
            "help": "Run forward passes under bf16 autocast on a CUDA device (log-softmax stays float32); "
            "ignored on CPU, where runs are float32 and bit-for-bit reproducible."
        },
    )
    seed: int = field(
        default=0,
        metadata={
            "help": "Seed of torch, numpy and Python RNGs for model init and sampling (see seed_everything)."
        },
    )

    def __post_init__(self) -> None:
        if self.advantage_scale not in SCALES:
            raise ValueError(f"advantage_scale {self.advantage_scale!r} unknown; choose one of {SCALES}")
        if not 0.0 <= self.epsilon_low < 1.0:
            raise ValueError(
                f"epsilon_low must be in [0, 1) so that 1 - epsilon_low > 0, got {self.epsilon_low}; "
                "PPO's usual value is 0.2"
            )
        if self.epsilon_high < self.epsilon_low:
            raise ValueError(
                f"epsilon_high ({self.epsilon_high}) < epsilon_low ({self.epsilon_low}): clip-higher widens the "
                "upper side only; set epsilon_high >= epsilon_low (e.g. 0.28 with epsilon_low 0.2, as DAPO)"
            )
        if self.beta < 0.0:
            raise ValueError(
                f"beta must be >= 0 (0 disables the KL penalty and the reference model), got {self.beta}"
            )
        if not self.learning_rate > 0.0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.weight_decay < 0.0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be >= 1 sample, got {self.micro_batch_size}")
        if not self.max_grad_norm > 0.0:
            raise ValueError(
                f"max_grad_norm must be > 0, got {self.max_grad_norm}; use math.inf to measure without clipping"
            )
        if not self.temperature > 0.0:
            raise ValueError(
                f"temperature must be > 0 (the rollouts' sampling temperature), got {self.temperature}"
            )
        if self.old_logprobs not in OLD_LOGPROBS:
            raise ValueError(f"old_logprobs {self.old_logprobs!r} unknown; choose one of {OLD_LOGPROBS}")


def bf16_autocast(device: torch.device, enabled: bool) -> torch.autocast:
    """bf16 autocast on CUDA when ``enabled``; a no-op elsewhere (CPU runs stay float32 and reproducible).
    Generation, scoring and the update all use it, so they run the policy at the same precision."""
    return torch.autocast(
        device_type=device.type, dtype=torch.bfloat16, enabled=enabled and device.type == "cuda"
    )


def make_optimizer(model: torch.nn.Module, config: GRPOConfig) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters, with the config's learning rate and weight decay."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay)


def token_logprobs(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """log pi(x_t | x_<t) of every token of ``input_ids`` (B, T) -> (B, T); position 0 has no
    context and gets 0. The log-softmax runs in float32, one row at a time, so a large vocabulary
    never needs a (B, T, V) float32 copy of the logits."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits  # (B, T, V)
    next_token_logits = logits[:, :-1, :]  # (B, T-1, V): position t predicts token t+1
    targets = input_ids[:, 1:]  # (B, T-1)
    rows = []
    for row_logits, row_targets in zip(next_token_logits, targets, strict=True):
        row_logprobs = torch.log_softmax(row_logits.float() / temperature, dim=-1)  # (T-1, V)
        rows.append(row_logprobs.gather(-1, row_targets.unsqueeze(-1)).squeeze(-1))  # (T-1,)
    logprobs = torch.stack(rows)  # (B, T-1)
    return F.pad(logprobs, (1, 0), value=0.0)  # (B, T)


def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: GRPOConfig,
    num_policy_tokens: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-level PPO-clip loss with an optional k3 KL penalty.

    logprobs, old_logprobs, ref_logprobs, mask: (B, T); advantages: (B,). The loss is the sum over
    the masked tokens divided by ``num_policy_tokens`` (default: the tokens of this mask); pass
    the batch's count when accumulating micro-batches, so their losses add up to the batch loss.
    Stats are token means over this mask: ``clip_fraction`` (low / high: tokens whose clipped term
    is active, i.e. that get no gradient), ``ratio_mean`` and, with beta > 0, ``kl``.
    """
    if config.beta > 0.0 and ref_logprobs is None:
        raise ValueError("beta > 0 needs ref_logprobs from the frozen reference model (or set beta=0)")
    mask = mask.to(logprobs.dtype)  # (B, T)
    A = advantages.to(logprobs.dtype).unsqueeze(1)  # (B, 1)

    log_ratio = logprobs - old_logprobs  # (B, T)
    ratio = torch.exp(log_ratio)  # (B, T)
    clipped_ratio = torch.clamp(ratio, 1.0 - config.epsilon_low, 1.0 + config.epsilon_high)  # (B, T)
    per_token_objective = torch.minimum(ratio * A, clipped_ratio * A)  # (B, T)
    per_token_loss = -per_token_objective  # (B, T)

    if config.beta > 0.0:
        log_ref_ratio = ref_logprobs - logprobs  # (B, T): log pi_ref/pi_theta
        per_token_kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1.0  # (B, T): k3 >= 0
        per_token_loss = per_token_loss + config.beta * per_token_kl  # (B, T)

    n_local = mask.sum()  # ()
    n = n_local if num_policy_tokens is None else torch.as_tensor(float(num_policy_tokens))
    loss = (per_token_loss * mask).sum() / n.clamp(min=1.0)  # ()

    with torch.no_grad():
        denominator = n_local.clamp(min=1.0)
        is_low_clipped = (ratio < 1.0 - config.epsilon_low) & (A < 0)  # (B, T)
        is_high_clipped = (ratio > 1.0 + config.epsilon_high) & (A > 0)  # (B, T)
        stats = {
            "policy_tokens": float(n_local),
            "clip_fraction_low": float((is_low_clipped * mask).sum() / denominator),
            "clip_fraction_high": float((is_high_clipped * mask).sum() / denominator),
            "ratio_mean": float((ratio * mask).sum() / denominator),
        }
        stats["clip_fraction"] = stats["clip_fraction_low"] + stats["clip_fraction_high"]
        if config.beta > 0.0:
            stats["kl"] = float((per_token_kl * mask).sum() / denominator)
    return loss, stats


def check_groups(samples: list[Sample], group_size: int) -> list[str]:
    """The task id of each group; samples must be consecutive runs of ``group_size`` of one task."""
    if group_size < 2:
        raise ValueError(
            f"group_size must be >= 2 (a group of one has no relative advantage), got {group_size}"
        )
    if not samples or len(samples) % group_size:
        raise ValueError(
            f"{len(samples)} samples do not split into groups of {group_size}; the engine must hand over "
            "G rollouts for every task of the batch"
        )
    task_ids = []
    for start in range(0, len(samples), group_size):
        group = {s.task_id for s in samples[start : start + group_size]}
        if len(group) != 1:
            raise ValueError(
                f"samples {start}..{start + group_size - 1} mix tasks {sorted(group)}; each group must be "
                f"{group_size} consecutive rollouts of one task"
            )
        task_ids.append(samples[start].task_id)
    for i, s in enumerate(samples):
        if s.loss_mask and s.loss_mask[0]:
            raise ValueError(
                f"sample {i} ({s.task_id}#{s.rollout_idx}): loss_mask[0] is 1, but the first token has no "
                "context to be generated from; a conversation starts with the prompt"
            )
    return task_ids


def pad_samples(samples: list[Sample], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Right-pad a micro-batch: input_ids, attention_mask, loss_mask (B, T) and old_logprobs (B, T)."""
    width = max(len(s.token_ids) for s in samples)
    input_ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(samples), width), dtype=torch.long)
    loss_mask = torch.zeros((len(samples), width), dtype=torch.float32)
    old_logprobs = torch.zeros((len(samples), width), dtype=torch.float32)
    for row, s in enumerate(samples):
        n = len(s.token_ids)
        input_ids[row, :n] = torch.tensor(s.token_ids, dtype=torch.long)
        attention_mask[row, :n] = 1
        loss_mask[row, :n] = torch.tensor(s.loss_mask, dtype=torch.float32)
        old_logprobs[row, :n] = torch.tensor(s.old_logprobs, dtype=torch.float32)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "loss_mask": loss_mask,
        "old_logprobs": old_logprobs,
    }


def grpo_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: list[Sample],
    group_size: int,
    config: GRPOConfig,
    ref_model: torch.nn.Module | None = None,
    pad_id: int = 0,
) -> dict[str, float]:
    """One GRPO training step on ``samples`` (consecutive groups of ``group_size`` rollouts of one
    task): advantages from the rewards, gradients accumulated over micro-batches, one optimiser
    step. Returns namespaced metrics. A batch without any policy token (every rollout failed before
    the model spoke) takes no step and reports ``train/skipped_step`` 1."""
    if config.beta > 0.0 and ref_model is None:
        raise ValueError("GRPOConfig.beta > 0 needs a frozen ref_model; pass one or set beta=0")
    started = time.perf_counter()
    task_ids = check_groups(samples, group_size)
    n_groups = len(task_ids)
    rewards = np.array([s.reward for s in samples], dtype=np.float64).reshape(n_groups, group_size)  # (n, G)
    advantages = group_advantages(rewards, scale=config.advantage_scale).reshape(-1)  # (n*G,)
    num_policy_tokens = sum(sum(s.loss_mask) for s in samples)
    metrics = {
        "rollout/groups": float(n_groups),
        "rollout/zero_variance_groups": float(zero_variance_groups(rewards)),
        "rollout/reward_mean": float(rewards.mean()),
        "rollout/reward_std": float(rewards.std()),
        "train/advantage_abs_mean": float(np.abs(advantages).mean()),
        "train/policy_tokens": float(num_policy_tokens),
        "train/learning_rate": float(optimizer.param_groups[0]["lr"]),
    }
    if num_policy_tokens == 0:
        return metrics | {"train/skipped_step": 1.0, "train/update_time_s": time.perf_counter() - started}

    vocab_size = (
        model.get_input_embeddings().num_embeddings if hasattr(model, "get_input_embeddings") else None
    )
    top_id = max(max(s.token_ids) for s in samples if s.token_ids)
    if vocab_size is not None and top_id >= vocab_size:
        raise ValueError(
            f"token id {top_id} is outside the model's vocabulary ({vocab_size}); the samples were tokenised "
            "for another model"
        )
    device = next(model.parameters()).device
    autocast = bf16_autocast(device, config.bf16)
    model.train()
    if ref_model is not None:
        ref_model.eval()
    optimizer.zero_grad(set_to_none=True)
    loss_total, weighted = 0.0, {}
    for start in range(0, len(samples), config.micro_batch_size):
        micro = samples[start : start + config.micro_batch_size]
        batch = {k: v.to(device) for k, v in pad_samples(micro, pad_id).items()}
        micro_advantages = torch.tensor(
            advantages[start : start + len(micro)], dtype=torch.float32, device=device
        )
        with autocast:
            logprobs = token_logprobs(model, batch["input_ids"], batch["attention_mask"], config.temperature)
            ref_logprobs = None
            if config.beta > 0.0:
                with torch.no_grad():
                    ref_logprobs = token_logprobs(
                        ref_model, batch["input_ids"], batch["attention_mask"], config.temperature
                    )
        old_logprobs = batch["old_logprobs"] if config.old_logprobs == "sampler" else logprobs.detach()
        loss, stats = grpo_loss(
            logprobs,
            old_logprobs,
            ref_logprobs,
            micro_advantages,
            batch["loss_mask"],
            config,
            num_policy_tokens,
        )
        loss.backward()
        loss_total += float(loss.detach())
        for key, value in stats.items():
            if key != "policy_tokens":
                weighted[key] = weighted.get(key, 0.0) + value * stats["policy_tokens"]

    params = [p for group in optimizer.param_groups for p in group["params"]]
    grad_norm = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

    metrics["train/loss"] = loss_total
    metrics["train/grad_norm"] = float(grad_norm)
    for key, value in weighted.items():
        metrics[f"train/{key}"] = value / num_policy_tokens
    metrics["train/skipped_step"] = 0.0
    metrics["train/update_time_s"] = time.perf_counter() - started
    return metrics


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's global RNGs (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


__all__ = [
    "GRPOConfig",
    "check_groups",
    "grpo_loss",
    "grpo_update",
    "make_optimizer",
    "pad_samples",
    "seed_everything",
    "token_logprobs",
]
