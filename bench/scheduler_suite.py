"""Scheduler evaluation suite: every scheduler on many simulator worlds, per world regime.

    PYTHONPATH=. .venv/bin/python bench/scheduler_suite.py --quick        # ~10 min on 2 idle cores (2 workers)
    PYTHONPATH=. .venv/bin/python bench/scheduler_suite.py                # full: 100k-task regime, more
    ... --regimes paper,no-info --schedulers random,dps,envsched --world-seeds 0,1,2   # tuning subsets

Regimes come from `envsched_core.worlds.REGIMES` (shared vs private difficulty, reward sparsity incl.
the paper's Table 2 regime, binary vs graded, catalogue size, learning rate / drift / forgetting, few
large vs many small environments, and a scrambled catalogue where embedding and signatures carry no
information). Each regime is drawn with several *world* seeds (new tasks, skills and catalogue); the
report seeds (default 100..) are disjoint from the seeds used while tuning (0..4). `--regimes stress` runs
`envsched_core.worlds.STRESS_REGIMES` instead: held-out variations never used for tuning (G = 2, 4 and 16,
B = 128, easier tasks, 10-check graded rewards, slow learning, the paper's regime with G = 4, B = 64
or environment updates, a scrambled catalogue with coin-flip verifiers, three environments, multi-step
tasks, noisy verifiers, broken environments, uneven environment sizes, environments added mid-campaign,
environment ids that name benchmarks or single tasks, environments held out whole, tasks that never pass,
environment outages, a judge blind to the policy, copied tasks, look-alike tasks, tasks whose groups never come
back, groups that come back short, rewards with a floor, environments mastered or out of reach from the start).
`--regimes latent` runs `envsched_core.latent_world.LATENT_REGIMES`: worlds of a second generative model, specified
apart from the simulator (skills as directions in a latent space, negative transfer, correlated partial checks,
Dr. GRPO's unnormalised advantages, held-out environments), none used for tuning either.
`--regimes compound` runs 24 compound attacks (`envsched_core.worlds.compound_regime`): a suite world with two or
three of the stress regimes' attacks at once, drawn at random (draw 1; `compound-0` is draw 0, kept for tuning, and
any `compound-D` is a fresh draw of 24 that no rule was written against); `--regimes wild` runs 24 wild worlds
(`envsched_core.worlds.wild_name`): a suite world with one or two of its settings (G, B, learning rate, difficulty
spread, graded share, ...) and one to three attacks, each at a value drawn over a wide range (draw 1; `wild-0` is for
tuning, any `wild-D` a fresh draw; each prints as its explicit `base+field=value+...` name); `base+attack+...` names
one combination (`--regimes sparse+settled+inverted`), and a `field=value` part sets one mechanism (a `Regime` field) at a strength of
your own or any other world setting, the batch size or a `SimConfig` field (`--regimes
default+flaky=0.5,paper+settled+inverted=0.4,paper+group_size=4+lr=3`).
`--catalogue required` shows every scheduler only the catalogue's four required columns (task_id, env_id, text,
tools; embeddings from the shipped model over the text), as a trainer's own task list may give them, instead of every
column the world writes (lengths, tool effects, verifier kinds, a world-made embedding).
`--observe-lag L` runs an asynchronous trainer: select(t) has seen the rewards of steps <= t-1-L only
(DAPO and GRESO, whose refill reads each round's rewards, are left out); `--sync-warmup K` observes the
first K steps before the next one is selected.

Per regime and scheduler, over worlds (95% t-intervals): steps and rollouts until the held-out score
reaches what random reaches at step T (a world where the target is never reached within the horizon
counts as horizon + 1 steps and the rollouts spent by then: a lower bound, flagged by `reached`);
the paper's Table 2 statistics (mean / median selected variance, median reward, environments and tools
per batch, over the horizon); exploitation hit rate at steps 1 and 7; the held-out score at the horizon; in
attack worlds with flaky verifiers (or broken ones, which never pass, or inverted ones, which pass the wrong
attempt), the share of each batch spent on them; where environments join late
(`late-envs`: every scheduler rebuilt from the campaign's history then), the share of each batch in them over
the 10 steps from the one they join at; where some environments go down (`outage`), the share of each batch in
them over the 10 steps from the outage's first and from the step they are back; where tasks are copies of others
(`duplicates`), the share of each batch whose original is already in it; where groups never come back (`lost`,
`lost-envs`) or come back with most rewards missing (`slow-tasks`), the share of each batch on those tasks; where half
the environments' rewards have a floor (`floor`), the share of each batch in them; where environments are settled out
of reach (`settled`), the share of each batch in them. The best scheduler of a regime has
the fewest mean rollouts to target; EnvSched is "tied" when the paired 95% interval of its difference to
the best includes 0. Where ablations ran, a second table gives each one's steps minus EnvSched's on the
same worlds (paired 95% t-interval), which separates one-step differences the unpaired table cannot.
The last line is machine-checkable:

    summary: envsched best or tied in X/Y regimes; paper-regime steps saved vs random Z.ZZx; vs best baseline W.WWx

Its paper ratios are `paper`'s; a run without it takes the first variation of it that ran (`latent-paper`,
`paper-g4`, ...) and names it on the line before; with none they read nan.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats
from threadpoolctl import threadpool_limits

from bench.overrides import without_refilling
from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.catalog import REQUIRED_COLUMNS
from envsched_core.schedulers import SCHEDULERS, fold_history
from envsched_core.simulator import Simulator, run_campaign, steps_to_target
from envsched_core.worlds import (
    ALL_REGIMES,
    DRAWN,
    LATENT_REGIMES,
    REGIMES,
    STRESS_REGIMES,
    LatentRegime,
    Regime,
    is_drawn,
    regime_named,
)

BASELINES: dict[str, Callable] = {
    name: (lambda cat, b, spec=spec: spec.cls(cat, spec.config_cls(batch_size=b)))
    for name, spec in SCHEDULERS.items()
    if name != "envsched"
}
# EnvSched and its ablations: SchedulerConfig overrides. Each piece of the predictor/selection is
# switched off alone; "paper" is the paper's predictor (discounted mean observed variance, fused).
ABLATIONS: dict[str, dict] = {
    "envsched": {},
    "es:paper-predictor": {"predictor": "variance"},
    "es:no-global": {"use_global_model": False},
    "es:within-only": {"use_cross_edges": False},
    "es:cross-only": {"use_within_edges": False},
    "es:uninformed-coverage": {"informed_coverage": False},
    "es:fixed-rho": {"adaptive_rho": False},
    "es:rho=1": {"rho": 1.0, "adaptive_rho": False},
    "es:eta=0": {"eta": 0.0},
    "es:no-transfer": {"transfer_weight": 0.0},
    "es:graded-only": {"full_pass_weight": 0.0},  # partial credit alone, not blended with the full pass
    "es:fixed-blend": {"full_pass_by_correlation": False},  # the whole blend in every environment
    "es:refill": {"refill_rounds": 3},  # switched on, not off: up to 3 refill rounds a step (off by default)
}
QUICK_ABLATION_REGIMES = ("paper", "default", "no-info")


@dataclass
class World:
    regime: Regime | LatentRegime
    seed: int
    sim: Simulator
    catalog: TaskCatalog
    first_catalog: TaskCatalog | None = None
    """The catalogue at step 1 where environments join late (`late_envs`), else None."""


def t_interval(values) -> tuple[float, float]:
    """(mean, half-width of the 95% t-interval); half-width 0 for one value."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return float("nan"), float("nan")
    if len(values) == 1:
        return float(values[0]), 0.0
    half = scipy_stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return float(values.mean()), float(half)


