"""Scheduler quality on the benchmark simulator, in the form of the EnvSched paper's tables.

    PYTHONPATH=. .venv/bin/python bench/scheduler_quality.py            # full (tens of minutes)
    PYTHONPATH=. .venv/bin/python bench/scheduler_quality.py --quick    # fewer seeds / steps
    ... --settings small --tables 1,2                                     # a subset

Tables, per simulator setting (small: 50 envs x 40 tasks, B = 64; large: 500 envs x 200 tasks,
B = 256; G = 8):
 (1) 200-step runs, EnvSched vs random: selected-task variance (mean over steps of the batch mean and
     of the batch median), median reward, environments and tools per batch.
 (2) initialisation sensitivity, S seeds x 7 steps: batch mean variance and exploitation hit rate at
     steps 1, 2 and 7 with 95% CIs (step 1 is all coverage, so it has no exploitation picks).
 (3) ablations: within-env edges only, cross-env edges only, coverage only (rho = 1), k = 2..32.
 (4) steps and rollouts until the held-out score reaches what random reaches at step 120.
EnvSched's graph is built once per (setting, config) with seed 0 and copied for every run seed (the
graph depends on the catalogue, not on the run); each run reseeds the scheduler RNG and the
simulator's rollout noise and drift. The world (tasks, latent skills) is seed 0 throughout.
Targets (issue 3): variance >= 1.34x random; hit rate at step 7 >= 92%; <= 40 steps to random's
step-120 score; fewer rollouts to that target than every baseline.
Baselines as in their reference code (issue 15): DPS / MoPPS on binary accuracy, GRESO's adaptive
refill and per-type streaks, DAPO as the recipe (3x, cap 10) and as `dapo-1x` (1x, cap 4, the DS
baseline of the MoPPS / DPS papers). Batch statistics describe the groups trained on
(`envsched_core.batch_metrics`), so DAPO / GRESO show their post-filter batches.
"""

from __future__ import annotations

import argparse
import copy
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.schedulers import SCHEDULERS
from envsched_core.simulator import LARGE, SMALL, SimConfig, Simulator, run_campaign, steps_to_target

BASELINES = {name: (spec.cls, spec.config_cls) for name, spec in SCHEDULERS.items() if name != "envsched"}
ABLATIONS = {
    "full": {},
    "within only": {"use_cross_edges": False},
    "cross only": {"use_within_edges": False},
    "rho = 1": {"rho": 1.0},
    **{f"k = {k}": {"k_within": k, "k_cross": k} for k in (2, 4, 8, 16, 32)},
}


@dataclass
class Setting:
    name: str
    sim: Simulator
    catalog: TaskCatalog
    batch_size: int


def make_setting(name: str, config: SimConfig, batch_size: int) -> Setting:
    t0 = time.perf_counter()
    sim = Simulator(config, seed=0)
    catalog = TaskCatalog.from_frame(sim.catalog_frame())
    print(
        f"[{name}] {config.n_envs} envs x {config.tasks_per_env} tasks, B={batch_size}, "
        f"G={config.group_size}: catalogue built in {time.perf_counter() - t0:.1f}s",
        flush=True,
    )
    return Setting(name, sim, catalog, batch_size)


