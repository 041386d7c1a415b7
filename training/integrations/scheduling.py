"""What the TRL and veRL adapters share: schedulers by name, fixed-size step batches, verifier rewards.

A trainer asks for a fixed number of prompts per step (its generation batch); a scheduler answers
``select(step)`` with its own batch. :class:`StepBatches` turns one into the other and feeds the step's
rewards back through ``observe``, checking that they belong to the batch it handed out.

Dynamic sampling (DAPO, GRESO). Neither trainer can roll out more prompts within a step once rewards
are seen (TRL has no dynamic sampling, trl#3708; veRL's sampler is asked once per step), so the
trainer's generation batch *is* the scheduler's first generation batch: the scheduler's B is sized
so that its over-sampled batch fills it (B = ceil(P / gen_batch_ratio) for DAPO, P / sampling_ratio
for GRESO), every group is observed, and zero-variance groups get zero GRPO advantage, i.e. no
gradient (the papers' post-rollout filter). The refill rounds of the papers do not run; the step
counts its zero-variance groups (``schedule/zero_variance_groups``).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import numpy as np
import pandas as pd

from environments.base import CallRecord, Trajectory, TurnRecord
from envsched_core import EnvSched, StateMismatch, TaskCatalog
from envsched_core.schedulers import SCHEDULERS as REGISTRY
from envsched_core.schedulers import fold_history
from training.tasks import TaskResolver
from training.tool_calls import parse_tool_calls


@dataclass(frozen=True)
class SchedulerEntry:
    cls: type
    config_cls: type
    oversample_field: str | None = None
    """Config field holding (generation batch / B) for the dynamic-sampling baselines."""


# The campaign registry's schedulers (the names of `envsched campaign run --scheduler`), each with the
# config field that sizes its over-sampled first generation batch, where it has one.
OVERSAMPLE_FIELDS = {"dapo": "gen_batch_ratio", "dapo-1x": "gen_batch_ratio", "greso": "sampling_ratio"}
SCHEDULERS: dict[str, SchedulerEntry] = {
    name: SchedulerEntry(spec.cls, spec.config_cls, OVERSAMPLE_FIELDS.get(name))
    for name, spec in REGISTRY.items()
}

# EnvSched's dynamic-sampling options, which a trainer with a fixed generation batch asked once per step
# cannot honour; StepBatches refuses them rather than dropping them silently, whether the scheduler came from
# make_scheduler or was built by the user (the pipeline's engines and the simulator run them).
UNSUPPORTED_IN_TRAINERS = {
    "refill_rounds": "it rolls out more rounds after a round's rewards, and the trainer generates once per step",
    "oversample_factor": "its batch grows past B, and the trainer's generation batch is fixed",
}


def scheduler_batch_size(name: str, prompts_per_step: int, options: dict[str, Any] | None = None) -> int:
    """B for scheduler ``name`` so that its first generation batch fills ``prompts_per_step`` prompts."""
    entry = _entry(name)
    if entry.oversample_field is None:
        return prompts_per_step
    ratio = float(
        (options or {}).get(entry.oversample_field, getattr(entry.config_cls(), entry.oversample_field))
    )
    return max(1, math.ceil(prompts_per_step / ratio))


def make_scheduler(
    name: str,
    tasks: pd.DataFrame,
    prompts_per_step: int,
    group_size: int,
    seed: int = 0,
    options: dict[str, Any] | None = None,
) -> Any:
    """Scheduler ``name`` over the task frame (task_id, env_id, text, tools, ... as in the warehouse's
    ``tasks`` table; EnvSched embeds ``text`` with the shipped model unless an ``embedding`` column is
    given). ``options`` are fields of the scheduler's config (e.g. ``{"rho": 1.0}``)."""
    entry = _entry(name)
    options = dict(options or {})
    known = {f.name for f in fields(entry.config_cls)} if is_dataclass(entry.config_cls) else set()
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"scheduler {name!r} has no option(s) {unknown}; its options are {sorted(known)}")
    for reserved in ("batch_size", "group_size"):
        if reserved in options:
            raise ValueError(
                f"{reserved} comes from the trainer's batch settings, not from scheduler options"
            )
    config = entry.config_cls(
        batch_size=scheduler_batch_size(name, prompts_per_step, options), group_size=group_size, **options
    )
    if entry.cls is EnvSched:
        return EnvSched(TaskCatalog.from_frame(tasks), config, seed=seed)
    return entry.cls(tasks[["task_id", "env_id"]], config, seed=seed)


