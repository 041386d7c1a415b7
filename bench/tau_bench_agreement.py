"""Agreement of the tau-bench environments with the recorded original, per domain and mode.

    .venv/bin/python bench/tau_bench_agreement.py [--show N]

Replays every recorded trajectory (``tests/environments/data/tau_bench_*_original.json.gz``: gold
actions of every task, hand-written cases, a seeded perturbation family; ``*_fuzz.json.gz``: 1000
random call sequences per domain) through the project's environment in both modes and prints the
counts, then the first N disagreements of each run.
"""

from __future__ import annotations

import argparse

from environments.tau_bench import TauBenchAirlineSource, TauBenchRetailSource
from environments.tau_bench.recorded import agreement_table, fuzz_agreement, load_recording


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", type=int, default=0, help="disagreements to print per domain and mode")
    args = parser.parse_args()
    rows, notes = [], []
    for domain, cls in (("retail", TauBenchRetailSource), ("airline", TauBenchAirlineSource)):
        recording, fuzz = load_recording(domain), load_recording(domain, "fuzz")
        for mode in ("policy", "original"):
            source = cls(semantics=mode)
            table, counts = agreement_table(source, recording), fuzz_agreement(source, fuzz)
            cells = [table.gold_calls_equal, table.gold_final_db_identical, table.perturbed_same_reward]
            cells += [table.cases_same_reward]
            cells += [counts["results"], counts["final_db"], counts["reward"]]
            rows.append((f"{domain} {mode}", cells))
            notes += [(f"{domain} {mode}", *d) for d in table.disagreements[: args.show]]
            notes += [(f"{domain} {mode}", t, "fuzz", w) for t, w in counts["disagreements"][: args.show]]
    heads = [
        "gold calls equal as JSON",
        "gold final DB identical",
        "perturbed, same reward",
        "cases, same reward",
    ]
    heads += ["fuzz results equal", "fuzz final DB identical", "fuzz same reward"]
    print("| |" + " | ".join(heads) + " |")
    print("|---|" + "---|" * len(heads))
    for name, cells in rows:
        print(f"| {name} | " + " | ".join(f"{a} / {b}" for a, b in cells) + " |")
    for name, task_id, kind, what in notes:
        print(f"{name}: {task_id} [{kind}] {what}")


if __name__ == "__main__":
    main()
