"""TRL's real GRPOTrainer (trl 1.16, CPU, the tiny Qwen2 model) with a scheduler choosing its prompts.

The prompts come from synthetic environments (real tools, real state-diff verifier); the reward the
scheduler learns from is the verifier's, run on each completion's tool calls. A second reward
(share of distinct characters) gives GRPO a non-zero advantage so the policy really moves.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")

from transformers import AutoTokenizer  # noqa: E402
from trl import GRPOConfig  # noqa: E402

from envsched_core.embedding import SentenceTransformerEmbedder  # noqa: E402
from training.integrations.scheduling import (  # noqa: E402
    SCHEDULERS,
    StepBatches,
    catalogue_frame,
    make_scheduler,
)
from training.integrations.trl import (  # noqa: E402
    EnvSchedGRPOTrainer,
    EnvSchedSampler,
    VerifierReward,
    grpo_task_dataset,
)
from training.tasks import TaskResolver  # noqa: E402

G = 2  # completions per prompt
P = 4  # prompts per step


@pytest.fixture(scope="module")
def resolver():
    return TaskResolver(["synthetic"], {"synthetic": {"envs": 6, "tasks_per_env": 4, "seed": 3}})


@pytest.fixture(scope="module")
def tasks(resolver):
    frame = catalogue_frame(resolver)
    frame["embedding"] = list(SentenceTransformerEmbedder()(frame["text"].tolist()))  # embed once
    return frame


@pytest.fixture(scope="module")
def dataset(resolver):
    # Without the tool specs in the prompt (1.3k-1.7k tokens each): same code path, a fraction of the CPU.
    return grpo_task_dataset(resolver, tools_in_prompt=False)


def qwen_like_tokenizer(tiny_lm_dir):
    """The tiny tokenizer without token_type_ids (Qwen2's tokenizer has none; generate rejects them)."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_dir)
    tokenizer.model_input_names = ["input_ids", "attention_mask"]
    return tokenizer


def distinct_chars_reward(completions, **kwargs):
    return [len(set(c[-1]["content"])) / max(1, len(c[-1]["content"])) for c in completions]


def grpo_args(tmp_path, steps):
    return GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=P * G,
        num_generations=G,
        max_completion_length=6,
        max_steps=steps,
        learning_rate=1e-2,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        dataloader_num_workers=0,
    )


class RecordingVerifier(VerifierReward):
    """The real verifier reward, remembering which tasks it scored and what it gave, call by call."""

    def __init__(self, resolver):
        super().__init__(resolver)
        self.calls: list[tuple[list[str], list[float]]] = []

    def __call__(self, prompts, completions, task_id, **kwargs):
        rewards = super().__call__(prompts, completions, task_id, **kwargs)
        self.calls.append(([str(t) for t in task_id], rewards))
        return rewards


def train(tiny_lm_dir, tmp_path, resolver, tasks, dataset, scheduler, steps=3):
    verifier = RecordingVerifier(resolver)
    trainer = EnvSchedGRPOTrainer(
        model=str(tiny_lm_dir),
        processing_class=qwen_like_tokenizer(tiny_lm_dir),
        reward_funcs=[verifier, distinct_chars_reward],
        args=grpo_args(tmp_path, steps),
        train_dataset=dataset,
        scheduler=scheduler,
        tasks=tasks,
        observed_reward="verifier",
    )
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    return trainer, verifier, before


def test_envsched_grpo_trainer_trains_on_envsched_batches(tiny_lm_dir, tmp_path, resolver, tasks, dataset):
    trainer, verifier, before = train(tiny_lm_dir, tmp_path, resolver, tasks, dataset, "envsched")
    batches = trainer.step_batches

    assert trainer.state.global_step == 3
    assert sorted(batches.batches) == [1, 2, 3] and batches.stale_steps == []
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))
    # The completions trained on are those of EnvSched's batch of each step, G in a row per prompt.
    assert len(verifier.calls) == 3
    for step, (scored_ids, rewards) in enumerate(verifier.calls, start=1):
        assert scored_ids == [t for t in batches.batches[step] for _ in range(G)]
        observed = batches.rollouts[step]
        assert observed["task_id"].tolist() == scored_ids
        assert observed["reward"].tolist() == pytest.approx(rewards)
        assert (observed["step"] == step).all()
    # A fresh EnvSched fed the same rewards selects the same batches: they are EnvSched's select.
    replay = make_scheduler("envsched", tasks, P, G, seed=0)
    for step in (1, 2, 3):
        assert replay.select(step)["task_id"].tolist() == batches.batches[step]
        replay.observe(batches.rollouts[step])
    assert batches.scheduler.state_dict()["stats"].keys() == replay.state_dict()["stats"].keys()
    # EnvSched's statistics saw every task of the three batches.
    visited = set().union(*(set(b) for b in batches.batches.values()))
    n = batches.scheduler.stats.state_dict()["n"]
    rows = batches.scheduler.catalog.indices_of(sorted(visited))
    assert (n[rows] > 0).all()
    logged = [entry for entry in trainer.state.log_history if "schedule/zero_variance_groups" in entry]
    assert len(logged) == 3


def format_bonus(completions, **kwargs):
    """A reward of 1 for every completion (a format reward every answer earns)."""
    return [1.0] * len(completions)