class Runner:
    """Runs (and caches) campaigns: one per (setting, scheduler, overrides, seed, steps)."""

    def __init__(self) -> None:
        self.cache: dict[tuple, pd.DataFrame] = {}
        self.templates: dict[tuple, EnvSched] = {}

    def envsched(self, s: Setting, seed: int, overrides: dict | None = None) -> EnvSched:
        """A fresh EnvSched; the graph is built once per (setting, config) and copied, then reseeded."""
        key = (s.name, tuple(sorted((overrides or {}).items())))
        if key not in self.templates:
            t0 = time.perf_counter()
            config = SchedulerConfig(batch_size=s.batch_size, **(overrides or {}))
            self.templates[key] = EnvSched(s.catalog, config, seed=0)
            print(
                f"  built EnvSched graph {dict(overrides or {})} in {time.perf_counter() - t0:.1f}s",
                flush=True,
            )
        sched = copy.deepcopy(self.templates[key])
        state = sched.state_dict()
        state["rng"] = np.random.default_rng(seed).bit_generator.state
        sched.load_state_dict(state)
        return sched

    def scheduler(self, s: Setting, name: str, seed: int, overrides: dict | None = None):
        if name == "envsched":
            return self.envsched(s, seed, overrides)
        cls, config_cls = BASELINES[name]
        return cls(s.catalog, config_cls(batch_size=s.batch_size), seed=seed)

    def run(
        self, s: Setting, name: str, seed: int, steps: int, overrides: dict | None = None
    ) -> pd.DataFrame:
        key = (s.name, name, tuple(sorted((overrides or {}).items())), seed, steps)
        if key not in self.cache:
            t0 = time.perf_counter()
            sched = self.scheduler(s, name, seed, overrides)
            self.cache[key] = run_campaign(sched, s.sim.reset(seed), steps)
            print(
                f"  ran {s.name}/{name} {dict(overrides or {})} seed={seed} x {steps} steps "
                f"in {time.perf_counter() - t0:.1f}s",
                flush=True,
            )
        return self.cache[key]


def ci95(values: np.ndarray) -> str:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return "n/a"
    half = 1.96 * values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{values.mean():.4f} +- {half:.4f}"


def print_table(title: str, frame: pd.DataFrame) -> None:
    print(f"\n{title}\n" + "-" * len(title))
    print(frame.to_string(index=False))


def table_long_runs(r: Runner, s: Setting, seeds: list[int], steps: int) -> None:
    rows = []
    for name in ("random", "envsched"):
        runs = [r.run(s, name, seed, steps) for seed in seeds]
        rows.append(
            {
                "scheduler": name,
                "mean var": np.mean([m["mean_var"].mean() for m in runs]),
                "median var": np.mean([m["median_var"].mean() for m in runs]),
                "median reward": np.mean([m["median_reward"].mean() for m in runs]),
                "envs/batch": np.mean([m["envs"].mean() for m in runs]),
                "tools/batch": np.mean([m["tools"].mean() for m in runs]),
                "hit rate": np.mean([m["hit_rate"].mean() for m in runs]),
            }
        )
    out = pd.DataFrame(rows)
    ratio = out.iloc[1, 1:] / out.iloc[0, 1:]
    out.loc[len(out)] = ["envsched / random", *ratio.to_numpy()]
    print_table(
        f"(1) [{s.name}] {steps}-step runs, {len(seeds)} seed(s): EnvSched vs random "
        f"(paper: var +34%, envs 36.5 -> 46.0, tools +16%; target var >= 1.34x)",
        out.round(4),
    )


def table_init_sensitivity(r: Runner, s: Setting, n_seeds: int) -> None:
    rows = []
    for name in ("random", "envsched"):
        runs = [r.run(s, name, 1000 + seed, 7) for seed in range(n_seeds)]
        for step in (1, 2, 7):
            rows.append(
                {
                    "scheduler": name,
                    "step": step,
                    "batch mean var (95% CI)": ci95([m["mean_var"].iloc[step - 1] for m in runs]),
                    "hit rate (95% CI)": ci95([m["hit_rate"].iloc[step - 1] for m in runs]),
                }
            )
    print_table(
        f"(2) [{s.name}] initialisation sensitivity, {n_seeds} seeds x 7 steps "
        "(paper: var 0.0596 -> 0.0813, hit 57.2% -> 92.1%; target hit@7 >= 92%)",
        pd.DataFrame(rows),
    )


def random_target(r: Runner, s: Setting, seeds: list[int], steps: int, at: int = 120) -> float:
    return float(np.mean([r.run(s, "random", seed, steps)["heldout"].iloc[at - 1] for seed in seeds]))


