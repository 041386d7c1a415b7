"""The multi-turn agent loop: a chat model, a task's user turns, a real environment and its verifier.

For each user turn of the task the loop appends the user message, then repeats: generate, parse the
Hermes / Qwen3 tool calls (``training.tool_calls``), execute them with ``env.call``, append the
results as ``tool`` messages, until the model answers without a call; then the next user turn. The
finished :class:`~environments.base.Trajectory` (one ``TurnRecord`` per user turn run) is scored by
``env.verify``.

**Tokens and the policy mask.** The training sequence is built incrementally, never by re-rendering
the whole conversation, so the tokens the policy sampled are exactly the tokens trained on (a
re-rendering can re-tokenise the model's text differently, or change earlier turns, as templates that
drop old reasoning do). The sequence is:

1. the prompt: ``apply_chat_template([system?, user_0], tools=env specs, add_generation_prompt=True)``,
   tokenised - mask 0;
2. each generation, as sampled, up to and including its stop token - mask 1, with the sampling
   log-probabilities;
3. after a generation, the tokens the template adds before the model speaks again (the end of the
   assistant turn after its stop token, the tool results or the next user message, the next
   generation prompt) - mask 0. This text is the difference between two renderings of a fixed
   two-message conversation: ``render([user "U", assistant "A"] + new_messages,
   add_generation_prompt=True)`` after ``"A" + <end-of-turn token>``. It does not depend on the
   history, so it is exact for any template whose turns render independently of later messages.

Decoding the mask-1 tokens gives back exactly the model's outputs (tested).

**Instruction mode.** Sources whose tasks were written for a user simulator (tau-bench, ACEBench) hold
the simulator's instruction as the task's only user turn; the loop sends it verbatim as the first
user message and never simulates replies (see ``environments/tau_bench/data.py``).

**Tools revealed later.** The tool list is rendered into the system prompt once (earlier tokens must
not change). When ``env.tools(turn)`` shows tools not shown before (BFCL's missed functions), their
specs are prepended to that turn's user message in a ``<tools>`` block.

**Limits and status.** ``ok``: every user turn was answered. ``truncated``: a generation hit its token
limit without a stop token (nothing of it is executed), the conversation reached
``max_total_tokens``, or a turn needed more than ``max_calls_per_turn`` calls (malformed call blocks
count: each is answered with an error message so the model can retry). ``timeout``: the rollout ran
longer than ``timeout_s``. ``error``: the environment or the template raised; the sample keeps reward 0
and an all-zero mask (an infrastructure failure says nothing about the policy). The trajectory holds
the turns actually run, so a truncated multi-turn task usually fails its verifier.

The loop is a state machine (:class:`Episode`) so an engine can batch the generations of many
episodes: ``run_episodes(episodes, generate)`` asks every unfinished episode for its next prompt and
calls ``generate`` once per round.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from environments.base import CallRecord, Environment, Task, ToolSpec, Trajectory, TurnRecord, Verdict
from training.samples import Sample
from training.tool_calls import parse_tool_calls


@dataclass
class AgentLoopConfig:
    """Limits of one rollout."""

    max_new_tokens: int = 1024
    """Most tokens one generation may produce; a generation cut at this length truncates the rollout."""
    max_total_tokens: int = 32768
    """Most tokens of the whole conversation (prompt, outputs, tool results); reaching it truncates."""
    max_calls_per_turn: int = 16
    """Most tool calls (malformed ones included) the model may make in one user turn."""
    system_prompt: str | None = None
    """Optional system message placed before the first user turn (the template adds the tools to it)."""
    timeout_s: float | None = None
    """Wall-clock limit of one rollout in seconds (status ``timeout``); None: no limit."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1 or self.max_total_tokens < 1:
            raise ValueError("max_new_tokens and max_total_tokens must be >= 1")
        if self.max_calls_per_turn < 1:
            raise ValueError("max_calls_per_turn must be >= 1 (0 would forbid every tool call)")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError("timeout_s must be positive, or None for no limit")


