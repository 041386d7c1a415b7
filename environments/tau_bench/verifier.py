"""tau-bench's reward: 1 when the database after the episode equals the database after replaying the
gold actions on a fresh copy, and every required output was said to the user; else 0.

Output matching follows tau-bench: an output counts as said when it appears, lower-cased, inside
some reply to the user that is lower-cased with its commas removed (``original``: the output keeps
its commas, as in tau-bench; ``policy`` removes them from the output too). The reason names what
differed: the first differing records (``table/key: field=value (gold value)``) or the outputs that
were never said.
"""

from __future__ import annotations

from collections.abc import Iterable

from environments.base import ToolCall, Verdict
from environments.tau_bench.db import Database


def normalise(text: str) -> str:
    return text.lower().replace(",", "")


def missing_outputs(
    outputs: Iterable[str], replies: list[str], strip_output_commas: bool = True
) -> list[str]:
    said = [normalise(r) for r in replies]
    wanted = normalise if strip_output_commas else str.lower
    return [o for o in outputs if not any(wanted(o) in r for r in said)]


def verdict(
    final: Database, gold: Database, outputs: list[str], replies: list[str], strip_output_commas: bool = True
) -> Verdict:
    """Compare the rollout's final database with the gold one and check the outputs."""
    final_digest, gold_digest = final.digest(), gold.digest()
    if final_digest != gold_digest:
        where = "; ".join(final.diff(gold))
        return Verdict(0.0, f"database differs from gold (digest {final_digest} != {gold_digest}): {where}")
    missing = missing_outputs(outputs, replies, strip_output_commas)
    if missing:
        return Verdict(0.0, f"database matches gold, but output(s) never said to the user: {missing}")
    said = f"; all {len(outputs)} output(s) said" if outputs else ""
    return Verdict(1.0, f"database matches gold (digest {final_digest}){said}")


def replay(db: Database, calls: Iterable[ToolCall], run) -> list[tuple[int, ToolCall, str]]:
    """Apply ``calls`` with ``run(db, call)``; returns (position, call, message) of those rejected."""
    errors = []
    for index, call in enumerate(calls):
        result = run(db, call)
        if result.is_error:
            errors.append((index, call, result.content))
    return errors