def fmt(values, digits: int = 1) -> str:
    mean, half = t_interval(values)
    if np.isnan(mean):
        return "n/a"
    return f"{mean:,.{digits}f} ± {half:,.{digits}f}"


def make_world(regime: Regime | LatentRegime, seed: int, quick: bool, catalogue: str = "full") -> World:
    """The world of ``regime`` and ``seed``; ``catalogue`` 'required': the schedulers see only the catalogue's
    required columns (task_id, env_id, text, tools; embeddings from the shipped model over the text), as a
    trainer's own task list may give them, instead of every column the world writes."""
    sim = regime.world(seed, quick)
    frame = sim.catalog_frame()
    if catalogue == "required":
        frame = frame[list(REQUIRED_COLUMNS)]
    first = sim.available_tasks()
    first_catalog = None if first.all() else TaskCatalog.from_frame(frame.loc[first].reset_index(drop=True))
    return World(regime, seed, sim, TaskCatalog.from_frame(frame), first_catalog)


def scheduler_for(world: World, name: str, run_seed: int, catalog: TaskCatalog | None = None):
    """Scheduler ``name`` over ``catalog`` (default: the world's whole catalogue)."""
    b, catalog = world.regime.batch_size, world.catalog if catalog is None else catalog
    if name in BASELINES:
        sched = BASELINES[name](catalog, b)
        sched.rng = np.random.default_rng(run_seed)
        if hasattr(sched, "sampler"):
            sched.sampler.perm = sched.rng.permutation(sched.n_tasks)
        return sched
    config = SchedulerConfig(batch_size=b, group_size=world.sim.config.group_size, **ABLATIONS[name])
    return EnvSched(catalog, config, seed=run_seed)


