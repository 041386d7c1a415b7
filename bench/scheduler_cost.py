"""System cost of EnvSched: wall time and peak memory of graph build, predict and select.

    PYTHONPATH=. .venv/bin/python bench/scheduler_cost.py              # 10k, 100k, 1M tasks
    PYTHONPATH=. .venv/bin/python bench/scheduler_cost.py --skip-1m    # 10k, 100k

Catalogues come from the benchmark simulator (200 tasks per environment, synthetic 32-d embeddings).
Each size runs in a fresh subprocess so peak RSS (`resource.getrusage`) belongs to that size alone;
predict / select peaks are the Python-heap peaks seen by `tracemalloc` (numpy reports its buffers), from a
traced call at the step after the timed, untraced one (tracing slowed select 1.6x at 100k tasks).
`select` is timed after one observed step, so the predictor has evidence to propagate; its time
includes the prediction it needs; `observe` (one step of B groups, incl. the outcome model's global refit)
is timed too, at step 1 (the first re-rank with reward profiles re-ranks every task) and at step 2 (only
the changed rows), without tracemalloc (it made observe 10-20x slower), and at step 3 handed over one group
a call (`observe(group, more=True)`, the last without), as a trainer that streams its groups does. Targets:
select + predict for B = 256 over 1M tasks <= 0.6 s once the graph is built (issue 10); graph build for 100k
tasks < 2 min (issue 3).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc

import pandas as pd


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


def timed(fn):
    """(result, seconds) of fn(), untraced: tracemalloc makes allocation-heavy code several times slower."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def timed_peak(fn):
    """(result, seconds, peak MiB of traced allocations) of fn()."""
    tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, seconds, peak


def measure(n_tasks: int, batch_size: int) -> dict:
    from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
    from envsched_core.simulator import SimConfig, Simulator

    per_env = 200
    sim = Simulator(
        SimConfig(n_envs=max(1, n_tasks // per_env), tasks_per_env=per_env, heldout_per_env=1), seed=0
    )
    t0 = time.perf_counter()
    frame = sim.catalog_frame()
    t_frame = time.perf_counter() - t0
    t0 = time.perf_counter()
    catalog = TaskCatalog.from_frame(frame)
    t_catalog = time.perf_counter() - t0
    del frame
    rss0 = rss_mib()
    t0 = time.perf_counter()
    sched = EnvSched(catalog, SchedulerConfig(batch_size=batch_size), seed=0)
    t_graph = time.perf_counter() - t0
    rss_graph = rss_mib()
    batch = sched.select(1)
    _, t_observe = timed(lambda: sched.observe(sim.rollout(batch, 1)))  # incl. the global refit
    batch, t_select = timed(lambda: sched.select(2))
    _, t_predict = timed(lambda: sched.predict(2))
    rollouts = sim.rollout(batch, 2)
    # a later step: cross edges re-ranked where changed
    _, t_observe_2 = timed(lambda: sched.observe(rollouts))
    # peaks from traced calls at the next step (tracemalloc slowed select 1.6x at 100k, so times are untraced)
    batch, _, m_select = timed_peak(lambda: sched.select(3))
    _, _, m_predict = timed_peak(lambda: sched.predict(3))
    # a trainer handing over each group as it finishes: observe(more=True), the models refit at the last group
    groups = [part for _, part in sim.rollout(batch, 3).groupby("task_id", sort=False)]
    _, t_streamed = timed(
        lambda: [sched.observe(part, more=i < len(groups) - 1) for i, part in enumerate(groups)]
    )
    return {
        "tasks": len(catalog),
        "B": batch_size,
        "frame s": t_frame,
        "catalogue s": t_catalog,
        "graph build s": t_graph,
        "graph peak RSS MiB": rss_graph,
        "RSS before graph MiB": rss0,
        "select s": t_select,
        "select peak MiB": m_select,
        "predict s": t_predict,
        "predict peak MiB": m_predict,
        "select+predict s": t_select + t_predict,
        "observe s": t_observe,
        "observe step 2 s": t_observe_2,
        "observe step 3, B calls s": t_streamed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--skip-1m", action="store_true", help="only 10k and 100k tasks")
    parser.add_argument("--sizes", default=None, help="comma list of task counts (overrides the defaults)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # child process mode
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.one, args.batch_size)))
        return
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else [10_000, 100_000, 1_000_000]
    if args.skip_1m:
        sizes = [s for s in sizes if s < 1_000_000]
    rows = []
    for n in sizes:
        print(f"measuring {n:,} tasks ...", flush=True)
        done = subprocess.run(
            [sys.executable, __file__, "--one", str(n), "--batch-size", str(args.batch_size)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            print(done.stderr[-2000:])
            rows.append({"tasks": n, "error": f"exit {done.returncode}"})
            continue
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    table = pd.DataFrame(rows)
    print("\nEnvSched system cost (targets: select+predict at 1M <= 0.6 s; graph build at 100k < 120 s)")
    print(table.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
