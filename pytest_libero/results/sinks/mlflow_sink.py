"""The MLflow sink: one MLflow run per pytest-libero run, at MLFLOW_TRACKING_URI."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Mapping

from pytest_libero.results.sinks import common as sinks

PARAM_CHARS = 500  # MLflow's smallest param-value limit across its versions and stores
BATCH = 100  # params per log_batch call (MLflow's limit)


class MlflowSink:
    """Logs each episode's metrics at step = its order of arrival, and at the end the summary's
    rates as metrics; `run_params` are the run's params, its run id a tag. Tracking URI:
    MLFLOW_TRACKING_URI (MLflow's own default without it); experiment MLFLOW_EXPERIMENT_NAME
    (default pytest-libero)."""

    def __init__(self, folder: Path) -> None:
        self.client: Any = None
        self.run_id: str | None = None
        self.step = 0

    def _start(self, run_dir: Path) -> str:
        if self.run_id is None:
            from mlflow.entities import Param
            from mlflow.tracking import MlflowClient

            client = MlflowClient()
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "pytest-libero")
            experiment = client.get_experiment_by_name(name)
            experiment_id = experiment.experiment_id if experiment is not None else client.create_experiment(name)
            params = sinks.run_params(run_dir)
            run = client.create_run(experiment_id, run_name=params["run_id"],
                                    tags={"pytest_libero.run_id": params["run_id"],
                                          "pytest_libero.protocol_identity": params["protocol_identity"]})
            items = [Param(key, value[:PARAM_CHARS]) for key, value in params.items()]
            for start in range(0, len(items), BATCH):
                client.log_batch(run.info.run_id, params=items[start:start + BATCH])
            self.client, self.run_id = client, run.info.run_id
        return self.run_id

    def _log(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(key, value, now, step) for key, value in metrics.items()]
        for start in range(0, len(items), 1000):  # MLflow takes at most 1,000 metrics a batch
            self.client.log_batch(self.run_id, metrics=items[start:start + 1000])

    def pytest_libero_record(self, record: Mapping[str, Any], run_dir: Path) -> None:
        self._start(run_dir)
        self._log({f"episode/{k}": v for k, v in sinks.episode_metrics(record).items()}, self.step)
        self.step += 1

    def pytest_libero_summary(self, summary: Mapping[str, Any], run_dir: Path) -> None:
        self._start(run_dir)
        self._log(sinks.summary_metrics(summary), 0)
        self.close()

    def close(self) -> None:
        run_id, self.run_id = self.run_id, None
        if run_id is not None:
            self.client.set_terminated(run_id)


KIND = sinks.SinkKind("mlflow", "pip install 'pytest-libero[mlflow]' and set MLFLOW_TRACKING_URI to your "
                      "tracking server (http://HOST:PORT) or a store it takes (file:PATH needs "
                      "MLFLOW_ALLOW_FILE_STORE=true)", MlflowSink)