def run_scheduler(
    world: World,
    name: str,
    horizon: int,
    observe_lag: int,
    sync_warmup: int,
    watch: dict[str, Callable[[pd.DataFrame], float]],
) -> tuple[pd.DataFrame, dict[str, list[float]]]:
    """One campaign of scheduler ``name`` on ``world``: its metrics and, per ``watch`` entry, its measure of each
    step's batch (e.g. the share among some task ids, ``share_in``). Where environments join the catalogue late (`late_envs`), the scheduler
    starts over the tasks there at step 1 and is rebuilt over the whole catalogue from the campaign's history
    at `late_step`, as a pipeline does after a pool refresh."""
    picks: dict[str, list[float]] = {label: [] for label in watch}

    def watched(sched):
        for label, measure in watch.items():
            sched = watch_picks(sched, measure, picks[label])
        return sched

    if world.first_catalog is None:
        sched = watched(scheduler_for(world, name, world.seed))
        return run_campaign(
            sched, world.sim.reset(world.seed), horizon, observe_lag=observe_lag, sync_warmup=sync_warmup
        ), picks

    def rebuilt(history: pd.DataFrame):
        fresh = scheduler_for(world, name, world.seed)
        fold_history(fresh, history, step_offset=0)  # the campaign's own clock, as restore_scheduler keeps it
        return watched(fresh)

    metrics = run_campaign(
        watched(scheduler_for(world, name, world.seed, world.first_catalog)),
        world.sim.reset(world.seed),
        horizon,
        observe_lag=observe_lag,
        sync_warmup=sync_warmup,
        rebuild_at=world.sim.late_step,
        rebuild=rebuilt,
    )
    return metrics, picks


def share_in(ids: set[str]) -> Callable[[pd.DataFrame], float]:
    """A batch measure: the share of the batch among ``ids``."""
    return lambda batch: float(batch["task_id"].astype(str).isin(ids).mean())


def share_of(mask: str):
    """For a world, the share of a batch among the tasks of its oracle mask ``mask``; None where the world has
    no such mask, or none or all of its tasks in it."""

    def measure(sim, ids: np.ndarray):
        chosen = np.asarray(getattr(sim, mask, []), dtype=bool)
        return share_in(set(ids[chosen])) if 0 < chosen.sum() < len(ids) else None

    return measure


def repeats(sim, ids: np.ndarray):
    """For a world of copied tasks (`duplicates`), the share of a batch's tasks that copy, or are copied by, one
    picked before them in the batch (1 - distinct originals / batch size); None in other worlds."""
    templates = getattr(sim, "templates", None)
    if templates is None or (templates == np.arange(len(ids))).all():
        return None
    template_of = dict(zip(ids, templates, strict=True))
    return lambda batch: 1.0 - batch["task_id"].astype(str).map(template_of).nunique() / max(len(batch), 1)


