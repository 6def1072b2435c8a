"""The Weights & Biases sink: one W&B run per pytest-libero run (offline with WANDB_MODE=offline)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from pytest_libero.results.sinks import common as sinks


class WandbSink:
    """Logs each episode as a history step and the summary as the run's summary; the run's
    config is `run_params`. Project: WANDB_PROJECT (default pytest-libero); the run's name is the
    run id, its group the policy profile; wandb's files go under `folder`/wandb."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.run: Any = None
        self.step = 0

    def _start(self, run_dir: Path) -> Any:
        if self.run is None:
            import wandb

            params = sinks.run_params(run_dir)
            self.folder.mkdir(parents=True, exist_ok=True)
            # console off and silent: wandb must neither wrap nor write into pytest's terminal output.
            self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "pytest-libero"), name=params["run_id"],
                                  group=params["profile"] or None, job_type="evaluation", config=params,
                                  dir=str(self.folder), settings=wandb.Settings(console="off", silent=True))
        return self.run

    def pytest_libero_record(self, record: Mapping[str, Any], run_dir: Path) -> None:
        run = self._start(run_dir)
        row: dict[str, Any] = {f"episode/{k}": v for k, v in sinks.episode_metrics(record).items()}
        row.update({f"episode/{k}": v for k, v in sinks.episode_labels(record).items()})
        run.log(row, step=self.step)
        self.step += 1

    def pytest_libero_summary(self, summary: Mapping[str, Any], run_dir: Path) -> None:
        run = self._start(run_dir)
        run.summary.update(sinks.summary_metrics(summary))
        self.close()

    def close(self) -> None:
        run, self.run = self.run, None
        if run is not None:
            run.finish()


KIND = sinks.SinkKind("wandb", "pip install 'pytest-libero[wandb]', then `wandb login` (or WANDB_API_KEY), "
                      "or WANDB_MODE=offline to keep the run on disk and `wandb sync` it later", WandbSink)
