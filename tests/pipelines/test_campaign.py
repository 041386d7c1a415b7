"""Campaigns end to end through Dagster: scheduling, the landing sensor, ingestion, quarantine, resume."""

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.campaign import CampaignConfig
from pipelines.driver import CampaignFailed, _execute, evaluate_sensor, ingest_pending, run_campaign
from pipelines.paths import Paths
from warehouse.landing import step_path
from warehouse.store import Warehouse

B, G = 12, 4


def _config(campaign_id: str, steps: int, **changes) -> CampaignConfig:
    return CampaignConfig(
        campaign_id=campaign_id, splits=["base"], batch_size=B, group_size=G, steps=steps, **changes
    )


def _start(driver, config: CampaignConfig) -> None:
    """Register the campaign and run its first batch and training step (no ingestion yet)."""
    from pipelines.driver import _execute

    driver.store.create_campaign(config.campaign_id, config.to_dict(), config.scheduler)
    driver.instance.add_dynamic_partitions("campaigns", [config.campaign_id])
    _execute(driver, "plan_step", config.campaign_id)
    _execute(driver, "train_step", config.campaign_id)


def _count(store: Warehouse, table: str, campaign_id: str) -> int:
    return store.scalar(f"SELECT count(*) FROM {table} WHERE campaign_id = ?", [campaign_id])


def test_campaign_run_five_steps_leaves_every_table_filled(driver):
    config = _config("five", steps=5)
    run_campaign(config, driver)
    store = driver.store
    sizes = store.query(
        "SELECT step, count(*) AS n FROM batches WHERE campaign_id = 'five' GROUP BY step ORDER BY step"
    )
    assert sizes["step"].tolist() == [1, 2, 3, 4, 5] and (sizes["n"] == B).all()
    assert _count(store, "rollouts", "five") == B * G * 5
    assert store.query("SELECT DISTINCT step FROM predictions WHERE campaign_id = 'five' ORDER BY 1")[
        "step"
    ].tolist() == [1, 2, 3, 4, 5]
    # what exploitation ranks is in the table beside the predicted variance it starts from
    ranked = store.query(
        "SELECT predicted_variance, value, moves FROM predictions WHERE campaign_id = 'five'"
    )
    assert ranked.notna().all().all() and ranked["moves"].between(0, 1).all()
    assert not ranked["value"].equals(ranked["predicted_variance"])
    assert (
        store.scalar("SELECT count(*) FROM ingested_files WHERE campaign_id = 'five' AND status = 'loaded'")
        == 5
    )
    assert store.campaign("five")["status"] == "completed"
    assert _count(store, "task_stats", "five") > 0
    metrics = store.step_metrics("five")
    assert {"schedule/mean_variance", "schedule/envs_per_batch", "rollout/reward_mean"} <= set(
        metrics.columns
    )
    first = store.batch("five", 1)
    assert (first["role"] == "coverage").all()  # step 1 has no history: all coverage
    assert (store.batch("five", 5)["role"] == "exploit").any()
    runs = {r.job_name for r in driver.instance.get_runs()}
    assert {"plan_step", "train_step", "ingest_rollouts"} <= runs
    # MLflow: one run for the campaign, the same metric names as step_metrics, a batch input per step.
    from mlflow import MlflowClient

    from training.mlflow_tracking import sqlite_uri

    client = MlflowClient(tracking_uri=sqlite_uri(Paths.from_env().mlflow_db))
    (run,) = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], "tags.`envsched.campaign_id` = 'five'"
    )
    for name in ("rollout/reward_mean", "schedule/mean_variance"):
        history = client.get_metric_history(run.info.run_id, name)
        assert sorted(m.step for m in history) == [1, 2, 3, 4, 5]
        assert {m.step: m.value for m in history}[5] == pytest.approx(metrics.loc[5, name])
    assert len(client.get_run(run.info.run_id).inputs.dataset_inputs) == 5
    assert store.scalar("SELECT count(mlflow_run_id) FROM checkpoints WHERE campaign_id = 'five'") == 5


def test_campaign_sensor_fired_twice_and_file_redelivered_add_no_rows(driver):
    config = _config("twice", steps=3)
    _start(driver, config)
    landing = step_path(Paths.from_env().landing, "twice", 1)
    # Fire the sensor twice from the same cursor: both ticks request the file; run both requests.
    runs_a, cursor = ingest_pending(driver, None)
    runs_b, _ = ingest_pending(driver, None)
    assert (runs_a, runs_b) == (1, 0)  # the second tick sees the file already loaded
    # a tick evaluated before the load saw the file: execute its request again, as a double-fired sensor would
    _execute(driver, "ingest_rollouts", "twice", {"ops": {"rollouts": {"config": {"path": str(landing)}}}})
    assert _count(driver.store, "rollouts", "twice") == B * G
    # Re-deliver the same file (same bytes, new mtime): the sensor's cursor skips it ...
    landing.write_bytes(landing.read_bytes())
    assert evaluate_sensor(driver, "landing_sensor", cursor).run_requests == []
    # ... and without a cursor the ledger does.
    assert evaluate_sensor(driver, "landing_sensor").run_requests == []
    assert _count(driver.store, "rollouts", "twice") == B * G
    assert driver.store.scalar("SELECT count(*) FROM ingested_files WHERE campaign_id = 'twice'") == 1


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _rewrite(path, change):
    original = pq.ParquetFile(path).read()
    frame = change(original.to_pandas())
    schema = pa.schema([f for f in original.schema if f.name in frame.columns])  # keep the writer's types
    pq.write_table(pa.Table.from_pandas(frame, schema=schema, preserve_index=False), path)