# What the suite reports of each batch beyond the metrics: label -> (the table's column, the measure for a world,
# the steps that count: every step, or the 10 from the step the world's attribute names). Late tasks count from
# joining; outage tasks while down and once back.
WATCHED = {
    "flaky": ("flaky picks", share_of("flaky_tasks"), None),
    "broken": ("broken picks", share_of("broken_tasks"), None),
    "inverted": ("inverted picks", share_of("inverted_tasks"), None),
    "late": ("new-env picks", share_of("late_tasks"), "late_step"),
    "down": ("picks while down", share_of("outage_tasks"), "outage_step"),
    "back": ("picks once back", share_of("outage_tasks"), "outage_end"),
    "repeats": ("repeat picks", repeats, None),
    "lost": ("lost picks", share_of("lost_tasks"), None),
    "slow-tasks": ("slow-task picks", share_of("slow_tasks"), None),
    "floored": ("floor-env picks", share_of("floored_tasks"), None),
    "capped": ("capped-env picks", share_of("capped_tasks"), None),
    "out-of-reach": ("out-of-reach picks", share_of("out_of_reach_tasks"), None),
}


def counted_steps(sim, first: str | None) -> slice:
    """The steps whose picks count: every step, or the 10 from the step the world's attribute ``first`` names."""
    if first is None:
        return slice(None)
    start = getattr(sim, first, 1)
    return slice(start - 1, start + 9)


def run_world(
    world: World, names: list[str], horizon: int, target_step: int, observe_lag: int = 0, sync_warmup: int = 0
) -> dict[str, dict]:
    """Every scheduler on one world (run seed = world seed); per scheduler its per-world numbers."""
    out: dict[str, dict] = {}
    runs: dict[str, pd.DataFrame] = {}
    ids = np.asarray(world.sim.task_ids)
    measures = {label: measure(world.sim, ids) for label, (_, measure, _) in WATCHED.items()}
    watch = {label: measure for label, measure in measures.items() if measure is not None}
    window = {label: counted_steps(world.sim, first) for label, (_, _, first) in WATCHED.items()}
    shares: dict[str, dict[str, float]] = {}
    for name in names:
        runs[name], picks = run_scheduler(world, name, horizon, observe_lag, sync_warmup, watch)
        shares[name] = {
            label: float(np.mean(picks[label][window[label]])) if label in watch else float("nan")
            for label in WATCHED
        }
    target = float(runs["random"]["heldout"].iloc[target_step - 1])
    for name, m in runs.items():
        steps, rollouts = steps_to_target(m, target)
        reached = not np.isnan(steps)
        out[name] = {
            "steps": steps if reached else horizon + 1,
            "rollouts": rollouts if reached else float(m["cum_rollouts"].iloc[-1]),
            "reached": reached,
            "mean_var": m["mean_var"].mean(),
            "median_var": m["median_var"].mean(),
            "median_reward": m["median_reward"].mean(),
            "envs": m["envs"].mean(),
            "tools": m["tools"].mean(),
            "hit1": m["hit_rate"].iloc[0],
            "hit7": m["hit_rate"].iloc[6],
            "trained": m["trained_groups"].mean() / world.regime.batch_size,
            "final": m["heldout"].iloc[-1],
            **shares[name],
        }
    return out


def watch_picks(sched, measure: Callable[[pd.DataFrame], float], values: list[float]):
    """``sched``, its ``select`` wrapped to append to ``values``, per step, ``measure`` of the batch (e.g. the share
    of the flaky tasks of an attack world)."""
    select = sched.select

    def recorded(step: int) -> pd.DataFrame:
        batch = select(step)
        values.append(measure(batch))
        return batch

    sched.select = recorded
    return sched


