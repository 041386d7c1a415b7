"""Headroom on the real environments: EnvSched's selection fed a true quantity of the skill policy.

    PYTHONPATH=. .venv/bin/python bench/real_oracle.py --catalogues acebench --seeds 3 --steps 120 \
        --target-step 120 --batch-size 32 --eval-samples 8 --reuse-from /tmp/ace10

The real-environment counterpart of ``bench/scheduler_oracle.py`` (a diagnostic: nothing here is in
envsched_core). Each oracle runs EnvSched's own selection (exploitation + coverage, environment quota,
similarity penalty) with its prediction replaced, at the start of every step, by a Monte Carlo estimate
from ``--samples`` extra rollouts per task of the current policy in the real environments (a stream of
their own, stream 2, so the training and evaluation draws are those of every other scheduler):

* ``variance``: the true expected group variance, (G - 1)/G s^2 of the task's samples;
* ``mixed``: the true chance that a group of G is informative, 1 - sum_v q_v^G over the task's distinct reward
  values v with sample frequencies q_v (what dynamic sampling filters on; std-normalised advantages give a
  mixed group a full-size update whatever its variance);
* ``gain-train``: the first-order gain in the *training pool's* mean reward of one GRPO group of the task,
  g_T . d_i, with d_i = E[sum_j A_j grad log pi(rollout j)] (the group's ascent direction, from the
  samples cut into groups of G) and g_T = grad of the pool's mean expected reward (score function:
  mean over tasks and samples of (r - mean_i r) grad log pi); what a scheduler could know without
  held-out data if it knew the policy;
* ``gain-heldout``: the same with g_H, the gradient of the *held-out* score (from ``--samples`` rollouts
  of every held-out task): the one-step greedy best, which peeks at the held-out tasks.

The bias parameter is left out of both gradients, as the skill policy's update leaves it out by default
(``learn_bias`` off). Rows of
other schedulers come from ``bench/campaign_real.py`` CSVs (``--reuse-from``, same options) or run here.
The oracle samples are not counted as rollouts. Tables are campaign_real's. Cost: --samples x the training
pool rollouts per step (ACEBench, 32 samples: 60-190 s a campaign, two at a time on 2 cores; BFCL, 16: 24-29 min).
Results and what they say: docs/scheduler.md, "Headroom on the real environments".
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench.campaign_real import (
    MIN_POOL_PER_SLOT,
    OUT,
    REGIMES,
    load_catalogue,
    make_scheduler,
    read_runs,
    reseeded,
    run_one,
    tables,
)
from bench.overrides import key_value
from envsched_core import EnvSched, SchedulerConfig, TaskCatalog
from envsched_core.scheduler import Predicted
from training.advantages import group_advantages
from training.engines.skill import SkillEngine
from training.policies.skill import RolloutRequest, rollout_seed

MODES = ("variance", "mixed", "gain-train", "gain-heldout")
ORACLE_STREAM = 2  # the oracle's own draws (training uses stream 0, evaluation stream 1)


def score_gradients(engine: SkillEngine, task_ids: list[str], groups: list[list]) -> np.ndarray:
    """grad log pi of every rollout, (n_tasks, samples, n_params); the bias column zeroed."""
    world = engine.world
    out = np.zeros((len(task_ids), len(groups[0]), world.n_params))
    for i, (task_id, episodes) in enumerate(zip(task_ids, groups, strict=True)):
        plan = world.plans[task_id]
        p = engine.policy.p_right(task_id)  # (steps,)
        for j, e in enumerate(episodes):
            k = e.decisions
            weight = e.right.astype(np.float64) - p[k]  # d log pi / dz of each decision
            out[i, j] = np.bincount(
                plan.features[k].ravel(), weights=np.repeat(weight, plan.features.shape[1]),
                minlength=world.n_params,
            )  # fmt: skip
    out[:, :, 0] = 0.0
    return out


def sample(engine: SkillEngine, task_ids: list[str], step: int, samples: int) -> tuple[np.ndarray, list]:
    """``samples`` rollouts of every task on the oracle's stream: rewards (n_tasks, samples), episodes."""
    requests = [
        RolloutRequest(t, j, rollout_seed(engine.seed, ORACLE_STREAM, step, t, j))
        for t in task_ids
        for j in range(samples)
    ]
    episodes = engine.executor.run(engine.spec, engine.policy.theta, requests)
    groups = [episodes[i * samples : (i + 1) * samples] for i in range(len(task_ids))]
    return np.array([[e.reward for e in g] for g in groups]), groups


