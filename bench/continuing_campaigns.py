"""Continuing campaigns (`continue_from: latest`): what a scheduler gains from the rollouts of the campaigns
before it.

On each world a first campaign of H steps (``--history-by``, EnvSched by default) trains the policy; a
second campaign then continues from that policy for 2 T steps, under each scheduler cold (a fresh one) and
warm (given the first campaign's rollouts the way the pipeline gives a template's history:
`envsched_core.schedulers.fold_history`). Every second campaign starts from the same
policy and the same history, so the rows differ only in the scheduler and what it was given. Reported:
steps and rollouts to random's held-out score at step T of the second campaign (95% t-interval over
worlds), the mean selected variance of its first 5 steps, and the final score. ``--new-envs F``: a share F of
the environments joins the pool only for the second campaign (the template's catalogue grew), so the
history says nothing about them; the share of each arm's picks there in steps 1-10 is reported.

    PYTHONPATH=. .venv/bin/python bench/continuing_campaigns.py --quick
    PYTHONPATH=. .venv/bin/python bench/continuing_campaigns.py --quick --regimes paper --history-by random
    PYTHONPATH=. .venv/bin/python bench/continuing_campaigns.py --quick --new-envs 0.3   # the pool grew in between
    PYTHONPATH=. .venv/bin/python bench/continuing_campaigns.py --real acebench --world-seeds 0,1,2,3,4,5,6,7,8,9

``--real CATALOGUE`` runs the skill policy on a real catalogue (bench/campaign_real.py's paper regime,
B = 64 capped at a quarter of the pool, G = 8, held-out evaluation every 5 steps); a world is then a seed,
and the target is the best held-out score random reaches by step T.
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from bench.scheduler_suite import fmt, make_world, t_interval, watch_picks
from envsched_core import TaskCatalog
from envsched_core.schedulers import fold_history, scheduler_config, scheduler_spec
from envsched_core.simulator import run_campaign
from envsched_core.worlds import REGIMES

ARMS = ("random", "dps", "dps+history", "envsched", "envsched+history")
EVAL_EVERY = 5  # real catalogues: held-out evaluation every 5 steps, as bench/campaign_real.py


def recorded(sched, history: list[pd.DataFrame]):
    """``sched`` with every observed rollout frame also appended to ``history``."""
    observe = sched.observe

    def observe_and_keep(rollouts: pd.DataFrame) -> None:
        history.append(rollouts[["task_id", "step", "reward"]])
        observe(rollouts)

    sched.observe = observe_and_keep
    return sched


def scheduler(arm: str, catalog: TaskCatalog, b: int, g: int, seed: int, history: pd.DataFrame | None = None):
    """The registry's scheduler for ``arm`` (as a campaign builds it); '+history': warm from ``history``."""
    name, _, warm = arm.partition("+")
    sched = scheduler_spec(name).cls(catalog, scheduler_config(name, b, g, {}), seed=seed)
    if warm:
        fold_history(sched, history)
    return sched


def new_environments(catalog: TaskCatalog, share: float, seed: int) -> set[str]:
    """A share of the environments (at least one when share > 0), drawn per world, added after the first campaign."""
    if share <= 0:
        return set()
    rng = np.random.default_rng([seed, 7])
    return set(rng.choice(catalog.env_ids, size=max(1, round(share * catalog.n_envs)), replace=False))


def sim_job(job: tuple[str, int, bool, str, int, int, float]) -> dict[str, pd.DataFrame]:
    """One simulator world: the first campaign (without the environments added later), then every arm's
    second campaign on the whole catalogue from the same policy."""
    regime, seed, quick, history_by, history_steps, target_step, new_share = job
    with threadpool_limits(limits=1):
        world = make_world(REGIMES[regime], seed, quick)
        b, g = world.regime.batch_size, world.sim.config.group_size
        added = new_environments(world.catalog, new_share, seed)
        frame = world.sim.catalog_frame()
        pool = TaskCatalog.from_frame(frame[~frame["env_id"].isin(added)].reset_index(drop=True))
        kept: list[pd.DataFrame] = []
        first = recorded(scheduler(history_by, pool, b, g, seed), kept)
        run_campaign(first, world.sim.reset(seed), history_steps)
        history, policy = pd.concat(kept, ignore_index=True), copy.deepcopy(world.sim.state_dict())
        added_ids = set(frame.loc[frame["env_id"].isin(added), "task_id"])
        runs = {}
        for arm in ARMS:
            world.sim.load_state_dict(copy.deepcopy(policy))
            sched = scheduler(arm, world.catalog, b, g, seed + 1, history)
            shares: list[float] = []  # stays empty when no environment was added
            runs[arm] = run_campaign(watch_picks(sched, added_ids, shares), world.sim, 2 * target_step)
            if added_ids:
                runs[arm]["new_env_share"] = shares
    return runs


