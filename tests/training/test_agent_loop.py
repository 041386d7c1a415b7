"""The agent loop on real environments, driven by a scripted model that writes Hermes tool calls.

The scripted "model" is a ``GenerateFn`` that returns fixed texts (tokenised with the tiny LM's
tokenizer, ending with <|im_end|>), so the trajectories, the verifier's reward and the policy mask
can be checked exactly. The random tiny LM itself drives BFCL in ``test_hf_engine.py``.
"""

import dataclasses

import pytest

from environments.base import ToolCall
from environments.bfcl import BfclMultiTurnSource
from environments.registry import get_source
from training.agent_loop import (
    AgentLoopConfig,
    ChatFormat,
    Episode,
    Generation,
    run_agent_loop,
    run_episodes,
)
from training.tool_calls import format_tool_call

LOGPROB = -0.5  # what the scripted model claims for each of its tokens


@pytest.fixture(scope="module")
def bfcl():
    source = BfclMultiTurnSource()
    return source, {t.task_id: t for t in source.load().tasks}


@pytest.fixture(scope="module")
def chat(tiny_tokenizer):
    return ChatFormat(tiny_tokenizer)


class Scripted:
    """Answers each prompt with the next text of ``outputs`` (then "Done."), as a stopped generation."""

    def __init__(self, tokenizer, outputs, stopped=True):
        self.tokenizer, self.outputs, self.stopped = tokenizer, list(outputs), stopped
        self.requests = []

    def __call__(self, requests):
        generations = []
        for request in requests:
            self.requests.append(request)
            text = self.outputs.pop(0) if self.outputs else "Done."
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            ids = ids + [self.tokenizer.eos_token_id] if self.stopped else ids
            generations.append(Generation(ids, [LOGPROB] * len(ids), self.stopped))
        return generations


def gold_outputs(task):
    """The gold solution as model outputs: each turn's calls in one message, then a short answer."""
    outputs = []
    for turn, calls in enumerate(task.gold):
        if calls:
            outputs.append("I will do that.\n" + "\n".join(format_tool_call(c) for c in calls))
        replies = task.gold_replies[turn] if turn < len(task.gold_replies) else ()
        outputs.append(" ".join(replies) or "Done.")
    return outputs


def policy_spans(sample):
    """Contiguous runs of mask-1 tokens."""
    spans, current = [], []
    for token, mask in zip(sample.token_ids, sample.loss_mask, strict=True):
        if mask:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    return spans + ([current] if current else [])


@pytest.mark.parametrize(
    "task_id",
    [
        "bfcl_v3_multi_turn/multi_turn_base_0",  # 4 turns, 10 gold calls
        "bfcl_v3_multi_turn/multi_turn_miss_func_0",  # 'sort' revealed at turn 3, an empty gold turn
    ],
)
def test_agent_loop_scripted_gold_passes_bfcl_verifier(bfcl, chat, tiny_tokenizer, task_id):
    source, tasks = bfcl
    task = tasks[task_id]
    rollout = run_agent_loop(
        task, source.make_environment(task), chat, Scripted(tiny_tokenizer, gold_outputs(task))
    )
    assert (rollout.status, rollout.error) == ("ok", None)
    assert rollout.verdict.reward == 1.0 and rollout.sample.reward == 1.0
    assert rollout.n_turns == len(task.user_turns)
    assert rollout.n_tool_calls == task.gold_calls
    assert rollout.tools_used == list(dict.fromkeys(c.name for turn in task.gold for c in turn))
    assert [[r.call for r in t.calls] for t in rollout.trajectory.turns] == [list(t) for t in task.gold]


def test_agent_loop_policy_mask_decodes_to_exactly_the_model_outputs(bfcl, chat, tiny_tokenizer):
    source, tasks = bfcl
    task = tasks["bfcl_v3_multi_turn/multi_turn_base_0"]
    outputs = gold_outputs(task)
    rollout = run_agent_loop(task, source.make_environment(task), chat, Scripted(tiny_tokenizer, outputs))
    sample = rollout.sample
    decoded = [tiny_tokenizer.decode(span) for span in policy_spans(sample)]
    assert decoded == [text + "<|im_end|>" for text in outputs]
    assert sample.old_logprobs == [LOGPROB if m else 0.0 for m in sample.loss_mask]
    assert rollout.completion_tokens == sum(sample.loss_mask)
    assert rollout.prompt_tokens + rollout.completion_tokens == len(sample.token_ids)
    # The incrementally built sequence is the template's rendering of the whole conversation, token for
    # token (the scripted texts tokenise canonically; a sampled model's need not, hence the incremental build).
    tools = [spec.as_function() for spec in source.make_environment(task).reset(task)]
    whole = chat.render(rollout.messages, tools=tools, add_generation_prompt=False).removesuffix("\n")
    assert sample.token_ids == chat.encode(whole)
    assert sample.loss_mask[0] == 0 and sample.loss_mask[-1] == 1


