"""Step time of a campaign run from the UI (`dagster dev`: webserver, daemon, run launcher) against the
same campaign in process (`pipelines.driver.run_campaign`), on BFCL-v3 base tasks, simulated engine.

    PYTHONPATH=. .venv/bin/python bench/campaign_ui_overhead.py --steps 3
    # the code before the campaign layer (a `git archive` of that commit in /tmp/before):
    PYTHONPATH=. .venv/bin/python bench/campaign_ui_overhead.py --steps 3 --code /tmp/before --mode clicks

Modes: ``sensor`` submits one `start_campaign` run and waits, the daemon does the rest (this code);
``clicks`` is what a user had to do before: register the campaign, launch `plan_step` once and
`train_step` every step; the landing sensor launches each ingestion. Per step = wall time from the
first submission to the last step observed, divided by the steps. Also shown: runs per step, the
mean time a run waited from submission to its start (queue + launch), and its mean wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg
import pandas as pd
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.dev_server import dagster_dev  # noqa: E402
from pipelines.jobs import catalog_run_config  # noqa: E402
from pipelines.paths import Paths  # noqa: E402
from warehouse.store import Warehouse  # noqa: E402

BFCL_BASE = catalog_run_config(["bfcl_v3_multi_turn"], {"bfcl_v3_multi_turn": {"categories": ["base"]}})

IN_PROCESS = """
import json, os, sys, time
import dagster as dg
from pipelines.campaign import CampaignConfig
from pipelines.definitions import defs
from pipelines.driver import DriverContext, run_campaign
from warehouse.store import Warehouse
args = json.loads(sys.argv[1])
config = CampaignConfig(campaign_id=args["id"], splits=["base"], batch_size=args["B"], group_size=args["G"],
                        steps=args["steps"], eval_every=0)
