"""The ``skill`` engine: the skill policy (``training.policies.skill``) acting in the real environments.

Per step: G rollouts of every batch task run through the real tool-call interface and are scored by
the environment's real verifier (on the chosen executor: in-process, a local process pool or Ray);
the policy takes one GRPO policy-gradient step; every ``eval_every`` steps (and at step 1) it is
evaluated on the held-out tasks. The landing rows are the rollouts; the metrics are returned to the
training step, which writes them to ``step_metrics`` (and, once wired, to MLflow):

* ``rollout/...``: reward_mean, count, zero_variance_groups, all_fail_groups, mixed_groups,
  all_pass_groups, right_rate (share of decisions taken right), tool_calls_mean, errors, seconds,
  per_second (rollouts per second of wall clock);
* ``train/...``: trained_groups, loss, grad_norm, decisions, p_right_mean, lr;
* ``eval/...`` (evaluation steps only): heldout_score (mean reward of ``eval_samples`` sampled
  rollouts per held-out task, fixed seeds; graded with ``reward=graded``), heldout_pass_rate (the
  same rollouts' binary verdicts), heldout_pass_at_k (share of held-out tasks with
  at least one pass among them), heldout_p_all_right (the model's own mean P(every step right), no
  verifier), heldout_tasks, heldout_rollouts, seconds; at step 1 also initial_heldout_score (before
  the first update).

Options (``engine_options``): the ``SkillConfig`` fields, plus ``executor`` (inprocess | process |
ray), ``workers``, ``ray_address``, ``ray_runtime_env``, ``sources`` (default: the ``source`` column
of the task frames) and ``source_options`` (per source, as for ``TaskResolver``).
"""

from __future__ import annotations

import json
import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from envsched_core.dynamic_sampling import rollout_rounds
from training.engines.base import Refill, RolloutEngine
from training.executors import built_worker, make_executor
from training.policies.skill import (
    EVAL_STREAM,
    TRAIN_STREAM,
    Episode,
    RolloutRequest,
    SkillConfig,
    SkillPolicy,
    SkillWorkerSpec,
    rollout_seed,
)

STATE_FILE = "skill_policy.pkl"
EXECUTOR_OPTIONS = ("executor", "workers", "ray_address", "ray_runtime_env", "sources", "source_options")


def _sources(frames: list[pd.DataFrame | None], given: list[str] | None) -> tuple[str, ...]:
    if given:
        return tuple(sorted(given))
    names = set()
    for frame in frames:
        if frame is not None and len(frame):
            if "source" not in frame.columns:
                raise ValueError("skill engine: task frame has no 'source' column; pass the `sources` option")
            names.update(frame["source"].astype(str))
    if not names:
        raise ValueError("skill engine: no tasks, so no sources to load")
    return tuple(sorted(names))


def group_counts(rewards: np.ndarray) -> dict[str, float]:
    """all-fail / mixed / all-pass groups of a (n_groups, G) reward matrix."""
    spread = rewards.max(axis=1) - rewards.min(axis=1)
    flat = spread == 0
    return {
        "all_fail_groups": float((flat & (rewards[:, 0] <= 0)).sum()),
        "mixed_groups": float((~flat).sum()),
        "all_pass_groups": float((flat & (rewards[:, 0] > 0)).sum()),
    }


