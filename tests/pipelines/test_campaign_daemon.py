"""Campaigns Dagster runs by itself: `start_campaign`, the campaign sensor, statuses set by the assets."""

import dagster as dg
import pandas as pd
import pytest
from click.testing import CliRunner

from campaign.config import CampaignConfig
from pipelines.batch_contract import batch_problem
from pipelines.campaign import build_scheduler
from pipelines.campaign_status import CAMPAIGN_TAG, STEP_TAG
from pipelines.cli import main
from pipelines.driver import CampaignFailed, _execute, evaluate_sensor, run_campaign, sensor_run_tags
from pipelines.paths import Paths
from pipelines.start_campaign import run_config_for

B, G = 12, 4


def _config(campaign_id: str, steps: int = 2, batch_size: int = B, **changes) -> CampaignConfig:
    return CampaignConfig(
        campaign_id=campaign_id,
        splits=["base"],
        batch_size=batch_size,
        group_size=G,
        steps=steps,
        eval_every=0,
        **changes,
    )


def _evaluate_sensor(driver) -> dg.SensorResult:
    return evaluate_sensor(driver, "campaign_sensor")


def _sensor_requests(driver) -> list[dg.RunRequest]:
    return list(_evaluate_sensor(driver).run_requests or [])


def test_start_campaign_registers_row_and_partition_and_the_sensor_plans_step_1(driver):
    assert _sensor_requests(driver) == []  # nothing to advance yet
    _execute(driver, "start_campaign", run_config=run_config_for(_config("ui-new-campaign")))
    assert driver.store.campaign("ui-new-campaign")["status"] == "created"
    assert "ui-new-campaign" in driver.instance.get_dynamic_partitions("campaigns")
    (start,) = driver.instance.get_runs(dg.RunsFilter(job_name="start_campaign"))
    assert start.tags[CAMPAIGN_TAG] == "ui-new-campaign"
    (request,) = _sensor_requests(driver)
    assert (request.job_name, request.partition_key, request.run_key) == (
        "plan_step",
        "ui-new-campaign",
        "ui-new-campaign:plan:1",
    )
    _execute(driver, request.job_name, request.partition_key, tags=request.tags)
    (request,) = _sensor_requests(driver)  # a batch is waiting: train it
    assert (request.job_name, request.tags[STEP_TAG]) == ("train_step", "1")
    assert driver.store.campaign("ui-new-campaign")["status"] == "running"


def test_start_campaign_with_a_bad_scheduler_config_fails_and_writes_nothing(driver):
    bad = run_config_for(_config("bad-rho"))
    bad["ops"]["register_campaign"]["config"]["scheduler_config"] = {"rho": 2.0}
    with pytest.raises(
        CampaignFailed, match=r"bad campaign config: SchedulerConfig: rho=2.0 must be in \[0, 1\]"
    ):
        _execute(driver, "start_campaign", run_config=bad)
    assert driver.store.campaign_overview("bad-rho").empty
    assert "bad-rho" not in driver.instance.get_dynamic_partitions("campaigns")


def test_unknown_campaign_partition_fails_saying_how_to_start_it_and_is_removed(driver):
    driver.instance.add_dynamic_partitions("campaigns", ["typo-campaign"])
    with pytest.raises(CampaignFailed) as error:
        _execute(driver, "plan_step", "typo-campaign")
    assert "unknown campaign 'typo-campaign'" in str(error.value)
    assert "start_campaign" in str(error.value) and "envsched campaign start" in str(error.value)
    assert "typo-campaign" not in driver.instance.get_dynamic_partitions("campaigns")


def test_campaign_advanced_by_the_sensors_completes_tags_runs_and_ends_mlflow_run(driver):
    run_campaign(_config("daemon", steps=2), driver)
    assert driver.store.campaign("daemon")["status"] == "completed"
    runs = driver.instance.get_runs()
    assert {"start_campaign", "plan_step", "train_step", "ingest_rollouts"} <= {r.job_name for r in runs}
    steps = {(r.job_name, r.tags.get(STEP_TAG)) for r in runs}
    assert {("train_step", "1"), ("train_step", "2"), ("ingest_rollouts", "2")} <= steps
    assert all(r.tags.get(CAMPAIGN_TAG) == "daemon" for r in runs), [(r.job_name, r.tags) for r in runs]
    # once completed, the sensor requests nothing more
    assert _sensor_requests(driver) == []
    from mlflow import MlflowClient

    from training.mlflow_tracking import sqlite_uri

    client = MlflowClient(tracking_uri=sqlite_uri(Paths.from_env().mlflow_db))
    (run,) = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], "tags.`envsched.campaign_id` = 'daemon'"
    )
    assert run.info.status == "FINISHED"


