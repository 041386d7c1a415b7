"""MLflow lineage of a campaign: one run per campaign, a metric point per step, each step's batch
as a dataset input, each checkpoint as a tag (and optionally as artifacts), the Dagster run ids.

Everything goes through ``MlflowClient`` with an explicit run id (no global active run, so several
threads or processes can log side by side). The store is a sqlite database, never MLflow's file
store::

    tracker = MLflowTracker(sqlite_uri(paths.mlflow_db), paths.mlflow_artifacts)
    run = tracker.start_campaign("c1", params=config_dict, dagster_run_id=context.run_id)
    tracker.log_step(run.run_id, step, metrics)
    tracker.log_batch(run.run_id, step, batch_frame)
    tracker.log_checkpoint(run.run_id, step, checkpoint_dir.as_uri())

A campaign's run is found again by its tag ``envsched.campaign_id``, so a resumed campaign (a new
process, a new Dagster run) keeps logging into the same MLflow run.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pandas as pd
from mlflow import MlflowClient
from mlflow.entities import DatasetInput, InputTag, Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT, MLFLOW_RUN_NAME

CAMPAIGN_TAG = "envsched.campaign_id"
DAGSTER_RUN_TAG = "envsched.dagster_run_id"
CHECKPOINT_TAG = "envsched.checkpoint_uri"
STEP_TAG = "envsched.step"
DEFAULT_EXPERIMENT = "envsched"
_BATCH_SIZE = 1000  # MLflow's log_batch limit on metrics per call
_PARAM_LIMIT = 6000  # MLflow's longest param value


def sqlite_uri(path: str | Path) -> str:
    """The MLflow tracking URI of a sqlite database file (absolute path; folder created)."""
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def flatten_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config -> flat MLflow params (``engine_options.model``); lists and other values as
    JSON or str, cut to MLflow's length limit."""
    flat: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_params(value, prefix=f"{name}."))
            continue
        if isinstance(value, str):
            text = value
        else:
            try:
                text = json.dumps(value, sort_keys=True, default=str)
            except (TypeError, ValueError):
                text = str(value)
        flat[name] = text[:_PARAM_LIMIT]
    return flat


@dataclass(frozen=True)
class CampaignRun:
    """A campaign's MLflow run: its id, experiment, a UI link, and whether it existed before."""

    run_id: str
    experiment_id: str
    url: str
    resumed: bool