class SkillEngine(RolloutEngine):
    name = "skill"

    def __init__(
        self,
        tasks: pd.DataFrame,
        group_size: int,
        seed: int = 0,
        heldout: pd.DataFrame | None = None,
        eval_every: int = 0,
        **options: Any,
    ):
        executor_options = {k: options.pop(k) for k in EXECUTOR_OPTIONS if k in options}
        self.config = SkillConfig.from_options(options)
        self.group_size, self.seed, self.eval_every = int(group_size), int(seed), int(eval_every)
        self.train_ids = tasks["task_id"].astype(str).tolist()
        self.heldout_ids = [] if heldout is None else heldout["task_id"].astype(str).tolist()
        overlap = set(self.train_ids) & set(self.heldout_ids)
        if overlap:
            raise ValueError(
                f"skill engine: {len(overlap)} task(s) both in training and held-out, e.g. {min(overlap)}"
            )
        self.spec = SkillWorkerSpec(
            sources=_sources([tasks, heldout], executor_options.get("sources")),
            source_options_json=json.dumps(executor_options.get("source_options") or {}, sort_keys=True),
            mistake_weights=self.config.mistake_weights,
            n_positions=self.config.n_positions,
            call_sd=self.config.call_sd,
            reward=self.config.reward,
        )
        self.world = built_worker(self.spec).world  # this process's copy (shared with in-process rollouts)
        missing = [t for t in self.train_ids + self.heldout_ids if t not in self.world.plans]
        if missing:
            raise ValueError(
                f"skill engine: {len(missing)} task id(s) not in sources {self.spec.sources}, e.g. {missing[0]}"
            )
        theta = self.world.initial_theta(self.config, self.seed, self.train_ids)
        self.policy = SkillPolicy(self.world, self.config, theta)
        self.executor = make_executor(
            executor_options.get("executor", "inprocess"),
            workers=executor_options.get("workers"),
            address=executor_options.get("ray_address"),
            runtime_env=executor_options.get("ray_runtime_env"),
        )
        self.rollouts_done = 0

    # ---- the three parts of a step (the benchmark calls them separately for dynamic sampling) ----
    def rollout(self, batch: pd.DataFrame, step: int) -> list[list[Episode]]:
        """G rollouts of every task of ``batch``, one group per row, rows in order."""
        task_ids = batch["task_id"].astype(str).tolist()
        requests = [
            RolloutRequest(t, j, rollout_seed(self.seed, TRAIN_STREAM, step, t, j))
            for t in task_ids
            for j in range(self.group_size)
        ]
        episodes = self.executor.run(self.spec, self.policy.theta, requests)
        self.rollouts_done += len(episodes)
        g = self.group_size
        return [episodes[i * g : (i + 1) * g] for i in range(len(task_ids))]

    def train(self, groups: list[list[Episode]], n_primary: int) -> dict[str, float]:
        """One GRPO step on the first ``n_primary`` informative groups."""
        result = self.policy.update(groups, n_primary)
        return {
            "train/trained_groups": float(result.trained_groups),
            "train/loss": result.loss,
            "train/grad_norm": result.grad_norm,
            "train/decisions": float(result.decisions),
            "train/p_right_mean": result.p_right_mean,
            "train/lr": self.config.lr,
        }

    def evaluate(self) -> dict[str, float]:
        """The current policy on the held-out tasks: ``eval_samples`` rollouts each, fixed seeds."""
        if not self.heldout_ids:
            return {}
        started = time.perf_counter()
        k = self.config.eval_samples
        requests = [
            RolloutRequest(t, j, rollout_seed(self.seed, EVAL_STREAM, 0, t, j))
            for t in self.heldout_ids
            for j in range(k)
        ]
        episodes = self.executor.run(self.spec, self.policy.theta, requests)
        rewards = np.array([e.reward for e in episodes]).reshape(len(self.heldout_ids), k)  # (H, k)
        passed = np.array([e.verdict_reward for e in episodes]).reshape(len(self.heldout_ids), k)
        return {
            "eval/heldout_score": float(rewards.mean()),
            "eval/heldout_pass_rate": float(passed.mean()),
            "eval/heldout_pass_at_k": float((rewards.max(axis=1) >= 1.0).mean()),
            "eval/heldout_p_all_right": float(
                np.mean([self.policy.p_all_right(t) for t in self.heldout_ids])
            ),
            "eval/heldout_tasks": float(len(self.heldout_ids)),
            "eval/heldout_rollouts": float(rewards.size),
            "eval/seconds": time.perf_counter() - started,
        }

    def eval_due(self, step: int) -> bool:
        return self.eval_every > 0 and bool(self.heldout_ids) and (step == 1 or step % self.eval_every == 0)

    # ---- the engine interface ---------------------------------------------------------------------
    def run_step(
        self, batch: pd.DataFrame, step: int, refill: Refill | None = None
    ) -> tuple[pd.DataFrame, dict[str, float]]:
        metrics: dict[str, float] = {}
        if step == 1 and self.eval_due(step):
            metrics["eval/initial_heldout_score"] = self.evaluate()["eval/heldout_score"]
        started = time.perf_counter()

        def roll(frame: pd.DataFrame) -> tuple[list[list[Episode]], pd.DataFrame]:
            groups = self.rollout(frame, step)
            return groups, landing_rows([e for g in groups for e in g], step)

        batch, parts = rollout_rounds(batch, roll, None if refill is None else (lambda part: refill(part[1])))
        groups = [g for part in parts for g in part[0]]
        seconds = time.perf_counter() - started
        rows = pd.concat([part[1] for part in parts], ignore_index=True)
        metrics.update(rollout_metrics(groups, seconds))
        primary = int((batch["role"] != "oversample").sum()) if "role" in batch.columns else len(batch)
        metrics.update(self.train(groups, primary))
        if self.eval_due(step):
            metrics.update(self.evaluate())
        return rows, metrics

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        state = {
            "policy": self.policy.state_dict(),
            "seed": self.seed,  # all rollout randomness derives from it (no RNG stream to save)
            "rng_scheme": "SeedSequence(seed, stream, step, blake2b(task_id), rollout_idx)",
            "rollouts_done": self.rollouts_done,
            "train_ids": self.train_ids,
            "heldout_ids": self.heldout_ids,
        }
        (directory / STATE_FILE).write_bytes(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))

    def load(self, directory: Path) -> None:
        state = pickle.loads((directory / STATE_FILE).read_bytes())
        if state["seed"] != self.seed:
            raise ValueError(f"checkpoint {directory} has seed {state['seed']}, this engine {self.seed}")
        self.policy.load_state_dict(state["policy"])
        self.rollouts_done = int(state["rollouts_done"])

    def close(self) -> None:
        self.executor.close()