def test_campaign_whose_engine_fails_is_marked_failed_with_the_reason(driver):
    # passes the config check (the option exists) but the engine cannot start with it
    with pytest.raises(CampaignFailed, match="training_step of step 1"):
        run_campaign(_config("broken", engine_options={"initial_success": "high"}), driver)
    status = driver.store.campaign("broken")
    assert status["status"] == "failed"
    assert status["status_reason"].startswith("training_step of step 1: TypeError")
    assert _sensor_requests(driver) == []  # a failed campaign is not advanced


def _scheduled_batch_metadata(driver, campaign_id: str, step: int = 1) -> dict:
    """Metadata of the ``scheduled_batch`` materialisation that scheduled the campaign's ``step``."""
    records = driver.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("scheduled_batch"), asset_partitions=[campaign_id]),
        limit=10,
    ).records
    (metadata,) = [
        m
        for m in (r.asset_materialization.metadata for r in records)
        if "tasks" in m and m["step"].value == step
    ]
    return metadata


def _quota_check_passed(driver) -> bool:
    """Every execution of the quota check (each step's batch), not only the latest, succeeded."""
    history = driver.instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("scheduled_batch"), "check_batch_respects_quota"), limit=100
    )
    return bool(history) and all(record.status.value == "SUCCEEDED" for record in history)


def test_quota_check_uses_the_campaign_env_quota(driver):
    config = _config("quota", steps=1, scheduler_config={"env_quota_fraction": 0.5})
    run_campaign(config, driver)
    metadata = _scheduled_batch_metadata(driver, "quota")
    assert metadata["environment_quota"].value == 6  # max(2, ceil(0.5 * 12)), not the default 2
    assert _quota_check_passed(driver)


def test_quota_check_passes_a_batch_that_needs_more_than_the_configured_quota(driver):
    # one task per environment cannot fill 24 slots from the base split's 20 environments: EnvSched raises the
    # quota just enough, and the check holds the batch to the raised quota, not the configured one
    tight = {"env_quota_fraction": 0.01, "env_quota_min": 1}
    config = _config("tight", steps=1, batch_size=24, scheduler_config=tight)
    scheduler, catalog = build_scheduler(driver.store, config)
    assert catalog.n_envs == 20
    assert scheduler.env_quota == 2
    run_campaign(config, driver)
    metadata = _scheduled_batch_metadata(driver, "tight")
    assert metadata["environment_quota"].value == scheduler.env_quota
    assert metadata["tasks"].value == 24
    assert _quota_check_passed(driver)


def test_quota_check_passes_a_pool_smaller_than_the_batch_scheduled_whole(driver):
    config = _config("whole", steps=1, batch_size=200)  # the base split holds 169 training tasks
    _, catalog = build_scheduler(driver.store, config)
    run_campaign(config, driver)
    assert _scheduled_batch_metadata(driver, "whole")["tasks"].value == len(catalog) == 169
    assert _quota_check_passed(driver)


def test_quota_check_passes_a_greso_first_round_that_skipped_part_of_a_small_pool(driver):
    # GRESO skips prompts with a zero-variance streak and draws others until B survive or the pool is used up:
    # over 169 tasks at B = 160, step 2's first round skips more than 9 and holds fewer than B (by its rule)
    greso = {"p_init": 0.01}  # a task after one zero-variance group is kept with probability 0.01
    config = _config("greso-small", steps=2, batch_size=160, scheduler="greso", scheduler_config=greso)
    run_campaign(config, driver)
    assert driver.store.campaign("greso-small")["status"] == "completed"
    assert _scheduled_batch_metadata(driver, "greso-small", step=2)["roles"].value["exploit"] < 160
    assert _quota_check_passed(driver)  # step 1's ingest run schedules step 2: the check failed that run


