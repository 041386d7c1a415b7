"""What a catalogue refresh costs a running campaign, through Dagster (the CLI driver's single process).

    PYTHONPATH=. .venv/bin/python bench/pipeline_cost.py --sizes 20000 --steps 2 --home H   # once: an embedded home
    PYTHONPATH=. .venv/bin/python bench/pool_refresh.py --home H/20000

A campaign (EnvSched, simulated engine, B = 256, G = 8) starts on the synthetic pool minus a share of its tasks
held back. After `--before` steps, with the next batch already scheduled and rolled out (the driver trains it
before it reports the step), a refresh retires as many tasks (half of them from that batch) and brings the
held-back ones back. `--after` more steps follow. The step after the
refresh rebuilds the scheduler over the new pool from the campaign's history (`restore_scheduler`), before its
assets take the warehouse pool. Printed: wall seconds of each step, and the Dagster step seconds of each asset
in a step before the refresh and in the step that rebuilt the scheduler.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np


def _set_active(store, task_ids, active: bool) -> None:
    with store.transaction() as conn:
        conn.execute(
            "UPDATE tasks SET active = ? WHERE list_contains(?, task_id)", [active, sorted(task_ids)]
        )


def _asset_seconds(instance, campaign_id: str, step: int) -> dict[str, float]:
    """Dagster step seconds of the ``step``-th training run and the ``step``-th ingestion run (in order)."""
    import dagster as dg

    runs = sorted(
        instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": campaign_id})),
        key=lambda r: instance.get_run_record_by_id(r.run_id).create_timestamp,
    )
    out: dict[str, float] = {}
    for job in ("train_step", "ingest_rollouts"):
        run = [r for r in runs if r.job_name == job][step - 1]
        for s in instance.get_run_step_stats(run.run_id):
            if s.end_time and s.start_time:
                out[s.step_key] = round(s.end_time - s.start_time, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True, help="an embedded data folder (pipeline_cost.py --home)")
    parser.add_argument("--before", type=int, default=6, help="steps before the refresh")
    parser.add_argument("--after", type=int, default=3, help="steps after it")
    parser.add_argument("--share", type=float, default=0.01, help="share of the pool retired (and added)")
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()

    import dagster as dg

    from pipelines.campaign import CampaignConfig, campaign_tasks
    from pipelines.definitions import defs
    from pipelines.driver import DriverContext, run_campaign
    from pipelines.paths import Paths
    from warehouse.store import Warehouse

    paths = Paths(Path(args.home)).ensure()
    os.environ["ENVSCHED_HOME"] = str(paths.home)
    os.environ["DAGSTER_HOME"] = str(paths.dagster_home)
    store = Warehouse(paths.warehouse)
    campaign_id = f"refresh-{time.strftime('%H%M%S')}"
    config = CampaignConfig(
        campaign_id=campaign_id,
        sources=["synthetic"],
        batch_size=args.batch_size,
        group_size=8,
        steps=args.before + args.after,
    )
    pool = campaign_tasks(store, config)["task_id"].to_numpy()
    rng = np.random.default_rng(0)
    count = max(2, int(args.share * len(pool)))
    held_back = set(rng.choice(pool, count, replace=False))
    _set_active(store, held_back, False)
    retired: set[str] = set()
    marks = [time.perf_counter()]

    def on_step(step: int) -> None:
        marks.append(time.perf_counter())
        print(f"  step {step}: {marks[-1] - marks[-2]:.2f} s", flush=True)
        if step != args.before:
            return
        scheduled = store.batch(campaign_id, step + 1)["task_id"].to_numpy()
        others = np.setdiff1d(pool, np.concatenate([scheduled, list(held_back)]))
        retired.update(rng.choice(scheduled, count // 2, replace=False))
        retired.update(rng.choice(others, count - count // 2, replace=False))
        _set_active(store, retired, False)
        _set_active(store, held_back, True)
        print(f"  refresh: {len(retired)} tasks retired, {len(held_back)} added", flush=True)

    try:
        with dg.DagsterInstance.get() as instance:
            ctx = DriverContext(defs=defs, instance=instance, store=store)
            run_campaign(config, ctx, on_step=on_step)
            before = _asset_seconds(instance, campaign_id, args.before - 1)
            rebuilt = _asset_seconds(instance, campaign_id, args.before + 1)
    finally:
        _set_active(store, retired | held_back, True)  # the home's pool as it was
    walls = np.diff(marks)
    print(
        f"\nCatalogue refresh during a campaign ({len(pool)} tasks, B = {args.batch_size}, G = 8; {count} retired,"
    )
    print(f"{count} added after step {args.before}; the step after it rebuilds the scheduler)")
    print(
        f"{'step wall s, median of steps 2..' + str(args.before):<44}{statistics.median(walls[1 : args.before]):8.2f}"
    )
    print(f"{'step wall s, step ' + str(args.before + 1) + ' (rebuild)':<44}{walls[args.before]:8.2f}")
    print(f"{'step wall s, median after':<44}{statistics.median(walls[args.before + 1 :]):8.2f}")
    print(
        f"\n{'asset (Dagster step s)':<28}{'step ' + str(args.before - 1):>10}{'step ' + str(args.before + 1):>10}"
    )
    for key in sorted(set(before) | set(rebuilt)):
        print(f"{key:<28}{before.get(key, float('nan')):>10.2f}{rebuilt.get(key, float('nan')):>10.2f}")
    states = store.scheduler_state(campaign_id, args.before + args.after, "observed")
    later = store.query(
        "SELECT count(*) FROM batches WHERE campaign_id = ? AND step > ? AND list_contains(?, task_id)",
        [campaign_id, args.before + 1, sorted(retired)],
    ).iloc[0, 0]
    print(
        f"\nstatus {store.campaign(campaign_id)['status']}; scheduler over {states['n_tasks']} tasks; "
        f"retired tasks picked after step {args.before + 1}: {later}"
    )


if __name__ == "__main__":
    main()
