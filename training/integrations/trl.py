"""EnvSched (or any baseline) choosing the prompts of TRL's ``GRPOTrainer`` (tested with trl 1.16).

One line changes in a TRL script: ``GRPOTrainer(...)`` becomes

    EnvSchedGRPOTrainer(..., scheduler="envsched", tasks=tasks_frame)

where the train dataset has a ``task_id`` column (one row per catalogue task) and ``tasks_frame`` is the
catalogue (task_id, env_id, text, tools, ...; :func:`training.integrations.scheduling.catalogue_frame`
builds it from environment sources). ``scheduler`` is a name (envsched, random, dapo, dapo-1x, greso,
mopps, dps) or a ready scheduler object with ``select`` / ``observe``.

How it plugs in (read from trl 1.16's ``grpo_trainer.py``):

* ``_get_train_sampler`` returns :class:`EnvSchedSampler` instead of ``RepeatSampler``. It keeps
  RepeatSampler's structure: per generation batch, P = generation_batch_size / num_generations prompts,
  each index repeated num_generations times in a row, the whole block repeated
  num_iterations x steps_per_generation times. The P prompts of block t are ``select(t)``, asked for
  lazily when the block's first index is drawn. Every rank computes the same stream.
* ``get_train_dataloader`` builds the DataLoader without accelerate's one-batch look-ahead (which
  would draw block t + 1 before block t's rewards exist) and gives each rank its slice of each block,
  as accelerate's batch-sampler sharding does.
* ``_calculate_rewards`` returns the rewards gathered over all ranks; the override gathers the task
  ids too and calls ``observe`` with (task_id, step, reward) on every rank, in training mode only.

Recorded: ``schedule/zero_variance_groups``, ``schedule/mean_reward_variance``,
``schedule/distinct_tasks`` and ``rollout/mean_reward`` per step in the trainer's logs (and so in
whatever ``report_to`` targets, e.g. MLflow); the scheduler state beside every checkpoint
(``envsched_scheduler.pkl``), which :meth:`EnvSchedGRPOTrainer.load_scheduler_state` restores.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator, Sequence
from typing import Any

import datasets
import pandas as pd
from accelerate.utils import gather_object
from torch.utils.data import DataLoader, Sampler
from trl import GRPOTrainer

from training.integrations.scheduling import StepBatches, make_scheduler, task_system_prompt, verifier_reward
from training.tasks import TaskResolver

STATE_FILE = "envsched_scheduler.pkl"


class EnvSchedSampler(Sampler[int]):
    """RepeatSampler's index stream with each block's prompts chosen by a scheduler (see module doc)."""

    def __init__(
        self,
        batches: StepBatches,
        mini_repeat_count: int,
        repeat_count: int = 1,
        process_index: int = 0,
        num_processes: int = 1,
        blocks_per_epoch: int | None = None,
    ):
        block = batches.prompts_per_step * mini_repeat_count
        if block % num_processes:
            raise ValueError(
                f"a generation batch of {block} completions does not split over {num_processes} processes"
            )
        self.batches = batches
        self.mini_repeat_count = mini_repeat_count
        self.repeat_count = repeat_count
        self.process_index, self.num_processes = process_index, num_processes
        # One "epoch" is as many blocks as RepeatSampler would give over the dataset.
        self.blocks_per_epoch = blocks_per_epoch or max(
            1, len(batches.row_of_task) // batches.prompts_per_step
        )

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.blocks_per_epoch):
            _, rows = self.batches.next_batch()
            flat = [row for row in rows for _ in range(self.mini_repeat_count)]
            share = len(flat) // self.num_processes
            mine = flat[self.process_index * share : (self.process_index + 1) * share]
            for _ in range(self.repeat_count):
                yield from mine

    def __len__(self) -> int:
        share = self.batches.prompts_per_step * self.mini_repeat_count // self.num_processes
        return self.blocks_per_epoch * share * self.repeat_count


class EnvSchedGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose prompts are chosen by a task scheduler that learns from their rewards.

    Extra arguments: ``scheduler`` (a name or an object with select / observe), ``tasks`` (the catalogue
    frame, needed when ``scheduler`` is a name), ``scheduler_options`` (fields of its config),
    ``scheduler_seed``, ``observed_reward``: the name of the reward function the scheduler learns from
    (default: the weighted sum of all reward functions, as GRPO trains on), and ``reward_range``: the range
    that reward can take (default (0, 1); an accuracy and a format reward of 0 / 1 summed: (0, 2)).
    """

    def __init__(
        self,
        *args: Any,
        scheduler: str | Any = "envsched",
        tasks: pd.DataFrame | None = None,
        scheduler_options: dict[str, Any] | None = None,
        scheduler_seed: int = 0,
        observed_reward: str | None = None,
        reward_range: tuple[float, float] = (0.0, 1.0),
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        dataset = self.train_dataset
        if not isinstance(dataset, datasets.Dataset) or "task_id" not in dataset.column_names:
            raise ValueError("EnvSchedGRPOTrainer needs a map-style datasets.Dataset with a 'task_id' column")
        task_ids = [str(t) for t in dataset["task_id"]]
        if len(set(task_ids)) != len(task_ids):
            raise ValueError("the train dataset has duplicate task_id values; keep one row per task")
        prompts_per_step = self.args.generation_batch_size // self.num_generations
        if isinstance(scheduler, str):
            if tasks is None:
                raise ValueError(f"scheduler={scheduler!r} needs the catalogue: pass tasks=<task frame>")
            unknown = sorted(set(tasks["task_id"].astype(str)) - set(task_ids))
            if unknown:
                raise ValueError(f"catalogue task(s) {unknown[:5]} have no row in the train dataset")
            scheduler = make_scheduler(
                scheduler, tasks, prompts_per_step, self.num_generations, scheduler_seed, scheduler_options
            )
        if observed_reward is not None and observed_reward not in self.reward_func_names:
            raise ValueError(
                f"observed_reward={observed_reward!r} is not a reward function; have {self.reward_func_names}"
            )
        self.observed_reward = observed_reward
        rows = {t: i for i, t in enumerate(task_ids)}
        self.step_batches = StepBatches(scheduler, rows, prompts_per_step, reward_range)

    # --- prompts ---------------------------------------------------------------------------------------
    def _get_train_sampler(self, dataset: Any = None) -> Sampler:
        return EnvSchedSampler(
            self.step_batches,
            mini_repeat_count=self.num_generations,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            process_index=self.accelerator.process_index,
            num_processes=self.accelerator.num_processes,
        )

    def get_train_dataloader(self) -> DataLoader:
        # No accelerator.prepare: its look-ahead would select block t + 1 before block t is observed.
        # GRPO batches are lists of dicts (identity collator), so there is nothing to move to a device.
        return DataLoader(
            self.train_dataset,
            batch_size=self._train_batch_size * self.args.steps_per_generation,
            sampler=self._get_train_sampler(),
            collate_fn=self.data_collator,
            num_workers=0,
        )

    # --- rewards ---------------------------------------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if not self.model.training:
            return rewards_per_func
        step = self.step_batches.pending_step
        if step is None:
            raise RuntimeError("rewards arrived for a generation batch the scheduler did not choose")
        task_ids = gather_object([str(x["task_id"]) for x in inputs])
        if self.observed_reward is None:
            weights = self.reward_weights.to(rewards_per_func.device)
            observed = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        else:
            observed = rewards_per_func[:, self.reward_func_names.index(self.observed_reward)]
        self.step_batches.observe(step, task_ids, observed.detach().cpu().tolist())
        for name, value in self.step_batches.metrics[step].items():
            self._log_metric(name, value)
        return rewards_per_func

    # --- checkpoints -----------------------------------------------------------------------------------
    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = os.path.join(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
            with open(os.path.join(folder, STATE_FILE), "wb") as f:
                pickle.dump(self.step_batches.state_dict(), f)

    def load_scheduler_state(self, checkpoint_dir: str) -> None:
        """Restore the scheduler saved beside a checkpoint; then ``train(resume_from_checkpoint=...)`` with
        ``args.ignore_data_skip=True``: the scheduler state already knows the step, and skipping batches
        would make it select (and never observe) the skipped steps again."""
        path = os.path.join(checkpoint_dir, STATE_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no scheduler state beside this checkpoint")
        with open(path, "rb") as f:
            self.step_batches.load_state_dict(pickle.load(f))


def grpo_task_dataset(
    resolver: TaskResolver, task_ids: Sequence[str] | None = None, tools_in_prompt: bool = True
) -> datasets.Dataset:
    """One conversational GRPO row per task: the environment's tools as the system prompt (unless
    ``tools_in_prompt`` is False), the task's first user turn as the user message, and ``task_id`` /
    ``env_id`` columns the reward function reads."""
    rows = []
    for task_id in task_ids or resolver.task_ids():
        task = resolver.task(task_id)
        system = (
            [{"role": "system", "content": task_system_prompt(resolver, task_id)}] if tools_in_prompt else []
        )
        rows.append(
            {
                "prompt": system + [{"role": "user", "content": task.user_turns[0]}],
                "task_id": task_id,
                "env_id": task.env_id,
            }
        )
    return datasets.Dataset.from_list(rows)


class VerifierReward:
    """A TRL reward function: each completion's tool calls run in a fresh environment of its task, and
    the environment's verifier gives the reward (see ``scheduling.verifier_reward``)."""

    __name__ = "verifier"

    def __init__(self, resolver: TaskResolver):
        self.resolver = resolver

    def __call__(self, prompts, completions, task_id, **kwargs) -> list[float]:
        rewards = []
        for completion, tid in zip(completions, task_id, strict=True):
            text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
            rewards.append(verifier_reward(self.resolver, str(tid), text or ""))
        return rewards