def true_quantity(engine: SkillEngine, mode: str, step: int, samples: int) -> np.ndarray:
    """The oracle's ranking quantity for every training task (the engine's training order)."""
    g = engine.group_size
    rewards, groups = sample(engine, engine.train_ids, step, samples)
    if mode == "variance":
        return (g - 1) / g * rewards.var(axis=1, ddof=1)
    if mode == "mixed":
        same = [sum((c / samples) ** g for c in np.unique(r, return_counts=True)[1]) for r in rewards]
        return 1.0 - np.asarray(same)
    grads = score_gradients(engine, engine.train_ids, groups)  # (N, S, P)
    n_groups = samples // g
    cut = rewards[:, : n_groups * g].reshape(len(rewards), n_groups, g)
    adv = group_advantages(cut.reshape(-1, g), scale=engine.policy.config.advantage_scale).reshape(cut.shape)
    ascent = np.einsum("ngs,ngsp->np", adv, grads[:, : n_groups * g].reshape(*cut.shape, -1)) / n_groups
    if mode == "gain-heldout":  # the score the gain is measured on: the pool's own, or the held-out tasks'
        rewards, groups = sample(engine, engine.heldout_ids, step, samples)
        grads = score_gradients(engine, engine.heldout_ids, groups)
    centred = rewards - rewards.mean(axis=1, keepdims=True)
    target = np.einsum("ns,nsp->p", centred, grads) / rewards.size  # score-function gradient of the mean
    return ascent @ target


class RealOracle(EnvSched):
    """EnvSched whose prediction is a true quantity of ``engine``'s current policy (diagnostic, bench only)."""

    def __init__(self, *args, mode: str, samples: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.mode, self.samples, self.engine = mode, samples, None

    def _predicted(self, step: int) -> Predicted:
        if self._cache is None or self._cache[0] != step:
            order = self.catalog.indices_of(np.asarray(self.engine.train_ids, dtype=object), what="task_id")
            value = np.zeros(len(self.catalog))
            value[order] = true_quantity(self.engine, self.mode, step, self.samples)
            value = np.maximum(value, 0.0) + 1e-12  # a harmful or useless group ranks last, all tied
            n = self.stats.n_at(step)
            everything = np.ones(len(value), dtype=bool)
            self._cache = (step, Predicted(value, everything, n, value, np.zeros(len(value)), None), None)
        return self._cache[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--catalogues", default="acebench")
    parser.add_argument(
        "--schedulers", default="random,dps,envsched", help="non-oracle rows (campaign_real names)"
    )
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--target-step", type=int, default=120)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--samples", type=int, default=32, help="oracle rollouts per task and step")
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--eval-samples", type=int, default=4)
    parser.add_argument("--heldout-fraction", type=float, default=0.2)
    parser.add_argument("--regime", choices=sorted(REGIMES), default="paper")
    parser.add_argument("--option", action="append", default=[], help="skill policy option key=value")
    parser.add_argument("--reuse-from", type=Path, default=None, help="campaign_real CSVs for the other rows")
    parser.add_argument("--out", type=Path, default=OUT / "real_oracle")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown or args.samples < 2 * args.group_size:
        raise SystemExit(f"--modes must be from {MODES} and --samples >= 2 G (got {unknown}, {args.samples})")
    options = {**REGIMES[args.regime], **dict(key_value(item) for item in args.option)}
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    names = args.schedulers.split(",")
    if "random" not in names:
        raise SystemExit("--schedulers must include random (it sets the target)")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.catalogues.split(","):
        train, heldout = load_catalogue(name, args.heldout_fraction, OUT / "cache")
        catalog = TaskCatalog.from_frame(train)
        batch_size = max(1, min(args.batch_size, len(train) // MIN_POOL_PER_SLOT))
        config = SchedulerConfig(batch_size=batch_size, group_size=args.group_size)
        template = EnvSched(catalog, config, seed=0)
        state = template.state_dict()

        def fresh(label: str, seed: int, template=template, state=state):
            return reseeded(template, state, seed)

        runs: dict[str, dict[int, pd.DataFrame]] = {s: {} for s in [*names, *modes]}
        for seed in seeds:
            for sched_name in [*names, *modes]:
                csv = args.out / f"campaign_real-{name}-{sched_name}-seed{seed}.csv"
                source = args.reuse_from if sched_name in names and args.reuse_from else args.out
                if (source / csv.name).exists():
                    runs[sched_name][seed] = read_runs(source, name, [sched_name], [seed])[sched_name][seed]
                    continue
                t0 = time.perf_counter()
                engine = SkillEngine(
                    train, args.group_size, seed, heldout=heldout, eval_every=args.eval_every,
                    eval_samples=args.eval_samples, **options,
                )  # fmt: skip
                if sched_name in modes:
                    sched = RealOracle(catalog, config, seed=seed, mode=sched_name, samples=args.samples)
                    sched.engine = engine
                else:
                    sched = make_scheduler(sched_name, catalog, batch_size, args.group_size, seed, fresh)
                try:
                    frame = run_one(sched, engine, catalog, args.steps, args.eval_every)
                finally:
                    engine.close()
                runs[sched_name][seed] = frame
                frame.assign(catalogue=name, scheduler=sched_name, seed=seed).to_csv(csv, index=False)
                print(f"  {name}/{sched_name} seed={seed}: {time.perf_counter() - t0:.0f}s", flush=True)
        show = sorted({0, *range(20, args.steps + 1, 20), args.target_step})
        print(tables(name, runs, args.target_step, show), flush=True)


if __name__ == "__main__":
    main()
