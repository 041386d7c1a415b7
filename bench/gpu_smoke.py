"""GPU smoke check: the training paths that CPU runs never reach (CUDA, bf16 autocast, vLLM).

    PYTHONPATH=. python bench/gpu_smoke.py                       # hf, and vllm when it is installed
    PYTHONPATH=. python bench/gpu_smoke.py --engines hf --home var

On a CUDA machine, over a tiny Qwen2-style chat model built on the spot (``training.tiny_lm``):

1. the GPU-marked tests (``pytest -m gpu tests/training``): GRPO under bf16 autocast, the ``hf``
   engine training its float32 weights on CUDA (and the TRL / veRL adapters' tests where installed);
2. for each engine, a campaign of ``--steps`` steps through the real CLI (Dagster runs, the DuckDB
   warehouse, MLflow, checkpoints) on ``--source``, then its per-step metrics read back from the
   warehouse and the dtype of the saved policy.

``--home`` is the data folder (``ENVSCHED_HOME``); a folder whose warehouse already holds the
source's catalogue and embeddings lets the campaign run without the embedding model. Each part prints
what ran; a part that fails is reported and the next one still runs. Exit status 1 if any part failed,
or if there is no CUDA device (then everything ran on CPU: a dry run of the script).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import torch

METRICS = ["rollout/count", "train/policy_tokens", "train/loss", "train/grad_norm", "train/step_time_s"]


def environment() -> str:
    import transformers

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    vllm = "not installed"
    if importlib.util.find_spec("vllm"):
        import vllm as vllm_module

        vllm = vllm_module.__version__
    return f"{gpu}; torch {torch.__version__}; transformers {transformers.__version__}; vllm {vllm}"


def run(label: str, command: list[str], env: dict) -> bool:
    print(f"\n== {label}: {' '.join(command)}", flush=True)
    started = time.perf_counter()
    done = subprocess.run(command, env=env)
    print(f"== {label}: exit {done.returncode} in {time.perf_counter() - started:.0f} s", flush=True)
    return done.returncode == 0


def campaign_report(home: Path, campaign_id: str) -> str:
    import duckdb
    from safetensors import safe_open

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        metrics = con.execute(
            "SELECT step, name, value FROM step_metrics WHERE campaign_id = ? AND name IN ?",
            [campaign_id, METRICS],
        ).df()
        uri = con.execute(
            "SELECT uri FROM checkpoints WHERE campaign_id = ? ORDER BY step DESC LIMIT 1", [campaign_id]
        ).fetchone()
    table = metrics.pivot(index="step", columns="name", values="value").reindex(columns=METRICS)
    dtypes: set[str] = set()
    for shard in (Path(unquote(urlparse(uri[0]).path)) / "policy").glob("*.safetensors") if uri else []:
        with safe_open(str(shard), "pt") as weights:
            dtypes |= {str(weights.get_slice(k).get_dtype()) for k in weights.keys()}
    return f"{table.to_string()}\nsaved policy weights: {sorted(dtypes) or 'no checkpoint'}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engines", default="hf,vllm", help="vllm is skipped when it is not installed")
    parser.add_argument("--source", default="tau_bench_retail")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--home", type=Path, default=None, help="data folder (default: a new temporary one)")
    args = parser.parse_args()

    home = (args.home or Path(os.environ.get("ENVSCHED_HOME") or tempfile.mkdtemp())).resolve()
    env = os.environ | {"ENVSCHED_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    print(environment(), f"\ndata folder {home}", flush=True)
    results = {"CUDA device": torch.cuda.is_available()}  # without one, the parts below run on CPU
    model = home / "models" / "tiny-lm"
    results["tiny model"] = run("tiny model", [sys.executable, "-m", "training.tiny_lm", str(model)], env)
    models = {"hf": model, "vllm": home / "models" / "tiny-lm-1head"}  # vLLM's kernels take head size 64
    if "vllm" in args.engines.split(",") and importlib.util.find_spec("vllm"):
        build = [sys.executable, "-m", "training.tiny_lm", str(models["vllm"]), "--heads", "1"]
        results["tiny model, 1 head"] = run("tiny model, 1 head", build, env)
    gpu_tests = [sys.executable, *"-m pytest -q -m gpu -p no:cacheprovider tests/training".split()]
    results["gpu tests"] = run("gpu tests", gpu_tests, env)
    for engine in args.engines.split(","):
        if engine == "vllm" and not importlib.util.find_spec("vllm"):
            print("\n== vllm campaign: skipped, vLLM is not installed (pip install 'envsched[gpu]')")
            results["vllm campaign"] = None
            continue
        campaign_id = f"gpu-smoke-{engine}-{int(time.time())}"
        command = [sys.executable, "-m", "pipelines.cli", "campaign", "run", "--engine", engine]
        command += ["--model", str(models[engine]), "--steps", str(args.steps), "--source", args.source]
        command += [*"--batch-size 4 --group-size 2 --eval-every 1".split(), "--campaign-id", campaign_id]
        command += ["--engine-option", "max_new_tokens=32"]
        if engine == "vllm":  # eager: the smoke checks the engine, not vLLM's compile or CUDA graphs
            command += ["--engine-option", "enforce_eager=true"]
        ok = results[f"{engine} campaign"] = run(f"{engine} campaign", command, env)
        if ok:
            try:
                print(campaign_report(home, campaign_id), flush=True)
            except Exception as exc:  # reported like any part, and the next engine still runs
                print(f"== {engine} campaign report: {type(exc).__name__}: {exc}", flush=True)
                results[f"{engine} campaign report"] = False
    print("\n| part | result |\n| --- | --- |")
    for part, ok in results.items():
        print(f"| {part} | {'skipped' if ok is None else 'ok' if ok else 'FAILED'} |")
    return 0 if all(ok is not False for ok in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