def test_batch_problem_names_what_breaks_the_contract():
    batch = pd.DataFrame({"task_id": ["a", "b", "c", "d"], "env_id": ["x", "x", "y", "z"], "role": "exploit"})
    assert batch_problem(batch, quota=2, expected=4, dynamic_sampling=False)[0] == ""
    assert batch_problem(batch, 1, 4, False)[0] == "2 tasks of environment 'x' (quota 1)"
    problem, rows = batch_problem(batch.iloc[:3], 2, 4, False)
    assert problem == "3 tasks where 4 were due" and len(rows) == 3
    assert (
        batch_problem(batch.iloc[:3], 2, 4, dynamic_sampling=True)[0] == ""
    )  # GRESO's skips used the pool up
    assert batch_problem(batch.iloc[:0], 2, 4, False)[0] == "0 tasks where 4 were due"
    twice = batch.assign(task_id=["a", "b", "c", "a"])
    problem, rows = batch_problem(twice, 2, 4, False)
    assert problem == "task 'a' 2 times" and rows["task_id"].tolist() == ["a", "a"]


def test_campaign_whose_scheduler_breaks_the_batch_contract_stops_and_trains_nothing(driver, monkeypatch):
    from envsched_core.baselines import RandomScheduler

    select = RandomScheduler.select

    def short(self, step):  # a scheduler bug: one task short of B (a task twice fails the warehouse's key)
        return select(self, step).iloc[:-1]

    monkeypatch.setattr(RandomScheduler, "select", short)
    with pytest.raises(
        CampaignFailed,
        match=r"scheduled_batch of step 1: the random batch breaks its contract \(11 tasks where 12 were due\)",
    ):
        run_campaign(_config("buggy", scheduler="random"), driver)
    assert driver.store.campaign("buggy")["status"] == "failed"
    assert driver.store.progress("buggy")["scheduled"] == 0  # the batch was not saved
    assert not driver.instance.get_runs(dg.RunsFilter(job_name="train_step"))
    assert not _quota_check_passed(driver)


def test_graph_fields_make_the_campaign_build_its_own_graph(driver):
    stored, _ = build_scheduler(driver.store, _config("stored"))
    own, _ = build_scheduler(driver.store, _config("own", scheduler_config={"k_within": 3}))

    def max_degree(scheduler) -> int:
        src = scheduler.within[0]
        return int(max(sum(src == s) for s in set(src.tolist())))

    assert max_degree(stored) == 8 and max_degree(own) == 3


NIGHTLY = """
name: nightly
cron: "0 2 * * *"
splits: [base]
batch_size: 12
group_size: 4
steps: 2
eval_every: 0
continue_from: latest
"""


def test_definitions_turn_each_template_into_a_stopped_schedule():
    from pipelines.definitions import defs

    schedule = defs.resolve_schedule_def("bfcl_nightly_schedule")
    assert schedule.job_name == "start_campaign" and schedule.cron_schedule == "0 2 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED


def test_template_schedule_tick_starts_a_campaign_that_continues_from_the_last(driver, tmp_path, monkeypatch):
    import pickle
    from datetime import UTC, datetime

    import numpy as np

    from campaign.templates import load_templates
    from pipelines.driver import follow_campaign
    from pipelines.schedules import template_schedule

    (tmp_path / "nightly.yaml").write_text(NIGHTLY)
    (template,) = load_templates(tmp_path)
    schedule = template_schedule(template)

    def tick(day: int) -> str:
        context = dg.build_schedule_context(
            instance=driver.instance, scheduled_execution_time=datetime(2026, 12, day, 2, tzinfo=UTC)
        )
        (request,) = schedule.evaluate_tick(context).run_requests
        _execute(driver, "start_campaign", run_config=request.run_config, tags=request.tags)
        campaign_id = request.tags[CAMPAIGN_TAG]
        follow_campaign(driver, campaign_id, steps=2)
        return campaign_id

    first, second = tick(1), tick(2)
    assert (first, second) == ("nightly-20261201", "nightly-20261202")
    assert driver.store.campaign(first)["config"]["continue_from"] == ""  # nothing to continue yet
    assert driver.store.campaign(second)["config"]["continue_from"] == first
    assert driver.store.campaign(second)["status"] == "completed"
    # The scheduler starts from the template's history: step 1 exploits (a fresh step 1 is all coverage).
    assert (driver.store.batch(first, 1)["role"] == "coverage").all()
    assert (driver.store.batch(second, 1)["role"] == "exploit").any()
    # ... every model of it, not only the visit counts: the first campaign's two steps came first
    state = driver.store.scheduler_state(second, 1, "selected")
    seen = driver.store.rollouts(first)["task_id"].nunique()
    assert state["step_offset"] == 2 and (state["outcome"]["last_step"] >= 0).sum() == seen
    _continuing_from_the_last_state_equals_replaying_the_history(driver.store, second, first, monkeypatch)
    # The policy starts from the first campaign's last checkpoint, not from scratch.
    root = Paths.from_env().checkpoints

    def theta(campaign_id: str, step: int) -> np.ndarray:
        return pickle.loads((root / campaign_id / f"step={step}" / "engine.pkl").read_bytes())["theta"]

    # (updates only push skills up, so one more step from first's last is closer to it than to its first)
    assert np.abs(theta(second, 1) - theta(first, 2)).sum() < np.abs(theta(second, 1) - theta(first, 1)).sum()
    (record,) = driver.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("training_step"), asset_partitions=[second]),
        limit=1,
        ascending=True,
    ).records
    assert record.asset_materialization.metadata["policy_from"].value == str(root / first / "step=2")


def _continuing_from_the_last_state_equals_replaying_the_history(store, campaign_id, previous, monkeypatch):
    """A campaign continuing ``previous`` by hand starts from its last saved state (no replay) and gets the
    scheduler that replaying ``previous``'s rollouts builds."""
    import pandas as pd

    from campaign.config import CampaignConfig
    from envsched_core import EnvSched
    from pipelines.campaign import _warm_history, build_scheduler

    config = CampaignConfig.from_dict(
        {**store.campaign(campaign_id)["config"], "template": "", "continue_from": previous}
    )
    replayed, catalog = build_scheduler(store, config)
    replayed.warm_start(_warm_history(store, config, catalog))

    def no_replay(self, history):
        raise AssertionError("replayed the history although the last state fits")

    monkeypatch.setattr(EnvSched, "warm_start", no_replay)
    chained, _ = build_scheduler(store, config, warm=True, catalog=catalog)
    pd.testing.assert_frame_equal(chained.predict(1), replayed.predict(1))
    pd.testing.assert_frame_equal(chained.select(1), replayed.select(1))
    # build_graph re-ran with other cross candidates: the last state's candidates are stale, so replay
    with store.transaction() as conn:
        conn.execute("DELETE FROM edges_cross WHERE campaign_id = '' AND hash(src || dst) % 3 = 0")
    with pytest.raises(AssertionError, match="replayed the history"):
        build_scheduler(store, config, warm=True, catalog=catalog)


@pytest.fixture
def pooled(tmp_path, monkeypatch, prepared_warehouse):
    """(driver context on an instance whose pools have one slot, the step keys holding a `warehouse` slot)."""
    import shutil

    from pipelines.definitions import defs
    from pipelines.driver import DriverContext
    from warehouse.store import Warehouse

    home = Paths(tmp_path / "pooled").ensure()
    monkeypatch.setenv("ENVSCHED_HOME", str(home.home))
    shutil.copy(prepared_warehouse, home.warehouse)
    with dg.instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 1}}}) as instance:

        def holders() -> list[str]:
            return [
                s.step_key for s in instance.event_log_storage.get_concurrency_info("warehouse").claimed_slots
            ]

        yield DriverContext(defs=defs, instance=instance, store=Warehouse(home.warehouse)), holders
        assert holders() == []  # every slot freed


