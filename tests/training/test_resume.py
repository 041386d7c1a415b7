"""Checkpoint content: a step, a crash and a resume give the same parameters as an uninterrupted run."""

import random

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from training.grpo import GRPOConfig, grpo_update, make_optimizer, token_logprobs
from training.samples import Sample
from training.training_state import load_training_state, rng_state, save_training_state, set_rng_state

GROUP_SIZE = 4


def tiny_lm(seed: int) -> Qwen2ForCausalLM:
    """A 2-layer Qwen2 with attention dropout, so training forwards consume the torch RNG."""
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
        attention_dropout=0.1,
    )
    return Qwen2ForCausalLM(config)


def rollouts(model, step: int) -> list[Sample]:
    """Two groups of "sampled" completions drawn from the global RNGs (torch for the tokens, Python
    for lengths, numpy for rewards), as an engine's sampling would; old log-probs from ``model``."""
    samples = []
    for task in ("task-a", "task-b"):
        for i in range(GROUP_SIZE):
            prompt = [1, 2, 3 + step]
            completion = torch.randint(4, 32, (random.randint(2, 6),)).tolist()
            ids, mask = prompt + completion, [0] * len(prompt) + [1] * len(completion)
            with torch.no_grad():
                model.eval()
                logprobs = token_logprobs(
                    model, torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long)
                )
            old = (logprobs[0] * torch.tensor(mask, dtype=torch.float32)).tolist()
            samples.append(Sample(task, i, ids, mask, old, float(np.random.rand() < 0.5)))
    return samples


def train_step(model, optimizer, config, step: int) -> dict[str, float]:
    return grpo_update(model, optimizer, rollouts(model, step), GROUP_SIZE, config)


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def test_resume_after_crash_continues_bit_for_bit(tmp_path):
    config = GRPOConfig(learning_rate=1e-2, micro_batch_size=3)

    # uninterrupted: two steps in one process
    model = tiny_lm(seed=0)
    optimizer = make_optimizer(model, config)
    seed_all(123)
    train_step(model, optimizer, config, step=1)
    uninterrupted_metrics = train_step(model, optimizer, config, step=2)
    uninterrupted_next_draws = (torch.rand(3), random.random(), np.random.rand())

    # interrupted: one step, checkpoint, crash
    crashed = tiny_lm(seed=0)
    crashed_optimizer = make_optimizer(crashed, config)
    seed_all(123)
    train_step(crashed, crashed_optimizer, config, step=1)
    save_training_state(tmp_path / "step=1", crashed, crashed_optimizer, extra={"step": 1})
    del crashed, crashed_optimizer

    # a fresh process: other weights, a new optimiser, other RNG states, then load and go on
    seed_all(999)
    resumed = tiny_lm(seed=7)
    resumed_optimizer = make_optimizer(resumed, config)
    extra = load_training_state(tmp_path / "step=1", resumed, resumed_optimizer)
    resumed_metrics = train_step(resumed, resumed_optimizer, config, step=extra["step"] + 1)

    for (name, p), q in zip(model.named_parameters(), resumed.parameters(), strict=True):
        assert torch.equal(p, q), name
    for p, q in zip(model.parameters(), resumed.parameters(), strict=True):
        a, b = optimizer.state[p], resumed_optimizer.state[q]
        assert torch.equal(a["exp_avg"], b["exp_avg"]) and torch.equal(a["exp_avg_sq"], b["exp_avg_sq"])
        assert torch.equal(a["step"], b["step"])
    assert resumed_metrics["train/loss"] == uninterrupted_metrics["train/loss"]
    next_draws = (torch.rand(3), random.random(), np.random.rand())  # the RNG streams are still in step
    assert (
        torch.equal(next_draws[0], uninterrupted_next_draws[0])
        and next_draws[1:] == uninterrupted_next_draws[1:]
    )


def test_training_state_policy_loads_with_from_pretrained(tmp_path):
    model = tiny_lm(seed=3)
    save_training_state(tmp_path, model, None)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "policy")
    for (name, p), q in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


def test_training_state_restores_every_rng(tmp_path):
    seed_all(5)
    save_training_state(
        tmp_path,
        torch.nn.Linear(2, 2),
        None,
        extra={"generator": torch.Generator().manual_seed(1).get_state()},
    )
    expected = (random.random(), np.random.rand(), torch.rand(1))
    seed_all(6)
    extra = load_training_state(tmp_path, torch.nn.Linear(2, 2))
    assert (random.random(), np.random.rand()) == expected[:2] and torch.equal(torch.rand(1), expected[2])
    assert torch.equal(extra["generator"], torch.Generator().manual_seed(1).get_state())


def test_training_state_plain_module_and_scheduler_round_trip(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    scheduler.step()
    save_training_state(tmp_path, model, optimizer, lr_scheduler=scheduler)

    fresh = torch.nn.Linear(3, 2)
    fresh_optimizer = torch.optim.AdamW(fresh.parameters(), lr=0.1)
    fresh_scheduler = torch.optim.lr_scheduler.StepLR(fresh_optimizer, step_size=1, gamma=0.5)
    load_training_state(tmp_path, fresh, fresh_optimizer, lr_scheduler=fresh_scheduler, restore_rng=False)

    assert torch.equal(fresh.weight, model.weight) and torch.equal(fresh.bias, model.bias)
    assert fresh_optimizer.param_groups[0]["lr"] == pytest.approx(0.05)
    assert fresh_scheduler.state_dict()["last_epoch"] == 1


def test_training_state_rejects_weights_of_another_model(tmp_path):
    save_training_state(tmp_path, tiny_lm(seed=0), None)
    other = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=32,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            tie_word_embeddings=True,
        )
    )
    with pytest.raises(ValueError, match="missing from the checkpoint"):
        load_training_state(tmp_path, other)
    with pytest.raises(FileNotFoundError, match="trainer_state.pt"):
        load_training_state(tmp_path / "nowhere", other)


def test_rng_state_round_trips_in_memory():
    state = rng_state()
    expected = (random.random(), float(np.random.rand()), torch.rand(2))
    set_rng_state(state)
    assert (random.random(), float(np.random.rand())) == expected[:2] and torch.equal(
        torch.rand(2), expected[2]
    )
