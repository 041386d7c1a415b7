"""The ``vllm`` engine's CPU-checkable parts. vLLM itself cannot run here (no GPU): the request
grouping and output mapping, the sharing of one instance per process and the sleep / wake bookkeeping are
checked against stand-ins for ``vllm.LLM`` (the only stand-ins in these tests, for parts that need a GPU).
The real vLLM runs in the GPU-marked test at the end (``bench/gpu_smoke.py``)."""

from dataclasses import dataclass, field
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from training.agent_loop import ChatFormat, GenerationRequest
from training.engines import make_engine
from training.engines import vllm as vllm_engine
from training.engines.vllm import VLLMEngine, VLLMEngineOptions


@dataclass
class RecordedSamplingParams:
    """Takes SamplingParams' keyword arguments and keeps them."""

    n: int = 1
    kwargs: dict = field(default_factory=dict)

    def __init__(self, n=1, **kwargs):
        self.n, self.kwargs = n, kwargs


class StandInLLM:
    """Answers request k with completions [100 + k, stop] (or a length cut for max_tokens 1)."""

    def __init__(self, stop_id, include_stop):
        self.stop_id, self.include_stop = stop_id, include_stop
        self.calls = []

    def generate(self, prompts, sampling_params, use_tqdm):
        self.calls.append((prompts, sampling_params))
        outputs = []
        for k, params in enumerate(sampling_params):
            completions = []
            for _ in range(params.n):
                if params.kwargs["max_tokens"] == 1:
                    completions.append(
                        SimpleNamespace(token_ids=[100 + k], finish_reason="length", stop_reason=None)
                    )
                else:
                    tokens = [100 + k] + ([self.stop_id] if self.include_stop else [])
                    completions.append(
                        SimpleNamespace(token_ids=tokens, finish_reason="stop", stop_reason=None)
                    )
            outputs.append(SimpleNamespace(outputs=completions))
        return outputs


def stand_in_engine(tokenizer, model_dir, include_stop=True):
    engine = object.__new__(VLLMEngine)
    engine.options = VLLMEngineOptions(model=str(model_dir), temperature=0.8, top_p=0.9)
    engine.chat = ChatFormat(tokenizer)
    engine.seed, engine._step = 7, 3
    engine._vllm = SimpleNamespace(SamplingParams=RecordedSamplingParams)
    engine.llm = StandInLLM(tokenizer.eos_token_id, include_stop)
    return engine


@pytest.mark.parametrize("include_stop", [True, False])  # vLLM versions differ on returning the stop token
def test_vllm_generate_groups_identical_prompts_into_one_request_with_n(
    tiny_tokenizer, tiny_lm_dir, include_stop
):
    engine = stand_in_engine(tiny_tokenizer, tiny_lm_dir, include_stop)
    eos = tiny_tokenizer.eos_token_id
    requests = [
        GenerationRequest([1, 2, 3], 8, "a", 0),
        GenerationRequest([1, 2, 3], 8, "a", 1),
        GenerationRequest([4, 5], 1, "b", 0),
        GenerationRequest([1, 2, 3], 8, "a", 2),
    ]
    generations = engine.generate(requests)
    prompts, params = engine.llm.calls[0]
    assert prompts == [{"prompt_token_ids": [1, 2, 3]}, {"prompt_token_ids": [4, 5]}]
    assert [p.n for p in params] == [3, 1]
    assert params[0].kwargs | {"seed": None} == {
        "temperature": 0.8,
        "top_p": 0.9,
        "top_k": -1,
        "max_tokens": 8,
        "stop_token_ids": [eos],
        "skip_special_tokens": False,
        "seed": None,
    }
    assert params[0].kwargs["seed"] != params[1].kwargs["seed"]
    assert [g.token_ids for g in generations] == [[100, eos], [100, eos], [101], [100, eos]]
    assert [g.stopped for g in generations] == [True, True, False, True]


def test_vllm_request_seed_does_not_depend_on_batching(tiny_tokenizer, tiny_lm_dir):
    engine = stand_in_engine(tiny_tokenizer, tiny_lm_dir)
    request = GenerationRequest([1, 2, 3], 8, "a", 1)
    engine.generate([request])
    engine.generate([GenerationRequest([9] * 5, 8, "z", 0), request])
    first, second = engine.llm.calls
    assert first[1][0].kwargs["seed"] == second[1][1].kwargs["seed"]


def test_make_engine_vllm_without_gpu_says_to_use_hf(tiny_lm_dir):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU; on CPU use engine 'hf'"):
        make_engine("vllm", pd.DataFrame({"task_id": [], "env_id": []}), 2, 0, {"model": str(tiny_lm_dir)})


def test_vllm_options_validate_memory_share(tiny_lm_dir):
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        VLLMEngineOptions(model=str(tiny_lm_dir), gpu_memory_utilization=1.5)


def test_vllm_instance_is_shared_by_the_engines_of_one_process(monkeypatch):
    """A campaign run in one process builds an engine per step; vLLM's sleep mode takes one instance per
    process (its second step failed so on the H200). A stand-in for ``vllm.LLM`` counts the instances."""
    monkeypatch.setattr(vllm_engine, "_SHARED_LLM", {})
    built = []
    stand_in = SimpleNamespace(LLM=lambda **kwargs: built.append(kwargs) or object())
    first = vllm_engine.shared_llm(stand_in, seed=1, model="m", enforce_eager=True)
    again = vllm_engine.shared_llm(stand_in, seed=2, model="m", enforce_eager=True)  # seed: per request
    assert again is first and again["llm"] is first["llm"] and len(built) == 1 and built[0]["seed"] == 1
    with pytest.raises(
        RuntimeError, match=r"other settings \(held, asked\) \{'enforce_eager': \(True, False\)\}"
    ):
        vllm_engine.shared_llm(stand_in, seed=1, model="m", enforce_eager=False)
    assert len(built) == 1


