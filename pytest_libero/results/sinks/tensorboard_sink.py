"""The TensorBoard sink: scalar event files (tensorboardX's writer: no TensorFlow, no torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from pytest_libero.results.sinks import common as sinks


class TensorboardSink:
    """Each episode's metrics as scalars at step = its order of arrival, the summary's rates at step
    0 and `run_params` as one text entry, in `folder`/runs/<profile>/<run id>/ (point
    `tensorboard --logdir FOLDER/runs` at it)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.writer: Any = None
        self.step = 0

    def _start(self, run_dir: Path) -> Any:
        if self.writer is None:
            from tensorboardX import SummaryWriter

            params = sinks.run_params(run_dir)
            logdir = self.folder / "runs" / (params["profile"] or "run") / params["run_id"]
            self.writer = SummaryWriter(logdir=str(logdir))
            self.writer.add_text("run/params", f"```\n{json.dumps(params, indent=1, sort_keys=True)}\n```", 0)
        return self.writer

    def pytest_libero_record(self, record: Mapping[str, Any], run_dir: Path) -> None:
        writer = self._start(run_dir)
        for name, value in sinks.episode_metrics(record).items():
            writer.add_scalar(f"episode/{name}", value, self.step)
        self.step += 1

    def pytest_libero_summary(self, summary: Mapping[str, Any], run_dir: Path) -> None:
        writer = self._start(run_dir)
        for name, value in sinks.summary_metrics(summary).items():
            writer.add_scalar(name, value, 0)
        self.close()

    def close(self) -> None:
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.close()


KIND = sinks.SinkKind("tensorboard", "pip install 'pytest-libero[tensorboard]' (tensorboardX), and "
                      "give --libero-sink-dir a folder you can write", TensorboardSink)
