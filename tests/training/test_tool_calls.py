"""The Hermes / Qwen3 tool-call parser: well-formed calls, malformed output, never an exception."""

import pytest

from environments.base import ToolCall
from training.tool_calls import format_tool_call, parse_tool_calls

CD = ToolCall("cd", {"folder": "docs"})
LS = ToolCall("ls", {})

CASES = [
    # plain answer, no call
    ("All done.", [], "All done.", []),
    # one call, the template's own layout
    ('<tool_call>\n{"name": "cd", "arguments": {"folder": "docs"}}\n</tool_call>', [CD], "", []),
    # text before and after two calls; calls keep their order
    (
        'Let me look.<tool_call>{"name": "cd", "arguments": {"folder": "docs"}}</tool_call> and '
        '<tool_call>{"name": "ls", "arguments": {}}</tool_call>ok',
        [CD, LS],
        "Let me look. and ok",
        [],
    ),
    # missing arguments means no arguments
    ('<tool_call>{"name": "ls"}</tool_call>', [LS], "", []),
    # OpenAI-style arguments: a string holding a JSON object
    ('<tool_call>{"name": "cd", "arguments": "{\\"folder\\": \\"docs\\"}"}</tool_call>', [CD], "", []),
    # reasoning before </think> is neither parsed nor kept
    (
        '<think>maybe <tool_call>{"name": "rm"}</tool_call></think>\n<tool_call>{"name": "ls"}</tool_call>',
        [LS],
        "",
        [],
    ),
    # bad JSON: the call is dropped, the error names the block
    (
        '<tool_call>{"name": "cd", "arguments": {"folder": }}</tool_call>',
        [],
        "",
        ["tool call 1: invalid JSON (Expecting value at character 39)"],
    ),
    # two JSON objects in one block is not one call
    (
        '<tool_call>{"name": "ls"} {"name": "ls"}</tool_call>',
        [],
        "",
        ["tool call 1: invalid JSON (Extra data at character 15)"],
    ),
    # a JSON list, not an object
    ('<tool_call>["ls"]</tool_call>', [], "", ["tool call 1: expected a JSON object, got list"]),
    # missing name
    ('<tool_call>{"arguments": {}}</tool_call>', [], "", ["tool call 1: missing or empty 'name'"]),
    # name that is not a string
    ('<tool_call>{"name": 3}</tool_call>', [], "", ["tool call 1: missing or empty 'name'"]),
    # arguments not an object
    (
        '<tool_call>{"name": "cd", "arguments": ["docs"]}</tool_call>',
        [],
        "",
        ["tool call 1: 'arguments' of 'cd' must be an object, got list"],
    ),
    # arguments a string that is not JSON
    (
        '<tool_call>{"name": "cd", "arguments": "docs"}</tool_call>',
        [],
        "",
        ["tool call 1: 'arguments' of 'cd' is a string that is not JSON"],
    ),
    # a good call, then an unclosed one (cut by the token limit): only the first runs
    (
        '<tool_call>{"name": "ls"}</tool_call>\n<tool_call>{"name": "cd", "arguments": {"folder": "docs"}}',
        [LS],
        "",
        ["tool call 2: '<tool_call>' is never closed"],
    ),
    # a call opened inside another: the outer is an error, the inner still parses
    (
        '<tool_call>{"name": <tool_call>{"name": "ls"}</tool_call>',
        [LS],
        "",
        ["tool call 1: '<tool_call>' opened inside another tool call"],
    ),
    # a closing tag with no opening is reported and dropped from the text
    ("done</tool_call>", [], "done", ["'</tool_call>' without an opening '<tool_call>'"]),
    # random garbage between tags, an empty block
    (
        "ĠĊ{{<tool_call></tool_call>",
        [],
        "ĠĊ{{",
        ["tool call 1: invalid JSON (Expecting value at character 0)"],
    ),
]


@pytest.mark.parametrize(("output", "calls", "text", "errors"), CASES)
def test_parse_tool_calls_table(output, calls, text, errors):
    parsed = parse_tool_calls(output)
    assert parsed.calls == calls
    assert parsed.text == text
    assert parsed.errors == errors


def test_parse_tool_calls_reads_what_format_tool_call_writes():
    call = ToolCall("mv", {"source": "a b.txt", "destination": "ü/", "n": [1, {"x": None}]})
    assert parse_tool_calls(format_tool_call(call) + format_tool_call(LS)).calls == [call, LS]


def test_parse_tool_calls_never_raises_on_random_text():
    import random

    rng = random.Random(0)
    pieces = [
        "<tool_call>",
        "</tool_call>",
        "{",
        "}",
        '"name"',
        ":",
        '"ls"',
        '"arguments"',
        "[",
        "x",
        "</think>",
    ]
    for _ in range(2000):
        output = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        parsed = parse_tool_calls(output)
        assert all(isinstance(c, ToolCall) and isinstance(c.arguments, dict) for c in parsed.calls)
