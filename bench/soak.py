"""Soak test of crash safety and ingestion: many campaigns, with kill -9s, re-deliveries, stray entries
and corrupt files injected, compared row by row with uninterrupted reference runs of the same seeds.

    PYTHONPATH=. .venv/bin/python bench/soak.py --quick     # 3 campaigns x 3 steps, 2 kills: ~8 min (busy 2 cores)
    PYTHONPATH=. .venv/bin/python bench/soak.py             # 20 campaigns x 10 steps = 200 steps, 12 kills

Campaigns run consecutively in a worker process (`--worker`, the same driver `envsched campaign run`
uses, simulated engine, BFCL base tasks, B=8, G=4) on one data folder whose Dagster instance has the
`warehouse` pool at limit 1. The controller:
- kills the worker with SIGKILL while a pooled step holds the slot (or at a random moment), then starts
  a new worker, which must free the dead run's slot and resume;
- between workers, truncates the waiting step's landing file of an unfinished campaign (the campaign
  fails with the quarantine reason; the controller resumes it with --force, as an operator would
  after removing the bad file) and re-delivers loaded steps, identical or with different rewards (a
  conflicting re-delivery must be quarantined and change nothing);
- at any time, adds stray entries: a FIFO, a directory and a device symlink named like step files, a
  valid file of an unregistered campaign;
- at the end, re-delivers one loaded step of every finished campaign (same rows, or different rewards)
  and runs one sensor tick over all campaigns, as the daemon would.
At the end every campaign must be completed, with batches and rollouts identical to its reference:
rows lost and rows duplicated are printed and must both be 0 (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The workers load BFCL base tasks only (200); pipelines is imported in the workers, not the controller.
BFCL_BASE_SOURCES = (["bfcl_v3_multi_turn"], {"bfcl_v3_multi_turn": {"categories": ["base"]}})


def campaign_config(campaign_id: str, steps: int, batch_size: int, group_size: int):
    from pipelines.campaign import CampaignConfig

    seed = int(campaign_id.rsplit("-", 1)[1])  # chaos-3 and ref-3 share seed 3
    return CampaignConfig(
        campaign_id=campaign_id,
        splits=["base"],
        batch_size=batch_size,
        group_size=group_size,
        steps=steps,
        seed=seed,
        eval_every=0,
    )


def worker(ids: list[str], force: set[str], steps: int, batch_size: int, group_size: int) -> None:
    """Run the campaigns one after another, as `envsched campaign run` would (resume where stopped)."""
    from pipelines.cli import _driver_context
    from pipelines.driver import CampaignFailed, run_campaign
    from pipelines.jobs import catalog_run_config

    ctx = _driver_context()  # frees slots of runs a killed worker left behind
    if not ctx.store.path.exists() or not ctx.store.scalar("SELECT count(*) FROM task_embeddings"):
        for job, run_config in (
            ("refresh_catalog", catalog_run_config(*BFCL_BASE_SOURCES)),
            ("build_graph", None),
        ):  # 200 tasks
            assert (
                ctx.defs.resolve_job_def(job)
                .execute_in_process(instance=ctx.instance, run_config=run_config)
                .success
            )
    for campaign_id in ids:
        try:
            run_campaign(
                campaign_config(campaign_id, steps, batch_size, group_size), ctx, force=campaign_id in force
            )
        except CampaignFailed as exc:
            print(f"{campaign_id} failed: {exc}", file=sys.stderr, flush=True)


def sweep() -> None:
    """One landing-sensor tick over every campaign, its requests executed (what the daemon does)."""
    from pipelines.cli import _driver_context
    from pipelines.driver import ingest_pending

    runs, _ = ingest_pending(_driver_context(), None)
    print(f"sweep: {runs} ingest run(s)", file=sys.stderr)


class Soak:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.rng = random.Random(args.seed)
        self.home = Path(args.home or tempfile.mkdtemp(prefix="envsched-soak-"))
        from pipelines.paths import Paths

        self.paths = Paths(self.home).ensure()
        self.env = {
            **os.environ,
            "ENVSCHED_HOME": str(self.home),
            "DAGSTER_HOME": str(self.paths.dagster_home),
            "PYTHONPATH": str(REPO),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        self.injected: Counter = Counter()
        self.t0 = time.monotonic()
        self.recovered: Counter = Counter()
        self.stray_count = 0
        self.log = self.home / "soak-workers.log"

    # -- workers -------------------------------------------------------------------------------
    def start_worker(self, ids: list[str], force: set[str]) -> subprocess.Popen:
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", ",".join(ids)]
        command += ["--force", ",".join(sorted(force))] if force else []
        command += ["--steps", str(self.args.steps), "--batch-size", str(self.args.batch_size)]
        command += ["--group-size", str(self.args.group_size)]
        handle = self.log.open("a")
        handle.write(f"=== worker {' '.join(command[2:])}\n")
        handle.flush()
        return subprocess.Popen(command, env=self.env, stdout=handle, stderr=handle)

    def run_references(self, ids: list[str]) -> float:
        t0 = time.monotonic()
        proc = self.start_worker(ids, set())
        if proc.wait() != 0:
            raise SystemExit(f"reference worker failed; see {self.log}")
        return time.monotonic() - t0

    # -- injections ----------------------------------------------------------------------------
    def note(self, what: str) -> None:
        self.injected[what] += 1
        print(f"  {time.monotonic() - self.t0:6.0f} s  {what}", flush=True)

    def inject_stray(self) -> None:
        landing = self.paths.landing
        n, kind = self.stray_count, self.rng.choice(["fifo", "directory", "device_symlink", "unregistered"])
        self.stray_count += 1
        folder = landing / f"stray-{n}" / "step=1"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / "rollouts.parquet"
        if kind == "fifo":
            os.mkfifo(target)
        elif kind == "directory":
            target.mkdir()
        elif kind == "device_symlink":
            target.symlink_to("/dev/zero")
        else:
            existing = sorted(landing.glob("ref-*/step=*/rollouts.parquet"))
            if not existing:
                return
            target.write_bytes(existing[0].read_bytes())
        self.note(f"stray {kind}")

    def kill_in_pool(self, proc: subprocess.Popen, instance) -> bool:
        """SIGKILL the worker while one of its own runs holds the pool slot (not a slot a dead run left)."""
        from pipelines.crash_safety import run_pids

        for slot in instance.event_log_storage.get_concurrency_info("warehouse").claimed_slots:
            if any(pid == proc.pid for pid, _ in run_pids(instance, slot.run_id)):
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                self.note(f"kill -9 in {slot.step_key}")
                return True
        return False

    def between_workers(self, unfinished: list[str]) -> None:
        """Safe to read the warehouse here: no worker runs."""
        from warehouse.landing import step_path
        from warehouse.store import Warehouse

        store = Warehouse(self.paths.warehouse)
        for campaign_id in unfinished:
            progress = store.progress(campaign_id) if store.path.exists() else None
            if not progress:
                continue
            waiting = step_path(self.paths.landing, campaign_id, progress["scheduled"])
            first = not self.injected["corrupt waiting-step file"]
            if (
                progress["loaded"] < progress["scheduled"]
                and waiting.exists()
                and (first or self.rng.random() < 0.5)
            ):
                waiting.write_bytes(waiting.read_bytes()[: max(1, waiting.stat().st_size // 3)])
                self.note("corrupt waiting-step file")
            if progress["loaded"] >= 1 and self.rng.random() < 0.7:
                self.redeliver(store, campaign_id, self.rng.randint(1, progress["loaded"]))

    def redeliver(self, store, campaign_id: str, step: int, conflicting: bool | None = None) -> None:
        """Write a loaded step's file again: the same rows in new bytes, or different rewards."""
        from warehouse.landing import write_step_file

        rows = store.rollouts(campaign_id, step).drop(columns=["source_file"])
        if conflicting if conflicting is not None else self.rng.random() < 0.5:
            write_step_file(self.paths.landing, rows.assign(reward=1.0 - rows["reward"]), campaign_id, step)
            self.note("re-delivery, different rewards")
        else:
            write_step_file(self.paths.landing, rows, campaign_id, step)
            self.note("re-delivery, same rows")

    # -- the run -------------------------------------------------------------------------------
    def chaos(self, ids: list[str]) -> float:
        import dagster as dg

        from warehouse.store import Warehouse

        instance = dg.DagsterInstance.from_config(str(self.paths.dagster_home))
        store = Warehouse(self.paths.warehouse)
        t0, kills_left, force, launches = time.monotonic(), self.args.kills, set(), 0
        pending = list(ids)
        while pending:
            launches += 1
            if launches > 4 * len(ids) + self.args.kills + 5:
                raise SystemExit(f"campaigns {pending} never completed; see {self.log}")
            proc = self.start_worker(pending, force)
            kill_after = time.monotonic() + self.rng.uniform(10.0, 45.0) if kills_left else None
            while proc.poll() is None:
                if self.stray_count < 2 * len(ids) and self.rng.random() < 0.002:
                    self.inject_stray()
                if kill_after and time.monotonic() > kill_after and self.kill_in_pool(proc, instance):
                    kills_left -= 1
                    break
                time.sleep(0.02)
            statuses = store.campaign_statuses()
            self.recovered["dead runs freed on restart"] = self.log.read_text().count("was left STARTED")
            for campaign_id in list(pending):
                status = statuses.get(campaign_id)
                if status == "completed":
                    pending.remove(campaign_id)
                    force.discard(campaign_id)
                elif status == "failed":
                    force.add(campaign_id)
                    self.recovered["campaigns resumed with --force"] += 1
            if pending:
                self.between_workers(pending)
        # Late re-deliveries to finished campaigns, ingested as the daemon's sensor would (all campaigns).
        for i, campaign_id in enumerate(ids):
            self.redeliver(store, campaign_id, self.rng.randint(1, self.args.steps), conflicting=i % 2 == 0)
        sweep = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--sweep"],
            env=self.env,
            capture_output=True,
            text=True,
        )
        if sweep.returncode != 0:
            raise SystemExit(f"sweep failed: {sweep.stderr[-2000:]}")
        return time.monotonic() - t0

    def compare(self, n: int) -> dict[str, int]:
        from warehouse.store import Warehouse

        store = Warehouse(self.paths.warehouse)
        lost = duplicated = differing = batch_diffs = prediction_diffs = incomplete = 0
        for i in range(n):
            keys = ["step", "task_id", "rollout_idx"]
            ref = store.rollouts(f"ref-{i}")[keys + ["reward"]]
            got = store.rollouts(f"chaos-{i}")[keys + ["reward"]]
            duplicated += int(got.duplicated(keys).sum())
            merged = ref.merge(
                got.drop_duplicates(keys), on=keys, how="outer", suffixes=("_ref", "_got"), indicator=True
            )
            lost += int((merged["_merge"] == "left_only").sum())
            duplicated += int((merged["_merge"] == "right_only").sum())  # rows the reference never had
            both = merged[merged["_merge"] == "both"]
            differing += int((both["reward_ref"] != both["reward_got"]).sum())
            ref_b = store.query(
                "SELECT step, task_id FROM batches WHERE campaign_id = ? ORDER BY step, position",
                [f"ref-{i}"],
            )
            got_b = store.query(
                "SELECT step, task_id FROM batches WHERE campaign_id = ? ORDER BY step, position",
                [f"chaos-{i}"],
            )
            batch_diffs += int(not ref_b.equals(got_b))
            predictions = [
                store.query(
                    "SELECT step, task_id, predicted_variance FROM predictions WHERE campaign_id = ? ORDER BY ALL",
                    [c],
                )
                for c in (f"ref-{i}", f"chaos-{i}")
            ]
            prediction_diffs += int(not predictions[0].equals(predictions[1]))
            incomplete += int(store.campaign(f"chaos-{i}")["status"] != "completed")
        quarantined = store.query("SELECT reason FROM ingested_files WHERE status = 'quarantined'")
        self.recovered["files quarantined"] = len(quarantined)
        self.recovered["  of them conflicting re-deliveries"] = int(
            quarantined["reason"].str.contains("conflicting re-delivery").sum()
        )
        return {
            "rows in references": int(
                store.scalar("SELECT count(*) FROM rollouts WHERE campaign_id LIKE 'ref-%'")
            ),
            "rows lost": lost,
            "rows duplicated": duplicated,
            "rows with a different reward": differing,
            "campaigns whose batches differ": batch_diffs,
            "campaigns whose predictions differ": prediction_diffs,
            "campaigns not completed": incomplete,
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="3 campaigns x 3 steps, 2 kills")
    parser.add_argument("--campaigns", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--kills", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--home", default=None, help="data folder (default: a new temporary folder)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--force", default="", help=argparse.SUPPRESS)
    parser.add_argument("--sweep", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sweep:
        sweep()
        return
    if args.worker:
        worker(args.worker.split(","), set(filter(None, args.force.split(","))), args.steps, args.batch_size,
               args.group_size)  # fmt: skip
        return
    if args.quick:
        args.campaigns, args.steps, args.kills = 3, 3, 2
    soak = Soak(args)
    print(f"data folder {soak.home}; {args.campaigns} campaigns x {args.steps} steps, B={args.batch_size}, "
          f"G={args.group_size}, up to {args.kills} kills, seed {args.seed}", flush=True)  # fmt: skip
    ref_s = soak.run_references([f"ref-{i}" for i in range(args.campaigns)])
    print(f"references (uninterrupted, with the catalogue build): {ref_s:.0f} s", flush=True)
    chaos_s = soak.chaos([f"chaos-{i}" for i in range(args.campaigns)])
    result = soak.compare(args.campaigns)
    print(f"chaos runs: {chaos_s:.0f} s\n")
    print("| injected | count |\n|---|---|")
    for name, count in sorted(soak.injected.items()):
        print(f"| {name} | {count} |")
    print("\n| recovered | count |\n|---|---|")
    for name, count in soak.recovered.items():
        print(f"| {name} | {count} |")
    print("\n| against the references | value |\n|---|---|")
    for name, value in result.items():
        print(f"| {name} | {value} |")
    bad = result["rows lost"] + result["rows duplicated"] + result["rows with a different reward"]
    bad += result["campaigns whose batches differ"] + result["campaigns whose predictions differ"]
    bad += result["campaigns not completed"]
    print(f"\nworker logs: {soak.log}")
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