def test_agent_loop_reveals_missed_functions_in_that_turns_user_message(bfcl, chat, tiny_tokenizer):
    source, tasks = bfcl
    task = tasks["bfcl_v3_multi_turn/multi_turn_miss_func_0"]
    assert task.metadata["missed_function"] == {"3": ["sort"]}
    rollout = run_agent_loop(
        task, source.make_environment(task), chat, Scripted(tiny_tokenizer, gold_outputs(task))
    )
    users = [m["content"] for m in rollout.messages if m["role"] == "user"]
    assert '"name": "sort"' not in users[0] and '"name": "sort"' not in users[2]
    assert users[3].startswith("New tools are available:\n<tools>\n") and '"name": "sort"' in users[3]
    prompt = tiny_tokenizer.decode(rollout.sample.token_ids[: rollout.sample.loss_mask.index(1)])
    assert '"name": "sort"' not in prompt and '"name": "cd"' in prompt


def test_agent_loop_malformed_call_is_answered_with_an_error_and_retried(bfcl, chat, tiny_tokenizer):
    source, tasks = bfcl
    task = tasks["bfcl_v3_multi_turn/multi_turn_base_0"]
    outputs = ['<tool_call>{"name": "cd", "arguments": {"folder": }}</tool_call>'] + gold_outputs(task)
    rollout = run_agent_loop(task, source.make_environment(task), chat, Scripted(tiny_tokenizer, outputs))
    errors = [
        m["content"] for m in rollout.messages if m["role"] == "tool" and m["content"].startswith("Error")
    ]
    assert errors == ["Error: could not parse tool call 1: invalid JSON (Expecting value at character 39)"]
    assert rollout.sample.metrics["rollout/parse_errors"] == 1.0
    assert rollout.verdict.reward == 1.0  # the malformed attempt never reached the environment


def test_agent_loop_environment_errors_go_back_to_the_model(bfcl, chat, tiny_tokenizer):
    source, tasks = bfcl
    task = tasks["bfcl_v3_multi_turn/multi_turn_base_0"]
    bad = format_tool_call(ToolCall("cd", {"folder": "no_such_folder"}))
    rollout = run_agent_loop(task, source.make_environment(task), chat, Scripted(tiny_tokenizer, [bad]))
    first = rollout.trajectory.turns[0].calls[0]
    assert first.result.is_error
    assert {"role": "tool", "name": "cd", "content": first.result.content} in rollout.messages
    assert rollout.status == "ok" and rollout.verdict.reward == 0.0


def test_agent_loop_call_limit_truncates(bfcl, chat, tiny_tokenizer):
    source, tasks = bfcl
    task = tasks["bfcl_v3_multi_turn/multi_turn_base_0"]
    ls = format_tool_call(ToolCall("ls", {}))
    config = AgentLoopConfig(max_calls_per_turn=3)
    rollout = run_agent_loop(
        task, source.make_environment(task), chat, Scripted(tiny_tokenizer, [ls + ls, ls + ls]), config
    )
    assert rollout.status == "truncated" and "max_calls_per_turn=3" in rollout.error
    assert rollout.n_tool_calls == 3  # the call over the limit is not executed
    assert rollout.n_turns == 1 and rollout.verdict.reward == 0.0


def test_agent_loop_total_token_limit_caps_generation_and_truncates(bfcl, chat, tiny_tokenizer):
    source, tasks = bfcl
    task = tasks["bfcl_v3_multi_turn/multi_turn_base_0"]
    prompt_length = len(Episode(task, source.make_environment(task), chat).token_ids)
    model = Scripted(tiny_tokenizer, ["a b c"], stopped=False)
    config = AgentLoopConfig(max_new_tokens=64, max_total_tokens=prompt_length + 5)
    rollout = run_agent_loop(task, source.make_environment(task), chat, model, config)
    assert model.requests[0].max_new_tokens == 5
    assert rollout.status == "truncated" and "without a stop token" in rollout.error


