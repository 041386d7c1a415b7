"""Run by test_trl_integration under torchrun (2 CPU processes, gloo): 2 GRPO steps with EnvSched choosing
the prompts; each rank writes what it selected, scored and observed to <out>/rank<r>.json."""

import json
import os
import sys

from transformers import AutoTokenizer
from trl import GRPOConfig

from envsched_core.embedding import SentenceTransformerEmbedder
from training.integrations.scheduling import catalogue_frame
from training.integrations.trl import EnvSchedGRPOTrainer, VerifierReward, grpo_task_dataset
from training.tasks import TaskResolver


class RecordingVerifier(VerifierReward):
    def __init__(self, resolver):
        super().__init__(resolver)
        self.scored: list[list[str]] = []

    def __call__(self, prompts, completions, task_id, **kwargs):
        self.scored.append([str(t) for t in task_id])
        return super().__call__(prompts, completions, task_id, **kwargs)


def distinct_chars_reward(completions, **kwargs):
    return [len(set(c[-1]["content"])) / max(1, len(c[-1]["content"])) for c in completions]


def main(model_dir: str, out: str) -> None:
    resolver = TaskResolver(["synthetic"], {"synthetic": {"envs": 6, "tasks_per_env": 4, "seed": 3}})
    tasks = catalogue_frame(resolver)
    tasks["embedding"] = list(SentenceTransformerEmbedder()(tasks["text"].tolist()))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.model_input_names = ["input_ids", "attention_mask"]
    verifier = RecordingVerifier(resolver)
    args = GRPOConfig(
        output_dir=os.path.join(out, "trainer"),
        per_device_train_batch_size=4,  # x 2 ranks = 8 completions = 4 prompts x G=2 per step
        num_generations=2,
        max_completion_length=6,
        max_steps=2,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
    )
    trainer = EnvSchedGRPOTrainer(
        model=model_dir,
        processing_class=tokenizer,
        reward_funcs=[verifier, distinct_chars_reward],
        args=args,
        train_dataset=grpo_task_dataset(resolver, tools_in_prompt=False),
        scheduler="envsched",
        tasks=tasks,
        observed_reward="verifier",
    )
    trainer.train()
    batches = trainer.step_batches
    rank = trainer.accelerator.process_index
    record = {
        "world": trainer.accelerator.num_processes,
        "batches": batches.batches,
        "scored": verifier.scored,
        "observed": {step: frame["task_id"].tolist() for step, frame in batches.rollouts.items()},
        "stale": batches.stale_steps,
    }
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