ctx = DriverContext(defs=defs, instance=dg.DagsterInstance.get(), store=Warehouse(args["warehouse"]))
started = time.perf_counter()
run_campaign(config, ctx)
print(json.dumps({"seconds": time.perf_counter() - started}))
"""


def _env(home: Paths, code: Path) -> dict:
    import os

    return {
        **os.environ,
        "PYTHONPATH": str(code),
        "ENVSCHED_HOME": str(home.home),
        "DAGSTER_HOME": str(home.dagster_home),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def prepare(home: Paths, code: Path) -> None:
    script = (
        "import json, sys, dagster as dg\nfrom pipelines.definitions import defs\n"
        "inst = dg.DagsterInstance.get()\n"
        'for job, cfg in (("refresh_catalog", json.loads(sys.argv[1])), ("build_graph", None)):\n'
        "    assert defs.resolve_job_def(job).execute_in_process(instance=inst, run_config=cfg).success\n"
    )
    subprocess.run([sys.executable, "-c", script, json.dumps(BFCL_BASE)], env=_env(home, code), check=True)


def in_process(home: Paths, code: Path, campaign_id: str, b: int, g: int, steps: int) -> float:
    args = {"id": campaign_id, "B": b, "G": g, "steps": steps, "warehouse": str(home.warehouse)}
    out = subprocess.run(
        [sys.executable, "-c", IN_PROCESS, json.dumps(args)],
        env=_env(home, code),
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def _graphql(url: str, query: str, variables: dict) -> dict:
    response = requests.post(f"{url}/graphql", json={"query": query, "variables": variables}, timeout=60)
    response.raise_for_status()
    return response.json()


LAUNCH = """
mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } } } }
"""


def submit(url: str, job: str, run_config: dict, tags: dict) -> str:
    params = {
        "selector": {
            "repositoryLocationName": "pipelines.definitions",
            "repositoryName": "__repository__",
            "jobName": job,
        },
        "runConfigData": run_config,
        "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]},
    }
    result = _graphql(url, LAUNCH, {"params": params})["data"]["launchRun"]
    if result["__typename"] != "LaunchRunSuccess":
        raise RuntimeError(f"launching {job}: {result}")
    return result["run"]["runId"]


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.5)


def ui_campaign(url: str, home: Paths, mode: str, campaign_id: str, b: int, g: int, steps: int) -> float:
    store = Warehouse(home.warehouse)
    config = {"campaign_id": campaign_id, "splits": ["base"], "batch_size": b, "group_size": g}
    config.update({"steps": steps, "eval_every": 0})

    def observed() -> int:
        return (
            store.progress(campaign_id)["observed"] if not store.campaign_overview(campaign_id).empty else 0
        )

    started = time.perf_counter()
    if mode == "sensor":
        submit(url, "start_campaign", {"ops": {"register_campaign": {"config": config}}}, {})
        _wait(lambda: observed() >= steps, 120 * steps, "campaign did not complete")
        return time.perf_counter() - started
    full = {
        "campaign_id": campaign_id,
        "sources": ["bfcl_v3_multi_turn"],
        "splits": ["base"],
        "heldout_splits": [],
        "heldout_fraction": 0.2,
        "eval_every": 0,
        "scheduler": "envsched",
        "scheduler_config": {},
        "batch_size": b,
        "group_size": g,
        "engine": "simulated",
        "engine_options": {},
        "steps": steps,
        "keep_checkpoints": 0,
        "seed": 0,
    }
    store.create_campaign(campaign_id, full, "envsched")
    dg.DagsterInstance.get().add_dynamic_partitions("campaigns", [campaign_id])
    partition = {"dagster/partition": campaign_id}
    submit(url, "plan_step", {}, partition)
    for step in range(1, steps + 1):
        _wait(lambda s=step: store.progress(campaign_id)["scheduled"] >= s, 300, f"batch {step} not planned")
        submit(url, "train_step", {}, partition)
        _wait(lambda s=step: observed() >= s, 300, f"step {step} not observed")
    return time.perf_counter() - started


def run_stats(instance: dg.DagsterInstance, since: float) -> tuple[int, float, float]:
    """(runs, mean seconds from creation to start, mean run wall seconds) of runs created after ``since``."""
    records = [r for r in instance.get_run_records() if r.create_timestamp.timestamp() >= since]
    waits = [r.start_time - r.create_timestamp.timestamp() for r in records if r.start_time]
    walls = [r.end_time - r.start_time for r in records if r.start_time and r.end_time]
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    return len(records), mean(waits), mean(walls)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--code", type=Path, default=ROOT, help="code the campaign runs (default: this tree)")
    parser.add_argument("--mode", choices=["sensor", "clicks"], default="sensor")
    args = parser.parse_args()
    b, g, steps = args.batch_size, args.group_size, args.steps
    with tempfile.TemporaryDirectory(prefix="envsched-ui-bench-") as tmp:
        home = Paths(Path(tmp)).ensure()
        import os

        os.environ.update({"ENVSCHED_HOME": str(home.home), "DAGSTER_HOME": str(home.dagster_home)})
        prepare(home, args.code)
        local = in_process(home, args.code, "bench-inprocess", b, g, steps)
        with dagster_dev(home.home, code_root=args.code) as url:
            since = time.time()
            ui = ui_campaign(url, home, args.mode, "bench-ui", b, g, steps)
            runs, wait, wall = run_stats(dg.DagsterInstance.get(), since)
    table = pd.DataFrame(
        [
            {
                "code": str(args.code),
                "mode": args.mode,
                "steps": steps,
                "B x G": f"{b} x {g}",
                "in-process s/step": round(local / steps, 2),
                "UI s/step": round(ui / steps, 2),
                "overhead s/step": round((ui - local) / steps, 2),
                "UI runs/step": round(runs / steps, 2),
                "run start wait s": round(wait, 2),
                "run wall s": round(wall, 2),
            }
        ]
    )
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
