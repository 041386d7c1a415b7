"""The ``hf`` rollout engine on CPU with the tiny random LM: generation, scoring, a full step
(landing rows that pass the landing contract, samples for GRPO), learning and bit-for-bit resume.

Engine tests use synthetic environments (about 1.7k prompt tokens with the tiny tokenizer) rather
than BFCL (about 6.5k), to keep CPU time small; one test drives BFCL with the random model.
"""

import os

import pandas as pd
import pytest
import torch

from environments.bfcl import BfclMultiTurnSource
from environments.registry import get_source
from training.agent_loop import AgentLoopConfig, ChatFormat, Generation, GenerationRequest, run_agent_loop
from training.engines import make_engine
from training.engines.hf import HFEngine, HFGenerator, score_samples, stop_token_ids
from training.grpo import token_logprobs
from training.samples import Sample
from training.tool_calls import format_tool_call
from warehouse.landing import OPTIONAL, REQUIRED, LandingFile, read_and_validate, write_step_file

G = 2


@pytest.fixture(scope="module")
def synthetic_tasks():
    catalog = get_source("synthetic").load()
    return catalog.tasks, pd.DataFrame(
        {"task_id": [t.task_id for t in catalog.tasks], "env_id": [t.env_id for t in catalog.tasks]}
    )


def batch_of(frame: pd.DataFrame, task_ids: list[str]) -> pd.DataFrame:
    rows = frame.set_index("task_id").loc[task_ids].reset_index()
    return rows.assign(role="coverage")[["task_id", "env_id", "role"]]


def engine_options(model_dir, **changes):
    # CPU unless a test says otherwise: bit-for-bit resume and the CPU tensors of these checks need it.
    return {
        "model": str(model_dir),
        "device": "cpu",
        "max_new_tokens": 8,
        "grpo": {"micro_batch_size": 2},
    } | changes


# ---- generation and scoring --------------------------------------------------------------------------
def test_hf_generator_respects_each_requests_limit_and_stops(tiny_model, tiny_tokenizer):
    prompt = tiny_tokenizer("list the files", add_special_tokens=False)["input_ids"]
    requests = [GenerationRequest(prompt, 3), GenerationRequest(prompt + prompt, 6)]
    generator = HFGenerator(tiny_model, tiny_tokenizer, [tiny_tokenizer.eos_token_id])
    torch.manual_seed(0)
    cut = generator(requests)
    assert [len(g.token_ids) for g in cut] == [3, 6] and not any(g.stopped for g in cut)
    # Every token a stop token: each generation is its first token, marked stopped.
    everything = HFGenerator(tiny_model, tiny_tokenizer, list(range(len(tiny_tokenizer))))
    stopped = everything(requests)
    assert [len(g.token_ids) for g in stopped] == [1, 1] and all(g.stopped for g in stopped)
    assert all(g.logprobs is None for g in cut + stopped)  # scored afterwards by score_samples


def test_hf_generator_samples_with_its_own_settings_not_the_checkpoint_s(tiny_model, tiny_tokenizer):
    """A checkpoint's generation_config (Qwen2.5-Instruct ships repetition_penalty 1.05) must not reshape the
    distribution GRPO scores: on transformers 4.5x and 5.x alike, sampling ignores it."""
    prompt = tiny_tokenizer("list the files", add_special_tokens=False)["input_ids"]
    requests = [GenerationRequest(prompt, 12), GenerationRequest(prompt + prompt, 12)]
    generator = HFGenerator(tiny_model, tiny_tokenizer, [tiny_tokenizer.eos_token_id])
    torch.manual_seed(0)
    plain = [g.token_ids for g in generator(requests)]
    own = tiny_model.generation_config
    own.repetition_penalty, own.min_p, own.no_repeat_ngram_size = 50.0, 0.5, 1
    torch.manual_seed(0)
    assert [g.token_ids for g in generator(requests)] == plain
    assert tiny_model.generation_config is own and own.repetition_penalty == 50.0  # handed back unchanged
    # the same settings passed to generate do change what it samples, so the check above can fail
    config = generator.config
    config.repetition_penalty, config.min_p, config.no_repeat_ngram_size = 50.0, 0.5, 1
    torch.manual_seed(0)
    assert [g.token_ids for g in generator(requests)] != plain


