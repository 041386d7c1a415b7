"""Agreement of the tau-bench environments with the recorded original, per domain and mode.

    .venv/bin/python bench/tau_bench_agreement.py [--show N]

Replays every recorded trajectory (``tests/environments/data/tau_bench_*_original.json.gz``: gold
actions of every task, hand-written cases, a seeded perturbation family) through the project's
environment in both modes and prints the counts, then the first N disagreements of each run.
"""

from __future__ import annotations

import argparse

from environments.tau_bench import TauBenchAirlineSource, TauBenchRetailSource
from environments.tau_bench.recorded import agreement_table, load_recording


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", type=int, default=0, help="disagreements to print per domain and mode")
    args = parser.parse_args()
    rows, notes = [], []
    for domain, cls in (("retail", TauBenchRetailSource), ("airline", TauBenchAirlineSource)):
        recording = load_recording(domain)
        for mode in ("policy", "original"):
            table = agreement_table(cls(semantics=mode), recording)
            rows.append((f"{domain} {mode}", table))
            notes += [(f"{domain} {mode}", *d) for d in table.disagreements[: args.show]]
    print(f"| {'':18} | gold calls equal as JSON | gold final DB identical | recorded, same reward |")
    print(f"|{'-' * 20}|{'-' * 26}|{'-' * 25}|{'-' * 23}|")
    for name, t in rows:
        cells = [t.gold_calls_equal, t.gold_final_db_identical, t.perturbed_same_reward]
        print(f"| {name:18} | " + " | ".join(f"{a:>10} / {b:<10}" for a, b in cells) + " |")
    for name, task_id, kind, what in notes:
        print(f"{name}: {task_id} [{kind}] {what}")


if __name__ == "__main__":
    main()