class MLflowTracker:
    """A small client of one MLflow experiment (created on first use with ``artifact_location``)."""

    def __init__(
        self,
        tracking_uri: str,
        artifact_location: str | Path | None = None,
        experiment_name: str = DEFAULT_EXPERIMENT,
        ui_url: str = "http://127.0.0.1:5000",
    ):
        if urlparse(tracking_uri).scheme in ("", "file"):
            raise ValueError(
                f"tracking URI {tracking_uri!r} points at MLflow's file store, which is not used here; "
                "give a database URI such as sqlite_uri(<home>/mlflow/mlflow.db)"
            )
        self.tracking_uri = tracking_uri
        self.client = MlflowClient(tracking_uri=tracking_uri)
        self.experiment_name = experiment_name
        self.ui_url = ui_url.rstrip("/")
        if artifact_location is not None and "://" not in str(artifact_location):
            artifact_location = Path(artifact_location).resolve().as_uri()
        self._artifact_location = artifact_location
        self._experiment_id: str | None = None

    @property
    def experiment_id(self) -> str:
        if self._experiment_id is None:
            experiment = self.client.get_experiment_by_name(self.experiment_name)
            if experiment is None:
                try:
                    self._experiment_id = self.client.create_experiment(
                        self.experiment_name, artifact_location=self._artifact_location
                    )
                except MlflowException:  # another process created it between the two calls
                    experiment = self.client.get_experiment_by_name(self.experiment_name)
                    if experiment is None:
                        raise
                    self._experiment_id = experiment.experiment_id
            else:
                self._experiment_id = experiment.experiment_id
        return self._experiment_id

    def run_url(self, run_id: str) -> str:
        """The MLflow UI page of a run (``mlflow ui`` serves ``ui_url``)."""
        return f"{self.ui_url}/#/experiments/{self.experiment_id}/runs/{run_id}"

    def find_campaign(self, campaign_id: str) -> str | None:
        """The run id of the campaign's run, or None (the oldest, should two have been created)."""
        quoted = campaign_id.replace("\\", "\\\\").replace("'", "\\'")
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{CAMPAIGN_TAG}` = '{quoted}'",
            order_by=["attributes.start_time ASC"],
            max_results=1,
        )
        return runs[0].info.run_id if runs else None

    def start_campaign(
        self,
        campaign_id: str,
        params: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
        dagster_run_id: str | None = None,
    ) -> CampaignRun:
        """The campaign's run: found by its tag and set RUNNING again, or created with ``params``
        (the campaign config, flattened) and ``tags``. Params are logged once, at creation."""
        run_id = self.find_campaign(campaign_id)
        resumed = run_id is not None
        extra_tags = dict(tags or {})
        if dagster_run_id:
            extra_tags[DAGSTER_RUN_TAG] = dagster_run_id
        if run_id is None:
            run = self.client.create_run(
                self.experiment_id,
                run_name=campaign_id,
                tags={CAMPAIGN_TAG: campaign_id, MLFLOW_RUN_NAME: campaign_id, **extra_tags},
            )
            run_id = run.info.run_id
            flat = flatten_params(params or {})
            names = sorted(flat)
            for start in range(0, len(names), 100):  # MLflow's log_batch limit on params per call
                chunk = names[start : start + 100]
                self.client.log_batch(run_id, params=[Param(k, flat[k]) for k in chunk])
        else:
            self.client.update_run(run_id, status="RUNNING")
            if extra_tags:
                self.client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in extra_tags.items()])
        return CampaignRun(
            run_id=run_id, experiment_id=self.experiment_id, url=self.run_url(run_id), resumed=resumed
        )

    def log_step(
        self,
        run_id: str,
        step: int,
        metrics: Mapping[str, float],
        dagster_run_id: str | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        """One point per metric at ``step`` (names as given: ``rollout/…``, ``train/…``); the
        Dagster run of the step as tag ``envsched.dagster_run_id.step_<t>`` (and as the latest)."""
        timestamp = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        points = [Metric(k, float(v), timestamp, int(step)) for k, v in metrics.items()]
        for start in range(0, len(points), _BATCH_SIZE):
            self.client.log_batch(run_id, metrics=points[start : start + _BATCH_SIZE])
        tags = [RunTag(STEP_TAG, str(step))]
        if dagster_run_id:
            tags += [
                RunTag(f"{DAGSTER_RUN_TAG}.step_{step}", dagster_run_id),
                RunTag(DAGSTER_RUN_TAG, dagster_run_id),
            ]
        self.client.log_batch(run_id, tags=tags)

    def log_batch(
        self,
        run_id: str,
        step: int,
        batch: pd.DataFrame,
        context: str = "training",
        source: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        """The step's batch as an MLflow dataset input ``batch-step-<t>`` with ``context`` (and the
        step as an input tag); ``source`` (a path or URI, e.g. the warehouse file) is where it came
        from. Returns the dataset's digest."""
        import mlflow.data

        with warnings.catch_warnings():  # a local path matches two equivalent local-artifact sources
            warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted")
            dataset = mlflow.data.from_pandas(batch, source=source, name=f"batch-step-{step}")
        input_tags = [InputTag(MLFLOW_DATASET_CONTEXT, context), InputTag(STEP_TAG, str(step))]
        input_tags += [InputTag(k, str(v)) for k, v in (tags or {}).items()]
        self.client.log_inputs(run_id, datasets=[DatasetInput(dataset._to_mlflow_entity(), input_tags)])
        return dataset.digest

    def log_checkpoint(
        self, run_id: str, step: int, uri: str, directory: str | Path | None = None
    ) -> str | None:
        """Link the step's checkpoint: tags ``envsched.checkpoint_uri.step_<t>`` and (the latest)
        ``envsched.checkpoint_uri``. With ``directory``, also copy its files into the run's
        artifacts under ``checkpoints/step=<t>`` (a full copy: fine for small models, not for 8B
        ones) and return that artifact URI."""
        self.client.log_batch(
            run_id, tags=[RunTag(f"{CHECKPOINT_TAG}.step_{step}", uri), RunTag(CHECKPOINT_TAG, uri)]
        )
        if directory is None:
            return None
        artifact_path = f"checkpoints/step={step}"
        self.client.log_artifacts(run_id, str(directory), artifact_path=artifact_path)
        return f"{self.client.get_run(run_id).info.artifact_uri}/{artifact_path}"

    def end_campaign(self, run_id: str, status: str = "FINISHED") -> None:
        """Mark the run FINISHED (or FAILED / KILLED); a later start_campaign reopens it."""
        self.client.set_terminated(run_id, status=status)

    def log_training_step(
        self,
        campaign_id: str,
        step: int,
        metrics: Mapping[str, float],
        batch: pd.DataFrame,
        checkpoint_uri: str,
        *,
        params: Mapping[str, Any] | None = None,
        dagster_run_id: str | None = None,
        checkpoint_dir: str | Path | None = None,
        batch_source: str | None = None,
        finished: bool = False,
    ) -> dict[str, str]:
        """Everything a training step logs, in one call (each step may be a new process): open or
        create the campaign's run, log the metrics, the batch and the checkpoint, and close the run
        when ``finished``. Returns what the Dagster materialisation links back to."""
        run = self.start_campaign(campaign_id, params=params, dagster_run_id=dagster_run_id)
        self.log_step(run.run_id, step, metrics, dagster_run_id)
        self.log_batch(run.run_id, step, batch, source=batch_source)
        self.log_checkpoint(run.run_id, step, checkpoint_uri, directory=checkpoint_dir)
        if finished:
            self.end_campaign(run.run_id)
        return {"mlflow_run_id": run.run_id, "mlflow_run_url": run.url, "checkpoint": checkpoint_uri}
