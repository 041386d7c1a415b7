"""The skill policy: a small trainable agent that acts in the real environments, for CPU campaigns.

An LLM cannot be trained on a CPU, yet the scheduler must be shown to save rollouts against real
environments and real verifiers. The skill policy replaces the LLM by the smallest model that keeps
what matters to a scheduler: it acts through the environment's real tool-call interface, its reward
is the environment's real ``verify``, it learns with GRPO advantages, and what it learns on one task
transfers to others along real structure (shared tools, shared environments), which the scheduler
cannot read off directly.

Model
-----
A task's gold solution is a sequence of *steps*: its gold calls turn by turn, followed in each turn
by the gold replies the verifier checks (tau-bench outputs). At step k of task i the policy makes a
binary decision: act right (the gold call, or say the gold reply) or make a mistake, with

    P(right_ik) = sigmoid(z_ik),
    z_ik = b + theta_tool[name_ik] + theta_effect[effect_ik] + theta_env[env_i]
             + theta_pos[min(k, P - 1)] + c_ik

where ``name`` is the tool called (``<reply>`` for a reply), ``effect`` its effect tag (read, write,
reply), ``env`` the task's environment and ``k`` the step's position in the task (P buckets). The
thetas are learned and shared across tasks: training on a ``cd`` call in one BFCL task moves every
task that calls ``cd``, in every environment that has the file system; training in
TicketAPI+TravelAPI moves every task of that environment. ``c_ik ~ N(0, call_sd)`` is a fixed,
unlearned difficulty of that particular call (seeded by the task id: some calls are harder than
their tool's average), and ``b`` a fixed calibration constant (``learn_bias`` makes it learnable; off
by default, since a global skill is taught equally by every informative group). A task's chance to
pass is roughly the product of its steps' P(right): long tasks are hard, which is where early
agentic RL sits (most groups all fail, some are mixed).

A mistake is one of (drawn with fixed weights among the kinds that apply to the step):

* ``skip``: the call is not made (the reply is not said);
* ``wrong_tool``: a neighbouring tool is called instead: another tool of the same effect visible in
  this turn (any other visible tool if none), its arguments filled from the gold call's arguments by
  name, then by type, then with a typed default;
* ``perturb_arg``: the gold call with one argument replaced by a same-typed value: another string the
  same tool parameter takes in some task (else one of the environment's strings), an integer +-1..2, a
  float scaled, a boolean flipped, a list with one element dropped, a dict with one value perturbed;
* ``stop_turn``: the agent ends its turn early: no further steps of this turn are taken.

What a mistake does is decided by the environment and its verifier, not by the model: most are fatal,
some are harmless (a redundant call skipped). Only P(right) is learned; the mistake kind and its
details are a fixed distribution, so they do not enter the gradient.

Randomness. A rollout draws a (steps, 4) table of uniforms from ``SeedSequence(seed, stream, step,
hash(task_id), rollout_idx)`` (``rollout_seed``): column 0 decides right/mistake, 1 the mistake kind,
2 and 3 its details. Results are therefore a pure function of (parameters, seed, step, task, rollout
index), whatever process runs them and in whatever order, and a checkpoint needs no RNG state beyond
the seed. Held-out evaluation uses stream 1 without the step, so every evaluation replays the same
uniforms (common random numbers): the held-out curve moves only because the parameters move.

Initialisation (seeded): theta_tool ~ N(0, tool_sd), theta_env ~ N(0, env_sd), theta_effect = 0,
theta_pos[p] = position_slope * p, and the bias b set by bisection so that the median training task
has P(all steps right) = ``initial_success`` (0.02: on BFCL about 70% of random G = 8 groups then
all fail, 30% are mixed, almost none all pass).

Training: GRPO (Shao et al., 2024, "DeepSeekMath"): each task's G rewards give group-relative
advantages A (``training.advantages.group_advantages``); the loss is the policy-gradient loss of the
decisions taken, summed over a rollout's decisions and averaged over the B x G rollouts of the
training batch (a zero-variance group has A = 0 and contributes nothing):

    loss = -1 / (B G) * sum_{groups, rollouts j} A_j * sum_{decisions k of j} log pi(d_k)
    log pi(right) = log sigmoid(z),   log pi(mistake) = log sigmoid(-z)  (+ log q(kind), constant)

One on-policy update per step, so PPO/GRPO's ratio is 1 and its clipped surrogate equals this loss.
As in DAPO's dynamic sampling (Yu et al., 2025), only the first B informative groups train. The
gradient w.r.t. z is -A (1[right] - sigmoid(z)) / (B G), scattered onto the five parameters of the
decision (``tests/training/test_skill_policy.py`` checks it against torch autograd and
torch.optim.SGD). The optimiser is SGD with momentum (torch.optim.SGD's rule, dampening 0): an update
then scales with the amount of learning signal in the batch, as it does for an LLM whose every weight
sees every token. Adam's per-coordinate normalisation would hand a full step to a one-hot parameter
touched by a single group and erase the difference between a batch of informative groups and a
batch of dead ones, which is what the scheduler is for.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, fields
from functools import cached_property
from typing import Any

import numpy as np

from environments.base import CallRecord, Environment, Task, ToolCall, ToolSpec, Trajectory, TurnRecord
from training.advantages import SCALES, group_advantages
from training.engines.base import by_name
from training.policies.graded_reward import REWARDS, graded_reward
from training.tasks import TaskResolver

REPLY_TOOL = "<reply>"
REPLY_EFFECT = "reply"
MISTAKES = ("skip", "wrong_tool", "perturb_arg", "stop_turn")
RIGHT = -1  # decision code of a right step; a mistake's code is its index in MISTAKES
TRAIN_STREAM, EVAL_STREAM = 0, 1
_N_FEATURES = 5  # bias, tool, effect, environment, position


@dataclass
class SkillConfig:
    """Hyper-parameters of the skill policy (engine options of the ``skill`` engine)."""

    initial_success: float = 0.02
    """Median P(all steps right) over the training tasks at step 0 (sets the bias b): a weak start."""
    tool_sd: float = 0.5
    """Std of the initial per-tool skills (some tools come easier than others)."""
    env_sd: float = 0.5
    """Std of the initial per-environment skills."""
    position_slope: float = -0.1
    """Initial theta_pos[p] = position_slope * p: later steps of a long task start harder."""
    n_positions: int = 8
    """P: position buckets (steps at index >= P - 1 share the last bucket)."""
    call_sd: float = 1.0
    """Std of the fixed, unlearned difficulty offset of each gold step (a property of the call)."""
    learn_bias: bool = False
    """Whether the global bias b is learned (off: b is the calibration constant; only the shared
    tool / effect / environment / position skills learn)."""
    lr: float = 0.01
    """SGD learning rate on the loss averaged over the B x G rollouts of a step."""
    momentum: float = 0.9
    """SGD momentum (torch.optim.SGD rule, dampening 0); 0 disables it."""
    advantage_scale: str = "std"
    """Group advantage normalisation: ``std`` (GRPO) or ``mean_only`` (Dr. GRPO, Liu et al., 2025)."""
    mistake_weights: tuple[float, float, float, float] = (0.25, 0.25, 0.35, 0.15)
    """Weights of skip, wrong_tool, perturb_arg, stop_turn among the kinds that apply to a step."""
    eval_samples: int = 4
    """Sampled rollouts per held-out task at each evaluation (fixed seeds: common random numbers)."""
    reward: str = "binary"
    """``binary``: the verifier's verdict (the original benchmarks'); ``graded``: a failed rollout scores
    the share of the verifier's checks it passed (``training.policies.graded_reward``)."""

    def __post_init__(self) -> None:
        self.mistake_weights = tuple(float(w) for w in self.mistake_weights)
        if not 0.0 < self.initial_success < 1.0:
            raise ValueError(f"initial_success must be in (0, 1), got {self.initial_success}")
        if self.tool_sd < 0 or self.env_sd < 0:
            raise ValueError("tool_sd and env_sd must be >= 0")
        if self.n_positions < 1:
            raise ValueError("n_positions must be >= 1")
        if self.call_sd < 0:
            raise ValueError("call_sd must be >= 0")
        if self.lr <= 0 or not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"need lr > 0 and 0 <= momentum < 1, got lr={self.lr}, momentum={self.momentum}")
        if self.advantage_scale not in SCALES:
            raise ValueError(f"advantage_scale {self.advantage_scale!r} unknown; choose from {SCALES}")
        weights = self.mistake_weights
        if len(weights) != len(MISTAKES) or min(weights) < 0 or weights[0] + weights[3] <= 0:
            raise ValueError(
                f"mistake_weights must be {len(MISTAKES)} non-negative weights for {MISTAKES}, "
                "with skip or stop_turn > 0 (they apply to every step)"
            )
        if self.eval_samples < 1:
            raise ValueError("eval_samples must be >= 1")
        if self.reward not in REWARDS:
            raise ValueError(f"reward {self.reward!r} unknown; choose from {REWARDS}")

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> SkillConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"unknown skill policy option(s) {unknown}; known: {sorted(known)}")
        return cls(**options)


