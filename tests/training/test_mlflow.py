"""MLflow lineage on a real sqlite store: the campaign run, step metrics, batch inputs, checkpoints."""

import dagster as dg
import pandas as pd
import pytest
from mlflow import MlflowClient

from pipelines.campaign import CampaignConfig
from pipelines.mlflow_resource import MLflowResource
from training.mlflow_tracking import (
    CAMPAIGN_TAG,
    CHECKPOINT_TAG,
    DAGSTER_RUN_TAG,
    MLflowTracker,
    flatten_params,
    sqlite_uri,
)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One sqlite store for the module (creating its tables takes a couple of seconds)."""
    root = tmp_path_factory.mktemp("mlflow")
    return sqlite_uri(root / "mlflow.db"), root / "artifacts"


def batch_frame(step: int) -> pd.DataFrame:
    """A scheduled batch as ``Warehouse.batch`` returns it."""
    return pd.DataFrame(
        {
            "task_id": [f"bfcl/multi_turn_base_{step}", f"tau/retail_{step}", "synthetic/e3_t1"],
            "env_id": ["bfcl/GorillaFileSystem", "tau/retail", "synthetic/e3"],
            "role": ["exploit", "explore", "oversample"],
            "predicted_variance": [0.06, 0.02, float("nan")],
        }
    )


def test_mlflow_campaign_run_holds_params_metrics_batches_and_checkpoints(store, tmp_path):
    uri, artifacts = store
    tracker = MLflowTracker(uri, artifacts)
    config = CampaignConfig(
        "lineage", engine="hf", engine_options={"model": "/models/tiny", "temperature": 1.0}
    )

    run = tracker.start_campaign("lineage", params=config.to_dict(), dagster_run_id="dagster-run-1")
    checkpoint = tmp_path / "step=2"
    checkpoint.mkdir()
    (checkpoint / "trainer_state.pt").write_bytes(b"state")
    for step in (1, 2):
        tracker.log_step(
            run.run_id,
            step,
            {"rollout/reward_mean": 0.1 * step, "train/loss": 1.0 / step},
            f"dagster-run-{step}",
        )
        tracker.log_batch(run.run_id, step, batch_frame(step), source=str(tmp_path / "warehouse.duckdb"))
    tracker.log_checkpoint(run.run_id, 1, "file:///ckpt/lineage/step=1")
    artifact_uri = tracker.log_checkpoint(run.run_id, 2, checkpoint.as_uri(), directory=checkpoint)

    client = MlflowClient(tracking_uri=uri)  # read back through a fresh client
    stored = client.get_run(run.run_id)
    assert not run.resumed and run.run_id in run.url and run.experiment_id in run.url
    assert stored.data.tags[CAMPAIGN_TAG] == "lineage"
    assert (
        stored.data.params["group_size"] == "8"
        and stored.data.params["engine_options.model"] == "/models/tiny"
    )
    assert stored.data.params["sources"] == '["bfcl_v3_multi_turn"]'
    history = client.get_metric_history(run.run_id, "train/loss")
    assert [(m.step, m.value) for m in history] == [(1, 1.0), (2, 0.5)]
    assert stored.data.tags[f"{DAGSTER_RUN_TAG}.step_2"] == "dagster-run-2"
    assert stored.data.tags[DAGSTER_RUN_TAG] == "dagster-run-2"
    inputs = {i.dataset.name: i for i in stored.inputs.dataset_inputs}
    assert sorted(inputs) == ["batch-step-1", "batch-step-2"]
    tags = {t.key: t.value for t in inputs["batch-step-2"].tags}
    assert tags["mlflow.data.context"] == "training" and tags["envsched.step"] == "2"
    assert '"task_id"' in inputs["batch-step-2"].dataset.schema
    assert stored.data.tags[f"{CHECKPOINT_TAG}.step_1"] == "file:///ckpt/lineage/step=1"
    assert stored.data.tags[CHECKPOINT_TAG] == checkpoint.as_uri()
    assert artifact_uri.endswith("checkpoints/step=2") and artifact_uri.startswith(artifacts.as_uri())
    assert [f.path for f in client.list_artifacts(run.run_id, "checkpoints/step=2")] == [
        "checkpoints/step=2/trainer_state.pt"
    ]


def test_mlflow_resumed_campaign_reuses_its_run(store):
    uri, artifacts = store
    first = MLflowTracker(uri, artifacts).start_campaign("resumable", params={"steps": 3})
    MLflowTracker(uri, artifacts).end_campaign(first.run_id, status="FAILED")  # the process crashed

    again = MLflowTracker(uri, artifacts).start_campaign(
        "resumable", params={"steps": 3}, dagster_run_id="d-2"
    )
    other = MLflowTracker(uri, artifacts).start_campaign("another", params={"steps": 3})

    client = MlflowClient(tracking_uri=uri)
    assert again.run_id == first.run_id and again.resumed
    assert client.get_run(again.run_id).info.status == "RUNNING"
    assert client.get_run(again.run_id).data.tags[DAGSTER_RUN_TAG] == "d-2"
    assert other.run_id != first.run_id and not other.resumed


def test_mlflow_resource_defaults_to_sqlite_under_home_and_links_a_dagster_run(home):
    @dg.asset
    def step_asset(context: dg.AssetExecutionContext, mlflow: MLflowResource) -> dg.MaterializeResult:
        links = mlflow.tracker().log_training_step(
            "dagster-linked",
            1,
            {"train/loss": 0.5},
            batch_frame(1),
            "file:///ckpt",
            dagster_run_id=context.run.run_id,
        )
        return dg.MaterializeResult(
            metadata={
                "mlflow_run_id": links["mlflow_run_id"],
                "mlflow_run_url": dg.MetadataValue.url(links["mlflow_run_url"]),
            }
        )

    result = dg.materialize([step_asset], resources={"mlflow": MLflowResource()})

    tracker = MLflowResource().tracker()
    assert tracker.tracking_uri == f"sqlite:///{home.resolve()}/mlflow/mlflow.db"
    assert (home / "mlflow" / "mlflow.db").exists()
    metadata = result.asset_materializations_for_node("step_asset")[0].metadata
    run = tracker.client.get_run(metadata["mlflow_run_id"].value)
    assert run.data.tags[DAGSTER_RUN_TAG] == result.run_id == run.data.tags[f"{DAGSTER_RUN_TAG}.step_1"]
    assert metadata["mlflow_run_url"].value == tracker.run_url(run.info.run_id)
    experiment = tracker.client.get_experiment(run.info.experiment_id)
    assert experiment.artifact_location == (home / "mlflow" / "artifacts").resolve().as_uri()


@pytest.mark.parametrize("uri", ["/tmp/mlruns", "file:///tmp/mlruns", "mlruns"])
def test_mlflow_tracker_refuses_the_file_store(uri):
    with pytest.raises(ValueError, match="file store"):
        MLflowTracker(uri)


def test_flatten_params_nests_with_dots_and_encodes_json():
    flat = flatten_params(
        {"a": 1, "b": {"c": [1, 2], "d": {"e": None}}, "f": {}, "g": "text", "h": "x" * 7000}
    )
    assert flat == {"a": "1", "b.c": "[1, 2]", "b.d.e": "null", "f": "{}", "g": "text", "h": "x" * 6000}


def test_mlflow_log_training_step_across_processes_keeps_one_run(store):
    uri, artifacts = store
    links = [
        MLflowTracker(uri, artifacts).log_training_step(  # a fresh tracker per step, as a new Dagster run
            "stepwise",
            step,
            {"rollout/zero_variance_groups": float(3 - step)},
            batch_frame(step),
            f"file:///ckpt/stepwise/step={step}",
            params={"steps": 2},
            dagster_run_id=f"d-{step}",
            finished=step == 2,
        )
        for step in (1, 2)
    ]
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(links[0]["mlflow_run_id"])
    assert links[1]["mlflow_run_id"] == run.info.run_id and run.info.run_id in links[1]["mlflow_run_url"]
    assert links[1]["checkpoint"] == "file:///ckpt/stepwise/step=2" == run.data.tags[CHECKPOINT_TAG]
    history = client.get_metric_history(run.info.run_id, "rollout/zero_variance_groups")
    assert [(m.step, m.value) for m in history] == [(1, 2.0), (2, 1.0)]
    assert len(run.inputs.dataset_inputs) == 2 and run.info.status == "FINISHED"