def landing_rows(episodes: list[Episode], step: int) -> pd.DataFrame:
    """Episodes as rows of the landing contract (all columns but campaign_id)."""
    return pd.DataFrame(
        {
            "step": np.full(len(episodes), step, dtype=np.int64),
            "task_id": [e.task_id for e in episodes],
            "rollout_idx": np.array([e.rollout_idx for e in episodes], dtype=np.int64),
            "reward": np.array([e.reward for e in episodes], dtype=np.float64),
            "n_turns": np.array([e.n_turns for e in episodes], dtype=np.int64),
            "n_tool_calls": np.array([e.n_tool_calls for e in episodes], dtype=np.int64),
            "tools_used": [list(e.tools_used) for e in episodes],
            "status": [e.status for e in episodes],
            "error": [e.error for e in episodes],
            "wall_time_s": np.array([e.wall_time_s for e in episodes], dtype=np.float64),
        }
    )


def rollout_metrics(groups: list[list[Episode]], seconds: float) -> dict[str, float]:
    rewards = np.array([[e.reward for e in g] for g in groups], dtype=np.float64)  # (n_groups, G)
    episodes = [e for g in groups for e in g]
    kinds = np.concatenate([e.kinds for e in episodes]) if episodes else np.zeros(0)
    counts = group_counts(rewards) if len(rewards) else {}
    return {
        "rollout/reward_mean": float(rewards.mean()),
        "rollout/count": float(rewards.size),
        "rollout/zero_variance_groups": counts["all_fail_groups"] + counts["all_pass_groups"],
        **{f"rollout/{name}": value for name, value in counts.items()},
        "rollout/right_rate": float((kinds < 0).mean()) if len(kinds) else float("nan"),
        "rollout/tool_calls_mean": float(np.mean([e.n_tool_calls for e in episodes])),
        "rollout/errors": float(sum(e.status != "ok" for e in episodes)),
        "rollout/seconds": seconds,
        "rollout/per_second": rewards.size / seconds if seconds > 0 else float("nan"),
    }