# ---- the static world: steps, features, value pools ---------------------------------------------
@dataclass(frozen=True)
class Step:
    """One step of a task's gold solution: a call or a reply, in a turn."""

    turn: int
    call: ToolCall | None
    reply: str | None
    effect: str
    perturbable: tuple[str, ...] = ()  # argument names whose value can be perturbed


@dataclass(frozen=True)
class TaskPlan:
    steps: tuple[Step, ...]
    features: np.ndarray  # (n_steps, 5) int64 indices into theta
    offsets: np.ndarray  # (n_steps,) float64 fixed difficulty offset of each step
    n_turns: int

    @cached_property
    def turn_steps(self) -> tuple[tuple[int, ...], ...]:
        by_turn: list[list[int]] = [[] for _ in range(self.n_turns)]
        for k, step in enumerate(self.steps):
            by_turn[step.turn].append(k)
        return tuple(tuple(ks) for ks in by_turn)


def _perturbable(value: Any) -> bool:
    if isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list):
        return len(value) > 0
    if isinstance(value, dict):
        return any(_perturbable(v) for v in value.values())
    return False


class SkillWorld:
    """Everything about the tasks the policy needs, built deterministically from a TaskResolver.

    Parameter layout of theta: [bias | tools | effects | environments | positions]. The vocabulary
    covers every task of the resolver's sources (training and held-out alike), sorted, so every
    process that builds the world from the same sources gets the same layout.
    """

    def __init__(self, resolver: TaskResolver, n_positions: int = 8, call_sd: float = 1.0):
        self.resolver = resolver
        self.n_positions, self.call_sd = n_positions, call_sd
        tasks = [resolver.task(t) for t in resolver.task_ids()]
        effects: dict[str, dict[str, str]] = {}
        for env_id in sorted({t.env_id for t in tasks}):
            effects[env_id] = {s.name: s.effect for s in resolver.environment_info(env_id).tools}
        self._effects = effects
        tool_names = {c.name for t in tasks for turn in t.gold for c in turn}
        if any(any(turn) for t in tasks for turn in t.gold_replies):
            tool_names.add(REPLY_TOOL)
        self.tools = sorted(tool_names)
        self.effects = sorted({e for env in effects.values() for e in env.values()} | {REPLY_EFFECT})
        self.envs = sorted(effects)
        self._tool_index = {n: i for i, n in enumerate(self.tools)}
        self._effect_index = {n: i for i, n in enumerate(self.effects)}
        self._env_index = {n: i for i, n in enumerate(self.envs)}
        self.off_tool = 1
        self.off_effect = self.off_tool + len(self.tools)
        self.off_env = self.off_effect + len(self.effects)
        self.off_pos = self.off_env + len(self.envs)
        self.n_params = self.off_pos + n_positions

        # Same-typed string values for perturbations: per (tool, parameter), then per environment.
        arg_strings: dict[tuple[str, str], set[str]] = {}
        env_strings: dict[str, set[str]] = {}
        for task in tasks:
            for turn in task.gold:
                for call in turn:
                    for name, value in call.arguments.items():
                        if isinstance(value, str):
                            arg_strings.setdefault((call.name, name), set()).add(value)
                            env_strings.setdefault(task.env_id, set()).add(value)
        self.arg_strings = {k: sorted(v) for k, v in arg_strings.items()}
        self.env_strings = {k: sorted(v) for k, v in env_strings.items()}
        self.plans = {task.task_id: self._plan(task) for task in tasks}

    def effect_of(self, env_id: str, tool: str) -> str:
        return self._effects.get(env_id, {}).get(tool, "read")

    def _plan(self, task: Task) -> TaskPlan:
        n_turns = len(task.gold) if task.gold else max(len(task.user_turns), 1)
        steps = []
        for turn in range(n_turns):
            for call in task.gold[turn] if turn < len(task.gold) else ():
                perturbable = tuple(sorted(n for n, v in call.arguments.items() if _perturbable(v)))
                steps.append(Step(turn, call, None, self.effect_of(task.env_id, call.name), perturbable))
            for reply in task.gold_replies[turn] if turn < len(task.gold_replies) else ():
                steps.append(Step(turn, None, reply, REPLY_EFFECT))
        features = np.zeros((len(steps), _N_FEATURES), dtype=np.int64)
        for k, step in enumerate(steps):
            tool = step.call.name if step.call is not None else REPLY_TOOL
            features[k] = (
                0,
                self.off_tool + self._tool_index[tool],
                self.off_effect + self._effect_index[step.effect],
                self.off_env + self._env_index[task.env_id],
                self.off_pos + min(k, self.n_positions - 1),
            )
        # A property of the call, not of the run: seeded by the task id only.
        offsets = self.call_sd * np.random.default_rng([11, task_hash(task.task_id)]).normal(size=len(steps))
        return TaskPlan(tuple(steps), features, offsets, n_turns)

    def logits(self, theta: np.ndarray, task_id: str) -> np.ndarray:
        """z of every step of the task, (n_steps,)."""
        plan = self.plans[task_id]
        return theta[plan.features].sum(axis=1) + plan.offsets

    def initial_theta(self, config: SkillConfig, seed: int, train_task_ids: list[str]) -> np.ndarray:
        """Seeded initial parameters; the bias calibrated on the training tasks (module docstring)."""
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 7]))
        theta = np.zeros(self.n_params)
        theta[self.off_tool : self.off_effect] = rng.normal(0.0, config.tool_sd, len(self.tools))
        theta[self.off_env : self.off_pos] = rng.normal(0.0, config.env_sd, len(self.envs))
        theta[self.off_pos :] = config.position_slope * np.arange(self.n_positions)
        target = math.log(config.initial_success)
        z_rest = [self.logits(theta, t) for t in train_task_ids]

        def median_log_success(bias: float) -> float:
            return float(np.median([-np.logaddexp(0.0, -(z + bias)).sum() for z in z_rest]))

        lo, hi = -30.0, 30.0  # median log P(all right) increases with the bias: bisect
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if median_log_success(mid) < target else (lo, mid)
        theta[0] = 0.5 * (lo + hi)
        return theta

    def parameter_names(self) -> list[str]:
        """What each entry of theta is: ``bias``, ``tool:``, ``effect:``, ``env:`` + name, ``position:`` + k."""
        return [
            "bias",
            *(f"tool:{n}" for n in self.tools),
            *(f"effect:{n}" for n in self.effects),
            *(f"env:{n}" for n in self.envs),
            *(f"position:{k}" for k in range(self.n_positions)),
        ]

    def fingerprint(self) -> str:
        """Hash of the parameter layout; a checkpoint loads as it is only into a world with the same one."""
        layout = [self.tools, self.effects, self.envs, self.n_positions, self.call_sd]
        return hashlib.sha256(json.dumps(layout).encode()).hexdigest()[:16]