def test_rollouts_and_scheduler_restores_hold_no_slot_and_each_asset_writes_in_one(pooled, monkeypatch):
    """Rolling out and restoring the scheduler (a cold build, a replay) run outside the `warehouse` pool;
    observing, selecting and every write run in the slot of their asset."""
    from envsched_core import EnvSched
    from pipelines import scheduler_cache
    from training.engines.simulated import SimulatedEngine
    from warehouse.store import Warehouse

    ctx, holders = pooled
    seen = []

    def recording(owner, name: str, what: str):
        real = getattr(owner, name)

        def wrapper(*args, **kwargs):
            seen.append((what, holders()))
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    recording(scheduler_cache, "restore_scheduler", "restore")
    recording(SimulatedEngine, "run_step", "rollout and update")
    recording(EnvSched, "observe", "observe")
    recording(EnvSched, "select", "select")
    for name in ("record_checkpoint", "save_observation", "save_batch"):
        recording(Warehouse, name, name)
    # a cold cache after each step, as in a run of its own under the daemon: every asset restores from the warehouse
    run_campaign(_config("pooled", steps=2), ctx, on_step=lambda step: scheduler_cache.clear())
    assert seen == [
        ("restore", []),
        ("select", ["scheduled_batch"]),
        ("save_batch", ["scheduled_batch"]),
        ("rollout and update", []),
        ("record_checkpoint", ["training_step"]),
        ("observe", ["variance_predictions"]),
        ("save_observation", ["variance_predictions"]),
        ("select", ["scheduled_batch"]),
        ("save_batch", ["scheduled_batch"]),
        ("rollout and update", []),
        ("record_checkpoint", ["training_step"]),
        ("restore", []),
        ("observe", ["variance_predictions"]),
        ("save_observation", ["variance_predictions"]),
    ]


def test_continuing_campaign_replays_its_history_holding_no_slot_and_no_lock(pooled, monkeypatch):
    import subprocess
    import sys

    from envsched_core import EnvSched
    from warehouse.store import Warehouse

    ctx, holders = pooled
    run_campaign(_config("first", steps=2), ctx)
    seen = []
    real_warm_start, real_save_batch = EnvSched.warm_start, Warehouse.save_batch

    def warm_start(self, history):
        # another process can open the warehouse to write: nothing here holds DuckDB's lock
        opened = subprocess.run(
            [
                sys.executable,
                "-c",
                "import duckdb, sys; duckdb.connect(sys.argv[1]).close()",
                str(ctx.store.path),
            ],
            capture_output=True,
            text=True,
        )
        seen.append(("replay", holders(), opened.returncode == 0 or opened.stderr[-300:]))
        return real_warm_start(self, history)

    def save_batch(self, campaign_id, step, *args):
        seen.append((f"save batch {step}", holders()))
        return real_save_batch(self, campaign_id, step, *args)

    monkeypatch.setattr(EnvSched, "warm_start", warm_start)
    monkeypatch.setattr(Warehouse, "save_batch", save_batch)
    # another seed: the last state of `first` does not fit (patterns are seeded), so the history is replayed
    run_campaign(_config("second", steps=1, continue_from="first", seed=1), ctx)
    assert seen == [("replay", [], True), ("save batch 1", ["scheduled_batch"])]
    assert ctx.store.scheduler_state("second", 1, "selected")["step_offset"] == 2


def _run_locked_out(driver, request: dg.RunRequest, monkeypatch, tags: dict[str, str] | None = None) -> str:
    """Run ``request`` (with the daemon's tags, or ``tags``), failing as a run does that meets the warehouse
    locked past a writer's wait, or whose process is killed: before any asset could mark the campaign failed."""
    from warehouse import store as store_module

    def locked(*args, **kwargs):
        raise store_module.WarehouseLockedError(
            "warehouse is locked by PID 4242 (jupyter) for more than 60 s"
        )

    with monkeypatch.context() as patch:
        patch.setattr(store_module.Warehouse, "session", locked)
        with pytest.raises(CampaignFailed, match="locked by PID 4242"):
            _launch(driver, request, tags)
    return request.run_key


def _launch(driver, request: dg.RunRequest, tags: dict[str, str] | None = None) -> None:
    """Execute ``request`` as the daemon launches it (with its run key and sensor tags)."""
    tags = tags or sensor_run_tags(request, "campaign_sensor")
    _execute(driver, request.job_name, request.partition_key, request.run_config, tags)


