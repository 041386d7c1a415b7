"""Calibration of EnvSched's variance predictions: predicted vs realised group variance of the tasks it picks.

    PYTHONPATH=. .venv/bin/python bench/scheduler_calibration.py                      # paper regime, 3 worlds
    PYTHONPATH=. .venv/bin/python bench/scheduler_calibration.py --regimes paper,default --plot calib.png

For every selected task the prediction made *before* its rollouts (the batch's `predicted_variance`) is
paired with the realised population variance of its G rewards and with the simulator's exact expected
variance. Pairs are binned by predicted variance (deciles); a calibrated predictor has mean realised ≈ mean
predicted in every bin. Also printed: Spearman correlation of predicted vs expected variance over the pairs,
for the outcome predictor and the paper's (predictor='variance'). `--plot` writes a reliability diagram.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from scipy.stats import spearmanr
from threadpoolctl import threadpool_limits

from bench.overrides import field_overrides
from bench.scheduler_suite import refuse_unknown_regimes
from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.worlds import regime_named


def pairs(regime_name: str, seeds: list[int], steps: int, predictor: str, overrides: dict) -> pd.DataFrame:
    regime, out = regime_named(regime_name), []
    for seed in seeds:
        sim = regime.world(seed, quick=True).reset(seed)
        catalog = TaskCatalog.from_frame(sim.catalog_frame())
        config = SchedulerConfig(
            batch_size=regime.batch_size, group_size=sim.config.group_size, predictor=predictor, **overrides
        )
        sched = EnvSched(catalog, config, seed=seed)
        index = pd.Index(sim.task_ids)
        for step in range(1, steps + 1):
            expected = sim.expected_variance()
            batch = sched.select(step)
            rollouts = sim.rollout(batch, step)
            sched.observe(rollouts)
            sim.train(rollouts, len(batch))
            sim.drift()
            realised = rollouts.groupby("task_id", sort=False)["reward"].var(ddof=0).reindex(batch["task_id"])
            out.append(
                pd.DataFrame(
                    {
                        "seed": seed,
                        "step": step,
                        "role": batch["role"].to_numpy(),
                        "predicted": batch["predicted_variance"].to_numpy(dtype=float),
                        "realised": realised.to_numpy(dtype=float),
                        "expected": expected[index.get_indexer(batch["task_id"])],
                    }
                )
            )
    frame = pd.concat(out, ignore_index=True)
    return frame[frame["step"] > 1]  # step 1 has no history: every prediction is the prior


def reliability(frame: pd.DataFrame, bins: int = 10) -> pd.DataFrame:
    cut = pd.qcut(frame["predicted"].rank(method="first"), bins, labels=False)
    table = frame.groupby(cut).agg(
        n=("predicted", "size"),
        predicted=("predicted", "mean"),
        realised=("realised", "mean"),
        expected=("expected", "mean"),
    )
    table.index.name = "decile"
    return table.reset_index()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--regimes", default="paper")
    parser.add_argument("--world-seeds", default="100,101,102")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--set", action="append", default=[], help="SchedulerConfig override KEY=VALUE")
    parser.add_argument("--plot", default=None, help="write a reliability diagram (PNG) to this path")
    args = parser.parse_args()
    refuse_unknown_regimes(parser, args.regimes.split(","))
    seeds = [int(s) for s in args.world_seeds.split(",")]
    reserved = {
        "batch_size": "the regime",
        "group_size": "the simulator",
        "predictor": "the script (it runs both)",
    }
    overrides = field_overrides(args.set, SchedulerConfig, reserved=reserved)
    panels = []
    with threadpool_limits(limits=1):
        for regime in args.regimes.split(","):
            for predictor in ("outcome", "variance"):
                frame = pairs(regime, seeds, args.steps, predictor, overrides)
                table = reliability(frame)
                rho = spearmanr(frame["predicted"], frame["expected"]).correlation
                gap = float(np.abs(table["predicted"] - table["realised"]).mean())
                print(
                    f"\n[{regime}] predictor={predictor}: {len(frame)} pairs, Spearman(predicted, expected) "
                    f"{rho:.3f}, mean |predicted - realised| over deciles {gap:.4f}"
                )
                print(table.round(4).to_string(index=False))
                panels.append((regime, predictor, table))
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 5))
        top = max(float(t[["predicted", "realised"]].max().max()) for _, _, t in panels)
        ax.plot([0, top], [0, top], color="grey", linestyle="--", label="calibrated")
        for regime, predictor, table in panels:
            ax.plot(table["predicted"], table["realised"], marker="o", label=f"{regime} / {predictor}")
        ax.set_xlabel("predicted group variance (decile mean)")
        ax.set_ylabel("realised group variance")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"\nwrote {args.plot}")


if __name__ == "__main__":
    main()
