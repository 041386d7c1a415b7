"""Continuing campaigns (`continue_from: latest`): what a scheduler gains from the rollouts of the campaigns
before it.

On each simulator world a first campaign of H steps (``--history-by``, EnvSched by default) trains the
policy; a second campaign then continues from that policy for 2 T steps, under each scheduler cold (a
fresh one) and warm (given the first campaign's rollouts the way the pipeline gives a template's history:
`EnvSched.warm_start`, baselines `campaign.warm_start.replay`). Every second campaign starts from the
same policy and the same history, so the rows differ only in the scheduler and what it was given.
Reported: steps and rollouts to the held-out score random reaches at step T of the second campaign
(95% t-interval over worlds), the mean selected variance of its first 5 steps, and the final score.

    PYTHONPATH=. .venv/bin/python bench/continuing_campaigns.py --quick
    PYTHONPATH=. .venv/bin/python bench/continuing_campaigns.py --quick --regimes paper --history-by random
"""

from __future__ import annotations

import argparse
import copy
import os
from multiprocessing import Pool

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from bench.scheduler_suite import fmt, make_world, scheduler_for, t_interval
from campaign.warm_start import replay
from envsched_core.simulator import run_campaign, steps_to_target
from envsched_core.worlds import REGIMES

ARMS = ("random", "dps", "dps+history", "envsched", "envsched+history")


def recorded(sched, history: list[pd.DataFrame]):
    """``sched`` with every observed rollout frame also appended to ``history``."""
    observe = sched.observe

    def observe_and_keep(rollouts: pd.DataFrame) -> None:
        history.append(rollouts[["task_id", "step", "reward"]])
        observe(rollouts)

    sched.observe = observe_and_keep
    return sched


def continued(world, arm: str, history: pd.DataFrame):
    """The second campaign's scheduler for ``arm``: cold, or warm from ``history`` (the first campaign's)."""
    name, _, warm = arm.partition("+")
    sched = scheduler_for(world, name, world.seed + 1)
    if warm and name == "envsched":
        sched.warm_start(history)
    elif warm:
        replay(sched, history)
    return sched


def world_job(job: tuple[str, int, bool, str, int, int]) -> dict[str, dict]:
    """One world: the first campaign, then every arm's second campaign from the same policy."""
    regime, seed, quick, history_by, history_steps, target_step = job
    with threadpool_limits(limits=1):
        world = make_world(REGIMES[regime], seed, quick)
        kept: list[pd.DataFrame] = []
        run_campaign(
            recorded(scheduler_for(world, history_by, seed), kept), world.sim.reset(seed), history_steps
        )
        history, policy = pd.concat(kept, ignore_index=True), copy.deepcopy(world.sim.state_dict())
        runs = {}
        for arm in ARMS:
            world.sim.load_state_dict(copy.deepcopy(policy))
            runs[arm] = run_campaign(continued(world, arm, history), world.sim, 2 * target_step)
    target = float(runs["random"]["heldout"].iloc[target_step - 1])
    out = {}
    for arm, m in runs.items():
        steps, rollouts = steps_to_target(m, target)
        out[arm] = {
            "steps": 2 * target_step + 1 if np.isnan(steps) else steps,
            "rollouts": float(m["cum_rollouts"].iloc[-1]) if np.isnan(rollouts) else rollouts,
            "early_var": float(m["mean_var"].iloc[:5].mean()),
            "final": float(m["heldout"].iloc[-1]),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="the suite's small worlds")
    parser.add_argument("--regimes", default="default,paper,private,drift,shift", help="comma list")
    parser.add_argument("--world-seeds", default="100,101,102,103,104", help="comma list")
    parser.add_argument("--history-by", default="envsched", help="the first campaign's scheduler")
    parser.add_argument("--history-steps", type=int, default=30, help="H: steps of the first campaign")
    parser.add_argument("--target-step", type=int, default=30, help="T: random's step-T score is the target")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    regimes = args.regimes.split(",")
    unknown = [r for r in regimes if r not in REGIMES]
    if unknown:
        parser.error(f"unknown regime(s) {unknown}; known: {list(REGIMES)}")
    seeds = [int(s) for s in args.world_seeds.split(",")]
    jobs = [
        (r, s, args.quick, args.history_by, args.history_steps, args.target_step)
        for r in regimes
        for s in seeds
    ]
    with Pool(args.workers) as pool:
        results = pool.map(world_job, jobs)
    print(
        f"first campaign: {args.history_steps} steps of {args.history_by}; second: {2 * args.target_step} "
        f"steps, target = random's step-{args.target_step} score; worlds {seeds}"
    )
    wins = 0
    for i, regime in enumerate(regimes):
        per_world = results[i * len(seeds) : (i + 1) * len(seeds)]
        table = pd.DataFrame(
            {
                arm: {
                    "steps to target": fmt([w[arm]["steps"] for w in per_world]),
                    "rollouts": fmt([w[arm]["rollouts"] for w in per_world], 0),
                    "variance, steps 1-5": f"{np.mean([w[arm]['early_var'] for w in per_world]):.4f}",
                    "final score": f"{np.mean([w[arm]['final'] for w in per_world]):.4f}",
                }
                for arm in ARMS
            }
        ).T
        print(f"\n## {regime}\n{table.to_string()}")
        means = {arm: t_interval([w[arm]["steps"] for w in per_world])[0] for arm in ARMS}
        wins += means["envsched+history"] <= min(means.values())
    print(f"\nsummary: envsched+history fewest steps in {wins}/{len(regimes)} regimes")


if __name__ == "__main__":
    main()