def test_hf_generator_left_padding_gives_the_unpadded_continuation(tiny_model, tiny_tokenizer):
    short = tiny_tokenizer("cd", add_special_tokens=False)["input_ids"]
    long = tiny_tokenizer("move the report to the temp folder please", add_special_tokens=False)["input_ids"]
    greedy = HFGenerator(tiny_model, tiny_tokenizer, [tiny_tokenizer.eos_token_id], top_p=1e-9)  # top-1
    alone = greedy([GenerationRequest(short, 6)])[0]
    batched = greedy([GenerationRequest(long, 6), GenerationRequest(short, 6)])[1]
    assert batched.token_ids == alone.token_ids


def test_score_samples_fills_policy_logprobs_independent_of_padding(tiny_model):
    samples = [
        Sample("t", 0, [5, 6, 7, 8, 9, 10], [0, 0, 1, 1, 0, 1], [0.0] * 6, 0.0),
        Sample("t", 1, [11, 12, 13], [0, 1, 1], [0.0] * 3, 1.0),
    ]
    score_samples(tiny_model, samples, temperature=0.7, micro_batch_size=2, pad_id=0, bf16=False)
    for sample in samples:
        ids = torch.tensor([sample.token_ids])
        alone = token_logprobs(tiny_model, ids, torch.ones_like(ids), temperature=0.7)[0]
        expected = alone * torch.tensor(sample.loss_mask, dtype=torch.float32)
        torch.testing.assert_close(torch.tensor(sample.old_logprobs), expected, rtol=1e-5, atol=1e-5)
        assert all((lp < 0) == bool(m) for lp, m in zip(sample.old_logprobs, sample.loss_mask, strict=True))


def test_hf_generator_random_tiny_lm_drives_bfcl(tiny_model, tiny_tokenizer):
    source = BfclMultiTurnSource()
    task = next(t for t in source.load().tasks if t.task_id == "bfcl_v3_multi_turn/multi_turn_base_0")
    chat = ChatFormat(tiny_tokenizer, stop_token_ids(tiny_model, tiny_tokenizer))
    generator = HFGenerator(tiny_model, tiny_tokenizer, chat.stop_token_ids)
    torch.manual_seed(0)
    rollout = run_agent_loop(
        task, source.make_environment(task), chat, generator, AgentLoopConfig(max_new_tokens=8)
    )
    assert rollout.status in {"ok", "truncated"} and rollout.verdict is not None
    assert rollout.verdict.reward == 0.0  # gibberish never solves a four-turn BFCL task
    assert 1 <= rollout.completion_tokens <= 8 * len(rollout.messages)
    first_policy_token = rollout.sample.loss_mask.index(1)
    prompt = tiny_tokenizer.decode(rollout.sample.token_ids[:first_policy_token])
    assert prompt.endswith("<|im_start|>assistant\n") and task.user_turns[0] in prompt


# ---- the engine ----------------------------------------------------------------------------------------
def test_make_engine_hf_validates_options(synthetic_tasks, tiny_lm_dir):
    _, frame = synthetic_tasks
    with pytest.raises(ValueError, match="engine_options.model is required"):
        make_engine("hf", frame, G, 0, {})
    with pytest.raises(ValueError, match="top_p"):
        make_engine("hf", frame, G, 0, engine_options(tiny_lm_dir, top_p=0.0))
    with pytest.raises(ValueError, match="temperature"):
        make_engine("hf", frame, G, 0, engine_options(tiny_lm_dir, grpo={"temperature": 0.5}))


