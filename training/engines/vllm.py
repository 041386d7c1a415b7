"""The ``vllm`` engine: rollouts with vLLM colocated with the trainer on one GPU, GRPO with ``transformers``.

Not run by CI (CPU only). On one H200 with vLLM 0.25.1 (docs/gpu.md) an earlier version of the GPU test
``test_vllm_engine_on_cuda_samples_trains_and_syncs_the_trainer_s_weights`` (one engine) passed and a
campaign's first step ran through Dagster; its second step then failed, since the campaign built a second
``vllm.LLM`` in the same process, which sleep mode's memory allocator refuses. One instance per process is now
shared (``shared_llm``), with its sleep state kept by tag; that, and the test's second engine, have not run on
a GPU yet.

Everything but sampling is the ``hf`` engine's (:class:`~training.engines.hf.HFEngine`): the agent
loop, the environments, the old log-probs recomputed by the trainer (``score_samples``), the GRPO
update, the checkpoints. Sampling goes through one in-process ``vllm.LLM`` (``external_launcher``
executor, as TRL's colocate mode, so the trainer can write its weights) and follows, per step:

1. wake the weights (``llm.wake_up(tags=["weights"])``) and copy the trainer's parameters into
   vLLM's model (``load_weights``: a step always starts from the trainer's policy, also after a
   resume), reset the prefix cache, wake the KV cache;
2. run the agent loop: every round, the prompts of all unfinished episodes in one ``llm.generate``;
   identical prompts (the G rollouts of a task before they diverge, i.e. the first turn) become one
   request with ``SamplingParams(n=k)``; each request gets a seed from (campaign seed, step, task,
   rollout, prompt length), so sampling does not depend on how requests were batched;
3. ``llm.sleep(level=2)``: weights and KV cache are dropped (the weights are re-synced anyway),
   freeing the GPU for the trainer's scoring pass and GRPO step.

vLLM is imported lazily: the module imports (and the ``hf`` engine works) without it. Install the
optional ``gpu`` extra (``pip install 'envsched[gpu]'``).
"""

from __future__ import annotations

import inspect
import os
import socket
import zlib
from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch

from training.agent_loop import Episode, Generation, GenerationRequest, Rollout, run_episodes
from training.engines.hf import HFEngine
from training.engines.options import VLLMEngineOptions


