"""The ``simulated`` engine: the envsched_core benchmark simulator laid over a real task catalogue.

No model and no environment run; rewards come from the simulator's latent-skill policy
(``envsched_core.simulator``), but its structure is the catalogue's own:

* one environment skill per real ``env_id``;
* one tool-type skill per real tool name (a tool name used in several environments, such as
  BFCL's ``cd``, is one shared skill, so learning transfers across those environments);
* one family skill per tool effect (read / write ...);
* difficulty d_i = d0 + 0.25 gold_calls + 0.15 turns + N(0, difficulty_sd), with d0 chosen so the
  initial median success probability is ``initial_success`` (early agentic RL: most groups fail);
* a task loads on at most 4 of its tools (write tools first, then by name), as the simulator does.

Held-out score: the mean success probability over the whole pool (the pipeline has no held-out
split yet). The GRPO-like update, drift and rollout noise are the simulator's.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pandas as pd

from envsched_core.dynamic_sampling import rollout_rounds
from envsched_core.simulator import SimConfig, Simulator
from training.engines.base import Refill, RolloutEngine, by_name

_MAX_TYPES = 4


class CatalogSimulator(Simulator):
    """A Simulator whose world is read from a catalogue frame instead of drawn at random."""

    def __init__(self, tasks: pd.DataFrame, config: SimConfig, seed: int = 0, initial_success: float = 0.15):
        self._tasks = tasks.reset_index(drop=True)
        self._initial_success = initial_success
        super().__init__(config, seed)

    def _build_world(self, rng: np.random.Generator) -> None:
        c, tasks = self.config, self._tasks
        env, env_names = pd.factorize(tasks["env_id"].astype(str))
        tool_lists, effect_lists = [], []
        for tools, effects in zip(tasks["tools"], tasks["tool_effects"], strict=True):
            pairs = sorted(zip(list(effects), list(tools), strict=True), key=lambda p: (p[0] == "read", p[1]))
            tool_lists.append([t for _, t in pairs[:_MAX_TYPES]])
            effect_lists.append([e for e, _ in pairs[:_MAX_TYPES]])
        type_codes, self.type_names = pd.factorize(
            pd.Series([t for ts in tool_lists for t in ts], dtype=object)
        )
        family_of = {}
        for name, effect in zip(type_codes, [e for es in effect_lists for e in es], strict=True):
            family_of.setdefault(name, effect)
        families, family_names = pd.factorize(pd.Series([family_of[t] for t in range(len(self.type_names))]))
        self.family_names = np.asarray(family_names, dtype=object)
        n, n_env, n_types, n_fam = len(tasks), len(env_names), len(self.type_names), len(family_names)
        types = np.full((n, _MAX_TYPES), -1, dtype=np.int64)
        cursor = 0
        for i, ts in enumerate(tool_lists):
            types[i, : len(ts)] = type_codes[cursor : cursor + len(ts)]
            cursor += len(ts)

        self.env_names = np.asarray(env_names, dtype=object)
        self.type_family = families
        gold_calls = tasks["gold_calls"].to_numpy(dtype=float)
        turns = tasks["turns"].to_numpy(dtype=float)
        graded = (
            (tasks["reward_kind"] == "graded").to_numpy() if "reward_kind" in tasks else np.zeros(n, bool)
        )
        self.n_train = n
        self._task_env, self._task_types = env, types
        self._gold_calls, self._turns = gold_calls, turns
        self._is_train = np.ones(n, bool)
        self._train_rows = self._heldout_rows = np.arange(n)
        self._graded = graded

        self._off_type, self._off_fam = n_env, n_env + n_types
        self._off_task = n_env + n_types + n_fam
        self.n_skills = self._off_task + n
        used = types >= 0
        k = np.maximum(used.sum(axis=1, keepdims=True), 1)
        idx, w = np.zeros((n, 10), dtype=np.int64), np.zeros((n, 10))
        idx[:, 0], w[:, 0] = env, c.w_env
        idx[:, 1:5] = np.where(used, self._off_type + types, 0)
        w[:, 1:5] = np.where(used, c.w_type / k, 0.0)
        idx[:, 5:9] = np.where(used, self._off_fam + families[np.maximum(types, 0)], 0)
        w[:, 5:9] = np.where(used, c.w_fam / k, 0.0)
        idx[:, 9], w[:, 9] = self._off_task + np.arange(n), c.w_task
        self._load_idx, self._load_w = idx, w

        theta0 = np.zeros(self.n_skills)
        theta0[:n_env] = rng.normal(c.mu_env, c.sd_env, n_env)
        theta0[self._off_type : self._off_fam] = rng.normal(c.mu_type, c.sd_type, n_types)
        theta0[self._off_fam : self._off_task] = rng.normal(c.mu_fam, c.sd_fam, n_fam)
        self._theta0 = theta0
        spread = 0.25 * gold_calls + 0.15 * turns + rng.normal(0, c.difficulty_sd, n)
        skill = (w * theta0[idx]).sum(axis=1)
        # d0 so that median(sigmoid(skill - d)) = initial_success: early on most groups all fail.
        target_logit = np.log(self._initial_success / (1 - self._initial_success))
        self._difficulty = spread + float(np.median(skill - spread) - target_logit)

    @property
    def task_ids(self) -> np.ndarray:
        return self._tasks["task_id"].astype(str).to_numpy()

    @property
    def skill_names(self) -> np.ndarray:
        """What each entry of theta is the skill of: ``env:``, ``type:``, ``family:`` or ``task:`` + its name."""
        parts = [("env", self.env_names), ("type", self.type_names), ("family", self.family_names)]
        names = [f"{kind}:{name}" for kind, values in parts for name in values]
        return np.asarray(names + [f"task:{t}" for t in self.task_ids], dtype=object)

    def learned(self) -> np.ndarray:
        """theta minus the initial policy: what training added to each skill."""
        return self.theta - self._theta0

    def carry_over(self, skills: np.ndarray, learned: np.ndarray) -> None:
        """Start from a policy trained on another pool: each skill it had keeps what it learned, by name; the
        rest (environments, tool types, tasks added since) start where a fresh policy does."""
        self.theta = self._theta0 + by_name(self.skill_names, skills, learned, np.zeros_like(self._theta0))


class SimulatedEngine(RolloutEngine):
    """Rollouts and a GRPO-like update from the simulator; the landing rows carry plausible extras
    (turns, tool calls, tools used) taken from the catalogue."""

    name = "simulated"

    def __init__(self, tasks: pd.DataFrame, group_size: int, seed: int = 0, initial_success: float = 0.15):
        self.sim = CatalogSimulator(
            tasks, SimConfig(group_size=group_size), seed=seed, initial_success=initial_success
        )
        self.sim.reset(seed)
        self._tasks = tasks.set_index("task_id")
        self.group_size = group_size

    def run_step(
        self, batch: pd.DataFrame, step: int, refill: Refill | None = None
    ) -> tuple[pd.DataFrame, dict[str, float]]:
        g = self.group_size
        batch, parts = rollout_rounds(batch, lambda frame: self.sim.rollout(frame, step), refill)
        rollouts = pd.concat(parts, ignore_index=True)
        primary = int((batch["role"] != "oversample").sum())
        trained = self.sim.train(rollouts, primary)
        self.sim.drift()
        info = self._tasks.loc[rollouts["task_id"]]
        rows = pd.DataFrame(
            {
                "step": step,
                "task_id": rollouts["task_id"].to_numpy(),
                "rollout_idx": np.tile(np.arange(g), len(batch)),
                "reward": rollouts["reward"].to_numpy(),
                "n_turns": info["turns"].to_numpy(dtype=np.int64),
                "n_tool_calls": info["gold_calls"].to_numpy(dtype=np.int64),
                "tools_used": [list(t) for t in info["tools"]],
                "status": "ok",
                "error": None,
            }
        )
        reward = rows["reward"].to_numpy().reshape(-1, g)
        metrics = {
            "rollout/reward_mean": float(reward.mean()),
            "rollout/zero_variance_groups": float((reward.std(axis=1) == 0).sum()),
            "rollout/count": float(reward.size),
            "train/trained_groups": float(trained),
            "eval/pool_success": float(self.sim.heldout_score()),
        }
        return rows, metrics

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        state = {**self.sim.state_dict(), "skills": self.sim.skill_names, "learned": self.sim.learned()}
        (directory / "engine.pkl").write_bytes(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))

    def load(self, directory: Path) -> None:
        state = pickle.loads((directory / "engine.pkl").read_bytes())
        skills = state.get("skills")  # absent: saved before checkpoints named their skills
        if skills is not None and not np.array_equal(skills, self.sim.skill_names):  # the pool changed since
            self.sim.carry_over(skills, state["learned"])
            self.sim.rng.bit_generator.state = state["rng"]
        else:
            self.sim.load_state_dict(state)