def test_a_step_whose_run_failed_without_failing_the_campaign_is_retried_under_a_new_run_key(
    driver, monkeypatch
):
    """The daemon launches a run key once: a killed or locked-out run left the campaign `running` and its
    next request skipped for good. Each failure now gets a new key, up to MAX_RETRIES; then the tick says
    why it waits, and a relaunch of `start_campaign` gives the campaign its retries back."""
    from pipelines.campaign_sensor import MAX_RETRIES

    _execute(driver, "start_campaign", run_config=run_config_for(_config("retried", steps=1)))
    (first,) = _sensor_requests(driver)
    assert first.run_key == "retried:plan:1"
    keys = [_run_locked_out(driver, first, monkeypatch)]
    for attempt in range(1, MAX_RETRIES + 1):
        (request,) = _sensor_requests(driver)
        assert request.run_key == f"retried:plan:1:retry{attempt}" and request.job_name == "plan_step"
        keys.append(_run_locked_out(driver, request, monkeypatch))
    assert len(set(keys)) == MAX_RETRIES + 1  # every attempt a key the daemon has not launched yet
    assert driver.store.campaign("retried")["status"] in ("created", "running")
    result = _evaluate_sensor(driver)
    assert not result.run_requests  # out of retries: it waits, and says why
    why = result.skip_reason.skip_message
    assert "campaign 'retried': plan_step of step 1 failed 4 times" in why
    assert "envsched campaign resume retried --force" in why
    monkeypatch.setattr(dg.DagsterInstance, "get", lambda: driver.instance)  # the CLI's instance is this one
    status = CliRunner().invoke(main, ["campaign", "status"])
    assert status.exit_code == 0 and f"waiting: {why}" in status.output

    _execute(driver, "start_campaign", run_config=run_config_for(_config("retried", steps=1)))  # a relaunch
    (request,) = _sensor_requests(driver)
    assert request.run_key == f"retried:plan:1:retry{MAX_RETRIES + 1}"
    _launch(driver, request)
    (request,) = _sensor_requests(driver)  # the step moved on: its train run has a key of its own
    assert request.run_key == "retried:train:1"


def test_an_ingestion_the_landing_sensor_launched_is_retried_by_the_campaign_sensor(driver, monkeypatch):
    _execute(driver, "start_campaign", run_config=run_config_for(_config("reingested", steps=1)))
    for _ in range(2):  # plan, then train: the landing file is written
        (request,) = _sensor_requests(driver)
        _launch(driver, request)
    assert _sensor_requests(driver) == []  # the landing sensor's to ingest
    (ingest,) = evaluate_sensor(driver, "landing_sensor").run_requests
    _run_locked_out(driver, ingest.with_replaced_attrs(job_name="ingest_rollouts"), monkeypatch, ingest.tags)
    (retry,) = _sensor_requests(driver)  # its cursor has seen the file: the campaign sensor asks again
    assert (retry.job_name, retry.run_key) == ("ingest_rollouts", "reingested:ingest:1:retry1")
    assert retry.run_config == ingest.run_config
    _launch(driver, retry)
    assert driver.store.progress("reingested") == {"scheduled": 1, "loaded": 1, "observed": 1}


def test_relaunching_start_campaign_with_resume_failed_resumes_a_failed_campaign(driver):
    config = _config("relaunched", steps=1)
    _execute(driver, "start_campaign", run_config=run_config_for(config))
    driver.store.set_campaign_status("relaunched", "failed", "training_step of step 1: a stray file")
    assert _sensor_requests(driver) == []
    _execute(driver, "start_campaign", run_config=run_config_for(config))  # as the UI relaunches it
    assert driver.store.campaign("relaunched")["status"] == "failed"  # not without saying so
    resumed = run_config_for(config)
    resumed["ops"]["register_campaign"]["config"]["resume_failed"] = True
    _execute(driver, "start_campaign", run_config=resumed)
    assert driver.store.campaign("relaunched")["status"] == "running"
    (request,) = _sensor_requests(driver)
    assert request.run_key == "relaunched:plan:1"
