"""Two numeric checks of the training path on a device (docs/gpu.md has the H200's tables).

    PYTHONPATH=. python bench/gpu_numerics.py              # cuda when available, else cpu
    PYTHONPATH=. python bench/gpu_numerics.py --device cpu

1. How much of one GRPO step the weights keep: one ``grpo_update`` (bf16 autocast on CUDA) of the GRPO
   tests' tiny model on one group (rewards 1, 0, 1, 0), with float32 or bfloat16 weights, at three
   learning rates; the share of weights the step changed.
2. Resume: the ``hf`` engine of the engine tests (one gold rollout per group, so every group has a
   signal), 4 synthetic tasks, G = 2, lr 1e-3, two steps; step 2 resumed from a step-1 checkpoint and a
   second uninterrupted run, each against the first run: rollouts, loss, largest weight difference;
   then the same with the engine's ``deterministic`` option (deterministic kernels, process-wide, so last).

Both reuse the tests' own models and engine (``tests/training``), so the numbers are those tests' cases.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "training"))
from test_grpo import COMPLETIONS, group, tiny_lm  # noqa: E402
from test_hf_engine import G, HalfScriptedEngine, batch_of, engine_options  # noqa: E402

from environments.registry import get_source  # noqa: E402
from training.grpo import GRPOConfig, grpo_update, make_optimizer  # noqa: E402
from training.tiny_lm import build_tiny_lm  # noqa: E402


def kept_update(device: str) -> None:
    print("| weights | lr | grad norm | weights changed by the step |\n| --- | --- | --- | --- |")
    for dtype in (torch.float32, torch.bfloat16):
        for lr in (1e-6, 1e-5, 1e-4):
            model = tiny_lm()
            samples = group(model, "task-a", COMPLETIONS, rewards=[1.0, 0.0, 1.0, 0.0])
            model = model.to(device, dtype)
            before = [p.detach().clone() for p in model.parameters()]
            config = GRPOConfig(learning_rate=lr, bf16=True)
            metrics = grpo_update(model, make_optimizer(model, config), samples, group_size=4, config=config)
            changed = sum(int((b != p).sum()) for b, p in zip(before, model.parameters(), strict=True))
            total = sum(p.numel() for p in model.parameters())
            name = str(dtype).removeprefix("torch.")
            print(f"| {name} | {lr:g} | {metrics['train/grad_norm']:.3g} | {changed / total:.1%} |")


def resume(device: str, deterministic: bool) -> None:
    folder = Path(tempfile.mkdtemp())
    model_dir = build_tiny_lm(folder / "lm", seed=0)
    tasks = get_source("synthetic").load().tasks
    frame = pd.DataFrame({"task_id": [t.task_id for t in tasks], "env_id": [t.env_id for t in tasks]})
    batch = batch_of(frame, [t.task_id for t in tasks[:4]])
    grpo = {"learning_rate": 1e-3, "micro_batch_size": 2}
    options = engine_options(model_dir, device=device, grpo=grpo, deterministic=deterministic)

    def run(steps, load=None, save=None):
        engine = HalfScriptedEngine(frame, G, seed=3, **options)
        if load:
            engine.load(load)
        results = []
        for step in steps:
            results.append(engine.run_step(batch, step=step))
            if save and step == 1:
                engine.save(save)
        return engine, results[-1]

    first, (rows, metrics) = run((1, 2), save=folder / "step1")
    columns = ["task_id", "rollout_idx", "reward", "completion_tokens"]
    print(f"deterministic kernels: {'on' if deterministic else 'off'}")
    print("| step 2 compared with the first run | rollouts | loss | weights, largest difference |")
    print("| --- | --- | --- | --- |")
    for label, (engine, (rows_b, metrics_b)) in {
        "resumed from step 1": run((2,), load=folder / "step1"),
        "a second uninterrupted run": run((1, 2)),
    }.items():
        same = rows[columns].reset_index(drop=True).equals(rows_b[columns].reset_index(drop=True))
        ours, theirs = first.model.state_dict(), engine.model.state_dict()
        diff = max(float((ours[k].float() - theirs[k].float()).abs().max()) for k in ours)
        loss = f"{metrics['train/loss']:.6g} / {metrics_b['train/loss']:.6g}"
        print(f"| {label} | {'equal' if same else 'differ'} | {loss} | {diff:.2g} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    device = parser.parse_args().device
    print(f"device {device} ({torch.cuda.get_device_name(0) if device == 'cuda' else 'CPU'})\n")
    kept_update(device)
    for deterministic in (False, True):  # torch's setting is process-wide: off first
        print()
        resume(device, deterministic)


if __name__ == "__main__":
    main()
