"""The `envsched` command line, run in-process with click's runner."""

from click.testing import CliRunner

from pipelines.cli import main


def test_cli_verify_gold_prints_passed_count():
    result = CliRunner().invoke(
        main, ["envs", "verify-gold", "--source", "bfcl_v3_multi_turn", "--limit", "25"]
    )
    assert result.exit_code == 0, result.output
    assert "passed 25/25" in result.output


def test_cli_verify_gold_names_an_unknown_source(home):
    result = CliRunner().invoke(main, ["envs", "verify-gold", "--source", "nope"])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()  # one line, no traceback
    assert "unknown environment source 'nope'" in line and "traceback in" in line


def test_cli_run_loads_catalogue_runs_a_campaign_and_sql_reads_it(home, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))  # restored after the test
    result = CliRunner().invoke(main, ["run", "--steps", "2", "--source", "bfcl_v3_multi_turn"])
    assert result.exit_code == 0, result.output
    assert "bfcl_v3_multi_turn" in result.output and "800" in result.output
    assert "mean_sel_var" in result.output and "make ui" in result.output
    assert (home / "warehouse.duckdb").exists() and (home / "dagster" / "dagster.yaml").exists()
    sql = CliRunner().invoke(
        main, ["sql", "SELECT count(*) AS n FROM tasks WHERE source = 'bfcl_v3_multi_turn'"]
    )
    assert sql.exit_code == 0 and "800" in sql.output
    import dagster as dg

    jobs = {r.job_name for r in dg.DagsterInstance.get().get_runs()}
    assert {"refresh_catalog", "build_graph", "plan_step", "train_step", "ingest_rollouts"} <= jobs
    steps = CliRunner().invoke(main, ["sql", "SELECT count(*) AS n FROM campaign_steps"])
    assert steps.exit_code == 0 and " 2" in steps.output


def test_cli_campaign_run_source_option_sets_the_synthetic_catalogue_size(home, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    args = ["campaign", "run", "--source", "synthetic", "--source-option", "synthetic.envs=8"]
    args += ["--source-option", "synthetic.tasks_per_env=10", "--steps", "2", "--batch-size", "8"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    sql = CliRunner().invoke(main, ["sql", "SELECT count(*) AS n FROM tasks WHERE source = 'synthetic'"])
    assert sql.output.split() == ["n", "80"]
    steps = CliRunner().invoke(main, ["sql", "SELECT count(*) AS n FROM campaign_steps"])
    assert steps.output.split() == ["n", "2"]


def test_cli_source_option_without_a_source_prefix_is_a_clear_error(home):
    result = CliRunner().invoke(main, ["campaign", "run", "--steps", "1", "--source-option", "envs=500"])
    assert result.exit_code != 0
    assert "expected SOURCE.KEY=VALUE" in result.output
    other = CliRunner().invoke(
        main, ["campaign", "run", "--steps", "1", "--source", "synthetic", "--source-option", "bfcl.x=1"]
    )
    assert other.exit_code != 0 and "not among --source" in other.output


def test_cli_campaign_start_finds_the_recorded_ui_and_names_one_that_does_not_answer(home, monkeypatch):
    from pipelines.dev_server import free_port
    from pipelines.paths import Paths

    monkeypatch.delenv("ENVSCHED_UI_URL", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    gone = f"http://127.0.0.1:{free_port()}"  # the last `envsched ui` recorded it, then stopped
    Paths(home).ensure().ui_url.write_text(gone)
    result = CliRunner().invoke(main, ["campaign", "start", "--steps", "1", "--campaign-id", "nowhere"])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert f"no Dagster UI at {gone}" in line and "--ui-url" in line
    monkeypatch.setenv("ENVSCHED_UI_URL", other := f"http://127.0.0.1:{free_port()}")
    result = CliRunner().invoke(main, ["campaign", "start", "--steps", "1", "--campaign-id", "nowhere"])
    assert f"no Dagster UI at {other}" in result.output


def test_cli_following_a_campaign_on_the_ui_stops_once_no_daemon_runs(home, monkeypatch, capsys):
    """`campaign run` waiting on the UI does not wait for ever once the UI (its daemon) is stopped."""
    import pytest

    from campaign.config import CampaignConfig
    from pipelines.cli import _follow_on_ui
    from pipelines.paths import Paths
    from warehouse.store import Warehouse

    monkeypatch.setenv("DAGSTER_HOME", str(Paths(home).ensure().dagster_home))  # no daemon beats there
    store = Warehouse(Paths(home).warehouse)
    store.create_campaign("orphaned", CampaignConfig("orphaned", steps=3).to_dict(), "envsched")
    store.set_campaign_status("orphaned", "running")
    with pytest.raises(SystemExit) as exit_info:
        _follow_on_ui(store, "orphaned")
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "no Dagster daemon runs on this data folder any more" in err and "step 0/3" in err
    assert "envsched campaign resume orphaned" in err