def summarise(runs: list[pd.DataFrame], target: float) -> dict:
    reached = [steps_to_target(m, target) for m in runs]
    steps = np.array([x[0] for x in reached])
    rollouts = np.array([x[1] for x in reached])
    n_hit = int((~np.isnan(steps)).sum())
    return {
        "steps to target": f"{np.nanmean(steps):.1f}" if n_hit else "never",
        "rollouts to target": f"{np.nanmean(rollouts):,.0f}" if n_hit else "never",
        "reached": f"{n_hit}/{len(runs)}",
        "heldout@end": np.mean([m["heldout"].iloc[-1] for m in runs]),
        "mean var": np.mean([m["mean_var"].mean() for m in runs]),
    }


def table_ablations(r: Runner, s: Setting, seeds: list[int], steps: int) -> None:
    target = random_target(r, s, seeds, steps)
    rows = []
    for label, overrides in ABLATIONS.items():
        runs = [r.run(s, "envsched", seed, steps, overrides) for seed in seeds]
        rows.append(
            {
                "variant": label,
                **summarise(runs, target),
                "hit@7": np.mean([m["hit_rate"].iloc[6] for m in runs]),
                "envs/batch": np.mean([m["envs"].mean() for m in runs]),
            }
        )
    print_table(
        f"(3) [{s.name}] ablations, {steps} steps, {len(seeds)} seed(s); target = random's "
        f"step-120 held-out score {target:.4f}",
        pd.DataFrame(rows).round(4),
    )


def table_steps_to_target(
    r: Runner, s: Setting, seeds: list[int], steps: int, names: list[str] | None = None
) -> None:
    target = random_target(r, s, seeds, steps)
    rows = []
    for name in names or ("envsched", *BASELINES):
        runs = [r.run(s, name, seed, steps) for seed in seeds]
        rows.append(
            {
                "scheduler": name,
                **summarise(runs, target),
                "rollouts/step": np.mean([m["rollouts"].mean() for m in runs]),
                "zero-var/batch": np.mean([m["zero_var_groups"].mean() for m in runs]),
            }
        )
    print_table(
        f"(4) [{s.name}] steps and rollouts to random's step-120 held-out score {target:.4f} "
        f"(start {s.sim.reset(0).heldout_score():.4f}; paper: EnvSched 40 steps; target <= 40 "
        "and fewest rollouts)",
        pd.DataFrame(rows).round(4),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1 seed for long runs, 20 init seeds, 150 steps")
    parser.add_argument("--settings", default="small,large", help="comma list of small, large")
    parser.add_argument("--tables", default="1,2,3,4", help="comma list of 1, 2, 3, 4")
    parser.add_argument("--steps", type=int, default=None, help="steps of long runs (default 200; >= 120)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds of long runs (default 3)")
    parser.add_argument("--init-seeds", type=int, default=None, help="seeds of table 2 (default 100)")
    parser.add_argument("--large-batch", type=int, default=256, help="B in the large setting (64..256)")
    parser.add_argument(
        "--schedulers",
        default=None,
        help=f"comma list for table 4 (default: envsched and every baseline: {', '.join(BASELINES)})",
    )
    args = parser.parse_args()
    names = args.schedulers.split(",") if args.schedulers else None
    unknown = sorted(set(names or ()) - {"envsched", *BASELINES})
    if unknown:
        parser.error(f"--schedulers: unknown {unknown}; choose from envsched, {', '.join(BASELINES)}")
    steps = args.steps or (150 if args.quick else 200)
    seeds = list(range(args.seeds or (1 if args.quick else 3)))
    init_seeds = args.init_seeds or (20 if args.quick else 100)
    tables = {int(t) for t in args.tables.split(",")}
    specs = {"small": (SMALL, 64), "large": (LARGE, args.large_batch)}
    runner = Runner()
    t0 = time.perf_counter()
    for name in args.settings.split(","):
        setting = make_setting(name, *specs[name])
        if 1 in tables:
            table_long_runs(runner, setting, seeds, steps)
        if 2 in tables:
            table_init_sensitivity(runner, setting, init_seeds)
        if 4 in tables:
            table_steps_to_target(runner, setting, seeds, steps, names)
        if 3 in tables:
            table_ablations(runner, setting, seeds, steps)
        print(flush=True)
    print(f"total {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