def test_hf_engine_step_returns_landing_rows_and_samples(synthetic_tasks, tiny_lm_dir, tmp_path):
    _, frame = synthetic_tasks
    engine = make_engine("hf", frame, G, 0, engine_options(tiny_lm_dir))
    assert isinstance(engine, HFEngine) and engine.device.type == "cpu" and engine.dtype == torch.float32
    batch = batch_of(frame, list(frame["task_id"][:2]))
    rows, metrics = engine.run_step(batch, step=1)

    assert set(rows.columns) == (set(REQUIRED) | set(OPTIONAL)) - {"campaign_id"}
    assert rows["task_id"].tolist() == [t for t in batch["task_id"] for _ in range(G)]
    assert rows["rollout_idx"].tolist() == [0, 1, 0, 1]
    path = write_step_file(tmp_path, rows.assign(campaign_id="c"), "c", 1)
    landed = read_and_validate(LandingFile.from_path(path), set(batch["task_id"]), G)
    assert len(landed) == 4

    samples = [r.sample for r in engine.last_rollouts]
    for sample, row in zip(samples, rows.itertuples(), strict=True):
        assert (sample.task_id, sample.rollout_idx, sample.reward) == (
            row.task_id,
            row.rollout_idx,
            row.reward,
        )
        assert sum(sample.loss_mask) == row.completion_tokens >= 1
        assert len(sample.token_ids) == row.prompt_tokens + row.completion_tokens
        assert all((lp < 0) == bool(m) for lp, m in zip(sample.old_logprobs, sample.loss_mask, strict=True))
    assert metrics["rollout/count"] == 4 and metrics["train/policy_tokens"] == rows["completion_tokens"].sum()
    assert metrics["rollout/zero_variance_groups"] == 2  # the random model fails every synthetic task
    assert metrics["rollout/envs_per_batch"] == batch["env_id"].nunique()


def test_hf_engine_step_rolls_out_the_refill_rounds_before_its_one_update(synthetic_tasks, tiny_lm_dir):
    _, frame = synthetic_tasks
    engine = make_engine("hf", frame, G, 0, engine_options(tiny_lm_dir))
    first, second = list(frame["task_id"][:2])
    seen: list[list[str]] = []

    def refill(rows: pd.DataFrame) -> pd.DataFrame:
        seen.append(rows["task_id"].tolist())
        more = batch_of(frame, [second]).assign(role="oversample")
        return more if len(seen) == 1 else more.iloc[:0]

    rows, metrics = engine.run_step(batch_of(frame, [first]), step=1, refill=refill)
    assert seen == [[first] * G, [second] * G]  # each round's landing rows went to the rule
    assert rows["task_id"].tolist() == [first] * G + [second] * G  # every round is in the landing rows
    assert metrics["rollout/count"] == 2 * G and len(engine.last_rollouts) == 2 * G