def regime_table(per_world: list[dict[str, dict]], names: list[str]) -> pd.DataFrame:
    rows = []
    random_var = np.mean([w["random"]["mean_var"] for w in per_world])
    for name in names:
        col = {k: [w[name][k] for w in per_world] for k in per_world[0][name]}
        rows.append(
            {
                "scheduler": name,
                "steps to target": fmt(col["steps"]),
                "rollouts to target": fmt(col["rollouts"], 0),
                "reached": f"{int(np.sum(col['reached']))}/{len(per_world)}",
                "mean var": round(float(np.mean(col["mean_var"])), 4),
                "var / random": round(float(np.mean(col["mean_var"])) / max(random_var, 1e-12), 2),
                "median var": round(float(np.mean(col["median_var"])), 4),
                "median reward": round(float(np.mean(col["median_reward"])), 3),
                "envs": round(float(np.mean(col["envs"])), 1),
                "tools": round(float(np.mean(col["tools"])), 1),
                "hit@1": _mean_or_dash(col["hit1"]),
                "hit@7": _mean_or_dash(col["hit7"]),
                "trained share": round(float(np.mean(col["trained"])), 3),
                "final held-out": round(float(np.mean(col["final"])), 3),
                **{
                    column: round(float(np.mean(col[label])), 3)
                    for label, (column, _, _) in WATCHED.items()
                    if not np.isnan(col[label]).all()
                },
            }
        )
    return pd.DataFrame(rows)


def paired_ablations(per_world: list[dict[str, dict]], names: list[str]) -> pd.DataFrame | None:
    """Each ablation's steps to target minus EnvSched's on the same world (mean, 95% t half-width). Both run on
    the same world with the same run seed, so the pairing removes the spread between worlds, which is what
    hides a one-step difference in the unpaired table. None without EnvSched or an ablation."""
    ablations = [n for n in names if n.startswith("es:")]
    if "envsched" not in names or not ablations:
        return None
    full = np.array([w["envsched"]["steps"] for w in per_world])
    rows = []
    for name in ablations:
        mean, half = t_interval(np.array([w[name]["steps"] for w in per_world]) - full)
        rows.append({"ablation": name, "steps - envsched's (paired)": f"{mean:+.1f} ± {half:.1f}"})
    return pd.DataFrame(rows)


def _mean_or_dash(values) -> str:
    values = np.asarray(values, dtype=float)
    return "-" if np.isnan(values).all() else f"{np.nanmean(values):.3f}"


def verdict(per_world: list[dict[str, dict]], names: list[str]) -> tuple[str, bool, float, float]:
    """(best scheduler, envsched best or tied, envsched / random steps ratio, best baseline / envsched)."""
    candidates = [n for n in names if n in BASELINES or n == "envsched"]
    rollouts = {n: np.array([w[n]["rollouts"] for w in per_world]) for n in candidates}
    steps = {n: np.array([w[n]["steps"] for w in per_world]) for n in candidates}
    best = min(candidates, key=lambda n: rollouts[n].mean())
    ok = best == "envsched"
    if not ok and "envsched" in candidates:
        low = t_interval(rollouts["envsched"] - rollouts[best])
        ok = low[0] - low[1] <= 0.0
    baselines = [n for n in candidates if n != "envsched"]
    peers = [steps[n].mean() for n in baselines if n != "random"]
    best_baseline_steps = min(peers) if peers else float("nan")  # --schedulers may name random alone
    es = steps["envsched"].mean() if "envsched" in steps else float("nan")
    return best, ok, steps["random"].mean() / es, best_baseline_steps / es


def world_job(job: tuple[str, int, bool, list[str], int, int, int, int, str]) -> dict[str, dict]:
    """One (regime, world seed): every scheduler on that world (a pool worker's unit of work)."""
    name, seed, quick, run_names, horizon, target_step, lag, warmup, catalogue = job
    with threadpool_limits(limits=1):  # small matrices: BLAS threads only thrash on a shared machine
        world = make_world(regime_named(name), seed, quick, catalogue)
        return run_world(world, run_names, horizon, target_step, lag, warmup)


