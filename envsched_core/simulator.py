"""Benchmark simulator: a synthetic agentic-RL world in which a task scheduler can be tested.

Generative model (all of it hidden from the scheduler except the catalogue columns listed below)
-----------------------------------------------------------------------------------------------
World, drawn once from `seed`:
* `n_tool_types` abstract tool types (e.g. "search_order", "update_booking"), each with an effect
  (read / write / create / delete) and a skill *family* (`n_families`). Type popularity is Zipf-like,
  so some tool types recur in many environments and others are rare.
* `n_envs` environments. Environment e exposes 4..10 tool types (qualified tool names
  "env017.search_order"), has a verifier kind (binary "state_match" or graded "partial_checks", share
  `graded_share`) and a base skill offset.
* Each environment has `tasks_per_env` training tasks (uneven sizes with `env_size_skew`) and
  `heldout_per_env` held-out tasks. A task uses 1..4 of its environment's tool types, has
  gold_calls = tools + Poisson(1) calls, turns = 1 + Poisson(1.5), and a difficulty
  d_i = d0 + 0.25 gold_calls + 0.15 turns + N(0, difficulty_sd): longer tasks are harder, plus a large
  idiosyncratic part no signature reveals.

Policy, a vector theta of latent skills: one per environment, one per tool type, one per family,
and one per training task (memorisation, which does not transfer to held-out tasks):
    z_i = w_env theta_env[e_i] + w_type mean_tau theta_type[tau] + w_fam mean_tau theta_fam[f(tau)]
          + w_task theta_task[i] - d_i,        p_i = sigmoid(z_i).
theta starts at N(mu, sd) per skill kind, mu chosen so that early on most groups of G rollouts all
fail, some are mixed and few all pass (the regime of agentic RL early in training).

Rollouts: binary environments give r ~ Bernoulli(p_i); graded ones give r = Binomial(K, p_i) / K
(K = `graded_checks` partial checks). The expected population variance of a group is
(G - 1)/G * p(1 - p) (binary) or (G - 1)/G * p(1 - p)/K (graded).

Update (GRPO-like): a group's push on its logit is the policy-gradient signal of group-normalised
advantages, sum_j A_j (r_j - p) / G = std(r) for binary rewards — zero for a zero-variance group.
Each trained group i adds lr / B * w_k * std(r_i) to every skill k it loads on (so learning on one task
transfers to its environment, to its tool types in every environment, and to their families). Only the
first B informative groups of a step train (DAPO-style schedulers may roll out more). After each
step every shared skill drifts by N(0, drift) — the policy moves even where it is not trained.

Held-out score: mean expected reward p over held-out tasks (never in the catalogue).

Catalogue exposed (`catalog_frame`): task_id, env_id, text, tools, tool_effects, state_fields, turns,
gold_calls, verifier, reward_kind, and a synthetic `embedding` — a noisy unit-norm mix of random vectors of the
task's environment, tool types and families (so it correlates with the latent skills it loads on,
not with difficulty), letting tests skip the sentence-transformers model.

Everything is vectorised with numpy and deterministic per (seed, run seed). Two standard settings:
`SMALL` (50 envs x 40 tasks) and `LARGE` (500 envs x 200 tasks).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from .catalog import TaskCatalog
from .dynamic_sampling import RewardFeed, rollout_rounds
from .metrics import (
    ENVS_PER_BATCH,
    EXPLOIT_HIT_RATE,
    MEAN_VARIANCE,
    MEDIAN_REWARD,
    MEDIAN_VARIANCE,
    TOOLS_PER_BATCH,
    ZERO_VARIANCE_GROUPS,
    batch_metrics,
    trained_groups,
)

_VERBS = [
    "search",
    "get",
    "list",
    "update",
    "create",
    "delete",
    "book",
    "cancel",
    "transfer",
    "check",
    "send",
    "modify",
    "compute",
    "return",
    "exchange",
    "find",
]
_NOUNS = [
    "order",
    "booking",
    "user",
    "flight",
    "file",
    "account",
    "message",
    "ticket",
    "item",
    "payment",
    "vehicle",
    "stock",
    "reservation",
    "directory",
    "contact",
    "invoice",
    "route",
    "product",
    "review",
    "calendar",
]
_EFFECT_OF_VERB = {
    "search": "read",
    "get": "read",
    "list": "read",
    "check": "read",
    "find": "read",
    "compute": "read",
    "update": "write",
    "modify": "write",
    "transfer": "write",
    "exchange": "write",
    "send": "create",
    "book": "create",
    "create": "create",
    "return": "write",
    "cancel": "delete",
    "delete": "delete",
}
_DOMAINS = [
    "retail",
    "airline",
    "file system",
    "banking",
    "messaging",
    "travel",
    "vehicle control",
    "trading",
    "ticketing",
    "calendar",
]


@dataclass(frozen=True)
class SimConfig:
    n_envs: int = 50
    """Number of environments."""
    tasks_per_env: int = 40
    """Training tasks per environment (all appear in the catalogue); the mean when env_size_skew > 0."""
    env_size_skew: float = 0.0
    """Uneven environments: the k-th largest has training tasks proportional to k^-env_size_skew (at least 2;
    the order drawn per world), about n_envs x tasks_per_env in all. 0 = every environment has tasks_per_env."""
    heldout_per_env: int = 6
    """Held-out tasks per environment (evaluation only, never in the catalogue)."""
    n_tool_types: int = 96
    """Abstract tool types shared across environments."""
    n_families: int = 12
    """Skill families grouping tool types."""
    group_size: int = 8
    """G: rollouts per selected task."""
    graded_share: float = 0.3
    """Share of environments with graded (partial-credit) verifiers."""
    graded_checks: int = 4
    """K: partial checks of a graded verifier (reward = passed / K)."""
    embed_dim: int = 32
    """Dimension of the synthetic task embedding."""
    embed_noise: float = 0.5
    """Weight of the task-specific noise in the embedding (higher = less informative)."""
    w_env: float = 0.5
    w_type: float = 0.3
    w_fam: float = 0.2
    w_task: float = 0.4
    """Loadings of a task's logit on its environment / tool-type / family / own skills."""
    mu_env: float = 0.0
    sd_env: float = 1.2
    mu_type: float = 0.0
    sd_type: float = 1.0
    mu_fam: float = 0.0
    sd_fam: float = 0.6
    """Initial skill distributions."""
    d0: float = 2.2
    difficulty_sd: float = 1.0
    """Difficulty offset and its idiosyncratic spread (see module docstring)."""
    lr: float = 6.0
    """Step size: skill k moves by lr / B * sum over trained groups of loading_k * std(r)."""
    drift: float = 0.01
    """Std of the per-step random walk of every shared skill."""

    def __post_init__(self) -> None:
        """A world needs tasks, groups that can differ and readable rewards; refuse one that does not, by name."""
        at_least_one = ("n_envs", "tasks_per_env", "heldout_per_env", "n_tool_types", "n_families")
        at_least_one += ("graded_checks", "embed_dim")
        wrong = [
            f"{name}={getattr(self, name)} must be >= 1" for name in at_least_one if getattr(self, name) < 1
        ]
        if self.group_size < 2:
            wrong.append(f"group_size={self.group_size} must be >= 2 (a group of one has no variance)")
        if not 0.0 <= self.graded_share <= 1.0:
            wrong.append(f"graded_share={self.graded_share} must be in [0, 1]")
        not_negative = ("lr", "drift", "difficulty_sd", "sd_env", "sd_type", "sd_fam", "embed_noise")
        wrong += [
            f"{name}={getattr(self, name)} must be >= 0"
            for name in not_negative
            if not getattr(self, name) >= 0
        ]
        if wrong:
            raise ValueError(f"SimConfig: {'; '.join(wrong)}.")