class HalfScriptedEngine(HFEngine):
    """Rollout 0 of each task is the gold solution written as tool calls; the others are sampled
    from the tiny LM. Gives every group reward variance, so the GRPO step has a real signal."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.scripts: dict[str, list[str]] = {}

    def rollout(self, task_ids, step):
        for task_id in task_ids:
            task = self.resolver.task(task_id)
            self.scripts[task_id] = [
                text for calls in task.gold for text in ("\n".join(map(format_tool_call, calls)), "Done.")
            ]
        return super().rollout(task_ids, step)

    def generate(self, requests):
        sampled = iter(self.generator([r for r in requests if r.rollout_idx != 0]))
        out = []
        for request in requests:
            if request.rollout_idx:
                out.append(next(sampled))
                continue
            ids = self.tokenizer(self.scripts[request.task_id].pop(0), add_special_tokens=False)["input_ids"]
            out.append(Generation(ids + [self.tokenizer.eos_token_id], None, stopped=True))
        return out


def _gold_logprob(engine: HFEngine) -> float:
    sample = engine.last_rollouts[0].sample
    ids = torch.tensor([sample.token_ids])
    with torch.no_grad():
        logprobs = token_logprobs(engine.model, ids, torch.ones_like(ids))[0]
    return float((logprobs * torch.tensor(sample.loss_mask, dtype=torch.float32)).sum())


def test_hf_engine_learns_and_resumes_bit_for_bit(synthetic_tasks, tiny_lm_dir, tmp_path):
    tasks, frame = synthetic_tasks
    batch = batch_of(frame, [tasks[0].task_id])
    options = engine_options(tiny_lm_dir, grpo={"learning_rate": 1e-3, "micro_batch_size": 2})

    first = HalfScriptedEngine(frame, G, seed=3, **options)
    initial = {k: v.clone() for k, v in first.model.state_dict().items()}
    rows, metrics = first.run_step(batch, step=1)
    assert rows["reward"].tolist() == [1.0, 0.0]
    assert metrics["rollout/zero_variance_groups"] == 0 and metrics["train/skipped_step"] == 0
    gold_before = first.last_rollouts[0].sample
    logprob_before = sum(gold_before.old_logprobs)
    assert _gold_logprob(first) > logprob_before  # the rewarded rollout became more likely
    assert any(not torch.equal(initial[k], v) for k, v in first.model.state_dict().items())

    first.save(tmp_path / "step=1")
    rows_2, metrics_2 = first.run_step(batch, step=2)

    resumed = HalfScriptedEngine(frame, G, seed=3, **options)
    resumed.load(tmp_path / "step=1")
    rows_2b, metrics_2b = resumed.run_step(batch, step=2)

    timing = ["wall_time_s"]
    pd.testing.assert_frame_equal(rows_2.drop(columns=timing), rows_2b.drop(columns=timing))
    for key, value in first.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[key]), key
    untimed = [k for k in metrics_2 if not k.endswith("_s") and not k.endswith("_per_s")]
    assert {k: metrics_2[k] for k in untimed} == {k: metrics_2b[k] for k in untimed}


@pytest.fixture
def restore_determinism(monkeypatch):
    """``deterministic`` is process-wide: give the next tests torch's setting and the environment back."""
    was, variable = (
        torch.are_deterministic_algorithms_enabled(),
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None),
    )
    yield
    torch.use_deterministic_algorithms(was)
    os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    if variable is not None:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = variable


def _resume_step_2(frame, batch, options, folder):
    """Step 2 of an uninterrupted run and of a run resumed from its step-1 checkpoint."""
    first = HalfScriptedEngine(frame, G, seed=3, **options)
    first.run_step(batch, step=1)
    first.save(folder / "step=1")
    rows, _ = first.run_step(batch, step=2)
    resumed = HalfScriptedEngine(frame, G, seed=3, **options)
    resumed.load(folder / "step=1")
    rows_b, _ = resumed.run_step(batch, step=2)
    return (first, rows), (resumed, rows_b)


def test_deterministic_option_turns_torch_s_deterministic_kernels_on_and_the_step_still_runs(
    synthetic_tasks, tiny_lm_dir, tmp_path, restore_determinism
):
    tasks, frame = synthetic_tasks
    torch.use_deterministic_algorithms(False)
    HalfScriptedEngine(frame, G, seed=3, **engine_options(tiny_lm_dir))
    assert not torch.are_deterministic_algorithms_enabled()  # off unless asked for
    options = engine_options(tiny_lm_dir, deterministic=True, grpo={"learning_rate": 1e-3})
    (first, rows), (resumed, rows_b) = _resume_step_2(
        frame, batch_of(frame, [tasks[0].task_id]), options, tmp_path
    )
    assert torch.are_deterministic_algorithms_enabled()
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    # every op of generation, scoring and the update has a deterministic kernel (torch raises otherwise)
    assert rows["reward"].tolist() == [1.0, 0.0]
    pd.testing.assert_frame_equal(rows.drop(columns=["wall_time_s"]), rows_b.drop(columns=["wall_time_s"]))