# ---- acting -----------------------------------------------------------------------------------
def task_hash(task_id: str) -> int:
    """A stable 63-bit integer of a task id (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.blake2b(task_id.encode(), digest_size=8).digest(), "little") >> 1


def rollout_seed(seed: int, stream: int, step: int, task_id: str, rollout_idx: int) -> tuple[int, ...]:
    """Entropy of one rollout's random numbers: (seed, stream, step, hash(task_id), rollout_idx)."""
    return (int(seed), int(stream), int(step), task_hash(task_id), int(rollout_idx))


@dataclass
class Episode:
    """One rollout: the verifier's reward and the decisions taken (what the update needs)."""

    task_id: str
    rollout_idx: int
    reward: float
    reason: str
    n_turns: int
    n_tool_calls: int
    tools_used: list[str]
    decisions: np.ndarray  # (D,) int64, step indices k of the decisions taken, in order
    kinds: np.ndarray  # (D,) int8, RIGHT (-1) or the index of the mistake in MISTAKES
    status: str = "ok"
    error: str | None = None
    wall_time_s: float = 0.0
    trajectory: Trajectory | None = None  # kept only when asked (``act(keep_trajectory=True)``)
    verdict_reward: float | None = None  # the verifier's own (binary) reward; ``reward`` may be graded

    @property
    def right(self) -> np.ndarray:
        return self.kinds == RIGHT