def regime_group(name: str) -> list[str]:
    """The regimes a --regimes entry names: a group ('stress', 'latent', 'compound' or 'wild' = the report draw,
    'compound-D' or 'wild-D' = draw D) or one regime."""
    groups = {
        "stress": list(STRESS_REGIMES),
        "latent": list(LATENT_REGIMES),
        **{kind: names() for kind, (_, names) in DRAWN.items()},  # the report draw of each kind
    }
    if name in groups:
        return groups[name]
    for kind, (_, names) in DRAWN.items():
        draw = name.removeprefix(f"{kind}-")
        if draw != name and draw.isdigit():
            return names(int(draw))
    return [name]


def regime_error(name: str) -> str | None:
    """Why ``name`` names no regime (None when it names one)."""
    try:
        regime_named(name)
    except KeyError as error:
        return str(error.args[0])
    return None


def refuse_unknown_regimes(parser: argparse.ArgumentParser, names: list[str]) -> None:
    """Stop the command, naming every entry of ``names`` that names no regime and why."""
    unknown = [error for name in names if (error := regime_error(name))]
    if unknown:
        drawn = ", ".join(f"'{kind}', '{kind}-D' (draw D), '{kind}-D-I'" for kind in DRAWN)
        parser.error(
            f"unknown regime(s) {unknown}; known: {list(ALL_REGIMES)}, 'stress', 'latent', {drawn} or "
            "'base+attack+...' (an attack by name, a mechanism at a strength or a world setting: "
            "'default+flaky=0.5', 'paper+group_size=4')"
        )