def test_score_samples_skips_samples_without_policy_tokens(tiny_model):
    empty = Sample("t", 0, [], [], [], 0.0)  # a rollout whose environment failed before the prompt
    context_only = Sample("t", 1, [5, 6], [0, 0], [0.0, 0.0], 0.0)
    score_samples(
        tiny_model, [empty, context_only], temperature=1.0, micro_batch_size=2, pad_id=0, bf16=False
    )
    assert (empty.old_logprobs, context_only.old_logprobs) == ([], [0.0, 0.0])


def _moved_fraction(before: dict, model) -> float:
    """Share of the parameters' entries that changed (named_parameters: tied weights count once)."""
    after = dict(model.named_parameters())
    return sum(int((before[k] != after[k]).sum()) for k in after) / sum(p.numel() for p in after.values())


@pytest.mark.parametrize("dtype, moved", [("", (0.9, 1.0)), ("bfloat16", (0.0, 0.2))])
def test_default_float32_weights_keep_a_small_step_that_bf16_weights_round_away(
    synthetic_tasks, tiny_lm_dir, dtype, moved
):
    """Why the trainer's weights default to float32 on every device: one GRPO step at the default
    learning rate (1e-6) moves nearly every float32 weight, while a bfloat16 copy keeps few of its moves."""
    tasks, frame = synthetic_tasks
    engine = HalfScriptedEngine(frame, G, seed=3, **engine_options(tiny_lm_dir, dtype=dtype))
    assert engine.dtype == (torch.bfloat16 if dtype else torch.float32)
    before = {k: p.detach().clone() for k, p in engine.model.named_parameters()}
    rows, metrics = engine.run_step(batch_of(frame, [tasks[0].task_id]), step=1)
    assert rows["reward"].tolist() == [1.0, 0.0] and metrics["train/skipped_step"] == 0
    assert moved[0] <= _moved_fraction(before, engine.model) <= moved[1]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_hf_engine_on_cuda_trains_float32_weights_under_bf16_autocast(synthetic_tasks, tiny_lm_dir):
    tasks, frame = synthetic_tasks
    default_device = engine_options(tiny_lm_dir, device="")  # empty: cuda when available
    engine = HalfScriptedEngine(frame, G, seed=3, **default_device)
    assert engine.device.type == "cuda" and engine.dtype == torch.float32
    assert engine.grpo.bf16 and engine.generator.autocast
    before = {k: p.detach().clone() for k, p in engine.model.named_parameters()}
    rows, metrics = engine.run_step(batch_of(frame, [tasks[0].task_id]), step=1)
    assert rows["reward"].tolist() == [1.0, 0.0] and metrics["train/skipped_step"] == 0
    assert metrics["train/grad_norm"] > 0 and _moved_fraction(before, engine.model) > 0.9


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_hf_engine_on_cuda_resumes_bit_for_bit_with_deterministic_kernels(
    synthetic_tasks, tiny_lm_dir, tmp_path, restore_determinism
):
    """Without ``deterministic`` a resumed CUDA run's weights differed by up to 7e-6 (docs/gpu.md)."""
    tasks, frame = synthetic_tasks
    grpo = {"learning_rate": 1e-3, "micro_batch_size": 2}
    options = engine_options(tiny_lm_dir, device="cuda", deterministic=True, grpo=grpo)
    (first, rows), (resumed, rows_b) = _resume_step_2(
        frame, batch_of(frame, [t.task_id for t in tasks[:4]]), options, tmp_path
    )
    pd.testing.assert_frame_equal(rows.drop(columns=["wall_time_s"]), rows_b.drop(columns=["wall_time_s"]))
    for key, value in first.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[key]), key
