"""veRL's own classes with the EnvSched curriculum sampler (installed: verl 0.7.1).

The sampler is loaded the way ``create_rl_sampler`` does, rows come from ``RLHFDataset`` through veRL's
``StatefulDataLoader`` and ``collate_fn``, each step becomes a ``DataProto`` repeated n times (as
``RayPPOTrainer.fit`` does), ``NaiveRewardManager`` scores the responses with our ``compute_score``
(the real verifier), and ``update(batch=batch)`` is called exactly as ``fit`` calls it. No rollout
workers (no GPU, no Ray cluster): the responses are the task's gold calls for the first of each group
and a refusal otherwise.

The same file passes against veRL 0.8.0 (``pip install --no-deps --target /tmp/verl080 verl==0.8.0``,
then ``PYTHONPATH=/tmp/verl080:.``): there the sampler is a plain torch ``Sampler`` and the update goes
through ``with_scheduler_feedback(RayPPOTrainer)._update_actor`` of the real 0.8 class, on a trainer
without workers (the parent's update then fails on the missing config, after the feedback ran).
"""

import functools
import json

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from torchdata.stateful_dataloader import StatefulDataLoader  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402
from verl.utils.import_utils import load_extern_object  # noqa: E402
from verl.workers.reward_manager.naive import NaiveRewardManager  # noqa: E402

from training.integrations.scheduling import SCHEDULERS, make_scheduler  # noqa: E402
from training.integrations.verl import (  # noqa: E402
    HAS_CURRICULUM_API,
    AbstractCurriculumSampler,
    EnvSchedCurriculumSampler,
    compute_score,
    dataset_task_ids,
    with_scheduler_feedback,
    write_verl_dataset,
)
from training.tasks import TaskResolver  # noqa: E402
from training.tiny_lm import TAG_TOKENS  # noqa: E402
from training.tool_calls import format_tool_call  # noqa: E402

G = 4  # actor_rollout_ref.rollout.n
P = 4  # data.train_batch_size
SOURCE_OPTIONS = {"synthetic": {"envs": 6, "tasks_per_env": 4, "seed": 3}}


@pytest.fixture(scope="module")
def resolver():
    return TaskResolver(["synthetic"], SOURCE_OPTIONS)


@pytest.fixture(scope="module")
def files(resolver, tmp_path_factory):
    return write_verl_dataset(resolver, tmp_path_factory.mktemp("verl"), tools_in_prompt=False)


