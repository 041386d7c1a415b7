"""GRPO: config validation, the loss against hand-computed values, and updates of a tiny causal LM."""

import math

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from training.grpo import GRPOConfig, grpo_loss, grpo_update, make_optimizer, pad_samples, token_logprobs
from training.samples import Sample

LN2 = math.log(2.0)
PROMPT = [1, 2, 3]


def tiny_lm(seed: int = 0) -> Qwen2ForCausalLM:
    """A 2-layer Qwen2 causal LM with random weights (vocabulary 32): real architecture, CPU-fast."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=32,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(config)


def sequence_logprob(model, sample: Sample) -> float:
    """log pi(completion | prompt): the sum over the sample's policy tokens."""
    with torch.no_grad():
        ids = torch.tensor([sample.token_ids])
        logprobs = token_logprobs(model, ids, torch.ones_like(ids))[0]  # (T,)
    return float((logprobs * torch.tensor(sample.loss_mask, dtype=torch.float32)).sum())


def group(model, task_id: str, completions: list[list[int]], rewards: list[float]) -> list[Sample]:
    """One GRPO group: the prompt followed by each completion, sampled (we pretend) from ``model``."""
    samples, device = [], next(model.parameters()).device
    for i, (completion, reward) in enumerate(zip(completions, rewards, strict=True)):
        ids = PROMPT + completion
        mask = [0] * len(PROMPT) + [1] * len(completion)
        with torch.no_grad():
            input_ids = torch.tensor([ids], device=device)
            logprobs = token_logprobs(model, input_ids, torch.ones_like(input_ids))[0].cpu()
        old = (logprobs * torch.tensor(mask, dtype=torch.float32)).tolist()
        samples.append(Sample(task_id, i, ids, mask, old, reward))
    return samples


COMPLETIONS = [[4, 5, 6, 7], [8, 9, 10], [11, 12, 13, 14, 15], [16, 17]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"advantage_scale": "rank"}, "advantage_scale"),
        ({"epsilon_low": 1.0}, "epsilon_low must be in"),
        ({"epsilon_low": 0.3, "epsilon_high": 0.2}, "clip-higher"),  # clip-lower is not a thing
        ({"beta": -0.1}, "beta must be >= 0"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"micro_batch_size": 0}, "micro_batch_size"),
        ({"max_grad_norm": 0.0}, "math.inf"),
        ({"temperature": 0.0}, "temperature"),
        ({"old_logprobs": "vllm"}, "old_logprobs"),
    ],
)
def test_grpo_config_rejects_bad_values_with_a_fix(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GRPOConfig(**kwargs)


def test_grpo_config_accepts_clip_higher():
    assert GRPOConfig(epsilon_low=0.2, epsilon_high=0.28).epsilon_high == 0.28


def test_grpo_loss_clips_both_sides_and_ignores_masked_tokens():
    config = GRPOConfig(epsilon_low=0.2, epsilon_high=0.3)
    # ratios: row 0 (A = +1): 1.5 (clipped to 1.3), 0.5 (kept: min picks it), 100 (masked out);
    #         row 1 (A = -2): 0.5 (clipped to 0.8), 1.5 (kept), 1.1 (kept).
    ratios = torch.tensor([[1.5, 0.5, 100.0], [0.5, 1.5, 1.1]])
    old_logprobs = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -1.5, -2.5]])
    logprobs = (old_logprobs + ratios.log()).requires_grad_()
    advantages = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])

    loss, stats = grpo_loss(logprobs, old_logprobs, None, advantages, mask, config)
    loss.backward()

    # objective terms: 1.3 + 0.5 + (-1.6) + (-3.0) + (-2.2) = -5.0 over N = 5 tokens
    torch.testing.assert_close(loss, torch.tensor(1.0))
    # d loss / d logprob = -ratio * A / N where unclipped, 0 where clipped or masked
    expected_grad = torch.tensor([[0.0, -0.5 * 1.0 / 5, 0.0], [0.0, -1.5 * -2.0 / 5, -1.1 * -2.0 / 5]])
    torch.testing.assert_close(logprobs.grad, expected_grad)
    assert stats["policy_tokens"] == 5.0
    assert stats["clip_fraction_high"] == pytest.approx(0.2)
    assert stats["clip_fraction_low"] == pytest.approx(0.2)
    assert stats["clip_fraction"] == pytest.approx(0.4)
    assert stats["ratio_mean"] == pytest.approx((1.5 + 0.5 + 0.5 + 1.5 + 1.1) / 5)
    assert "kl" not in stats


def test_grpo_loss_normalises_by_the_batch_token_count():
    config = GRPOConfig()
    logprobs = torch.tensor([[-1.0, -1.0]])
    advantages = torch.tensor([1.0])
    mask = torch.ones(1, 2)
    local, _ = grpo_loss(logprobs, logprobs, None, advantages, mask, config)
    batch, _ = grpo_loss(logprobs, logprobs, None, advantages, mask, config, num_policy_tokens=8)
    torch.testing.assert_close(local, torch.tensor(-1.0))  # ratio 1: -(1 + 1) / 2
    torch.testing.assert_close(batch, torch.tensor(-0.25))  # -(1 + 1) / 8