SMALL = SimConfig(n_envs=50, tasks_per_env=40)
LARGE = SimConfig(n_envs=500, tasks_per_env=200)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def structural_difficulty(config: SimConfig, gold_calls: np.ndarray, turns: np.ndarray) -> np.ndarray:
    """The part of a task's difficulty its length explains: d0 + 0.25 gold_calls + 0.15 turns."""
    return config.d0 + 0.25 * gold_calls + 0.15 * turns


def _position_in_env(env: np.ndarray) -> np.ndarray:
    """Each row's index among the rows of its environment (rows sorted by environment)."""
    return np.arange(len(env)) - np.searchsorted(env, env, side="left")


def env_task_ids(env_names: np.ndarray, env: np.ndarray) -> np.ndarray:
    """Task ids "<environment>-t<position in it>" for rows sorted by environment ``env``, the position at a fixed
    width, so ids sort in catalogue order."""
    j = _position_in_env(env)
    width = max(4, len(str(int(j.max(initial=0)))))
    return np.char.add(np.char.add(env_names[env], "-t"), np.char.zfill(j.astype(str), width))


def catalog_columns(
    task_ids: np.ndarray,
    env_ids: np.ndarray,
    texts: list[str],
    tools: list[list[str]],
    effects: list[list[str]],
    fields: list[list[str]],
    turns: np.ndarray,
    gold_calls: np.ndarray,
    graded: np.ndarray,
    embedding: np.ndarray,
) -> pd.DataFrame:
    """The catalogue frame a scheduler may see, one row per training task, in the columns every world model
    writes (this simulator and `latent_world.LatentWorld`)."""
    return pd.DataFrame(
        {
            "task_id": task_ids,
            "env_id": env_ids,
            "text": texts,
            "tools": tools,
            "tool_effects": effects,
            "state_fields": fields,
            "turns": turns.astype(int),
            "gold_calls": gold_calls.astype(int),
            "verifier": np.where(graded, "partial_checks", "state_match"),
            "reward_kind": np.where(graded, "graded", "binary"),
            "embedding": list(embedding),
        }
    )