@dataclass(frozen=True)
class RolloutRequest:
    task_id: str
    rollout_idx: int
    seed: tuple[int, ...]


def _type_ok(value: Any, schema_type: Any) -> bool:
    kinds = {
        "string": (str,),
        "integer": (int,),
        "number": (int, float),
        "boolean": (bool,),
        "array": (list, tuple),
        "object": (dict,),
    }
    if schema_type not in kinds:
        return False
    if isinstance(value, bool) and schema_type != "boolean":
        return False
    return isinstance(value, kinds[schema_type])


_DEFAULTS = {"string": "", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}


def neighbour_arguments(spec: ToolSpec, gold: ToolCall) -> dict[str, Any]:
    """Arguments of a wrong tool: gold arguments by name, then unused ones by type, then defaults."""
    properties = spec.parameters.get("properties", {}) or {}
    required = list(spec.parameters.get("required", []) or [])
    unused = [n for n in gold.arguments if n not in properties]
    out: dict[str, Any] = {}
    for name, prop in properties.items():
        if name in gold.arguments:
            out[name] = gold.arguments[name]
        elif name in required:
            kind = prop.get("type") if isinstance(prop, dict) else None
            match = next((n for n in unused if _type_ok(gold.arguments[n], kind)), None)
            if match is not None:
                unused.remove(match)
                out[name] = gold.arguments[match]
            else:
                out[name] = copy.deepcopy(_DEFAULTS.get(kind, ""))
    return out