@pytest.fixture(scope="module")
def tokenizer(tiny_lm_dir):
    """The tiny tokenizer with its tool-call tags as non-special added tokens, as in Qwen2.5 / Qwen3:
    veRL's reward manager decodes with skip_special_tokens=True, which would drop special tags."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_dir)
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    for token in spec["added_tokens"]:
        token["special"] = token["special"] and token["content"] not in TAG_TOKENS
    tokenizer._tokenizer = Tokenizer.from_str(json.dumps(spec))
    return tokenizer


@pytest.fixture(scope="module")
def dataset(files, tokenizer, tmp_path_factory):
    config = OmegaConf.create(
        {
            "prompt_key": "prompt",
            "max_prompt_length": 256,
            "truncation": "left",
            "filter_overlong_prompts": False,
            "cache_dir": str(tmp_path_factory.mktemp("verl_cache")),
        }
    )
    return RLHFDataset(data_files=[str(files[0])], tokenizer=tokenizer, config=config)


def data_config(catalogue, scheduler):
    return OmegaConf.create(
        {
            "train_batch_size": P,
            "dataloader_num_workers": 0,
            "sampler": {
                "class_path": "pkg://training.integrations.verl",
                "class_name": "EnvSchedCurriculumSampler",
                "scheduler": scheduler,
                "catalogue": str(catalogue),
                "group_size": G,
            },
        }
    )


def pad(rows, pad_id, left):
    length = max(len(x) for x in rows)
    ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    for i, x in enumerate(rows):
        span = slice(length - len(x), length) if left else slice(0, len(x))
        ids[i, span], mask[i, span] = torch.tensor(x), 1
    return ids, mask


def respond(batch, resolver, tokenizer):
    """What the agent loop returns (it applies the chat template to ``raw_prompt`` in 0.7): left-padded
    prompts and right-padded responses, the gold first-turn calls for the first of each group."""
    prompt_rows = [
        tokenizer.apply_chat_template(list(m), add_generation_prompt=True, tokenize=True)
        for m in batch.non_tensor_batch["raw_prompt"]
    ]
    texts = []
    for i, info in enumerate(batch.non_tensor_batch["extra_info"]):
        gold = resolver.task(info["task_id"]).gold[0]
        texts.append("\n".join(format_tool_call(c) for c in gold) if i % G == 0 else "I cannot help.")
    response_rows = [
        tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in texts
    ]
    prompts, prompt_mask = pad(prompt_rows, tokenizer.pad_token_id, left=True)
    responses, response_mask = pad(response_rows, tokenizer.pad_token_id, left=False)
    out = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": torch.cat([prompt_mask, response_mask], dim=1),
        }
    )
    return batch.union(out), texts


def run_steps(dataset, files, resolver, tokenizer, scheduler, steps=3, checkpoint=None, resume=None):
    """``steps`` steps as ``RayPPOTrainer.fit`` runs them. ``checkpoint``: a path where the dataloader's state
    is saved at the last step, where fit saves it (0.5 - 0.7: before ``update``; >= 0.8: after the feedback
    in ``_update_actor``); ``resume``: such a path, loaded into a fresh dataloader first, as fit does."""
    config = data_config(files[1], scheduler)
    sampler_cls = load_extern_object(config.sampler.class_path, config.sampler.class_name)
    sampler = sampler_cls(data_source=dataset, data_config=config)
    loader = StatefulDataLoader(
        dataset=dataset, batch_size=P, num_workers=0, drop_last=True, collate_fn=collate_fn, sampler=sampler
    )
    if resume is not None:
        loader.load_state_dict(torch.load(resume, weights_only=False))
    score = functools.partial(compute_score, sources=["synthetic"], source_options=SOURCE_OPTIONS)
    seen = []
    for count, batch_dict in enumerate(loader, start=1):
        step = sampler.batches.step
        batch = DataProto.from_single_dict(batch_dict)
        batch = batch.repeat(repeat_times=G, interleave=True)
        batch, texts = respond(batch, resolver, tokenizer)
        batch.batch["token_level_scores"] = NaiveRewardManager(tokenizer, num_examine=0, compute_score=score)(
            batch
        )
        if checkpoint is not None and count == steps and HAS_CURRICULUM_API:
            torch.save(loader.state_dict(), checkpoint)
        if HAS_CURRICULUM_API:
            if isinstance(loader.sampler, AbstractCurriculumSampler):  # RayPPOTrainer.fit's own test
                loader.sampler.update(batch=batch)
        else:
            from verl.trainer.ppo.ray_trainer import RayPPOTrainer

            trainer = object.__new__(with_scheduler_feedback(RayPPOTrainer))
            trainer.train_dataloader = loader
            with pytest.raises(AttributeError):  # no config, no workers: the parent update cannot run
                trainer._update_actor(batch)
        if checkpoint is not None and count == steps and not HAS_CURRICULUM_API:
            torch.save(loader.state_dict(), checkpoint)
        seen.append((step, [str(i["task_id"]) for i in batch_dict["extra_info"]], batch, texts))
        if count == steps:
            break
    return sampler, seen


def test_verl_sampler_serves_envsched_batches_and_learns_from_token_level_scores(
    dataset, files, resolver, tokenizer
):
    sampler, seen = run_steps(dataset, files, resolver, tokenizer, "envsched")
    assert isinstance(sampler, AbstractCurriculumSampler) and isinstance(sampler, EnvSchedCurriculumSampler)
    batches = sampler.batches
    assert sorted(batches.rollouts) == [1, 2, 3]
    all_rewards = []
    for step, task_ids, batch, texts in seen:
        assert task_ids == batches.batches[step]  # the rows veRL loaded are EnvSched's batch
        observed = batches.rollouts[step]
        assert observed["task_id"].tolist() == [t for t in task_ids for _ in range(G)]
        scores = batch.batch["token_level_scores"].sum(-1).tolist()
        assert observed["reward"].tolist() == pytest.approx(scores)
        direct = [
            compute_score("synthetic", x, t, sources=["synthetic"], source_options=SOURCE_OPTIONS)
            for x, t in zip(texts, observed["task_id"], strict=True)
        ]
        assert scores == pytest.approx(direct)
        all_rewards += scores
    assert 0.0 in all_rewards and 1.0 in all_rewards  # the gold calls solve some tasks, the refusals none
    replay = make_scheduler("envsched", pd.read_parquet(files[1]), P, G, seed=0)
    for step in (1, 2, 3):
        assert replay.select(step)["task_id"].tolist() == batches.batches[step]
        replay.observe(batches.rollouts[step])


@pytest.mark.parametrize("name", ["envsched", "dps"])
def test_a_verl_checkpoint_carries_the_scheduler_and_a_resume_continues_it(
    name, dataset, files, resolver, tokenizer, tmp_path
):
    """Killed after the checkpoint of step 2 and resumed from it: steps 3 and 4 are what the scheduler of an
    unbroken run picks, given what the checkpoint had observed (0.5 - 0.7 save before step 2's ``update``, so
    its rewards are lost with the process)."""
    path = tmp_path / "data.pt"
    before, _ = run_steps(dataset, files, resolver, tokenizer, name, steps=2, checkpoint=path)
    resumed, after = run_steps(dataset, files, resolver, tokenizer, name, steps=2, resume=path)
    assert [step for step, *_ in after] == [3, 4]
    assert sorted(resumed.batches.rollouts) == ([1, 3, 4] if HAS_CURRICULUM_API else [1, 2, 3, 4])
    assert resumed.batches.batches[2] == before.batches.batches[2]
    assert (2 in resumed.batches.observed_steps) == (not HAS_CURRICULUM_API)

    reference = make_scheduler(name, pd.read_parquet(files[1]), P, G, seed=0)
    for step in (1, 2, 3, 4):
        picked = reference.select(step)["task_id"].tolist()
        assert picked == (before if step <= 2 else resumed).batches.batches[step]
        if step != 2 or not HAS_CURRICULUM_API:
            reference.observe((before if step <= 2 else resumed).batches.rollouts[step])
    # Resumed mid-epoch, the sampler serves the rest of that epoch, as the dataloader's length says.
    assert len(list(iter(resumed))) == (resumed.steps_per_epoch - 4 % resumed.steps_per_epoch) * P


@pytest.mark.parametrize("name", sorted(set(SCHEDULERS) - {"envsched"}))
def test_verl_sampler_runs_every_baseline(name, dataset, files, resolver, tokenizer):
    sampler, seen = run_steps(dataset, files, resolver, tokenizer, name, steps=2)
    assert sorted(sampler.batches.rollouts) == [1, 2]
    for step, task_ids, _, _ in seen:
        assert task_ids == sampler.batches.batches[step] and len(task_ids) == P


def test_verl_sampler_rejects_rows_without_a_filled_index(dataset, files):
    dataset.dataframe = dataset.dataframe.map(lambda row: {"extra_info": {**row["extra_info"], "index": 0}})
    try:
        with pytest.raises(ValueError, match="extra_info.index is 0, expected 1"):
            EnvSchedCurriculumSampler(dataset, data_config(files[1], "random"))
    finally:
        dataset.dataframe = dataset.dataframe.map(
            lambda row, i: {"extra_info": {**row["extra_info"], "index": i}}, with_indices=True
        )
    assert dataset_task_ids(dataset)[1] == dataset.dataframe[1]["extra_info"]["task_id"]


def test_verl_sampler_reads_a_reward_on_the_range_it_is_given(dataset, files):
    config = data_config(files[1], "envsched")
    config.sampler.reward_range = [0, 2]  # e.g. an answer reward and a format reward of 0 / 1, summed
    sampler = EnvSchedCurriculumSampler(dataset, config)
    _, rows = sampler.batches.next_batch()
    scores = torch.tensor([[0.0, 2.0], [0.0, 1.0]] * (len(rows) * G // 2))  # per response, summed over tokens
    index = np.repeat(np.asarray(rows), G)
    sampler.update(DataProto.from_dict(tensors={"token_level_scores": scores}, non_tensors={"index": index}))
    observed = sampler.batches.rollouts[1]
    assert observed["reward"].tolist() == pytest.approx((scores.sum(-1) / 2).tolist())
    config.sampler.reward_range = [0, 1]
    fresh = EnvSchedCurriculumSampler(dataset, config)
    _, rows = fresh.batches.next_batch()
    index = np.repeat(np.asarray(rows), G)
    with pytest.raises(ValueError, match="outside reward_range=\\(0, 1\\)"):
        fresh.update(
            DataProto.from_dict(tensors={"token_level_scores": scores}, non_tensors={"index": index})
        )
    assert fresh.batches.pending_step == 1  # nothing observed: the step can still be fed


def test_verl_sampler_needs_catalogue_and_group_size(dataset):
    with pytest.raises(ValueError, match="data.sampler.catalogue"):
        EnvSchedCurriculumSampler(dataset, OmegaConf.create({"train_batch_size": P, "sampler": {}}))


def test_with_scheduler_feedback_wraps_only_where_fit_does_not_call_update():
    class Trainer:
        def _update_actor(self, batch):
            return "updated"

    wrapped = with_scheduler_feedback(Trainer)
    # 0.5 - 0.7: fit calls sampler.update itself, so the class must stay as it is (no double observe).
    assert (wrapped is Trainer) == HAS_CURRICULUM_API
    if not HAS_CURRICULUM_API:
        assert issubclass(wrapped, Trainer) and wrapped.__name__ == "EnvSchedTrainer"