def cpu_seconds() -> float:
    """CPU time of this process and of its finished (joined) worker processes."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    with threadpool_limits(limits=1):
        run_suite()


def run_suite() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small worlds, 5 seeds, ablations in 3 regimes")
    parser.add_argument(
        "--regimes",
        default=None,
        help="comma list (default: every suite regime; 'stress': the held-out ones; 'latent': the second world model)",
    )
    parser.add_argument(
        "--schedulers", default=None, help="comma list (default: baselines, envsched, ablations)"
    )
    parser.add_argument("--world-seeds", default=None, help="comma list (default 100..104; 100..107 full)")
    parser.add_argument("--target-step", type=int, default=60, help="T: random's step-T score is the target")
    parser.add_argument("--horizon", type=int, default=None, help="steps run (default 2 T)")
    parser.add_argument(
        "--observe-lag",
        type=int,
        default=0,
        help="L: an asynchronous trainer; select(t) has seen the rewards of steps <= t-1-L only "
        "(dynamic-sampling schedulers, which read each round's rewards, are left out)",
    )
    parser.add_argument(
        "--sync-warmup",
        type=int,
        default=0,
        help="K: with --observe-lag, the first K steps are observed before the next one is selected",
    )
    parser.add_argument(
        "--catalogue",
        choices=["full", "required"],
        default="full",
        help="'required': schedulers see only task_id, env_id, text and tools (embeddings from the shipped model)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes running worlds in parallel (default: 2, or 1 on one core); results do not depend on it",
    )
    args = parser.parse_args()
    if args.workers < 1:
        parser.error(f"--workers={args.workers} must be >= 1")
    regimes = args.regimes.split(",") if args.regimes else list(REGIMES)
    regimes = [n for r in regimes for n in regime_group(r)]
    refuse_unknown_regimes(parser, regimes)
    default_names = [*BASELINES, *ABLATIONS]
    names = args.schedulers.split(",") if args.schedulers else default_names
    unknown = [n for n in names if n not in BASELINES and n not in ABLATIONS]
    if unknown:
        parser.error(f"unknown scheduler(s) {unknown}; known: {default_names}")
    if "random" not in names:
        names = ["random", *names]
    if args.observe_lag < 0 or args.sync_warmup < 0:
        parser.error(f"--observe-lag={args.observe_lag} and --sync-warmup={args.sync_warmup} must be >= 0")
    names = without_refilling(names, args.observe_lag)
    seeds = (
        [int(s) for s in args.world_seeds.split(",")]
        if args.world_seeds
        else list(range(100, 105 if args.quick else 108))
    )
    horizon = args.horizon or 2 * args.target_step
    t_start = time.perf_counter()
    plan = {
        name: [
            n
            for n in names
            if n in BASELINES
            or n == "envsched"
            or not args.quick
            or args.schedulers
            or name in QUICK_ABLATION_REGIMES
        ]
        for name in regimes
    }
    jobs = [
        (
            name,
            seed,
            args.quick,
            plan[name],
            horizon,
            args.target_step,
            args.observe_lag,
            args.sync_warmup,
            args.catalogue,
        )
        for name in regimes
        for seed in seeds
    ]
    verdicts = {}
    # Worlds are independent and seeded, so running them in parallel changes no number; results come back
    # in job order, so each regime's table prints as soon as its last world is done.
    parallel = args.workers > 1
    with multiprocessing.get_context("fork").Pool(args.workers) if parallel else nullcontext() as pool:
        results = pool.imap(world_job, jobs) if parallel else map(world_job, jobs)
        t0 = time.perf_counter()
        for name in regimes:
            regime, run_names = regime_named(name), plan[name]
            per_world = [next(results) for _ in seeds]
            config = regime.sim_config(args.quick)
            title = (
                f"[{name}] {regime.description}; {config.n_envs} envs x {config.tasks_per_env} tasks"
                + (
                    f" on average (sizes ~ k^-{skew})"
                    if (skew := getattr(config, "env_size_skew", 0))
                    else ""
                )
                + ", "
                f"B={regime.batch_size}, G={config.group_size}, {len(seeds)} worlds, target = random's "
                f"step-{args.target_step} held-out score, horizon {horizon}"
                + (", catalogue: the required columns only" if args.catalogue == "required" else "")
                + (f", rewards observed {args.observe_lag} step(s) late" if args.observe_lag else "")
                + (
                    f" after {args.sync_warmup} synchronous steps"
                    if args.observe_lag and args.sync_warmup
                    else ""
                )
                + f" ({time.perf_counter() - t0:.0f}s)"
            )
            t0 = time.perf_counter()
            print(f"\n{title}\n" + "-" * min(len(title), 110))
            print(regime_table(per_world, run_names).to_string(index=False))
            paired = paired_ablations(per_world, run_names)
            if paired is not None:
                print(paired.to_string(index=False))
            verdicts[name] = verdict(per_world, run_names)
            best, ok, vs_random, vs_best = verdicts[name]
            print(
                f"best: {best}; envsched best or tied: {'yes' if ok else 'no'}; "
                f"steps saved vs random {vs_random:.2f}x, vs best baseline {vs_best:.2f}x",
                flush=True,
            )
    print(
        f"\ntotal {time.perf_counter() - t_start:.0f}s wall, {cpu_seconds():.0f} CPU s "
        f"({args.workers} worker{'s' if args.workers > 1 else ''})"
    )
    n_ok = sum(v[1] for v in verdicts.values())
    paper_name = paper_regime(list(verdicts))
    if paper_name not in (None, "paper"):
        print(f"paper regime of this run: {paper_name}")
    paper = verdicts.get(paper_name, (None, False, float("nan"), float("nan")))
    print(
        f"summary: envsched best or tied in {n_ok}/{len(verdicts)} regimes; "
        f"paper-regime steps saved vs random {paper[2]:.2f}x; vs best baseline {paper[3]:.2f}x"
    )


def paper_regime(names: list[str]) -> str | None:
    """The regime the summary's paper ratios come from: `paper` when it ran, else the first regime run that
    is a variation of it (`latent-paper`, `paper-g4`, `paper+flaky`, a drawn compound or wild regime on the `paper`
    base, ...), so a run of another regime group still says how its Table 2 regime went; None when no such regime ran
    (the ratios print as nan)."""
    if "paper" in names:
        return "paper"

    def varies_paper(name: str) -> bool:
        # drawn: its name does not say its base, its description does
        if is_drawn(name):
            return regime_named(name).description.split(" + ")[0] == "paper"
        return "paper" in name.replace("+", "-").split("-")

    return next((n for n in names if varies_paper(n)), None)


if __name__ == "__main__":
    main()