def _pick(options: list[Any], u: float) -> Any:
    return options[min(int(u * len(options)), len(options) - 1)]


class SkillActor:
    """Rolls out the policy in real environments (one process's share of a batch's rollouts)."""

    def __init__(self, world: SkillWorld, mistake_weights: tuple[float, ...], reward: str = "binary"):
        self.world = world
        self.weights = np.asarray(mistake_weights, dtype=float)
        self.graded = reward == "graded"

    def __call__(self, theta: np.ndarray, request: RolloutRequest) -> Episode:
        task = self.world.resolver.task(request.task_id)
        env = self.world.resolver.environment(request.task_id)
        rng = np.random.default_rng(np.random.SeedSequence(list(request.seed)))
        return self.act(task, env, theta, rng, request.rollout_idx)

    def act(
        self,
        task: Task,
        env: Environment,
        theta: np.ndarray,
        rng: np.random.Generator,
        rollout_idx: int = 0,
        keep_trajectory: bool = False,
    ) -> Episode:
        started = time.perf_counter()
        plan = self.world.plans[task.task_id]
        p_right = 1.0 / (1.0 + np.exp(-self.world.logits(theta, task.task_id)))  # (n_steps,)
        uniforms = rng.random((len(plan.steps), 4))  # (n_steps, 4): right?, kind, detail, detail
        decisions: list[int] = []
        kinds: list[int] = []
        tools_used: set[str] = set()
        n_calls = 0
        trajectory = Trajectory(task_id=task.task_id)
        try:
            env.reset(task)
            for turn in range(plan.n_turns):
                record = TurnRecord()
                visible: list[ToolSpec] | None = None
                for k in plan.turn_steps[turn]:
                    step, u = plan.steps[k], uniforms[k]
                    decisions.append(k)
                    if u[0] < p_right[k]:
                        kinds.append(RIGHT)
                        call = step.call
                    else:
                        if step.call is not None and visible is None:
                            visible = env.tools(turn)
                        kind, call = self._mistake(task, step, u, visible or [])
                        kinds.append(kind)
                        if kind == MISTAKES.index("stop_turn"):
                            break
                    if call is not None:
                        record.calls.append(CallRecord(call, env.call(call.name, call.arguments)))
                        tools_used.add(call.name)
                        n_calls += 1
                    elif kinds[-1] == RIGHT and step.reply is not None:
                        record.replies.append(step.reply)
                trajectory.turns.append(record)
            verdict = env.verify(trajectory)
            reward, reason, status, error = verdict.reward, verdict.reason, "ok", None
            verdict_reward = verdict.reward
            if self.graded:
                reward = graded_reward(task, env, trajectory, verdict)
        except Exception as exc:  # an environment bug must not kill the batch: the rollout scores 0
            reward, reason, status, error = 0.0, "", "error", f"{type(exc).__name__}: {exc}"
            verdict_reward = 0.0
        return Episode(
            task_id=task.task_id,
            rollout_idx=rollout_idx,
            reward=float(reward),
            reason=reason[:300],
            n_turns=plan.n_turns,
            n_tool_calls=n_calls,
            tools_used=sorted(tools_used),
            decisions=np.asarray(decisions, dtype=np.int64),
            kinds=np.asarray(kinds, dtype=np.int8),
            status=status,
            error=error,
            wall_time_s=time.perf_counter() - started,
            trajectory=trajectory if keep_trajectory else None,
            verdict_reward=float(verdict_reward),
        )

    def _mistake(
        self, task: Task, step: Step, u: np.ndarray, visible: list[ToolSpec]
    ) -> tuple[int, ToolCall | None]:
        """(mistake kind, the call made instead or None) for a wrong step."""
        applicable = np.zeros(len(MISTAKES), dtype=bool)
        applicable[[0, 3]] = True  # skip, stop_turn
        neighbours: list[ToolSpec] = []
        if step.call is not None:
            others = [s for s in visible if s.name != step.call.name]
            neighbours = [s for s in others if s.effect == step.effect] or others
            applicable[1] = bool(neighbours)
            applicable[2] = bool(step.perturbable)
        weights = np.where(applicable, self.weights, 0.0)
        cumulative = np.cumsum(weights) / weights.sum()
        kind = int(min(np.searchsorted(cumulative, u[1], side="right"), len(MISTAKES) - 1))
        while not applicable[kind]:  # float edge: land on the last applicable kind
            kind -= 1
        if MISTAKES[kind] == "wrong_tool":
            spec = _pick(sorted(neighbours, key=lambda s: s.name), u[2])
            return kind, ToolCall(spec.name, neighbour_arguments(spec, step.call))
        if MISTAKES[kind] == "perturb_arg":
            name = _pick(list(step.perturbable), u[2])
            arguments = dict(step.call.arguments)
            arguments[name] = self._perturb(task, step.call.name, name, arguments[name], u[3])
            return kind, ToolCall(step.call.name, arguments)
        return kind, None

    def _perturb(self, task: Task, tool: str, name: str, value: Any, u: float) -> Any:
        """A different value of the same type (module docstring)."""
        if isinstance(value, bool):
            return not value
        if isinstance(value, int):
            return value + _pick([-2, -1, 1, 2], u)
        if isinstance(value, float):
            changed = round(value * (0.5 + u), 2)
            return changed if changed != value else value + 1.0
        if isinstance(value, str):
            pool = [s for s in self.world.arg_strings.get((tool, name), []) if s != value]
            pool = pool or [s for s in self.world.env_strings.get(task.env_id, []) if s != value]
            return _pick(pool, u) if pool else value + "_2"
        if isinstance(value, list):
            drop = _pick(list(range(len(value))), u)
            return value[:drop] + value[drop + 1 :]
        if isinstance(value, dict):
            keys = sorted(k for k, v in value.items() if _perturbable(v))
            key = _pick(keys, u)
            return {**value, key: self._perturb(task, tool, f"{name}.{key}", value[key], (u * 7.0) % 1.0)}
        return value