class Simulator:
    """A world (fixed by `seed`) plus a policy that `reset(run_seed)` restores to its start."""

    def __init__(self, config: SimConfig = SMALL, seed: int = 0):
        self.config, self.seed = config, int(seed)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0]))
        self._build_world(rng)
        self.reset(0)

    # ---- world ----------------------------------------------------------------------------------
    def _build_world(self, rng: np.random.Generator) -> None:
        c = self.config
        n_types, n_env = c.n_tool_types, c.n_envs
        verb = rng.integers(len(_VERBS), size=n_types)
        noun = rng.integers(len(_NOUNS), size=n_types)
        self.type_names = np.array(
            [f"{_VERBS[v]}_{_NOUNS[n]}_{t}" for t, (v, n) in enumerate(zip(verb, noun, strict=True))]
        )
        self.type_effect = np.array([_EFFECT_OF_VERB[_VERBS[v]] for v in verb])
        self.type_noun = np.array([_NOUNS[n] for n in noun])
        self.type_family = rng.integers(c.n_families, size=n_types)
        popularity = 1.0 / np.arange(1, n_types + 1) ** 0.8
        popularity = rng.permutation(popularity / popularity.sum())

        # Environments: a tool-type set each, a verifier kind, a domain for the text.
        n_env_tools = rng.integers(4, 11, size=n_env)
        env_types = np.full((n_env, 10), -1, dtype=np.int64)
        for e in range(n_env):  # n_envs <= a few thousand: a loop is fine here
            env_types[e, : n_env_tools[e]] = rng.choice(
                n_types, size=n_env_tools[e], replace=False, p=popularity
            )
        self.env_graded = rng.random(n_env) < c.graded_share
        self.env_domain = rng.integers(len(_DOMAINS), size=n_env)
        self.env_names = np.array([f"env{e:04d}" for e in range(n_env)])

        # Tasks (training then held-out), all vectorised: slot s of a task picks env tool k_s.
        sizes = self._env_sizes()
        per_env = sizes + c.heldout_per_env
        env = np.repeat(np.arange(n_env), per_env)
        n_all = len(env)
        n_tools = rng.integers(1, 5, size=n_all)
        n_tools = np.minimum(n_tools, n_env_tools[env])
        # Random distinct positions within the env's tool list: argsort of uniform keys, masked.
        keys = rng.random((n_all, 10))
        keys[np.arange(10)[None, :] >= n_env_tools[env][:, None]] = np.inf
        pos = np.argsort(keys, axis=1)[:, :4]
        types = np.take_along_axis(env_types[env], pos, axis=1)
        types[np.arange(4)[None, :] >= n_tools[:, None]] = -1  # (n_all, 4), -1 = unused
        gold_calls = n_tools + rng.poisson(1.0, size=n_all)
        turns = 1 + rng.poisson(1.5, size=n_all)
        difficulty = structural_difficulty(c, gold_calls, turns) + rng.normal(0, c.difficulty_sd, n_all)

        train = _position_in_env(env) < sizes[env]
        self.n_train = int(train.sum())
        self._task_env, self._task_types = env, types
        self._gold_calls, self._turns, self._difficulty = gold_calls, turns, difficulty
        self._is_train = train
        self._train_rows = np.flatnonzero(train)
        self._heldout_rows = np.flatnonzero(~train)
        self._graded = self.env_graded[env]

        # Skill layout in theta: [env | type | family | task (training tasks only)].
        self._off_type = n_env
        self._off_fam = n_env + n_types
        self._off_task = n_env + n_types + c.n_families
        self.n_skills = self._off_task + self.n_train
        task_slot = np.full(n_all, -1, dtype=np.int64)
        task_slot[self._train_rows] = np.arange(self.n_train)
        used = types >= 0
        k = used.sum(axis=1, keepdims=True)
        # Loadings as a fixed-width (n_all, 10) index/weight table: env, 4 types, 4 families, task.
        idx = np.zeros((n_all, 10), dtype=np.int64)
        w = np.zeros((n_all, 10))
        idx[:, 0], w[:, 0] = env, c.w_env
        idx[:, 1:5] = np.where(used, self._off_type + types, 0)
        w[:, 1:5] = np.where(used, c.w_type / k, 0.0)
        idx[:, 5:9] = np.where(used, self._off_fam + self.type_family[np.maximum(types, 0)], 0)
        w[:, 5:9] = np.where(used, c.w_fam / k, 0.0)
        idx[:, 9] = np.where(task_slot >= 0, self._off_task + task_slot, 0)
        w[:, 9] = np.where(task_slot >= 0, c.w_task, 0.0)
        self._load_idx, self._load_w = idx, w

        theta0 = np.zeros(self.n_skills)
        theta0[:n_env] = rng.normal(c.mu_env, c.sd_env, n_env)
        theta0[self._off_type : self._off_fam] = rng.normal(c.mu_type, c.sd_type, n_types)
        theta0[self._off_fam : self._off_task] = rng.normal(c.mu_fam, c.sd_fam, c.n_families)
        self._theta0 = theta0

        # Synthetic embeddings: env, type and family directions plus task noise.
        d = c.embed_dim
        u_env = rng.normal(size=(n_env, d))
        u_type = rng.normal(size=(n_types, d))
        u_fam = rng.normal(size=(c.n_families, d))
        t_rows = self._train_rows
        tt = types[t_rows]
        m = (tt >= 0)[..., None]
        kk = m.sum(axis=1)
        emb = (
            0.6 * u_env[env[t_rows]]
            + 0.6 * (u_type[np.maximum(tt, 0)] * m).sum(axis=1) / kk
            + 0.3 * (u_fam[self.type_family[np.maximum(tt, 0)]] * m).sum(axis=1) / kk
            + c.embed_noise * rng.normal(size=(len(t_rows), d))
        )
        self._embedding = (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
        self._text_seed = int(rng.integers(2**31))

    def _env_sizes(self) -> np.ndarray:
        """Training tasks per environment (`env_size_skew`; drawn from a stream of its own)."""
        c = self.config
        if c.env_size_skew < 0:
            raise ValueError(f"SimConfig: env_size_skew={c.env_size_skew} must be >= 0.")
        if c.env_size_skew == 0:
            return np.full(c.n_envs, c.tasks_per_env, dtype=np.int64)
        share = np.arange(1, c.n_envs + 1, dtype=float) ** -c.env_size_skew
        share = np.random.default_rng(np.random.SeedSequence([self.seed, 6])).permutation(share / share.sum())
        return np.maximum(np.rint(share * c.n_envs * c.tasks_per_env), 2).astype(np.int64)

    # ---- policy state ---------------------------------------------------------------------------
    def reset(self, run_seed: int = 0) -> Simulator:
        """Restore the initial policy; rollout noise and drift come from (seed, run_seed)."""
        self.theta = self._theta0.copy()
        self.rng = np.random.default_rng(np.random.SeedSequence([self.seed, 1, int(run_seed)]))
        return self

    def state_dict(self) -> dict[str, Any]:
        return {"theta": self.theta.copy(), "rng": copy.deepcopy(self.rng.bit_generator.state)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.theta = np.asarray(state["theta"], dtype=float).copy()
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])

    def _logit(self, rows: np.ndarray) -> np.ndarray:
        return (self._load_w[rows] * self.theta[self._load_idx[rows]]).sum(axis=1) - self._difficulty[rows]

    def _success(self, rows: np.ndarray) -> np.ndarray:
        return _sigmoid(self._logit(rows))

    def success_probability(self) -> np.ndarray:
        """p_i of every training task, catalogue order (oracle; for metrics only)."""
        return self._success(self._train_rows)

    def expected_variance(self) -> np.ndarray:
        """Expected population variance of a G-group for every training task (oracle)."""
        return self._group_variance(self.success_probability())

    def available_tasks(self) -> np.ndarray:
        """Mask over training tasks (catalogue order) of those a scheduler may pick at the coming step (all of
        them here; `worlds.WorldSimulator` holds environments back until they join)."""
        return np.ones(self.n_train, dtype=bool)

    def _group_variance(self, p: np.ndarray) -> np.ndarray:
        """Expected population variance of a G-group of every training task whose checks pass with rate ``p``."""
        g = self.config.group_size
        v = p * (1 - p) * (g - 1) / g
        return np.where(self._graded[self._train_rows], v / self.config.graded_checks, v)

    def heldout_score(self) -> float:
        """Expected reward on the held-out tasks under the current policy."""
        return float(self._success(self._heldout_rows).mean())

    # ---- catalogue --------------------------------------------------------------------------------
    @property
    def task_ids(self) -> np.ndarray:
        return env_task_ids(self.env_names, self._task_env[self._train_rows])

    def catalog_frame(self) -> pd.DataFrame:
        """What a scheduler may see: one row per training task."""
        rows = self._train_rows
        rng = np.random.default_rng(self._text_seed)
        types = self._task_types[rows]
        env = self._task_env[rows]
        tools, effects, fields, texts = [], [], [], []
        openers = ["Please", "The user wants you to", "Help the customer", "You must"]
        for n, (e, tt) in enumerate(zip(env, types, strict=True)):
            tt = tt[tt >= 0]
            names = [f"{self.env_names[e]}.{self.type_names[t]}" for t in tt]
            tools.append(names)
            effects.append([str(x) for x in self.type_effect[tt]])
            fields.append(
                sorted({f"{self.type_noun[t]}.status" for t in tt if self.type_effect[t] != "read"})
            )
            steps = ", then ".join(self.type_names[t].rsplit("_", 1)[0].replace("_", " ") for t in tt)
            texts.append(
                f"{openers[rng.integers(4)]} {steps} in the {_DOMAINS[self.env_domain[e]]} "
                f"system (case {n % 97})."
            )
        return catalog_columns(
            self.task_ids,
            self.env_names[env],
            texts,
            tools,
            effects,
            fields,
            self._turns[rows],
            self._gold_calls[rows],
            self._graded[rows],
            self._embedding,
        )

    def task_catalog(self) -> TaskCatalog:
        """The catalogue as a `TaskCatalog` (built once per world; batch metrics read its tools)."""
        if getattr(self, "_task_catalog", None) is None:
            self._task_catalog = TaskCatalog.from_frame(self.catalog_frame())
        return self._task_catalog

    # ---- rollouts and training ---------------------------------------------------------------------
    def _rows_of(self, task_ids: pd.Series) -> np.ndarray:
        if not hasattr(self, "_id_index"):
            self._id_index = pd.Index(self.task_ids)
        pos = self._id_index.get_indexer(task_ids.astype(str))
        if (pos < 0).any():
            raise ValueError(f"unknown task_id(s) {task_ids[pos < 0].head(3).tolist()}")
        return pos

    def rollout(self, batch: pd.DataFrame, step: int) -> pd.DataFrame:
        """G rollouts per row of `batch`: DataFrame task_id, step, reward (G rows per task, in order)."""
        reward = self._draw_rewards(self._train_rows[self._rows_of(batch["task_id"])])
        return pd.DataFrame(
            {
                "task_id": np.repeat(batch["task_id"].astype(str).to_numpy(), self.config.group_size),
                "step": int(step),
                "reward": reward.ravel(),
            }
        )

    def _draw_rewards(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), G) rewards: Bernoulli(p) for binary verifiers, Binomial(K, p) / K for graded ones."""
        g, k = self.config.group_size, self.config.graded_checks
        p = self._group_success(rows)
        binary = (self.rng.random((len(rows), g)) < p).astype(float)
        graded = self.rng.binomial(k, np.broadcast_to(p, (len(rows), g))) / k
        return np.where(self._graded[rows][:, None], graded, binary)

    def _group_success(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), 1): the success rate each group's rollouts are drawn at (a subclass may move it per group)."""
        return self._success(rows)[:, None]

    def train(self, rollouts: pd.DataFrame, max_groups: int) -> int:
        """GRPO-like update from the first `max_groups` informative groups; returns how many trained."""
        if rollouts.empty:
            return 0
        pos, r = self._groups(rollouts)
        std = np.nanstd(r, axis=1)
        informative = np.flatnonzero(std > 1e-9)[:max_groups]
        if len(informative):
            rows = self._train_rows[pos[informative]]
            signal = self._group_signal(rows, r[informative], std[informative])
            # Batch-mean update, as a GRPO loss averaged over the B groups of the training batch.
            push = (self.config.lr / max(max_groups, 1)) * self._load_w[rows] * signal[:, None]
            push = self._push_direction(rows, push)
            self.theta += np.bincount(
                self._load_idx[rows].ravel(), weights=push.ravel(), minlength=self.n_skills
            )
        return len(informative)

    def _groups(self, rollouts: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(catalogue position of each group's task, its rewards as a (groups, G) array, NaN past a short
        group's end). A group is a run of one task's rows, at most G long: a runner may return fewer."""
        g = self.config.group_size
        ids = rollouts["task_id"].to_numpy()
        starts = np.ones(len(ids), dtype=bool)
        starts[1:] = ids[1:] != ids[:-1]
        run = np.cumsum(starts) - 1
        # a run longer than G is two groups (one task handed out twice in a row)
        starts |= (np.arange(len(ids)) - np.flatnonzero(starts)[run]) % g == 0
        group = np.cumsum(starts) - 1
        first = np.flatnonzero(starts)
        r = np.full((len(first), g), np.nan)
        r[group, np.arange(len(ids)) - first[group]] = rollouts["reward"].to_numpy(dtype=float)
        return self._rows_of(pd.Series(ids[first])), r

    def _group_signal(self, rows: np.ndarray, reward: np.ndarray, std: np.ndarray) -> np.ndarray:
        """A group's policy-gradient push on its task's logit, sum_j A_j (r_j - p) / G = std(r)."""
        return std

    def _push_direction(self, rows: np.ndarray, push: np.ndarray) -> np.ndarray:
        """The push of the trained groups of `rows` (a subclass may make some of them noise)."""
        return push

    def drift(self) -> None:
        """Random walk of the shared skills (environment, tool type, family)."""
        n_shared = self._off_task
        self.theta[:n_shared] += self.rng.normal(0.0, self.config.drift, n_shared)

    def with_config(self, **changes: Any) -> Simulator:
        """A new world from the same seed with some config fields changed."""
        return Simulator(replace(self.config, **changes), self.seed)


# ---- the campaign loop ------------------------------------------------------------------------------
def run_campaign(
    scheduler: Any,
    sim: Simulator,
    steps: int,
    first_step: int = 1,
    observe_lag: int = 0,
    sync_warmup: int = 0,
    rebuild_at: int | None = None,
    rebuild: Callable[[pd.DataFrame], Any] | None = None,
) -> pd.DataFrame:
    """Run `steps` select -> rollout -> observe (-> refill ...) -> train steps; one metrics row per step.

    The rounds of a step run through `dynamic_sampling.rollout_rounds`: dynamic-sampling schedulers
    (DAPO, GRESO) refill until their rule stops, and every rollout is counted in `rollouts`. The
    policy then trains on the first B informative groups, B = rows of the step that are not
    'oversample'. Metrics come from `metrics.batch_metrics`, over the groups trained on: `mean_var` /
    `median_var` / `median_reward` / `zero_var_groups` / `envs` / `tools`; `hit_rate` = share of the
    trained 'exploit' picks whose realised variance is > 0 and at least the 75th percentile of the
    pool's expected variance (`n_exploit` of them); `rollouts` (every round, G per task handed out, those
    a runner dropped included) and `cum_rollouts`;
    `trained_groups` = groups that moved the policy (variance > 0); `pool_var` = the pool's mean
    expected variance; `heldout` after the update. The initial held-out score is in
    `frame.attrs["heldout0"]`.

    `observe_lag` = L > 0 runs an asynchronous trainer (`dynamic_sampling.RewardFeed`): `select(t)` has
    seen the rewards of steps <= t - 1 - L only (L = 1: the next batch is chosen while this one's
    rollouts are still running), except that steps <= `sync_warmup` are observed before the next one is
    selected; rewards still in flight at the end are observed before returning.

    `rebuild_at` = K with `rebuild(history)`: before step K the campaign's scheduler is replaced by
    `rebuild(every rollout so far)` (task_id, step, reward; what was in flight is observed first), as a
    pipeline rebuilds its scheduler when the pool changes (tasks added mid-campaign).
    """
    if (rebuild_at is None) != (rebuild is None):
        raise ValueError("run_campaign: rebuild_at and rebuild go together.")
    if rebuild_at is not None and not first_step < rebuild_at < first_step + steps:
        raise ValueError(
            f"run_campaign: rebuild_at={rebuild_at} must be a step after the first ({first_step}) and at most the "
            f"last ({first_step + steps - 1})."
        )
    feed = RewardFeed(scheduler, observe_lag, sync_warmup)
    catalog = sim.task_catalog()
    rows, cum, history = [], 0, []
    heldout0 = sim.heldout_score()
    for step in range(first_step, first_step + steps):
        if step == rebuild_at:
            feed.flush()
            scheduler = rebuild(pd.concat(history, ignore_index=True))
            feed = RewardFeed(scheduler, observe_lag, sync_warmup)
        expected = sim.expected_variance()[sim.available_tasks()]  # the pool the scheduler picks from

        def roll(frame: pd.DataFrame, step: int = step) -> pd.DataFrame:
            return sim.rollout(frame, step)

        every, parts = rollout_rounds(scheduler.select(step), roll, feed.next_round(step))
        rollouts = pd.concat(parts, ignore_index=True)
        feed.step_done(step, rollouts)
        if rebuild_at is not None and step < rebuild_at:
            history.append(rollouts[["task_id", "step", "reward"]])
        b = int((every["role"] != "oversample").sum())
        trained = sim.train(rollouts, b)
        sim.drift()
        groups = trained_groups(every, rollouts)
        m = batch_metrics(every, rollouts, catalog, reference_variance=expected, groups=groups)
        # every group handed out was generated, including those a runner dropped (a `lost` world's)
        spent = len(every) * sim.config.group_size
        cum += spent
        rows.append(
            {
                "step": step,
                "n_selected": b,
                "mean_var": m[MEAN_VARIANCE],
                "median_var": m[MEDIAN_VARIANCE],
                "median_reward": m[MEDIAN_REWARD],
                "zero_var_groups": int(m[ZERO_VARIANCE_GROUPS]),
                "envs": int(m[ENVS_PER_BATCH]),
                "tools": int(m[TOOLS_PER_BATCH]),
                "n_exploit": int((groups["trained"] & (groups["role"] == "exploit")).sum()),
                "hit_rate": m[EXPLOIT_HIT_RATE],
                "rollouts": spent,
                "cum_rollouts": cum,
                "trained_groups": trained,
                "pool_var": float(expected.mean()),
                "heldout": sim.heldout_score(),
            }
        )
    feed.flush()
    out = pd.DataFrame(rows)
    out.attrs["heldout0"] = heldout0
    return out


def steps_to_target(metrics: pd.DataFrame, target: float) -> tuple[float, float]:
    """(first step whose held-out score >= target, cumulative rollouts then); NaN if never."""
    hit = metrics.index[metrics["heldout"] >= target]
    if len(hit) == 0:
        return float("nan"), float("nan")
    row = metrics.loc[hit[0]]
    return float(row["step"]), float(row["cum_rollouts"])