def real_job(job: tuple[str, int, str, int, int]) -> dict[str, pd.DataFrame]:
    """One seed of a real catalogue: as ``sim_job``, with the skill policy checkpointed between campaigns."""
    from bench import campaign_real as real  # the environments load only when asked for
    from training.engines.skill import SkillEngine

    name, seed, history_by, history_steps, target_step = job
    train, heldout = real.load_catalogue(name, 0.2, real.OUT / "cache")
    catalog, g = TaskCatalog.from_frame(train), 8
    b = max(1, min(64, len(train) // real.MIN_POOL_PER_SLOT))

    def engine() -> SkillEngine:
        return SkillEngine(
            train, g, seed, heldout=heldout, eval_every=EVAL_EVERY, eval_samples=4, **real.REGIMES["paper"]
        )

    kept: list[pd.DataFrame] = []
    first, runs = engine(), {}
    with tempfile.TemporaryDirectory(prefix="continuing-") as checkpoint:
        try:
            first_sched = recorded(scheduler(history_by, catalog, b, g, seed), kept)
            real.run_one(first_sched, first, catalog, history_steps, EVAL_EVERY)
            first.save(Path(checkpoint))
        finally:
            first.close()
        history = pd.concat(kept, ignore_index=True)
        for arm in ARMS:
            second = engine()
            try:
                second.load(Path(checkpoint))
                sched = scheduler(arm, catalog, b, g, seed + 1, history)
                runs[arm] = real.run_one(sched, second, catalog, 2 * target_step, EVAL_EVERY)
            finally:
                second.close()
    return runs


def scored(runs: dict[str, pd.DataFrame], target_step: int, best_within: bool) -> dict[str, dict]:
    """Per arm: steps and rollouts to random's step-T score (``best_within``: its best evaluated score by
    step T), the first 5 steps' selected variance and the final score."""
    random = runs["random"].dropna(subset=["heldout"])
    random = random[(random["step"] > 0) & (random["step"] <= target_step)]
    target = float(random["heldout"].max() if best_within else random["heldout"].iloc[-1])
    out = {}
    for arm, m in runs.items():
        evaluated = m[m["step"] > 0].dropna(subset=["heldout"])
        hit = evaluated[evaluated["heldout"] >= target - 1e-12]
        steps = float(hit["step"].iloc[0]) if len(hit) else 2 * target_step + 1
        rollouts = float(hit["cum_rollouts"].iloc[0]) if len(hit) else float(m["cum_rollouts"].iloc[-1])
        first5 = m[(m["step"] >= 1) & (m["step"] <= 5)]
        final = float(evaluated["heldout"].iloc[-1])
        out[arm] = {
            "steps": steps,
            "rollouts": rollouts,
            "early_var": first5["mean_var"].mean(),
            "final": final,
        }
        if "new_env_share" in m:
            out[arm]["new_share"] = float(m.loc[m["step"] <= 10, "new_env_share"].mean())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="the suite's small worlds")
    parser.add_argument("--regimes", default="default,paper,private,drift,shift", help="comma list")
    parser.add_argument("--real", default=None, help="a real catalogue (acebench, tau, bfcl, all) instead")
    parser.add_argument("--world-seeds", default="100,101,102,103,104", help="comma list")
    parser.add_argument("--history-by", default="envsched", help="the first campaign's scheduler")
    parser.add_argument("--history-steps", type=int, default=30, help="H: steps of the first campaign")
    parser.add_argument("--target-step", type=int, default=30, help="T: random's step-T score is the target")
    parser.add_argument(
        "--new-envs",
        type=float,
        default=0.0,
        help="share of the environments added to the pool after the first campaign (simulator worlds)",
    )
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    regimes = [args.real] if args.real else args.regimes.split(",")
    unknown = [r for r in regimes if r not in REGIMES] if not args.real else []
    if unknown:
        parser.error(f"unknown regime(s) {unknown}; known: {list(REGIMES)}")
    seeds = [int(s) for s in args.world_seeds.split(",")]
    H, T = args.history_steps, args.target_step
    if args.real:
        job, jobs = real_job, [(args.real, s, args.history_by, H, T) for s in seeds]
    else:
        jobs = [(r, s, args.quick, args.history_by, H, T, args.new_envs) for r in regimes for s in seeds]
        job = sim_job
    with Pool(args.workers) as pool:
        results = [scored(runs, T, best_within=bool(args.real)) for runs in pool.map(job, jobs)]
    target = f"random's {'best score by' if args.real else 'score at'} step {T}"
    added = f" ({args.new_envs:.0%} of the environments added after the first)" if args.new_envs else ""
    print(
        f"first campaign: {H} steps of {args.history_by}; second: {2 * T} steps{added}; target {target}; "
        f"worlds {seeds}"
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
                | (
                    {"new-env picks, steps 1-10": f"{np.mean([w[arm]['new_share'] for w in per_world]):.3f}"}
                    if args.new_envs
                    else {}
                )
                for arm in ARMS
            }
        ).T
        print(f"\n## {regime}\n{table.to_string()}")
        means = {arm: t_interval([w[arm]["steps"] for w in per_world])[0] for arm in ARMS}
        wins += means["envsched+history"] <= min(means.values())
    print(f"\nsummary: envsched+history fewest steps in {wins}/{len(regimes)} regimes")


if __name__ == "__main__":
    main()