def test_agent_loop_cut_generation_is_not_executed(bfcl, chat, tiny_tokenizer):
    source, tasks = bfcl
    task = tasks["bfcl_v3_multi_turn/multi_turn_base_0"]
    model = Scripted(tiny_tokenizer, [format_tool_call(ToolCall("mkdir", {"dir_name": "x"}))], stopped=False)
    rollout = run_agent_loop(task, source.make_environment(task), chat, model)
    assert rollout.status == "truncated" and rollout.n_tool_calls == 0
    assert rollout.sample.loss_mask[-1] == 1  # the cut output is still the policy's, and trained on


def test_agent_loop_instruction_mode_runs_tau_bench_from_its_instruction(chat, tiny_tokenizer):
    source = get_source("tau_bench_retail")
    task = next(t for t in source.load().tasks if t.metadata["outputs"])
    assert len(task.user_turns) == 1  # the simulator's instruction, sent as the first user message
    rollout = run_agent_loop(
        task, source.make_environment(task), chat, Scripted(tiny_tokenizer, gold_outputs(task))
    )
    assert rollout.messages[0] == {"role": "user", "content": task.user_turns[0]}
    assert rollout.status == "ok" and rollout.verdict.reward == 1.0, rollout.verdict.reason


def test_run_episodes_batches_one_generate_call_per_round(bfcl, chat, tiny_tokenizer):
    source, tasks = bfcl
    task = tasks["bfcl_v3_multi_turn/multi_turn_base_0"]
    calls = []

    def generate(requests):
        calls.append(len(requests))
        return Scripted(tiny_tokenizer, ["Done."] * len(requests))(requests)

    episodes = [Episode(task, source.make_environment(task), chat, rollout_idx=g) for g in range(3)]
    rollouts = run_episodes(episodes, generate)
    assert calls == [3, 3, 3, 3]  # four user turns, each answered at once by all three episodes
    assert [r.sample.rollout_idx for r in rollouts] == [0, 1, 2]
    assert all(r.status == "ok" and r.n_turns == 4 for r in rollouts)


def test_chat_format_rejects_a_stop_token_the_template_does_not_end_turns_with(tiny_tokenizer):
    with pytest.raises(ValueError, match="starts with none of the stop tokens"):
        ChatFormat(tiny_tokenizer, stop_token_ids=[tiny_tokenizer.pad_token_id])


def test_agent_loop_broken_task_ends_in_error_status_without_policy_tokens(bfcl, chat, tiny_tokenizer):
    source, tasks = bfcl
    task = tasks["bfcl_v3_multi_turn/multi_turn_base_0"]
    broken = dataclasses.replace(task, metadata={})  # the environment cannot reset without its classes
    rollout = run_agent_loop(broken, source.make_environment(broken), chat, Scripted(tiny_tokenizer, []))
    assert rollout.status == "error" and rollout.error.startswith("KeyError")
    assert rollout.sample.reward == 0.0 and rollout.verdict is None
    assert sum(rollout.sample.loss_mask) == 0


def test_agent_loop_timeout_stops_before_the_next_generation(bfcl, chat, tiny_tokenizer):
    source, tasks = bfcl
    task = tasks["bfcl_v3_multi_turn/multi_turn_base_0"]
    model = Scripted(tiny_tokenizer, [])
    rollout = run_agent_loop(
        task, source.make_environment(task), chat, model, AgentLoopConfig(timeout_s=1e-9)
    )
    assert rollout.status == "timeout" and model.requests == []
    assert rollout.verdict.reward == 0.0 and rollout.completion_tokens == 0


def test_agent_loop_runs_one_message_as_one_acebench_batch(chat, tiny_tokenizer):
    # ACEBench multi-turn (original semantics): the first exception of a message stops the rest of it,
    # and every call of that message is answered with the original's one error text.
    from environments.acebench.original.dispatch import MULTI_TURN_BATCH_ERROR

    source = get_source("acebench_agent")
    task = next(t for t in source.load().tasks if t.metadata["acebench_id"] == "agent_multi_turn_4")
    bad = ToolCall("send_message", {"sender_name": "Eve", "receiver": "Frank", "message": "Hi"})
    message = "\n".join(format_tool_call(c) for c in (bad, ToolCall("turn_on_wifi", {})))
    env = source.make_environment(task)
    rollout = run_agent_loop(task, env, chat, Scripted(tiny_tokenizer, [message]))
    assert [r.result.content for r in rollout.trajectory.turns[0].calls] == [MULTI_TURN_BATCH_ERROR] * 2
    assert env.end_state() == []  # no batch completed: the original reports no classes, the task fails
    assert rollout.verdict.reward == 0.0