class VLLMEngine(HFEngine):
    """The ``hf`` engine with vLLM sampling; see the module docstring."""

    name = "vllm"
    options_class = VLLMEngineOptions

    def __init__(self, tasks: pd.DataFrame, group_size: int, seed: int = 0, **options: Any):
        if not torch.cuda.is_available():
            raise RuntimeError("the vllm engine needs a CUDA GPU; on CPU use engine 'hf'")
        try:
            import vllm
        except ImportError as exc:
            raise ImportError(
                "the vllm engine needs vLLM: pip install 'envsched[gpu]' (or use engine 'hf')"
            ) from exc
        super().__init__(tasks, group_size, seed, **options)
        opts: VLLMEngineOptions = self.options  # type: ignore[assignment]
        # A single-process "distributed" run, so the executor lives in this process (TRL colocate).
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("LOCAL_RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine core in this process
        self._vllm = vllm
        self._shared = shared_llm(
            vllm,
            seed=seed,
            model=opts.model,
            dtype=opts.vllm_dtype,
            gpu_memory_utilization=opts.gpu_memory_utilization,
            max_model_len=opts.max_total_tokens,
            max_num_seqs=opts.max_num_seqs,
            enable_sleep_mode=opts.enable_sleep_mode,
            enforce_eager=opts.enforce_eager,
            distributed_executor_backend="external_launcher",
        )
        self.llm = self._shared["llm"]
        self._sleep()
        self.weight_syncs = 0

    # ---- vLLM lifecycle ---------------------------------------------------------------------------
    @property
    def _awake(self) -> set[str]:
        """Tags of the shared instance's memory that are awake ("weights", "kv_cache"), whichever engine woke
        them."""
        return self._shared["awake"]

    def _vllm_model(self) -> Any:
        executor = self.llm.llm_engine.model_executor
        worker = executor.driver_worker
        runner = worker.model_runner if hasattr(worker, "model_runner") else worker.worker.model_runner
        return runner.model

    def _sleep(self) -> None:
        """Drop weights and KV cache (level 2). A half-woken instance (an error between the two wake-ups) is
        woken whole first: vLLM's sleep does nothing while any of its tags still sleeps."""
        if not self.options.enable_sleep_mode or not self._awake:  # type: ignore[attr-defined]
            return
        for tag in SLEEP_TAGS:
            if tag not in self._awake:
                self._wake_up(tag)
        self.llm.sleep(level=2)
        self._awake.clear()

    def _wake_and_sync(self) -> None:
        """Wake the weights, copy the trainer's parameters into vLLM, then wake the KV cache."""
        sleep_mode = self.options.enable_sleep_mode  # type: ignore[attr-defined]
        if sleep_mode and "weights" not in self._awake:
            torch.cuda.empty_cache()
            self._wake_up("weights")
        model = self._vllm_model()
        with torch.no_grad():
            for name, param in self.model.named_parameters():
                model.load_weights([(name, param.data)])
        self.llm.reset_prefix_cache()
        self.weight_syncs += 1
        if sleep_mode and "kv_cache" not in self._awake:
            self._wake_up("kv_cache")

    def _wake_up(self, tag: str) -> None:
        """Wake one kind of memory (vLLM >= 0.8.4 takes tags; older ones wake everything at once)."""
        if "tags" in inspect.signature(self.llm.wake_up).parameters:
            self.llm.wake_up(tags=[tag])
            self._awake.add(tag)
        elif tag == "weights":
            self.llm.wake_up()
            self._awake.update(SLEEP_TAGS)

    def sample_episodes(self, episodes: list[Episode]) -> list[Rollout]:
        try:
            self._wake_and_sync()
            return run_episodes(episodes, self.generate)
        finally:  # asleep again whatever failed, so the trainer gets the GPU
            self._sleep()
            torch.cuda.empty_cache()

    # ---- sampling --------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """One ``llm.generate`` for the round; identical prompts share one request with n = count."""
        groups: dict[tuple[tuple[int, ...], int], list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault((tuple(request.prompt_ids), request.max_new_tokens), []).append(i)
        prompts, params, members = [], [], []
        for (prompt, max_new_tokens), indices in groups.items():
            first = requests[indices[0]]
            prompts.append({"prompt_token_ids": list(prompt)})
            params.append(
                self._vllm.SamplingParams(
                    n=len(indices),
                    temperature=self.options.temperature,
                    top_p=self.options.top_p,
                    top_k=-1,
                    max_tokens=max_new_tokens,
                    stop_token_ids=list(self.chat.stop_token_ids),
                    skip_special_tokens=False,
                    seed=self._request_seed(first, len(prompt)),
                )
            )
            members.append(indices)
        outputs = self.llm.generate(prompts, sampling_params=params, use_tqdm=False)
        results: list[Generation | None] = [None] * len(requests)
        for request_output, indices in zip(outputs, members, strict=True):
            for index, completion in zip(indices, request_output.outputs, strict=True):
                results[index] = self._generation(completion)
        return results  # type: ignore[return-value]

    def _generation(self, completion: Any) -> Generation:
        tokens = list(completion.token_ids)
        stopped = completion.finish_reason == "stop"
        if stopped and (not tokens or tokens[-1] not in self.chat.stop_token_ids):
            # vLLM versions differ on whether the stop token is in token_ids; the loop needs it there.
            reason = completion.stop_reason
            tokens.append(reason if isinstance(reason, int) else self.chat.stop_token_ids[0])
        return Generation(tokens, None, stopped=stopped)

    def _request_seed(self, request: GenerationRequest, prompt_length: int) -> int:
        key = f"{self.seed}|{self._step}|{request.task_id}|{request.rollout_idx}|{prompt_length}"
        return zlib.crc32(key.encode())

    def rollout(self, task_ids: Sequence[str], step: int) -> list[Rollout]:
        self._step = step
        return super().rollout(task_ids, step)

    _step = 0


# The process's vLLM instance: sleep mode's memory allocator takes one per process, and a campaign run in one
# process builds an engine per step. Its weights are the trainer's, copied in before every sampling round.
_SHARED_LLM: dict[str, Any] = {}
SLEEP_TAGS = ("weights", "kv_cache")


def shared_llm(vllm: Any, seed: int, **arguments: Any) -> dict[str, Any]:
    """``{"llm", "arguments", "awake"}``: the process's ``vllm.LLM``, built on first use (awake), reused by any
    later engine with the same ``arguments``. ``seed`` is vLLM's default and is not compared: every request
    carries its own seed. Other arguments in the same process, or a second start after a failed one (the
    allocator cannot be set up twice), raise RuntimeError saying why."""
    if "failed" in _SHARED_LLM:
        raise RuntimeError(
            f"vLLM failed to start earlier in this process ({_SHARED_LLM['failed']}) and cannot start again in "
            "it (sleep mode's allocator): run the campaign in a new process"
        )
    if not _SHARED_LLM:
        try:
            llm = vllm.LLM(seed=seed, **arguments)
        except Exception as exc:
            _SHARED_LLM["failed"] = f"{type(exc).__name__}: {exc}"
            raise
        _SHARED_LLM.update(llm=llm, arguments=arguments, awake=set(SLEEP_TAGS))
    elif _SHARED_LLM["arguments"] != arguments:
        held = _SHARED_LLM["arguments"]
        changed = {k: (held.get(k), v) for k, v in arguments.items() if held.get(k) != v}
        raise RuntimeError(
            f"this process already runs vLLM with other settings (held, asked) {changed}; vLLM's sleep mode "
            "allows one instance per process: run campaigns with other vLLM settings in another process"
        )
    return _SHARED_LLM


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
