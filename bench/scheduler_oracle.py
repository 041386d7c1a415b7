"""Headroom of EnvSched's selection: what it reaches when fed a true quantity instead of its prediction.

    PYTHONPATH=. .venv/bin/python bench/scheduler_oracle.py --regimes paper,default,private --world-seeds 0,1,2
    ... --regimes paper,default --modes transfer,transfer-kernel --with-envsched   # the transfer factor's headroom

Each oracle runs EnvSched's own selection (exploitation + coverage, environment quota, similarity
penalty, adaptive rho) with its predicted variance replaced by one quantity read from the simulator's
hidden state at the start of each step (a diagnostic only: nothing here is in envsched_core):

* ``variance``: the true expected group variance, c_e (G - 1)/G p (1 - p);
* ``std``: the true expected group reward std E[std(r)] (GRPO's push on every loaded skill is
  lr / B * w_k * std(r), see envsched_core/simulator.py);
* ``gain``: the true expected first-order held-out gain of training on the task's group,
  E[std(r_i)] * sum_k w_ik g_k with g_k = sum_h p_h (1 - p_h) w_hk over held-out tasks h and shared
  skills k (environment, tool types, families); memorisation (theta_task) does not transfer.

Two more keep EnvSched's own prediction and replace only its frontier transfer factor (``EnvSched._transfer``):

* ``transfer``: the true held-out transfer sum_k w_ik g_k of ``gain`` (normalised as EnvSched's factor is);
* ``transfer-kernel``: the true skill kernel over EnvSched's predicted frontier, sum_k w_ik sum_j w_jk v_j over
  training tasks j (v: EnvSched's predicted E[p (1 - p)]), which separates how tasks share skills from where
  the frontier is.

Every oracle of the first three is fully confident (uncertainty 0, so adaptive rho sits at rho_min) and has
evidence on every task. E[std(r)] is exact for binary rewards (binomial sum) and estimated for graded ones from a
fixed bank of simulated groups (common random numbers, so rankings are stable across steps). Rows also
run real EnvSched (``envsched``) and random for reference; steps are to random's step-T held-out score.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from bench.overrides import field_overrides
from bench.scheduler_suite import _mean_or_dash, fmt, make_world, refuse_unknown_regimes, scheduler_for
from envsched_core import EnvSched, SchedulerConfig
from envsched_core.scheduler import Predicted, relative_transfer
from envsched_core.simulator import Simulator, run_campaign, steps_to_target
from envsched_core.worlds import regime_named

MODES = ("variance", "std", "gain")
TRANSFER_MODES = ("transfer", "transfer-kernel")
GRADED_BANK = 256  # simulated groups per p for a graded task's E[std]


def binary_expected_std(p: np.ndarray, g: int) -> np.ndarray:
    """E[std(r)] of G Bernoulli(p) rewards (population std, as the simulator's update uses)."""
    from scipy.stats import binom

    m = np.arange(g + 1)
    std = np.sqrt(m / g * (1 - m / g))
    return binom.pmf(m[None, :], g, p[:, None]) @ std


def graded_expected_std(p: np.ndarray, g: int, k: int, rng_seed: int = 7) -> np.ndarray:
    """E[std(r)] of G rewards Binomial(K, p) / K, from a fixed bank of uniforms (inverse-CDF draws)."""
    u = np.random.default_rng(rng_seed).random((GRADED_BANK, g, k))
    passed = (u[None] < p[:, None, None, None]).sum(axis=3) / k  # (N, bank, G)
    return passed.std(axis=2).mean(axis=1)


def true_quantity(sim: Simulator, mode: str) -> np.ndarray:
    """The oracle's ranking quantity for every training task, catalogue order."""
    if mode == "variance":
        return sim.expected_variance()
    if not isinstance(sim, Simulator):
        raise ValueError(
            f"oracle mode {mode!r} reads the base simulator's skills; {type(sim).__name__} has 'variance' only"
        )
    c = sim.config
    rows = sim._train_rows
    p = sim._success(rows)
    graded = sim._graded[rows]
    std = binary_expected_std(p, c.group_size)
    if graded.any():
        std[graded] = graded_expected_std(p[graded], c.group_size, c.graded_checks)
    if mode == "std":
        return std
    return std * true_transfer(sim)


def true_transfer(sim: Simulator) -> np.ndarray:
    """Per training task, sum_k w_ik g_k: its shared skills' held-out sensitivity g_k = sum_h p_h (1 - p_h) w_hk."""
    h = sim._heldout_rows
    ph = sim._success(h)
    g_k = np.bincount(
        sim._load_idx[h].ravel(),
        weights=(sim._load_w[h] * (ph * (1 - ph))[:, None]).ravel(),
        minlength=sim.n_skills,
    )
    g_k[sim._off_task :] = 0.0
    rows = sim._train_rows
    return (sim._load_w[rows] * g_k[sim._load_idx[rows]]).sum(axis=1)


def shared_loadings(sim: Simulator) -> sp.csr_matrix:
    """(training tasks, shared skills): each task's loadings on its environment, tool types and families."""
    rows = sim._train_rows
    shared = sim._load_idx[rows] < sim._off_task  # not the task's own skill: memorisation does not transfer
    idx, w = np.where(shared, sim._load_idx[rows], 0), np.where(shared, sim._load_w[rows], 0.0)
    n, width = idx.shape
    return sp.csr_matrix((w.ravel(), (np.repeat(np.arange(n), width), idx.ravel())), shape=(n, sim._off_task))


class OracleEnvSched(EnvSched):
    """EnvSched whose prediction is a true quantity read from ``sim`` (diagnostic, bench only)."""

    def __init__(self, *args, sim: Simulator, mode: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.sim, self.mode = sim, mode

    def _predicted(self, step: int) -> Predicted:
        if self._cache is None or self._cache[0] != step:
            value = true_quantity(self.sim, self.mode)
            n = self.stats.n_at(step)
            everything = np.ones(len(value), dtype=bool)
            nothing = np.zeros(len(value), dtype=bool)  # no silence back-off in the simulator's worlds
            predicted = Predicted(value, everything, n, value, np.zeros(len(value)), nothing)
            self._cache = (step, predicted, None)
        return self._cache[1]


class TransferOracleEnvSched(EnvSched):
    """EnvSched whose frontier transfer factor is read from ``sim`` (``TRANSFER_MODES``; diagnostic, bench only)."""

    def __init__(self, *args, sim: Simulator, mode: str, **kwargs):
        if not isinstance(sim, Simulator):
            raise ValueError(
                f"oracle mode {mode!r} reads the base simulator's skills; {type(sim).__name__} has none"
            )
        super().__init__(*args, **kwargs)
        self.sim, self.mode = sim, mode
        # the loadings are fixed for a world (only the skills' values move): built once, not at every step
        self.loadings = shared_loadings(sim) if mode == "transfer-kernel" else None

    def _transfer(self, frontier: np.ndarray) -> np.ndarray | float:
        if self.cfg.transfer_weight <= 0:
            return 1.0
        if self.loadings is None:
            t = true_transfer(self.sim)
        else:
            t = np.asarray(self.loadings @ (self.loadings.T @ frontier)).ravel()
        return relative_transfer(t, self.cfg.transfer_weight)


def run(regime: str, seed: int, names: list[str], horizon: int, target_step: int, overrides: dict) -> dict:
    world = make_world(regime_named(regime), seed, quick=True)
    out, runs = {}, {}
    for name in names:
        sim = world.sim.reset(seed)
        if name in MODES + TRANSFER_MODES:
            config = SchedulerConfig(
                batch_size=world.regime.batch_size, group_size=sim.config.group_size, **overrides
            )
            oracle = OracleEnvSched if name in MODES else TransferOracleEnvSched
            sched = oracle(world.catalog, config, seed=seed, sim=sim, mode=name)
        else:
            sched = scheduler_for(world, name, seed)
        runs[name] = run_campaign(sched, sim, horizon)
    target = float(runs["random"]["heldout"].iloc[target_step - 1])
    for name, m in runs.items():
        steps, rollouts = steps_to_target(m, target)
        out[name] = {
            "steps": horizon + 1 if np.isnan(steps) else steps,
            "hit7": m["hit_rate"].iloc[6],
            "mean_var": m["mean_var"].mean(),
            "zero_var": m["zero_var_groups"].mean(),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--regimes", default="paper,default,private")
    parser.add_argument("--world-seeds", default="0,1,2")
    parser.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES + TRANSFER_MODES)}")
    parser.add_argument("--target-step", type=int, default=60)
    parser.add_argument("--horizon", type=int, default=None, help="steps run (default: the target step)")
    parser.add_argument("--with-envsched", action="store_true", help="also run EnvSched as built")
    parser.add_argument("--set", action="append", default=[], help="SchedulerConfig FIELD=VALUE for oracles")
    args = parser.parse_args()
    refuse_unknown_regimes(parser, args.regimes.split(","))
    unknown = sorted(set(args.modes.split(",")) - set(MODES + TRANSFER_MODES))
    if unknown:
        parser.error(f"unknown oracle mode(s) {unknown}; known: {list(MODES + TRANSFER_MODES)}")
    reserved = {"batch_size": "the regime", "group_size": "the simulator"}
    overrides = field_overrides(args.set, SchedulerConfig, reserved=reserved)
    names = ["random", *args.modes.split(",")] + (["envsched"] if args.with_envsched else [])
    horizon = args.horizon or args.target_step
    seeds = [int(s) for s in args.world_seeds.split(",")]
    rows = []
    t0 = time.process_time()
    for regime in args.regimes.split(","):
        per_world = [run(regime, s, names, horizon, args.target_step, overrides) for s in seeds]
        random_steps = np.mean([w["random"]["steps"] for w in per_world])
        for name in names:
            steps = [w[name]["steps"] for w in per_world]
            rows.append(
                {
                    "regime": regime,
                    "selection fed": name,
                    "steps to target": fmt(steps),
                    "x random": round(random_steps / np.mean(steps), 2),
                    "hit@7": _mean_or_dash([w[name]["hit7"] for w in per_world]),
                    "mean var": round(float(np.mean([w[name]["mean_var"] for w in per_world])), 4),
                    "zero-var groups": round(float(np.mean([w[name]["zero_var"] for w in per_world])), 1),
                }
            )
        print(pd.DataFrame([r for r in rows if r["regime"] == regime]).to_string(index=False), flush=True)
    print(f"{time.process_time() - t0:.0f} CPU s")


if __name__ == "__main__":
    with threadpool_limits(limits=1):
        main()
