"""The BFCL-v3 multi-turn verdict, computed the way bfcl-eval's ``multi_turn_checker`` computes it.

Rules (bfcl-eval ``eval_checker/multi_turn_eval/multi_turn_checker.py``, read, not copied):
1. The trajectory has exactly as many turns as the ground truth (else "force-terminated").
2. Model calls and gold calls are each replayed on fresh instances, turn by turn.
3. For a turn whose gold list is non-empty: the model made at least one call in that turn; after the
   turn every involved class's public attributes equal the gold instances' (state check); and the
   gold turn's results are contained, as a multiset, in all model results so far (response check).
4. Turns with an empty gold list are executed (so later state checks are exact) but not checked.
The first failing turn decides the reason. Reward is 1 for a pass, 0 otherwise.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from environments.base import Task, ToolCall, Verdict
from environments.bfcl.backend import execute, method_table, new_instances, public_state


def _replay(task: Task):
    """Fresh instances for one side (model or gold) of the comparison and their method table."""
    meta = task.metadata
    instances = new_instances(meta["involved_classes"], meta["initial_config"], meta["long_context"])
    return instances, method_table(instances)


def check(task: Task, model_turns: Sequence[Sequence[ToolCall]]) -> Verdict:
    if len(model_turns) != len(task.gold):
        return Verdict(0.0, f"force-terminated: {len(model_turns)} turns, ground truth has {len(task.gold)}")
    model_instances, model_methods = _replay(task)
    gold_instances, gold_methods = _replay(task)
    model_results_so_far: list[str] = []
    for turn, (model_calls, gold_calls) in enumerate(zip(model_turns, task.gold, strict=True)):
        model_results_so_far += [execute(model_methods, c.name, c.arguments).content for c in model_calls]
        gold_results = [execute(gold_methods, c.name, c.arguments).content for c in gold_calls]
        if not gold_calls:
            continue
        if not model_calls:
            return Verdict(0.0, f"turn {turn}: no tool call, but the ground truth makes {len(gold_calls)}")
        for class_name, gold_instance in gold_instances.items():
            gold_state = public_state(gold_instance)
            model_state = public_state(model_instances[class_name])
            differing = sorted(k for k, v in gold_state.items() if model_state.get(k, _MISSING) != v)
            if differing:
                return Verdict(
                    0.0, f"turn {turn}: {class_name} state differs from ground truth in {differing}"
                )
        missing = Counter(gold_results) - Counter(model_results_so_far)
        if missing:
            shown = "; ".join(r[:80] for r in missing.elements())
            return Verdict(0.0, f"turn {turn}: ground-truth results missing from the model's: {shown}")
    return Verdict(1.0, "all turns match the ground truth state and responses")


class _Missing:
    def __ne__(self, other: object) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return False


_MISSING = _Missing()
