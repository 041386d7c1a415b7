"""Which property of a GRPO group predicts how much the skill policy's held-out score gains from it?

    PYTHONPATH=. .venv/bin/python bench/learning_signal_real.py --catalogues bfcl,tau --seeds 2

A scheduler picks groups by a predicted property (EnvSched: the graded reward variance; DPS / MoPPS:
the binary success rate). This measures, on the real environments in ``bench/campaign_real.py``'s
regime, which realised property of a group goes with the learning it gives. For each (catalogue,
seed) the policy is first trained ``--warmup`` steps on random batches (B, G as in the campaigns);
then ``--candidates`` random training tasks are rolled out (G each) and each group's own GRPO update
(its share of a B-group step, ``SkillPolicy.update``'s gradient) is scored by the first-order change
of three held-out objectives it causes, ``gain = grad_H . (-lr * grad_group)``:

* ``graded``: the held-out score the campaigns report (mean graded reward), its gradient estimated by
  the score function over ``--eval-samples`` real rollouts per held-out task (per-task baseline);
* ``binary``: the same rollouts' binary verdicts (pass rate);
* ``p_all``: the policy's own P(every step right), exact (no verifier, no noise).

For each group property it prints the Spearman correlation with each gain and the total gain of the
B groups it would pick (the top B by the property, an oracle on the realised value) relative to the
best possible B (the top B by gain itself) and to B random groups. Properties: graded variance,
binary variance acc (1 - acc), mean graded reward, success rate acc, mixtures, and each divided by
the task's gold steps (its horizon). Last, per catalogue: the mean gain of the mixed pass / fail groups
by the task's number of gold steps (on tau-bench a long task's variance comes mostly from read calls
whose mistakes are harmless, so its groups teach little).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from bench.campaign_real import MIN_POOL_PER_SLOT, REGIMES, load_catalogue
from training.engines.skill import SkillEngine
from training.policies.skill import EVAL_STREAM, RolloutRequest, _log_sigmoid, rollout_seed

OUT = Path(__file__).parent / "out"


def group_gradient(engine: SkillEngine, group, batch_size: int) -> np.ndarray:
    """d loss / d theta of one group as a member of a B-group GRPO step (SkillPolicy.update's formula)."""
    policy = engine.policy
    features, offsets, right, advantage, trained = policy.loss_terms([group], 1)
    if len(trained) == 0:
        return np.zeros_like(policy.theta)
    z = policy.theta[features].sum(axis=1) + offsets
    p = 1.0 / (1.0 + np.exp(-z))
    dloss_dz = -advantage * (right.astype(float) - p) / (batch_size * len(group))
    grad = np.bincount(features.ravel(), weights=np.repeat(dloss_dz, 5), minlength=len(policy.theta))
    if not policy.config.learn_bias:
        grad[0] = 0.0
    return grad


def heldout_gradients(engine: SkillEngine, samples: int) -> dict[str, np.ndarray]:
    """Gradients of the held-out objectives w.r.t. theta (module docstring)."""
    policy, world = engine.policy, engine.world
    ids = engine.heldout_ids
    requests = [
        RolloutRequest(t, j, rollout_seed(engine.seed, EVAL_STREAM + 10, 0, t, j))
        for t in ids
        for j in range(samples)
    ]
    episodes = engine.executor.run(engine.spec, policy.theta, requests)
    out = {"graded": np.zeros_like(policy.theta), "binary": np.zeros_like(policy.theta)}
    for i in range(len(ids)):
        eps = episodes[i * samples : (i + 1) * samples]
        for key, rewards in (
            ("graded", np.array([e.reward for e in eps])),
            ("binary", np.array([e.verdict_reward for e in eps])),
        ):
            centred = rewards - rewards.mean()
            for e, a in zip(eps, centred, strict=True):
                if a == 0:
                    continue
                plan = world.plans[e.task_id]
                z = policy.theta[plan.features[e.decisions]].sum(axis=1) + plan.offsets[e.decisions]
                dlogp = e.right.astype(float) - 1.0 / (1.0 + np.exp(-z))
                feats = plan.features[e.decisions]
                out[key] += np.bincount(
                    feats.ravel(), weights=np.repeat(a * dlogp, 5), minlength=len(policy.theta)
                )
    n = len(ids) * samples
    out = {
        k: v / n * samples / max(samples - 1, 1) for k, v in out.items()
    }  # unbiased with a leave-in baseline
    grad_p = np.zeros_like(policy.theta)
    for t in ids:  # d/dtheta mean_t prod_k sigmoid(z_k) = P_t (1 - sigmoid(z_k)) on the step's features
        plan = world.plans[t]
        z = policy.theta[plan.features].sum(axis=1) + plan.offsets
        p_all = float(np.exp(_log_sigmoid(z).sum()))
        weights = np.repeat(p_all * (1.0 - 1.0 / (1.0 + np.exp(-z))), 5)
        grad_p += np.bincount(plan.features.ravel(), weights=weights, minlength=len(policy.theta))
    out["p_all"] = grad_p / len(ids)
    for g in out.values():
        if not policy.config.learn_bias:
            g[0] = 0.0
    return out


def measure(name: str, seed: int, args) -> pd.DataFrame:
    train, heldout = load_catalogue(name, 0.2, OUT / "cache")
    batch_size = max(1, min(args.batch_size, len(train) // MIN_POOL_PER_SLOT))
    engine = SkillEngine(
        train, args.group_size, seed, heldout=heldout, eval_samples=2, **REGIMES[args.regime]
    )
    rng = np.random.default_rng([seed, 99])
    for step in range(1, args.warmup + 1):
        batch = train.iloc[rng.choice(len(train), batch_size, replace=False)]
        engine.train(engine.rollout(batch, step), batch_size)
    grads = heldout_gradients(engine, args.eval_samples)
    n = min(args.candidates, len(train))
    candidates = train.iloc[rng.choice(len(train), n, replace=False)]
    groups = engine.rollout(candidates, args.warmup + 1)
    lr = engine.config.lr
    rows = []
    for group in groups:
        rewards = np.array([e.reward for e in group])
        acc = np.array([e.verdict_reward for e in group]) >= 1.0
        g = group_gradient(engine, group, batch_size)
        row = {
            "task_id": group[0].task_id,
            "graded_var": rewards.var(),
            "binary_var": acc.mean() * (1 - acc.mean()),
            "mean": rewards.mean(),
            "acc": acc.mean(),
            "length": len(engine.world.plans[group[0].task_id].steps),
        }
        for key, grad in grads.items():
            row[f"gain_{key}"] = float(grad @ (-lr * g))
        rows.append(row)
    engine.close()
    frame = pd.DataFrame(rows)
    frame["catalogue"], frame["seed"] = name, seed
    frame.attrs["batch_size"] = batch_size
    return frame


PROPERTIES = {
    "graded variance": lambda f: f["graded_var"],
    "binary variance acc(1-acc)": lambda f: f["binary_var"],
    "graded var x mean": lambda f: f["graded_var"] * f["mean"],
    "graded var, mean >= 0.5": lambda f: f["graded_var"] * (f["mean"] >= 0.5),
    "mean reward": lambda f: f["mean"],
    "success rate acc": lambda f: f["acc"],
    "binary var + graded var": lambda f: f["binary_var"] + f["graded_var"],
    "graded var / (1 + gold steps)": lambda f: f["graded_var"] / (1 + f["length"]),
    "binary var / (1 + gold steps)": lambda f: f["binary_var"] / (1 + f["length"]),
    "mixed pass/fail / (1 + gold steps)": lambda f: (f["binary_var"] > 0) / (1 + f["length"]),
    "graded var / sqrt(1 + gold steps)": lambda f: f["graded_var"] / np.sqrt(1 + f["length"]),
}


def report(frame: pd.DataFrame, batch_size: int, label: str) -> str:
    rows = []
    for prop, fn in PROPERTIES.items():
        value = fn(frame).to_numpy()
        row = {"property": prop}
        for gain in ("gain_graded", "gain_binary", "gain_p_all"):
            y = frame[gain].to_numpy()
            rho = spearmanr(value, y).statistic if np.ptp(value) > 0 else np.nan
            top = np.argsort(-value, kind="stable")[:batch_size]
            best = np.sort(y)[::-1][:batch_size].sum()
            rand = y.mean() * batch_size
            short = gain.removeprefix("gain_")
            row[f"rho {short}"] = rho
            row[f"top-B {short} / best"] = y[top].sum() / best if best > 0 else np.nan
            row[f"top-B {short} / random"] = y[top].sum() / rand if rand > 0 else np.nan
        rows.append(row)
    table = pd.DataFrame(rows).round(3)
    mixed = frame["graded_var"] > 0
    stats = (
        f"{len(frame)} groups, {mixed.mean():.0%} with graded variance > 0, "
        f"{(frame['binary_var'] > 0).mean():.0%} with mixed pass/fail; mean gain graded "
        f"{frame['gain_graded'].mean():.2e}, binary {frame['gain_binary'].mean():.2e}, p_all {frame['gain_p_all'].mean():.2e}"
    )
    title = f"[{label}] B={batch_size}: {stats}"
    return f"\n{title}\n{'-' * len(title)}\n{table.to_string(index=False)}\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--catalogues", default="bfcl,tau")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=10, help="random GRPO steps before measuring")
    parser.add_argument("--candidates", type=int, default=320, help="random training tasks rolled out")
    parser.add_argument("--eval-samples", type=int, default=8, help="rollouts per held-out task for grad H")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--regime", choices=sorted(REGIMES), default="paper")
    args = parser.parse_args()
    for name in args.catalogues.split(","):
        frames = [measure(name, seed, args) for seed in range(args.seeds)]
        for frame in frames:
            print(
                report(frame, frame.attrs["batch_size"], f"{name} seed {frame['seed'].iloc[0]}"), flush=True
            )
        both = pd.concat(frames)
        mixed = both[both["binary_var"] > 0]
        by_length = mixed.groupby(pd.cut(mixed["length"], [-1, 2, 4, 6, 10, 100]), observed=True)
        table = by_length.agg(
            groups=("gain_p_all", "size"),
            gain_graded=("gain_graded", "mean"),
            gain_p_all=("gain_p_all", "mean"),
            acc=("acc", "mean"),
        )
        print(
            f"\n[{name}] mixed pass/fail groups by gold steps (all seeds)\n{table.to_string()}\n", flush=True
        )


if __name__ == "__main__":
    main()
