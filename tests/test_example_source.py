"""The README's environment of your own (`examples/kv_store.py`), selected by module path as a user does:
`verify-gold`, then campaigns of the skill engine, which runs the example's own tools and verifier."""

from click.testing import CliRunner

from pipelines.cli import main
from warehouse.store import Warehouse

SOURCE = "examples.kv_store:KeyValueSource"  # the class calls itself "kv_store"


def test_example_source_replays_every_gold_solution():
    result = CliRunner().invoke(main, ["envs", "verify-gold", "--source", SOURCE])
    assert result.exit_code == 0, result.output
    assert "passed 48/48" in result.output


def test_a_source_named_by_module_path_runs_campaigns_and_reloads_under_that_name(home, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))

    def campaign(campaign_id: str, envs: int):
        args = ["campaign", "run", "--campaign-id", campaign_id, "--source", SOURCE, "--engine", "skill"]
        args += ["--source-option", f"{SOURCE}.envs={envs}"]  # a dotted source name takes options too
        args += ["--steps", "2", "--batch-size", "8", "--group-size", "4", "--eval-every", "0"]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output

    campaign("kv-first", envs=3)
    store = Warehouse(home / "warehouse.duckdb")
    tasks = (
        "SELECT source, count(*) FILTER (WHERE active) AS active, count(*) AS rows FROM tasks GROUP BY ALL"
    )
    # The rows carry the name the source was selected by, which every later run resolves it by.
    assert store.query(tasks).to_dict("records") == [{"source": SOURCE, "active": 36, "rows": 36}]
    rollouts = store.query("SELECT * FROM rollouts WHERE campaign_id = 'kv-first'")
    assert len(rollouts) == 2 * 8 * 4 and (rollouts["status"] == "ok").all()
    assert rollouts["task_id"].str.startswith("kv_store/store").all()
    assert set(rollouts["reward"]) <= {0.0, 1.0} and (rollouts["n_tool_calls"] > 0).any()

    campaign("kv-second", envs=2)  # reloaded under the same name: the third store's tasks are retired
    assert store.query(tasks).to_dict("records") == [{"source": SOURCE, "active": 24, "rows": 36}]
    picked = store.query("SELECT DISTINCT task_id FROM batches WHERE campaign_id = 'kv-second'")["task_id"]
    assert len(picked) and not picked.str.startswith("kv_store/store2/").any()


def test_a_source_whose_module_does_not_import_is_a_one_line_error(home):
    result = CliRunner().invoke(main, ["envs", "verify-gold", "--source", "no_such_pkg.envs:Source"])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert "cannot import 'no_such_pkg.envs'" in line and "PYTHONPATH" in line