@pytest.mark.parametrize(
    "damage, reason",
    [
        # (how the step file is damaged, what the quarantine reason must say)
        (_truncate, "not a readable Parquet file"),
        (
            lambda p: _rewrite(p, lambda t: t.drop(columns=["reward"])),
            "missing required column(s) ['reward']",
        ),
        (
            lambda p: _rewrite(p, lambda t: t.assign(reward=[3.0] + [0.0] * (len(t) - 1))),
            "'reward' outside [0, 1]",
        ),
        (
            lambda p: _rewrite(p, lambda t: t.assign(task_id=["no/such/task"] + t.task_id.tolist()[1:])),
            "unknown task id",
        ),
    ],
    ids=["truncated", "missing_column", "reward_3", "unknown_task"],
)
def test_campaign_bad_landing_file_is_quarantined_and_loads_nothing(driver, damage, reason):
    config = _config("bad", steps=2)
    _start(driver, config)
    landing = step_path(Paths.from_env().landing, "bad", 1)
    damage(landing)
    before = {t: _count(driver.store, t, "bad") for t in ("rollouts", "predictions", "task_stats", "batches")}
    with pytest.raises(CampaignFailed, match="quarantined"):
        ingest_pending(driver, None)
    assert not landing.exists()
    quarantined = list((Paths.from_env().landing / "_quarantine" / "bad").rglob("*.parquet"))
    assert len(quarantined) == 1
    row = driver.store.query("SELECT status, reason FROM ingested_files WHERE campaign_id = 'bad'")
    assert row["status"].tolist() == ["quarantined"] and reason in row["reason"][0]
    assert {t: _count(driver.store, t, "bad") for t in before} == before
    status = driver.store.campaign("bad")
    assert status["status"] == "failed" and reason in status["status_reason"]
    with pytest.raises(CampaignFailed, match="failed earlier"):
        run_campaign(config, driver)  # the campaign stops instead of training on a wrong batch


def _table(store: Warehouse, sql: str) -> pd.DataFrame:
    return store.query(sql).reset_index(drop=True)


def test_campaign_killed_between_ingest_and_next_batch_resumes_exactly(driver, monkeypatch, tmp_path):
    config = _config("crash", steps=4)
    real_save_batch = Warehouse.save_batch

    def crash_at_step_3(self, campaign_id, step, batch, state):
        if step == 3:
            raise KeyboardInterrupt("killed before scheduling step 3")
        return real_save_batch(self, campaign_id, step, batch, state)

    monkeypatch.setattr(Warehouse, "save_batch", crash_at_step_3)
    with pytest.raises((CampaignFailed, KeyboardInterrupt)):
        run_campaign(config, driver)
    progress = driver.store.progress("crash")
    assert progress == {"scheduled": 2, "loaded": 2, "observed": 2}
    monkeypatch.setattr(Warehouse, "save_batch", real_save_batch)
    run_campaign(config, driver)

    # The same campaign without the crash, in another campaign id, gives identical batches and rewards.
    reference = _config("nocrash", steps=4)
    run_campaign(reference, driver)
    for sql in (
        "SELECT step, task_id, role FROM batches WHERE campaign_id = '{}' ORDER BY step, position",
        "SELECT step, task_id, rollout_idx, reward FROM rollouts WHERE campaign_id = '{}' ORDER BY ALL",
    ):
        crashed, clean = (
            _table(driver.store, sql.format("crash")),
            _table(driver.store, sql.format("nocrash")),
        )
        assert len(crashed) > 0 and crashed.equals(clean)
    assert _count(driver.store, "rollouts", "crash") == B * G * 4


def test_campaign_cli_with_hf_engine_runs_a_tiny_lm_through_the_pipeline(driver, tmp_path, monkeypatch):
    """`envsched campaign run --engine hf --model DIR`: a real (tiny, random) model in real BFCL
    environments with the real verifier, a GRPO step, the landing file, the sensor, ingestion."""
    from click.testing import CliRunner

    from pipelines.cli import main
    from training.tiny_lm import build_tiny_lm

    model = build_tiny_lm(tmp_path / "tiny-lm", seed=0)
    monkeypatch.setenv("DAGSTER_HOME", str(Paths.from_env().dagster_home))
    args = [
        "campaign",
        "run",
        "--engine",
        "hf",
        "--model",
        str(model),
        "--steps",
        "2",
        "--campaign-id",
        "hf",
        "--split",
        "base",
        "--batch-size",
        "2",
        "--group-size",
        "2",
        "--engine-option",
        "max_new_tokens=8",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "Per step (hf)" in result.output
    store = driver.store
    assert _count(store, "rollouts", "hf") == 2 * 2 * 2
    assert store.campaign("hf")["status"] == "completed"
    metrics = store.step_metrics("hf")
    assert {"train/loss", "train/policy_tokens", "rollout/zero_variance_groups"} <= set(metrics.columns)
    assert (metrics["train/policy_tokens"] > 0).all()
    checkpoint = Paths.from_env().checkpoints / "hf" / "step=2"
    assert (checkpoint / "policy").is_dir() and (checkpoint / "optimizer.pt").exists()
    tokens = store.query("SELECT completion_tokens FROM rollouts WHERE campaign_id = 'hf'")[
        "completion_tokens"
    ]
    assert (tokens > 0).all()
