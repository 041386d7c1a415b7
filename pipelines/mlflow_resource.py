"""The MLflow resource: where campaign runs are tracked (a sqlite store under ``<home>/mlflow``)."""

from __future__ import annotations

import dagster as dg

from pipelines.paths import Paths
from training.mlflow_tracking import DEFAULT_EXPERIMENT, MLflowTracker, sqlite_uri


class MLflowResource(dg.ConfigurableResource):
    """MLflow tracking; empty ``tracking_uri`` means ``sqlite:///<home>/mlflow/mlflow.db`` and empty
    ``artifact_location`` means ``<home>/mlflow/artifacts`` (home: ``ENVSCHED_HOME``, default ``./var``).
    MLflow's file store is refused: use a database URI."""

    tracking_uri: str = ""
    artifact_location: str = ""
    experiment_name: str = DEFAULT_EXPERIMENT
    ui_url: str = "http://127.0.0.1:5000"

    def tracker(self) -> MLflowTracker:
        paths = Paths.from_env()
        if not (self.tracking_uri and self.artifact_location):
            paths.ensure()
        return MLflowTracker(
            tracking_uri=self.tracking_uri or sqlite_uri(paths.mlflow_db),
            artifact_location=self.artifact_location or paths.mlflow_artifacts,
            experiment_name=self.experiment_name,
            ui_url=self.ui_url,
        )