def test_grpo_loss_k3_kl_matches_hand_computed_values():
    config = GRPOConfig(beta=0.1)
    logprobs = torch.tensor([[-1.0, -2.0, -3.0]], requires_grad=True)
    ref_logprobs = torch.tensor([[-1.0 + LN2, -2.0 - LN2, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    advantages = torch.tensor([0.0])  # no policy term: the loss is the KL penalty alone

    loss, stats = grpo_loss(logprobs, logprobs.detach(), ref_logprobs, advantages, mask, config)
    loss.backward()

    # k3 = exp(d) - d - 1 with d = log pi_ref - log pi: d = ln 2 -> 1 - ln 2, d = -ln 2 -> ln 2 - 1/2
    kl = ((1 - LN2) + (LN2 - 0.5)) / 2
    torch.testing.assert_close(torch.tensor(stats["kl"]), torch.tensor(kl))
    torch.testing.assert_close(loss, torch.tensor(0.1 * kl))
    # d k3 / d log pi = 1 - exp(d): -1 and +1/2, times beta / N = 0.05
    torch.testing.assert_close(logprobs.grad, torch.tensor([[-0.05, 0.025, 0.0]]))


def test_grpo_loss_with_beta_needs_reference_logprobs():
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="ref_logprobs"):
        grpo_loss(x, x, None, torch.zeros(1), torch.ones(1, 2), GRPOConfig(beta=0.04))


def test_token_logprobs_matches_log_softmax_and_ignores_right_padding():
    model = tiny_lm().eval()
    ids = torch.tensor([[1, 5, 9, 2]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0]  # (T, V)
        by_hand = torch.stack([torch.log_softmax(logits[t - 1], -1)[ids[0, t]] for t in range(1, 4)])
        padded = token_logprobs(
            model,
            torch.tensor([[1, 5, 9, 2, 0, 0], [3, 4, 0, 0, 0, 0]]),
            torch.tensor([[1] * 4 + [0] * 2, [1] * 2 + [0] * 4]),
        )
    torch.testing.assert_close(token_logprobs(model, ids, torch.ones_like(ids))[0, 1:].detach(), by_hand)
    assert padded.shape == (2, 6) and padded[0, 0] == 0.0
    torch.testing.assert_close(padded[0, 1:4], by_hand)


def test_pad_samples_right_pads_every_field():
    samples = [
        Sample("t", 0, [1, 2, 3], [0, 1, 1], [0.0, -0.5, -0.25], 1.0),
        Sample("t", 1, [4, 5], [0, 1], [0.0, -1.0], 0.0),
    ]
    batch = pad_samples(samples, pad_id=9)
    assert batch["input_ids"].tolist() == [[1, 2, 3], [4, 5, 9]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["loss_mask"].tolist() == [[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]]
    assert batch["old_logprobs"].tolist() == [[0.0, -0.5, -0.25], [0.0, -1.0, 0.0]]


def test_grpo_update_raises_positive_and_lowers_negative_advantage_completions():
    model = tiny_lm()
    samples = group(model, "task-a", COMPLETIONS, rewards=[1.0, 0.0, 1.0, 0.0])
    before = [sequence_logprob(model, s) for s in samples]
    config = GRPOConfig(learning_rate=1e-3, micro_batch_size=2)

    metrics = grpo_update(model, make_optimizer(model, config), samples, group_size=4, config=config)

    after = [sequence_logprob(model, s) for s in samples]
    change = [a - b for a, b in zip(after, before, strict=True)]
    assert change[0] > 0 and change[2] > 0, change  # rewarded completions became more likely
    assert change[1] < 0 and change[3] < 0, change  # unrewarded ones less likely
    # on-policy (ratio 1): loss = -sum_i A_i |o_i| / N = -(4 - 3 + 5 - 2) / 14, A = +-1 (std scale)
    assert metrics["train/loss"] == pytest.approx(-4 / 14, rel=1e-5)
    assert metrics["train/policy_tokens"] == 14.0
    assert metrics["train/clip_fraction"] == 0.0
    assert metrics["train/grad_norm"] > 0.0


def test_grpo_update_zero_variance_group_adds_no_policy_gradient():
    model = tiny_lm()
    before = [p.detach().clone() for p in model.parameters()]
    samples = group(model, "task-b", COMPLETIONS, rewards=[0.5, 0.5, 0.5, 0.5])
    config = GRPOConfig(learning_rate=1e-2)

    metrics = grpo_update(model, make_optimizer(model, config), samples, group_size=4, config=config)

    assert metrics["rollout/zero_variance_groups"] == 1.0
    assert metrics["train/grad_norm"] == 0.0
    assert metrics["train/loss"] == 0.0
    assert all(torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))


def test_grpo_update_zero_variance_group_only_dilutes_the_token_mean():
    """A zero-variance group next to a learning group changes nothing but the token count N."""
    config = GRPOConfig()
    model = tiny_lm()
    learning = group(model, "task-a", COMPLETIONS, rewards=[1.0, 0.0, 1.0, 0.0])
    flat = group(model, "task-b", [[20, 21], [22], [23, 24, 25], [26]], rewards=[1.0, 1.0, 1.0, 1.0])

    def gradient(samples):
        model.zero_grad()
        batch = pad_samples(samples)
        logprobs = token_logprobs(model, batch["input_ids"], batch["attention_mask"])
        advantages = torch.tensor([1.0, -1.0, 1.0, -1.0] + [0.0] * (len(samples) - 4))
        loss, _ = grpo_loss(logprobs, batch["old_logprobs"], None, advantages, batch["loss_mask"], config)
        loss.backward()
        return torch.cat([p.grad.flatten() for p in model.parameters()]), float(batch["loss_mask"].sum())

    alone, n_alone = gradient(learning)
    mixed, n_mixed = gradient(learning + flat)
    torch.testing.assert_close(mixed * n_mixed, alone * n_alone)


def test_grpo_update_micro_batches_accumulate_to_one_batch_step():
    samples_model = tiny_lm()
    samples = group(samples_model, "task-a", COMPLETIONS, rewards=[1.0, 0.0, 0.0, 1.0]) + group(
        samples_model, "task-b", [[20, 21], [22], [23, 24, 25], [26]], rewards=[0.0, 0.0, 1.0, 0.0]
    )
    results = []
    for micro_batch_size in (1, 3, 8):
        model = tiny_lm()
        config = GRPOConfig(learning_rate=1e-3, micro_batch_size=micro_batch_size)
        optimizer = make_optimizer(model, config)
        metrics = grpo_update(model, optimizer, samples, group_size=4, config=config)
        assert optimizer.state[next(model.parameters())]["step"] == 1  # one optimiser step, however split
        results.append((metrics, [p.detach().clone() for p in model.parameters()]))
    for metrics, params in results[1:]:
        assert metrics["train/loss"] == pytest.approx(results[0][0]["train/loss"], rel=1e-5)
        for p, q in zip(params, results[0][1], strict=True):
            torch.testing.assert_close(p, q)


def test_grpo_update_with_reference_reports_kl_and_metrics_are_namespaced():
    model, reference = tiny_lm(seed=0), tiny_lm(seed=1)
    samples = group(model, "task-a", COMPLETIONS, rewards=[1.0, 0.0, 0.0, 0.0])
    config = GRPOConfig(beta=0.04, epsilon_high=0.28)

    metrics = grpo_update(model, make_optimizer(model, config), samples, 4, config, ref_model=reference)

    assert metrics["train/kl"] > 0.0  # two different random models
    assert all(key.split("/")[0] in {"rollout", "train"} for key in metrics)
    with pytest.raises(ValueError, match="ref_model"):
        grpo_update(model, make_optimizer(model, config), samples, 4, config)


@pytest.mark.parametrize(
    ("task_ids", "group_size", "message"),
    [
        (["a", "a", "b", "b"], 3, "do not split"),  # 4 samples, groups of 3
        (["a", "b", "a", "b"], 2, "mix tasks"),  # interleaved instead of consecutive
        (["a", "a"], 1, "group_size must be >= 2"),
    ],
)
def test_grpo_update_rejects_malformed_groups(task_ids, group_size, message):
    model = tiny_lm()
    samples = [Sample(t, i, [1, 2], [0, 1], [0.0, -1.0], 0.0) for i, t in enumerate(task_ids)]
    config = GRPOConfig()
    with pytest.raises(ValueError, match=message):
        grpo_update(model, make_optimizer(model, config), samples, group_size, config)


def test_grpo_update_without_policy_tokens_skips_the_step():
    model = tiny_lm()
    samples = [Sample("a", i, [1, 2], [0, 0], [0.0, 0.0], float(i % 2)) for i in range(4)]
    config = GRPOConfig()
    optimizer = make_optimizer(model, config)
    metrics = grpo_update(model, optimizer, samples, 4, config)
    assert metrics["train/skipped_step"] == 1.0 and metrics["train/policy_tokens"] == 0.0
    assert optimizer.state == {}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_grpo_update_bf16_autocast_on_cuda_takes_a_finite_step():
    model = tiny_lm().cuda()
    samples = group(model, "task-a", COMPLETIONS, rewards=[1.0, 0.0, 1.0, 0.0])
    before = [p.detach().clone() for p in model.parameters()]
    config = GRPOConfig(learning_rate=1e-3, bf16=True)

    metrics = grpo_update(model, make_optimizer(model, config), samples, group_size=4, config=config)

    assert math.isfinite(metrics["train/loss"]) and metrics["train/grad_norm"] > 0.0
    assert all(p.dtype == torch.float32 for p in model.parameters())  # autocast, not a bf16 copy
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))


def test_grpo_update_rejects_tokens_outside_the_vocabulary():
    model = tiny_lm()  # vocabulary 32
    samples = [Sample("a", i, [1, 40], [0, 1], [0.0, -1.0], float(i % 2)) for i in range(2)]
    config = GRPOConfig()
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        grpo_update(model, make_optimizer(model, config), samples, 2, config)