@dataclass(frozen=True)
class SkillWorkerSpec:
    """What a worker process needs to roll out the policy: sources to load, mistake weights, reward mode.

    Hashable and small, so executors ship it with every chunk; ``build`` is cached per process
    (``training.executors.built_worker``), so a worker loads its sources once.
    """

    sources: tuple[str, ...]
    source_options_json: str = "{}"
    mistake_weights: tuple[float, ...] = SkillConfig().mistake_weights
    n_positions: int = SkillConfig().n_positions
    call_sd: float = SkillConfig().call_sd
    reward: str = SkillConfig().reward

    @property
    def key(self) -> str:
        return hashlib.sha256(repr(self).encode()).hexdigest()[:16]

    def build(self) -> SkillActor:
        resolver = TaskResolver(list(self.sources), json.loads(self.source_options_json))
        world = SkillWorld(resolver, self.n_positions, self.call_sd)
        return SkillActor(world, self.mistake_weights, self.reward)


# ---- learning ---------------------------------------------------------------------------------
@dataclass
class UpdateResult:
    loss: float
    grad_norm: float
    trained_groups: int
    decisions: int
    p_right_mean: float


def _log_sigmoid(z: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -z)


class SkillPolicy:
    """The learnable parameters theta, their SGD-with-momentum optimiser, and the GRPO update."""

    def __init__(self, world: SkillWorld, config: SkillConfig, theta: np.ndarray):
        if theta.shape != (world.n_params,):
            raise ValueError(f"theta has shape {theta.shape}, the world needs ({world.n_params},)")
        self.world, self.config = world, config
        self.theta = np.asarray(theta, dtype=np.float64).copy()
        self.velocity = np.zeros_like(self.theta)

    def p_right(self, task_id: str) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.world.logits(self.theta, task_id)))

    def p_all_right(self, task_id: str) -> float:
        """The model's own P(every step right) of a task (no verifier; a mistake may be harmless)."""
        return float(np.exp(_log_sigmoid(self.world.logits(self.theta, task_id)).sum()))

    def loss_terms(
        self, groups: list[list[Episode]], n_primary: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Flattened decisions of the trained rollouts: features (D, 5), fixed offsets (D,), right (D,),
        advantage (D,), and the indices of the trained groups."""
        rewards = np.array([[e.reward for e in g] for g in groups], dtype=np.float64)  # (n_groups, G)
        advantages = group_advantages(rewards, scale=self.config.advantage_scale)  # (n_groups, G)
        informative = np.flatnonzero(rewards.max(axis=1) - rewards.min(axis=1) > 0)[:n_primary]
        feats, offsets, right, adv = [], [], [], []
        for i in informative:
            for j, episode in enumerate(groups[i]):
                plan = self.world.plans[episode.task_id]
                feats.append(plan.features[episode.decisions])
                offsets.append(plan.offsets[episode.decisions])
                right.append(episode.right)
                adv.append(np.full(len(episode.decisions), advantages[i, j]))
        if not feats:
            empty = np.zeros(0)
            return np.zeros((0, _N_FEATURES), dtype=np.int64), empty, empty.astype(bool), empty, informative
        return (
            np.concatenate(feats),
            np.concatenate(offsets),
            np.concatenate(right),
            np.concatenate(adv),
            informative,
        )

    def update(self, groups: list[list[Episode]], n_primary: int) -> UpdateResult:
        """One GRPO policy-gradient step on the first ``n_primary`` informative groups (module docstring)."""
        if not groups:
            return UpdateResult(0.0, 0.0, 0, 0, float("nan"))
        group_size = len(groups[0])
        features, offsets, right, advantage, trained = self.loss_terms(groups, n_primary)
        norm = max(n_primary, 1) * group_size  # B x G: dead groups dilute the step, as in GRPO
        z = self.theta[features].sum(axis=1) + offsets  # (D,)
        p = 1.0 / (1.0 + np.exp(-z))  # (D,)
        log_prob = np.where(right, _log_sigmoid(z), _log_sigmoid(-z))  # (D,)
        loss = -(advantage * log_prob).sum() / norm
        dloss_dz = -advantage * (right.astype(np.float64) - p) / norm  # (D,)
        grad = np.bincount(
            features.ravel(), weights=np.repeat(dloss_dz, _N_FEATURES), minlength=self.world.n_params
        )  # (n_params,)
        if not self.config.learn_bias:
            grad[0] = 0.0  # b stays the calibration constant
        self.velocity = self.config.momentum * self.velocity + grad
        self.theta = self.theta - self.config.lr * self.velocity
        return UpdateResult(
            loss=float(loss),
            grad_norm=float(np.linalg.norm(grad)),
            trained_groups=len(trained),
            decisions=len(z),
            p_right_mean=float(p.mean()) if len(p) else float("nan"),
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            "theta": self.theta.copy(),
            "velocity": self.velocity.copy(),
            "config": asdict(self.config),
            "fingerprint": self.world.fingerprint(),
            "names": self.world.parameter_names(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Exactly, into the same world; into a world whose sources changed since (a catalogue refresh added
        or removed tools or environments), by parameter name: what the checkpoint knew keeps its trained
        value and momentum, the rest keeps this policy's initial value and no momentum."""
        theta = np.asarray(state["theta"], dtype=np.float64)
        velocity = np.asarray(state["velocity"], dtype=np.float64)
        if state["fingerprint"] == self.world.fingerprint():
            self.theta, self.velocity = theta.copy(), velocity.copy()
            return
        if "names" not in state or state["config"] != asdict(self.config):
            raise ValueError(
                "checkpoint was written for a different task world (tools / environments / positions) or "
                "policy config; load it with the sources and config it was trained with"
            )
        names = self.world.parameter_names()
        self.theta = by_name(names, state["names"], theta, self.theta)
        self.velocity = by_name(names, state["names"], velocity, np.zeros_like(self.theta))
