"""EnvSched (or any baseline) as veRL's curriculum sampler (tested with verl 0.7.1; the >= 0.8 route
against verl 0.8.0's classes, see tests/training/test_verl_integration.py).

veRL 0.5 - 0.7 (``verl/experimental/dataset/sampler.py``): ``create_rl_sampler`` loads
``data.sampler.class_path`` / ``class_name`` and builds it as ``cls(data_source=dataset,
data_config=config.data)``; ``RayPPOTrainer.fit`` draws each step's prompts from it (batch size
``data.gen_batch_size`` or ``data.train_batch_size``) and calls ``sampler.update(batch=batch)`` after the
step, with the rewards in ``batch.batch["token_level_scores"]`` and the dataset rows in
``batch.non_tensor_batch["index"]`` (from ``extra_info.index``, 0 when missing, so it must be filled).
``data.dataloader_num_workers=0`` is required (a worker would prefetch batches before the update)::

    data.sampler.class_path=pkg://training.integrations.verl data.sampler.class_name=EnvSchedCurriculumSampler
    +data.sampler.scheduler=envsched +data.sampler.catalogue=/data/envsched/catalogue.parquet
    '+data.sampler.group_size=${actor_rollout_ref.rollout.n}' data.dataloader_num_workers=0

Optional keys under ``data.sampler``: ``scheduler_options`` (fields of the scheduler's config), ``seed``,
``reward_key`` (a ``reward_extra_info`` key to learn from instead of the summed token-level scores,
e.g. ``acc``). :func:`write_verl_dataset` writes the train parquet (``extra_info.index`` and
``extra_info.task_id`` filled) and the catalogue; :func:`compute_score` is a
``custom_reward_function`` that runs the real verifier on the response.

veRL >= 0.8 removed the curriculum API. Its ``RayPPOTrainer(..., train_sampler=...)`` still takes a
sampler, but ``fit`` no longer calls ``update``: wrap the trainer class with
:func:`with_scheduler_feedback`, which feeds each step's batch to the sampler just before the actor
update (after the rewards are in the batch). The v1 trainer's ``ReplayBuffer`` custom sampler
(``trainer.v1.sampler.custom_sampler``) picks already rolled-out groups out of TransferQueue, not which
prompts to roll out, so it does not fit a pre-rollout scheduler.

Resume: veRL's checkpoints carry the sampler's state. ``RayPPOTrainer`` saves ``train_dataloader.state_dict()``
as ``data.pt`` and loads it on resume, and torchdata's ``StatefulDataLoader`` includes a sampler that has
``state_dict`` / ``load_state_dict``. veRL 0.5 - 0.7 save before ``update``, so the checkpoint's last step
is still in flight and its rewards never arrive; the resumed scheduler carries on without them. Not
supported: the verl-recipe DAPO trainer (its ``fit`` never calls ``update``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from torch.utils.data import Sampler

from training.integrations.scheduling import (
    StepBatches,
    catalogue_frame,
    make_scheduler,
    task_system_prompt,
    verifier_reward,
)
from training.tasks import TaskResolver

try:  # veRL 0.5 - 0.7
    from verl.experimental.dataset.sampler import AbstractCurriculumSampler

    HAS_CURRICULUM_API = True
except ImportError:  # veRL >= 0.8, or veRL not installed: a plain sampler for `train_sampler=`
    AbstractCurriculumSampler = Sampler  # type: ignore[assignment,misc]
    HAS_CURRICULUM_API = False


def _option(config: Any, key: str, default: Any = None) -> Any:
    value = config.get(key, default) if hasattr(config, "get") else getattr(config, key, default)
    return default if value is None else value


class EnvSchedCurriculumSampler(AbstractCurriculumSampler):
    """veRL sampler whose every step is the scheduler's ``select``; ``update`` feeds the rewards back."""

    def __init__(self, data_source: Any, data_config: Any):
        options = _option(data_config, "sampler", {})
        catalogue = _option(options, "catalogue")
        group_size = _option(options, "group_size")
        if catalogue is None or group_size is None:
            raise ValueError(
                "EnvSchedCurriculumSampler needs data.sampler.catalogue (the task parquet) and "
                "data.sampler.group_size (= actor_rollout_ref.rollout.n)"
            )
        self.task_of_row = dataset_task_ids(data_source)
        prompts_per_step = int(
            _option(data_config, "gen_batch_size", _option(data_config, "train_batch_size"))
        )
        scheduler_options = dict(_option(options, "scheduler_options", {}))
        scheduler = make_scheduler(
            str(_option(options, "scheduler", "envsched")),
            pd.read_parquet(catalogue),
            prompts_per_step,
            int(group_size),
            seed=int(_option(options, "seed", _option(data_config, "seed", 0))),
            options=scheduler_options,
        )
        rows = {task_id: row for row, task_id in enumerate(self.task_of_row)}
        reward_range = tuple(_option(options, "reward_range", (0.0, 1.0)))  # the reward's range, e.g. [0, 2]
        self.batches = StepBatches(scheduler, rows, prompts_per_step, reward_range)
        self.reward_key = _option(options, "reward_key")
        self.steps_per_epoch = max(1, len(rows) // prompts_per_step)

    def __iter__(self) -> Iterator[int]:
        # An epoch is steps_per_epoch steps; resumed mid-epoch, the rest of that epoch.
        for _ in range(self.steps_per_epoch - self.batches.step % self.steps_per_epoch):
            _, rows = self.batches.next_batch()
            yield from rows

    # veRL saves its dataloader's state in every checkpoint (``data.pt``) and loads it on resume; torchdata's
    # StatefulDataLoader keeps a sampler's own state there when the sampler has these two methods.
    def state_dict(self) -> dict[str, Any]:
        """The scheduler's state and its steps (``StepBatches.state_dict``)."""
        return self.batches.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.batches.load_state_dict(state)

    def __len__(self) -> int:
        return self.steps_per_epoch * self.batches.prompts_per_step

    def update(self, batch: Any) -> None:
        """Observe one step: task of each response from ``index``, reward from ``token_level_scores``."""
        step = self.batches.pending_step
        if step is None:
            raise RuntimeError("update() without a pending step: every step's batch is observed once")
        rows = np.asarray(batch.non_tensor_batch["index"], dtype=np.int64)
        if len(rows) > 1 and not rows.any():
            raise ValueError(
                "every row has index 0: fill extra_info.index with the dataset row (write_verl_dataset does)"
            )
        if self.reward_key is None:
            rewards = batch.batch["token_level_scores"].sum(dim=-1).detach().cpu().numpy()
        else:
            rewards = np.asarray(batch.non_tensor_batch[self.reward_key], dtype=float)
        self.batches.observe(step, [self.task_of_row[r] for r in rows], rewards.tolist())


def dataset_task_ids(data_source: Any) -> list[str]:
    """Task id of each row of an RLHFDataset (its ``extra_info.task_id``; ``index`` must be the row)."""
    frame = getattr(data_source, "dataframe", None)
    if frame is None or "extra_info" not in frame.column_names:
        raise ValueError("the train dataset needs an extra_info column with task_id and index (RLHFDataset)")
    task_ids = []
    for row, info in enumerate(frame["extra_info"]):
        if not info or "task_id" not in info:
            raise ValueError(f"train dataset row {row}: extra_info has no task_id")
        if int(info.get("index", -1)) != row:
            raise ValueError(
                f"train dataset row {row}: extra_info.index is {info.get('index')!r}, expected {row}"
            )
        task_ids.append(str(info["task_id"]))
    if len(set(task_ids)) != len(task_ids):
        raise ValueError("the train dataset has duplicate task ids; keep one row per task")
    return task_ids


def with_scheduler_feedback(trainer_cls: type) -> type:
    """veRL >= 0.8: ``trainer_cls`` (``RayPPOTrainer``) feeding each step to the sampler before the actor
    update. On 0.5 - 0.7 ``fit`` already calls ``update``, so the class is returned unchanged."""
    if HAS_CURRICULUM_API:
        return trainer_cls

    class EnvSchedFeedbackTrainer(trainer_cls):  # type: ignore[valid-type,misc]
        def _update_actor(self, batch):
            sampler = self.train_dataloader.sampler
            if isinstance(sampler, EnvSchedCurriculumSampler):
                sampler.update(batch)
            return super()._update_actor(batch)

    EnvSchedFeedbackTrainer.__name__ = f"EnvSched{trainer_cls.__name__}"
    return EnvSchedFeedbackTrainer


def write_verl_dataset(
    resolver: TaskResolver,
    directory: str | Path,
    task_ids: Sequence[str] | None = None,
    tools_in_prompt: bool = True,
) -> tuple[Path, Path]:
    """Write ``train.parquet`` (veRL's RLHF rows: data_source, prompt, reward_model.ground_truth = task id,
    extra_info.index / task_id) and ``catalogue.parquet`` (the scheduler's task frame); returns both."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    task_ids = list(task_ids or resolver.task_ids())
    rows = []
    for index, task_id in enumerate(task_ids):
        task = resolver.task(task_id)
        system = (
            [{"role": "system", "content": task_system_prompt(resolver, task_id)}] if tools_in_prompt else []
        )
        rows.append(
            {
                "data_source": task.source,
                "prompt": system + [{"role": "user", "content": task.user_turns[0]}],
                "ability": "agent",
                "reward_model": {"style": "rule", "ground_truth": task_id},
                "extra_info": {"index": index, "task_id": task_id, "env_id": task.env_id},
            }
        )
    train, catalogue = directory / "train.parquet", directory / "catalogue.parquet"
    pd.DataFrame(rows).to_parquet(train, index=False)
    catalogue_frame(resolver, task_ids).to_parquet(catalogue, index=False)
    return train, catalogue


@functools.lru_cache(maxsize=8)
def _resolver(sources: tuple[str, ...], options_json: str) -> TaskResolver:
    return TaskResolver(list(sources), json.loads(options_json))


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict | None = None,
    sources: Sequence[str] | None = None,
    source_options: dict[str, dict[str, Any]] | None = None,
) -> float:
    """veRL ``custom_reward_function``: the verifier's reward for the response's tool calls on task
    ``ground_truth``. ``sources`` / ``source_options`` (via ``custom_reward_function.reward_kwargs``) name
    the environment sources to load; by default the row's ``data_source``."""
    resolver = _resolver(tuple(sources or [data_source]), json.dumps(source_options or {}, sort_keys=True))
    return verifier_reward(resolver, str(ground_truth), solution_str)