@dataclass(frozen=True)
class GenerationRequest:
    """The next prompt of one episode (``task_id``, ``rollout_idx`` say which)."""

    prompt_ids: list[int]
    max_new_tokens: int
    task_id: str = ""
    rollout_idx: int = 0


@dataclass(frozen=True)
class Generation:
    """One sampled continuation: its tokens up to and including the stop token (``stopped``), or
    ``max_new_tokens`` tokens without one; ``logprobs[i]`` is the sampling log-probability of token i,
    or ``logprobs`` is None when the engine scores the finished sample itself (the ``hf`` engine does,
    with the trainer's forward pass: ``training.engines.hf.score_samples``)."""

    token_ids: list[int]
    logprobs: list[float] | None
    stopped: bool


GenerateFn = Callable[[Sequence[GenerationRequest]], list[Generation]]


class ChatFormat:
    """What the loop needs from a tokenizer's chat template: the first prompt, and the text the
    template puts between one generation and the next (see the module docstring)."""

    _USER, _ASSISTANT = "<<envsched-user>>", "<<envsched-assistant>>"

    def __init__(self, tokenizer: Any, stop_token_ids: Sequence[int] | None = None):
        self.tokenizer = tokenizer
        ids = list(stop_token_ids) if stop_token_ids else [tokenizer.eos_token_id]
        self.stop_token_ids = [i for i in ids if i is not None]
        if not self.stop_token_ids:
            raise ValueError("the tokenizer has no EOS token and no stop_token_ids were given")
        self._end_of_turn = self._find_end_of_turn()

    def render(self, messages: list[dict[str, Any]], tools=None, add_generation_prompt=True) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=False)

    def prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        return self.encode(self.render(messages, tools=tools or None))

    def continuation(self, new_messages: list[dict[str, Any]]) -> list[int]:
        """Tokens after an assistant turn's stop token up to the next generation prompt."""
        after = self._after_placeholder(new_messages, add_generation_prompt=True)
        if not after.startswith(self._end_of_turn):
            raise ValueError(f"chat template: assistant turn does not end with {self._end_of_turn!r}")
        return self.encode(after[len(self._end_of_turn) :])

    def _after_placeholder(self, new_messages: list[dict[str, Any]], add_generation_prompt: bool) -> str:
        """What the template renders after the placeholder assistant message of a fixed conversation."""
        base = [{"role": "user", "content": self._USER}, {"role": "assistant", "content": self._ASSISTANT}]
        text = self.render(base + new_messages, add_generation_prompt=add_generation_prompt)
        return text[text.index(self._ASSISTANT) + len(self._ASSISTANT) :]

    def _find_end_of_turn(self) -> str:
        after = self._after_placeholder([], add_generation_prompt=False)
        for token_id in self.stop_token_ids:
            stop = self.decode([token_id])
            if stop and after.startswith(stop):
                return stop
        raise ValueError(
            f"chat template ends an assistant turn with {after[:40]!r}, which starts with none of the stop "
            f"tokens {[self.decode([i]) for i in self.stop_token_ids]}; pass the template's end-of-turn token"
        )


@dataclass
class Rollout:
    """One finished episode: the training sample, the trajectory and verdict, and the landing fields."""

    sample: Sample
    trajectory: Trajectory
    verdict: Verdict | None
    status: str
    error: str | None
    n_turns: int
    n_tool_calls: int
    tools_used: list[str]
    prompt_tokens: int
    completion_tokens: int
    wall_time_s: float
    messages: list[dict[str, Any]] = field(default_factory=list)

    def landing_row(self, step: int) -> dict[str, Any]:
        """The row of this rollout in the landing file (``warehouse.landing``), without campaign_id."""
        return {
            "step": step,
            "task_id": self.sample.task_id,
            "rollout_idx": self.sample.rollout_idx,
            "reward": self.sample.reward,
            "n_turns": self.n_turns,
            "n_tool_calls": self.n_tool_calls,
            "tools_used": list(self.tools_used),
            "status": self.status,
            "error": self.error,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "wall_time_s": self.wall_time_s,
        }