@pytest.mark.parametrize("reward_range", [None, (0.0, 3.0)])
def test_a_summed_reward_needs_its_range_and_is_read_on_it(
    reward_range, tiny_lm_dir, tmp_path, resolver, tasks, dataset
):
    verifier = RecordingVerifier(resolver)
    # the scheduler learns from the weighted sum, as GRPO trains on: in [2, 3] here
    trainer = EnvSchedGRPOTrainer(
        model=str(tiny_lm_dir),
        processing_class=qwen_like_tokenizer(tiny_lm_dir),
        reward_funcs=[verifier, format_bonus, format_bonus],
        args=grpo_args(tmp_path, 2),
        train_dataset=dataset,
        scheduler="envsched",
        tasks=tasks,
        **({} if reward_range is None else {"reward_range": reward_range}),
    )
    if reward_range is None:  # the sum is out of [0, 1]: refused at the first step, naming the option
        with pytest.raises(ValueError, match="outside reward_range=\\(0, 1\\); set reward_range"):
            trainer.train()
        return
    trainer.train()
    batches = trainer.step_batches
    for step, (_, rewards) in enumerate(verifier.calls, start=1):  # read as (sum - 0) / 3
        assert batches.rollouts[step]["reward"].tolist() == pytest.approx([(r + 2.0) / 3 for r in rewards])
        mean = 2.0 + sum(rewards) / len(rewards)
        assert batches.metrics[step]["rollout/mean_reward"] == pytest.approx(mean)


@pytest.mark.parametrize("name", sorted(set(SCHEDULERS) - {"envsched"}))
def test_envsched_grpo_trainer_runs_every_baseline(name, tiny_lm_dir, tmp_path, resolver, tasks, dataset):
    trainer, verifier, _ = train(tiny_lm_dir, tmp_path, resolver, tasks, dataset, name, steps=2)
    batches = trainer.step_batches
    assert len(verifier.calls) == 2 and sorted(batches.rollouts) == [1, 2]
    for step, (scored_ids, _) in enumerate(verifier.calls, start=1):
        assert len(batches.batches[step]) == P
        assert scored_ids == [t for t in batches.batches[step] for _ in range(G)]
    # The scheduler's own first pick for step 1 is what the trainer rolled out.
    replay = make_scheduler(name, tasks, P, G, seed=0)
    assert replay.select(1)["task_id"].tolist()[:P] == batches.batches[1]


def test_envsched_sampler_keeps_the_repeat_structure_and_splits_ranks(tasks):
    def stream(rank, ranks):
        scheduler = make_scheduler("random", tasks, P, G, seed=7)
        rows = {t: i for i, t in enumerate(tasks["task_id"])}
        sampler = EnvSchedSampler(
            StepBatches(scheduler, rows, P),
            G,
            repeat_count=2,
            process_index=rank,
            num_processes=ranks,
            blocks_per_epoch=2,
        )
        return list(sampler), sampler

    single, sampler = stream(0, 1)
    assert len(single) == len(sampler) == 2 * 2 * P * G
    first = single[: P * G]
    assert first == single[P * G : 2 * P * G]  # the block repeats (num_iterations x steps_per_generation)
    assert all(first[i] == first[i + 1] for i in range(0, P * G, G))  # G in a row per prompt
    assert len(set(first)) == P
    # Two ranks: each gets its half of every block; together they are the single-process stream.
    rank0, _ = stream(0, 2)
    rank1, _ = stream(1, 2)
    half = P * G // 2
    assert rank0[:half] + rank1[:half] == first


def test_envsched_grpo_trainer_rejects_a_dataset_without_task_ids(tiny_lm_dir, tmp_path, dataset, tasks):
    with pytest.raises(ValueError, match="'task_id' column"):
        EnvSchedGRPOTrainer(
            model=str(tiny_lm_dir),
            reward_funcs=[distinct_chars_reward],
            args=grpo_args(tmp_path, 1),
            train_dataset=dataset.remove_columns("task_id"),
            scheduler="random",
            tasks=tasks,
        )


def test_make_scheduler_rejects_unknown_names_and_options(tasks):
    with pytest.raises(ValueError, match="unknown; choose from"):
        make_scheduler("bandit", tasks, P, G)
    with pytest.raises(ValueError, match=r"no option\(s\) \['lr'\]"):
        make_scheduler("mopps", tasks, P, G, options={"lr": 0.1})
    # DAPO's first generation batch (3x over-sampled) fills the trainer's P prompts.
    dapo = make_scheduler("dapo", tasks, P, G)
    assert len(dapo.select(1)) >= P > dapo.batch_size


@pytest.mark.slow
def test_envsched_grpo_trainer_two_ranks_select_the_same_batches(tiny_lm_dir, tmp_path):
    """torchrun, 2 CPU processes: every rank selects the same batches, trains on its half of each step
    and observes the rewards of both halves (gathered) before the next step is selected."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = Path(__file__).with_name("trl_two_ranks.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(port),
    ]
    done = subprocess.run(
        [*command, str(script), str(tiny_lm_dir), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank0["world"] == rank1["world"] == 2
    assert rank0["batches"] == rank1["batches"] and sorted(rank0["batches"]) == ["1", "2"]
    assert rank0["stale"] == rank1["stale"] == []
    for step, batch in rank0["batches"].items():
        completions = [t for t in batch for _ in range(G)]
        i = int(step) - 1
        assert rank0["scored"][i] + rank1["scored"][i] == completions  # each rank its contiguous half
        assert rank0["observed"][step] == rank1["observed"][step] == completions  # the gathered rewards