class SleepyStandIn:
    """vLLM 0.25's sleep bookkeeping (``v1/executor/abstract.py``): ``sleep`` does nothing while any tag still
    sleeps ("Executor is already sleeping"); ``wake_up(tags)`` wakes those tags."""

    def __init__(self):
        self.sleeping, self.sleeps = set(), 0

    def sleep(self, level):
        if not self.sleeping:
            self.sleeping, self.sleeps = {"weights", "kv_cache"}, self.sleeps + 1

    def wake_up(self, tags=None):
        self.sleeping -= set(tags or self.sleeping)

    def reset_prefix_cache(self):
        pass


def sleepy_engine(model_dir, shared, load_weights):
    engine = object.__new__(VLLMEngine)
    engine.options = VLLMEngineOptions(model=str(model_dir))
    engine._shared, engine.llm, engine.weight_syncs = shared, shared["llm"], 0
    engine.model = torch.nn.Linear(2, 2)
    engine._vllm_model = lambda: SimpleNamespace(load_weights=load_weights)
    return engine


def test_vllm_engine_falls_asleep_whole_whatever_fails_while_it_samples(tiny_lm_dir, monkeypatch):
    """The trainer needs the GPU back after every round: after a failure between the two wake-ups (weights
    awake, KV cache asleep, where vLLM's own sleep does nothing) and after a failure while sampling."""
    llm = SleepyStandIn()
    shared = {"llm": llm, "arguments": {}, "awake": {"weights", "kv_cache"}}  # as shared_llm leaves it

    def broken_copy(weights):
        raise RuntimeError("copy failed")

    engine = sleepy_engine(tiny_lm_dir, shared, load_weights=broken_copy)
    engine._sleep()
    assert llm.sleeping == {"weights", "kv_cache"} and llm.sleeps == 1 and not shared["awake"]
    with pytest.raises(RuntimeError, match="copy failed"):
        engine.sample_episodes([])
    assert llm.sleeping == {"weights", "kv_cache"} and llm.sleeps == 2 and not shared["awake"]

    def broken_loop(episodes, generate):
        raise RuntimeError("sampling failed")

    monkeypatch.setattr(vllm_engine, "run_episodes", broken_loop)
    later = sleepy_engine(tiny_lm_dir, shared, load_weights=lambda weights: None)  # the next step's engine
    later._sleep()  # as its constructor does: already asleep, nothing to do
    assert llm.sleeps == 2
    with pytest.raises(RuntimeError, match="sampling failed"):
        later.sample_episodes([])
    assert llm.sleeping == {"weights", "kv_cache"} and llm.sleeps == 3 and later.weight_syncs == 1


def test_vllm_instance_that_failed_to_start_is_not_started_again(monkeypatch):
    monkeypatch.setattr(vllm_engine, "_SHARED_LLM", {})

    def out_of_memory(**kwargs):
        raise ValueError("no memory left")

    failing = SimpleNamespace(LLM=out_of_memory)
    with pytest.raises(ValueError, match="no memory left"):
        vllm_engine.shared_llm(failing, seed=0, model="m")
    with pytest.raises(
        RuntimeError, match=r"failed to start earlier in this process \(ValueError: no memory"
    ):
        vllm_engine.shared_llm(SimpleNamespace(LLM=lambda **kwargs: object()), seed=0, model="m")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_vllm_engine_on_cuda_samples_trains_and_syncs_the_trainer_s_weights(tmp_path):
    """The real vLLM: two steps of sampling (synthetic environments, a tiny model whose head size vLLM's
    kernels take), the GRPO update, and the weights vLLM samples with copied from the trainer each step."""
    pytest.importorskip("vllm")
    from environments.registry import get_source
    from training.tiny_lm import build_tiny_lm

    tasks = get_source("synthetic").load().tasks
    frame = pd.DataFrame({"task_id": [t.task_id for t in tasks], "env_id": [t.env_id for t in tasks]})
    model_dir = build_tiny_lm(tmp_path / "lm", seed=0, heads=1)
    options = {"model": str(model_dir), "max_new_tokens": 8, "enforce_eager": True}
    options |= {"gpu_memory_utilization": 0.2, "grpo": {"learning_rate": 1e-3}}
    engine = make_engine("vllm", frame, group_size=2, seed=3, options=options)
    batch = frame.iloc[:2].assign(role="coverage")
    for step in (1, 2):
        rows, metrics = engine.run_step(batch, step=step)
        assert len(rows) == 4 and metrics["rollout/count"] == 4 and engine.weight_syncs == step
        assert all(0 < len(r.sample.token_ids) for r in engine.last_rollouts)
    # an engine built later in this process (a campaign's next step) takes over the same vLLM instance
    later = make_engine("vllm", frame, group_size=2, seed=3, options=options)
    assert later.llm is engine.llm and later.run_step(batch, step=3)[1]["rollout/count"] == 4
    engine._wake_and_sync()  # vLLM's copy now holds the trainer's weights
    ours = dict(engine.model.named_parameters())["model.embed_tokens.weight"]
    theirs = dict(engine._vllm_model().named_parameters())["model.embed_tokens.weight"]
    rows = ours.shape[0]  # vLLM pads the vocabulary to a multiple of 64
    torch.testing.assert_close(theirs[:rows].float(), ours.detach().to(theirs.dtype).float())
    engine._sleep()
