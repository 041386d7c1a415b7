"""Parsing ACEBench milestone strings such as ``"[login_device(), send_message(sender_name='Eve', ...)]"``.

Milestones are written as Python call lists, but not always valid Python: some single-quoted strings
contain unescaped apostrophes (``merchant_name='Domino's'``, ``title='Today's spending'``). The
parser first tries the text as is; if that fails it re-reads it treating a quote as closing a string
only when the next non-space character could follow a string (``, ) ] } :`` or the end), and as an
apostrophe otherwise.
"""

from __future__ import annotations

import ast

from environments.base import ToolCall

_AFTER_STRING = ",)]}:"


def _escape_apostrophes(text: str) -> str:
    out: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(text):
        char = text[i]
        if quote is None:
            if char in "'\"":
                quote = char
            out.append(char)
        elif char == "\\":
            out.append(text[i : i + 2])
            i += 1
        elif char == quote:
            rest = text[i + 1 :].lstrip()
            if not rest or rest[0] in _AFTER_STRING:
                quote = None
                out.append(char)
            else:
                out.append("\\" + char)
        else:
            out.append(char)
        i += 1
    return "".join(out)


def _calls_from_tree(node: ast.expr) -> list[ToolCall]:
    items = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
    calls = []
    for item in items:
        if not (isinstance(item, ast.Call) and isinstance(item.func, ast.Name)):
            raise ValueError("expected a list of plain function calls")
        if item.args:
            raise ValueError(f"{item.func.id}: positional arguments are not supported")
        calls.append(ToolCall(item.func.id, {kw.arg: ast.literal_eval(kw.value) for kw in item.keywords}))
    return calls


def parse_step(text: str) -> list[ToolCall]:
    """One milestone step (a bracketed list of calls, or a single call) -> its calls, in order.

    Raises ValueError with the reason when the text is not a call list even after the repair.
    """
    source = text.strip()
    try:
        return _calls_from_tree(ast.parse(source, mode="eval").body)
    except (SyntaxError, ValueError):
        pass
    try:
        return _calls_from_tree(ast.parse(_escape_apostrophes(source), mode="eval").body)
    except SyntaxError as exc:
        raise ValueError(f"not a call list ({exc.msg})") from None
