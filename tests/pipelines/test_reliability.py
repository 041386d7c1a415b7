"""Reliability through Dagster: stray entries and other campaigns' files never stop a campaign, late
re-deliveries never rewrite history, failures say their cause in one line, resume after a fix."""

import json
import os

import pytest

import warehouse.landing as landing_module
import warehouse.store as store_module
from pipelines.campaign import CampaignConfig
from pipelines.driver import CampaignFailed, _execute, evaluate_sensor, ingest_pending, run_campaign
from pipelines.paths import Paths
from warehouse.landing import step_path
from warehouse.store import Warehouse

B, G = 8, 4


def _config(campaign_id: str, steps: int) -> CampaignConfig:
    return CampaignConfig(campaign_id=campaign_id, splits=["base"], batch_size=B, group_size=G, steps=steps)


def _start(driver, config: CampaignConfig) -> None:
    driver.store.create_campaign(config.campaign_id, config.to_dict(), config.scheduler)
    driver.instance.add_dynamic_partitions("campaigns", [config.campaign_id])
    driver.store.set_campaign_status(config.campaign_id, "running")
    _execute(driver, "plan_step", config.campaign_id)
    _execute(driver, "train_step", config.campaign_id)


def _sensor(driver, cursor=None):
    return evaluate_sensor(driver, "landing_sensor", cursor)


def test_sensor_skips_odd_entries_reports_once_and_rehashes_nothing_loaded(driver, monkeypatch, capfd):
    config = _config("tick", steps=2)
    _start(driver, config)
    landing = Paths.from_env().landing
    (landing / "tick" / "step=2" / "rollouts.parquet").mkdir(parents=True)  # a directory
    (landing / "nobody" / "step=1").mkdir(parents=True)
    os.mkfifo(landing / "nobody" / "step=1" / "rollouts.parquet")  # a FIFO in an unregistered campaign
    (landing / "tick" / "step=3").mkdir()
    (landing / "tick" / "step=3" / "rollouts.parquet").symlink_to("/dev/zero")  # a symlink to a device
    (landing / "ghost" / "step=1").mkdir(parents=True)
    (landing / "ghost" / "step=1" / "rollouts.parquet").write_bytes(
        step_path(landing, "tick", 1).read_bytes()
    )

    capfd.readouterr()
    first = _sensor(driver)
    assert [r.partition_key for r in first.run_requests] == ["tick"]  # the tick did not fail
    warned = [line for line in capfd.readouterr().err.splitlines() if "WARNING" in line]
    for entry in ("tick/step=2/rollouts.parquet", "nobody/step=1", "tick/step=3", "ghost/step=1"):
        assert sum(entry in line for line in warned) == 1, (entry, warned)
    cursor = json.loads(first.cursor)
    assert "landing/ghost/step=1/rollouts.parquet" in cursor["waiting"]
    assert len(cursor["bad"]) == 3

    runs, _ = ingest_pending(driver, None, "tick")
    assert runs == 1 and driver.store.progress("tick")["loaded"] == 1
    hashed = []
    real_hash = landing_module.file_hash
    monkeypatch.setattr(landing_module, "file_hash", lambda p: hashed.append(p) or real_hash(p))
    capfd.readouterr()
    second = _sensor(driver, first.cursor)
    assert second.run_requests == [] and hashed == []  # nothing re-read, nothing re-reported
    assert "WARNING" not in capfd.readouterr().err
    step_file = step_path(landing, "tick", 1)
    step_file.write_bytes(step_file.read_bytes())  # same bytes, new mtime: hashed once, not requested
    assert _sensor(driver, second.cursor).run_requests == [] and len(hashed) == 1


def test_campaign_late_conflicting_redelivery_keeps_history_and_completes_identically(
    driver, campaign_tables
):
    config = _config("late", steps=2)
    _start(driver, config)
    assert ingest_pending(driver, None, "late")[0] == 1  # step 1 loaded and observed, step 2 scheduled
    _execute(driver, "train_step", "late")  # step 2 trained on its batch
    before = campaign_tables(driver.store, "late")
    landing = step_path(Paths.from_env().landing, "late", 1)
    # The late, different version of step 1 arrives at the same path after step 2 was trained.
    rows = driver.store.rollouts("late", 1).drop(columns=["source_file"])
    rows["reward"] = 1.0 - rows["reward"]
    landing_module.write_step_file(Paths.from_env().landing, rows, "late", 1)
    runs, _ = ingest_pending(driver, None, "late")
    assert runs == 2  # the re-delivery (quarantined, skipped) and step 2 (loaded)
    # not stopped by the re-delivery; step 2 was its last, so the assets completed it
    assert not landing.exists() and driver.store.campaign("late")["status"] == "completed"
    reason = driver.store.scalar("SELECT reason FROM ingested_files WHERE status = 'quarantined'")
    assert "conflicting re-delivery of step 1" in reason
    after = campaign_tables(driver.store, "late")
    assert after[0].equals(before[0])  # no batch re-selected
    assert after[1][after[1].step == 1].reset_index(drop=True).equals(before[1])  # step 1 untouched
    run_campaign(config, driver)
    run_campaign(_config("late-ref", steps=2), driver)
    for got, want in zip(
        campaign_tables(driver.store, "late"), campaign_tables(driver.store, "late-ref"), strict=True
    ):
        assert len(got) and got.equals(want)