def _entry(name: str) -> SchedulerEntry:
    if name not in SCHEDULERS:
        raise ValueError(f"scheduler {name!r} unknown; choose from {sorted(SCHEDULERS)}")
    return SCHEDULERS[name]


class StepBatches:
    """Fixed-size prompt batches from a scheduler, one per trainer step, and their rewards fed back.

    ``row_of_task`` maps each task id to its row in the trainer's dataset. Steps count from 1. Every
    rank of a distributed run holds its own copy and sees the same (gathered) rewards, so every copy
    selects the same batches. ``reward_range`` (lo, hi) is the range the trainer's reward can take (two reward
    functions of 0 / 1 summed: (0, 2)); the schedulers learn from it read as (r - lo) / (hi - lo), in [0, 1],
    which GRPO's group-normalised advantages do not tell apart.
    """

    def __init__(
        self,
        scheduler: Any,
        row_of_task: dict[str, int],
        prompts_per_step: int,
        reward_range: Sequence[float] = (0.0, 1.0),
    ):
        if prompts_per_step < 1:
            raise ValueError(f"prompts_per_step must be >= 1, got {prompts_per_step}")
        low, high = (float(x) for x in reward_range)
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise ValueError(f"reward_range must be two finite numbers lo < hi, got {tuple(reward_range)}")
        self.reward_range = (low, high)
        # EnvSched's SchedulerConfig; the baselines have no such fields
        settings = getattr(scheduler, "cfg", None)
        for option, why in UNSUPPORTED_IN_TRAINERS.items():
            value = getattr(settings, option, 0)
            if value:
                raise ValueError(
                    f"scheduler option {option}={value!r} cannot run in a trainer ({why}); "
                    "leave it at 0 here, a pipeline campaign runs it"
                )
        self.scheduler = scheduler
        self.row_of_task = dict(row_of_task)
        self.prompts_per_step = prompts_per_step
        self.step = 0
        self.batches: dict[int, list[str]] = {}  # step -> task ids handed to the trainer, in order
        self.observed_steps: set[int] = set()
        self.rollouts: dict[int, pd.DataFrame] = {}  # step -> the rollouts passed to observe
        self.metrics: dict[int, dict[str, float]] = {}
        self.stale_steps: list[int] = []  # steps selected before the previous step was observed

    def next_batch(self) -> tuple[int, list[int]]:
        """(step, dataset rows): the scheduler's batch for the next step, exactly prompts_per_step long."""
        self.step += 1
        if self.step > 1 and self.step - 1 not in self.observed_steps:
            self.stale_steps.append(self.step)
        frame = self.scheduler.select(self.step)
        task_ids = frame["task_id"].astype(str).tolist()[: self.prompts_per_step]
        if not task_ids:
            raise ValueError(
                f"scheduler {type(self.scheduler).__name__} selected no task for step {self.step}"
            )
        # A batch shorter than the trainer's (GRESO skipping most of a small pool) repeats its own tasks.
        task_ids += [task_ids[i % len(task_ids)] for i in range(self.prompts_per_step - len(task_ids))]
        missing = [t for t in task_ids if t not in self.row_of_task]
        if missing:
            raise ValueError(f"scheduled task id(s) {missing[:5]} have no row in the trainer's dataset")
        self.batches[self.step] = task_ids
        return self.step, [self.row_of_task[t] for t in task_ids]

    @property
    def pending_step(self) -> int | None:
        """The latest step handed out whose rewards were not observed yet."""
        return self.step if self.step and self.step not in self.observed_steps else None

    def observe(self, step: int, task_ids: Sequence[str], rewards: Sequence[float]) -> pd.DataFrame:
        """Feed one step's rollouts (one reward per completion) to the scheduler; returns the frame."""
        if step not in self.batches:
            raise ValueError(f"step {step} was never handed out (steps so far: 1..{self.step})")
        task_ids = [str(t) for t in task_ids]
        if len(task_ids) != len(rewards):
            raise ValueError(f"{len(task_ids)} task ids but {len(rewards)} rewards for step {step}")
        foreign = sorted(set(task_ids) - set(self.batches[step]))
        if foreign:
            raise ValueError(f"step {step}: rewards for task(s) {foreign[:5]} that are not in its batch")
        raw = np.asarray(rewards, dtype=float)
        frame = pd.DataFrame({"task_id": task_ids, "step": step, "reward": self._unit(step, task_ids, raw)})
        if step in self.observed_steps:
            return self._delivered_again(step, frame)
        self.scheduler.observe(frame)
        self.observed_steps.add(step)
        self.rollouts[step] = frame
        groups = frame.assign(reward=raw).groupby("task_id")["reward"]  # the trainer's own units
        variance = groups.var(ddof=0).fillna(0.0)
        self.metrics[step] = {
            "schedule/zero_variance_groups": float((variance < 1e-12).sum()),
            "schedule/mean_reward_variance": float(variance.mean()),
            "schedule/distinct_tasks": float(len(variance)),
            "rollout/mean_reward": float(raw.mean()),
        }
        return frame

    def _delivered_again(self, step: int, frame: pd.DataFrame) -> pd.DataFrame:
        """A step observed before, delivered again (a retried reward call, a worker resending after a restart):
        the first delivery's frame when every group repeats its rewards, nothing observed twice; an error naming
        the first group that differs otherwise (which of the two deliveries is right cannot be told here)."""
        before = self.rollouts[step].groupby("task_id")["reward"]
        for task, rewards in frame.groupby("task_id", sort=False)["reward"]:
            earlier = np.sort(before.get_group(task).to_numpy()) if task in before.groups else np.zeros(0)
            now = np.sort(rewards.to_numpy())
            if len(now) != len(earlier) or not np.allclose(now, earlier, rtol=0.0, atol=1e-9):
                raise ValueError(
                    f"step {step} was already observed, and task {task!r} now has other rewards "
                    f"({len(now)}, mean {now.mean():.4g}; observed: {len(earlier)}, "
                    f"mean {earlier.mean() if len(earlier) else float('nan'):.4g})"
                )
        return self.rollouts[step]

    def _unit(self, step: int, task_ids: list[str], reward: np.ndarray) -> np.ndarray:
        """The trainer's rewards read on [0, 1]; one outside ``reward_range`` is refused, naming the option."""
        low, high = self.reward_range
        slack = 1e-9 * (high - low)  # a weighted sum's float rounding
        outside = ~np.isfinite(reward) | (reward < low - slack) | (reward > high + slack)
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise ValueError(
                f"step {step}: reward {reward[i]!r} of task {task_ids[i]!r} is outside reward_range=({low:g}, "
                f"{high:g}); set reward_range to the range the trainer's reward can take (the weighted sum of its "
                "reward functions, unless observed_reward names one)"
            )
        return np.clip((reward - low) / (high - low), 0.0, 1.0)

    def state_dict(self) -> dict[str, Any]:
        """Scheduler state plus the step counter; ``load_state_dict`` resumes where it stopped."""
        return {
            "scheduler": self.scheduler.state_dict(),
            "step": self.step,
            "batches": dict(self.batches),
            "observed": sorted(self.observed_steps),  # an asynchronous trainer may hold steps in flight
            # what a scheduler that cannot load its state as it is gets rebuilt from (see load_state_dict)
            "rollouts": {step: frame[["task_id", "reward"]] for step, frame in self.rollouts.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume where ``state`` stopped. A scheduler state that does not fit (saved by another EnvSched
        release, or over another task set: ``StateMismatch``) is rebuilt from the rollouts the state kept,
        those of tasks no longer in the dataset dropped, with a warning."""
        rollouts = {int(s): f.assign(step=int(s)) for s, f in state.get("rollouts", {}).items()}
        try:
            self.scheduler.load_state_dict(state["scheduler"])
        except StateMismatch as exc:
            if "rollouts" not in state:  # saved before states kept their rollouts: nothing to rebuild from
                raise StateMismatch(
                    f"{exc} This state keeps no rollouts to rebuild the scheduler from (an earlier release "
                    "saved it): start a fresh one, or warm_start it from the run's logged rollouts."
                ) from exc
            self._rebuild(rollouts)
            warnings.warn(
                f"{exc} Rebuilt from the rollouts of {len(rollouts)} observed step(s).", stacklevel=2
            )
        self.rollouts = rollouts
        self.step = int(state["step"])
        self.batches = {int(k): list(v) for k, v in state["batches"].items()}
        # states saved before "observed" was kept came from synchronous trainers: every step observed
        self.observed_steps = {int(s) for s in state.get("observed", self.batches)}

    def _rebuild(self, rollouts: dict[int, pd.DataFrame]) -> None:
        """Fold the earlier steps' rollouts into this (fresh) scheduler, one step at a time on the trainer's
        clock: EnvSched through ``warm_start``, a baseline through its own ``observe``."""
        frames = [
            f.loc[f["task_id"].isin(self.row_of_task), ["task_id", "step", "reward"]]
            for f in rollouts.values()
        ]
        if not frames:
            return  # nothing observed yet: the fresh scheduler is that state
        fold_history(self.scheduler, pd.concat(frames, ignore_index=True), step_offset=0)


def verifier_reward(resolver: TaskResolver, task_id: str, completion: str) -> float:
    """Run the tool calls of one completion in a fresh environment of ``task_id``; the verifier's reward.

    A single completion answers the task's first user turn; a multi-turn task's verifier then judges the
    trajectory it produced (later turns were not attempted). Malformed calls are skipped.
    """
    task = resolver.task(task_id)
    env = resolver.environment(task_id)
    env.reset(task)
    parsed = parse_tool_calls(completion)
    turn = TurnRecord()
    for call in parsed.calls:
        turn.calls.append(CallRecord(call, env.call(call.name, call.arguments)))
    if parsed.text.strip():
        turn.replies.append(parsed.text.strip())
    return float(env.verify(Trajectory(task_id=task_id, turns=[turn])).reward)


def task_system_prompt(resolver: TaskResolver, task_id: str) -> str:
    """The tools of a task's environment at turn 0, in the Hermes convention the agent loop uses."""
    task = resolver.task(task_id)
    env = resolver.environment(task_id)
    specs = env.reset(task)
    lines = "\n".join(json.dumps(spec.as_function()) for spec in specs)
    return (
        "You may call functions to solve the task. Function signatures:\n<tools>\n"
        f'{lines}\n</tools>\nCall one with <tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call>.'
    )


def catalogue_frame(resolver: TaskResolver, task_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """The scheduler's task frame (the warehouse ``tasks`` columns it reads) for tasks of loaded sources."""
    rows = []
    for task_id in task_ids or resolver.task_ids():
        task = resolver.task(task_id)
        effects = {spec.name: spec.effect for spec in resolver.environment_info(task.env_id).tools}
        rows.append(
            {
                "task_id": task.task_id,
                "env_id": task.env_id,
                "text": task.text,
                "tools": list(task.tools),
                "tool_effects": [effects.get(name, "unknown") for name in task.tools],
                "state_fields": list(task.state_fields),
                "turns": len(task.user_turns),
                "gold_calls": task.gold_calls,
                "verifier": task.verifier,
            }
        )
    return pd.DataFrame(rows)