class Episode:
    """One rollout as a state machine: ``request()`` gives the next prompt (None when finished),
    ``feed(generation)`` consumes the model's answer; ``result()`` once finished."""

    def __init__(
        self,
        task: Task,
        env: Environment,
        chat: ChatFormat,
        config: AgentLoopConfig | None = None,
        rollout_idx: int = 0,
    ):
        self.task, self.env, self.chat = task, env, chat
        self.config = config or AgentLoopConfig()
        self.rollout_idx = rollout_idx
        self.started = time.perf_counter()
        self.token_ids: list[int] = []
        self.loss_mask: list[int] = []
        self.logprobs: list[float] = []
        self.messages: list[dict[str, Any]] = []
        self.trajectory = Trajectory(task_id=task.task_id)
        self.status: str | None = None
        self.error: str | None = None
        self.verdict: Verdict | None = None
        self.turn = 0
        self.calls_this_turn = 0
        self.parse_errors = 0
        self._shown: set[str] = set()
        self._wall_time_s = 0.0
        try:
            tools = env.reset(task)
            self._shown = {spec.name for spec in tools}
            if self.config.system_prompt is not None:
                self.messages.append({"role": "system", "content": self.config.system_prompt})
            self.messages.append({"role": "user", "content": self._user_message(0)})
            self.trajectory.turns.append(TurnRecord())
            self._append(chat.prompt(self.messages, [spec.as_function() for spec in tools]), mask=0)
        except Exception as exc:  # a broken environment or template must not stop the batch
            self._finish("error", f"{type(exc).__name__}: {exc}")

    @property
    def done(self) -> bool:
        return self.status is not None

    def request(self) -> GenerationRequest | None:
        if self.done:
            return None
        if self.config.timeout_s is not None and time.perf_counter() - self.started > self.config.timeout_s:
            self._finish("timeout", f"rollout exceeded {self.config.timeout_s} s")
            return None
        budget = self.config.max_total_tokens - len(self.token_ids)
        if budget <= 0:
            self._finish("truncated", f"conversation reached max_total_tokens={self.config.max_total_tokens}")
            return None
        return GenerationRequest(
            list(self.token_ids), min(self.config.max_new_tokens, budget), self.task.task_id, self.rollout_idx
        )

    def feed(self, generation: Generation) -> None:
        if self.done:
            raise RuntimeError("feed() on a finished episode")
        try:
            self._feed(generation)
        except Exception as exc:
            self._finish("error", f"{type(exc).__name__}: {exc}")

    def _feed(self, generation: Generation) -> None:
        ids = list(generation.token_ids)
        logprobs = list(generation.logprobs) if generation.logprobs is not None else [0.0] * len(ids)
        self._append(ids, mask=1, logprobs=logprobs)
        if not generation.stopped:
            self._finish(
                "truncated", f"a generation reached its limit of {len(ids)} tokens without a stop token"
            )
            return
        text = self.chat.decode(ids[:-1])
        self.messages.append({"role": "assistant", "content": text})
        parsed = parse_tool_calls(text)
        record = self.trajectory.turns[-1]
        if parsed.text:
            record.replies.append(parsed.text)
        if not parsed.calls and not parsed.errors:
            self._next_turn()
            return
        room = self.config.max_calls_per_turn - self.calls_this_turn
        results: list[dict[str, Any]] = []
        batch = parsed.calls[:room]  # one assistant message: executed as one batch
        for call, result in zip(batch, self.env.call_batch(batch), strict=True):
            record.calls.append(CallRecord(call, result))
            results.append({"role": "tool", "name": call.name, "content": result.content})
        for error in parsed.errors[: max(room - len(parsed.calls), 0)]:
            results.append({"role": "tool", "name": "error", "content": f"Error: could not parse {error}"})
        self.parse_errors += len(parsed.errors)
        self.calls_this_turn += len(parsed.calls) + len(parsed.errors)
        self.messages.extend(results)
        if self.calls_this_turn > self.config.max_calls_per_turn:
            self._finish(
                "truncated",
                f"turn {self.turn}: more than max_calls_per_turn={self.config.max_calls_per_turn} tool calls",
            )
            return
        self._append(self.chat.continuation(results), mask=0)

    def _next_turn(self) -> None:
        if self.turn + 1 >= len(self.task.user_turns):
            self._finish("ok", None)
            return
        self.turn += 1
        self.calls_this_turn = 0
        message = {"role": "user", "content": self._user_message(self.turn)}
        self.messages.append(message)
        self.trajectory.turns.append(TurnRecord())
        self._append(self.chat.continuation([message]), mask=0)

    def _user_message(self, turn: int) -> str:
        text = self.task.user_turns[turn]
        if turn == 0:
            return text
        new = [spec for spec in self.env.tools(turn) if spec.name not in self._shown]
        if not new:
            return text
        self._shown |= {spec.name for spec in new}
        return _tools_block(new) + "\n\n" + text

    def _append(self, ids: list[int], mask: int, logprobs: list[float] | None = None) -> None:
        if logprobs is not None and len(logprobs) != len(ids):
            raise ValueError(f"generation has {len(ids)} tokens but {len(logprobs)} log-probabilities")
        self.token_ids.extend(ids)
        self.loss_mask.extend([mask] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))

    def _finish(self, status: str, error: str | None) -> None:
        self.status, self.error = status, error
        if status != "error":
            try:
                self.verdict = self.env.verify(self.trajectory)
            except Exception as exc:
                self.status, self.error = "error", f"verifier: {type(exc).__name__}: {exc}"
        self._wall_time_s = time.perf_counter() - self.started

    def result(self) -> Rollout:
        if not self.done:
            raise RuntimeError("result() before the episode finished")
        reward = self.verdict.reward if self.verdict is not None else 0.0
        mask = self.loss_mask if self.status != "error" else [0] * len(self.loss_mask)
        calls = [rec.call for turn in self.trajectory.turns for rec in turn.calls]
        metrics = {"rollout/parse_errors": float(self.parse_errors)}
        if self.verdict is not None:
            metrics.update({f"verifier/{k}": float(v) for k, v in self.verdict.metrics.items()})
        sample = Sample(
            task_id=self.task.task_id,
            rollout_idx=self.rollout_idx,
            token_ids=list(self.token_ids),
            loss_mask=list(mask),
            old_logprobs=list(self.logprobs),
            reward=reward,
            metrics=metrics,
        )
        completion = sum(self.loss_mask)
        return Rollout(
            sample=sample,
            trajectory=self.trajectory,
            verdict=self.verdict,
            status=self.status or "error",
            error=self.error,
            n_turns=len(self.trajectory.turns),
            n_tool_calls=len(calls),
            tools_used=list(dict.fromkeys(c.name for c in calls)),
            prompt_tokens=len(self.token_ids) - completion,
            completion_tokens=completion,
            wall_time_s=self._wall_time_s,
            messages=self.messages,
        )


def _tools_block(specs: list[ToolSpec]) -> str:
    lines = "\n".join(json.dumps(spec.as_function()) for spec in specs)
    return f"New tools are available:\n<tools>\n{lines}\n</tools>"


def run_episodes(episodes: Sequence[Episode], generate: GenerateFn) -> list[Rollout]:
    """Drive ``episodes`` to the end, one batched ``generate`` call per round."""
    while True:
        active = [(episode, episode.request()) for episode in episodes]
        active = [(episode, request) for episode, request in active if request is not None]
        if not active:
            return [episode.result() for episode in episodes]
        generations = generate([request for _, request in active])
        if len(generations) != len(active):
            raise RuntimeError(f"generate returned {len(generations)} generations for {len(active)} prompts")
        for (episode, _), generation in zip(active, generations, strict=True):
            episode.feed(generation)


def run_agent_loop(
    task: Task,
    env: Environment,
    chat: ChatFormat,
    generate: GenerateFn,
    config: AgentLoopConfig | None = None,
    rollout_idx: int = 0,
) -> Rollout:
    """One rollout of ``task`` in the fresh environment ``env``."""
    return run_episodes([Episode(task, env, chat, config, rollout_idx)], generate)[0]