def test_conflicting_redelivery_of_a_completed_campaigns_last_step_is_quarantined_and_skipped(driver):
    run_campaign(_config("done", steps=2), driver)
    before = driver.store.rollouts("done")
    rows = driver.store.rollouts("done", 2).drop(columns=["source_file"])
    landing_module.write_step_file(
        Paths.from_env().landing, rows.assign(reward=1.0 - rows["reward"]), "done", 2
    )
    runs, _ = ingest_pending(driver, None)  # a sensor tick over every campaign, as the daemon runs it
    assert runs == 1 and driver.store.campaign("done")["status"] == "completed"
    reason = driver.store.scalar("SELECT reason FROM ingested_files WHERE status = 'quarantined'")
    assert "conflicting re-delivery of step 2" in reason
    assert driver.store.rollouts("done").equals(before)


def _corrupt(path):
    path.write_bytes(path.read_bytes()[:100])


def test_campaign_bad_file_of_another_campaign_never_stops_this_one_and_resume_force(driver, monkeypatch):
    from click.testing import CliRunner

    from pipelines.cli import main

    other = _config("other", steps=1)
    _start(driver, other)
    _corrupt(step_path(Paths.from_env().landing, "other", 1))
    run_campaign(_config("mine", steps=2), driver)  # other's malformed file is not this run's business
    assert driver.store.campaign("mine")["status"] == "completed"
    assert driver.store.campaign("other")["status"] == "running"
    with pytest.raises(CampaignFailed, match="quarantined"):
        ingest_pending(driver, None, "other")
    assert driver.store.campaign("other")["status"] == "failed"
    # The daemon's sensor holds files of a failed campaign instead of ingesting them.
    rows = driver.store.rollouts("mine", 1).drop(columns=["source_file"]).assign(campaign_id="other")
    landing_module.write_step_file(Paths.from_env().landing, rows, "other", 1)
    held = _sensor(driver)
    assert (
        held.run_requests == []
        and "resume" in json.loads(held.cursor)["waiting"]["landing/other/step=1/rollouts.parquet"][2]
    )
    step_path(Paths.from_env().landing, "other", 1).unlink()  # the operator removes the stray file

    # Through the CLI, on the same data folder: refused without --force, resumed with it.
    monkeypatch.setenv("DAGSTER_HOME", str(Paths.from_env().dagster_home))
    refused = CliRunner().invoke(main, ["campaign", "resume", "other"])
    assert refused.exit_code == 1 and "--force" in refused.output
    resumed = CliRunner().invoke(main, ["campaign", "resume", "other", "--force"])
    assert resumed.exit_code == 0, resumed.output
    assert driver.store.campaign("other")["status"] == "completed"
    assert driver.store.scalar("SELECT count(*) FROM rollouts WHERE campaign_id = 'other'") == B * G


def test_campaign_run_failure_names_the_lock_holder_in_one_line(driver, monkeypatch, duckdb_reader):
    config = _config("locked", steps=1)
    driver.store.create_campaign(config.campaign_id, config.to_dict(), config.scheduler)
    driver.instance.add_dynamic_partitions("campaigns", [config.campaign_id])
    with duckdb_reader(driver.store.path) as notebook:
        monkeypatch.setattr(store_module, "_LOCK_WAIT_S", 0.5)
        with pytest.raises(CampaignFailed) as info:
            _execute(driver, "plan_step", "locked")
    message = str(info.value)
    assert f"locked by PID {notebook.pid}" in message and "Error occurred while executing" not in message
    assert "\n" not in message


def test_campaign_loaded_but_unobserved_step_resumes_without_its_landing_file(driver, monkeypatch):
    config = _config("gone", steps=2)
    real = Warehouse.save_observation

    def crash_at_step_2(self, campaign_id, step, *args, **kwargs):
        if step == 2:
            raise KeyboardInterrupt("killed inside the refresh of step 2")
        return real(self, campaign_id, step, *args, **kwargs)

    monkeypatch.setattr(Warehouse, "save_observation", crash_at_step_2)
    with pytest.raises((CampaignFailed, KeyboardInterrupt)):
        run_campaign(config, driver)
    assert driver.store.progress("gone") == {"scheduled": 2, "loaded": 2, "observed": 1}
    step_path(Paths.from_env().landing, "gone", 2).unlink()
    monkeypatch.setattr(Warehouse, "save_observation", real)
    run_campaign(config, driver)
    assert driver.store.progress("gone")["observed"] == 2
    assert driver.store.campaign("gone")["status"] == "completed"
