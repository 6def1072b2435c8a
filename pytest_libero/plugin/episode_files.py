"""The worker side of evidence: stream one episode's video and write its record atomically.

A video that cannot be encoded (ffmpeg failed: results/encoder.py) is a harness fault on its
episode: the record is written all the same, with every count and hash the episode produced,
as env_error (the simulator's or the harness's, never the policy's; resume runs it again) whose
message carries ffmpeg's exit status and stderr tail, and names no video (none is left).
"""

from __future__ import annotations

import traceback
from typing import Any

from pytest_libero.core.benchmark import Unattempted
from pytest_libero.core.cells import Cell
from pytest_libero.core.outcomes import Outcome, Termination
from pytest_libero.errors import EnvironmentFault
from pytest_libero.core.policy import adapter_file_hash
from pytest_libero.results.files import VideoWriter
from pytest_libero.plugin.options import LiberoRun
from pytest_libero.results.records import RunDir, episode_record, placeholder_record, write_record
from pytest_libero.results.summary import episode_row

CONTROL_HZ = 20


class EpisodeFiles:
    """Owns the files of one episode: the MP4 while it grows, then the record that names it."""

    def __init__(self, run_dir: RunDir, run: LiberoRun, cell: Cell, policy: Any, worker: str,
                 started: float, compute: dict[str, Any]) -> None:
        from pytest_libero.core.policy import profile_of

        self.run_dir, self.run, self.cell, self.worker, self.started = run_dir, run, cell, worker, started
        self.compute = compute  # where it runs: the GPU and rendering backend (plugin.gpus.record_fields)
        # An isolated policy's adapter file is hashed in its own process (it is in its profile).
        hashes = {} if run.isolation != "none" else adapter_file_hash(policy)
        self.profile = dict(profile_of(policy, run.policy), **hashes)
        self.profile["isolation"] = "in-process" if run.isolation == "none" else run.isolation
        # One frame per delivered observation (or per control), played back in real time.
        fps = CONTROL_HZ if run.video_rate == "control" else max(1, round(CONTROL_HZ / run.protocol.replan_interval))
        self.video = VideoWriter(run_dir.video_path(cell.id), fps=fps) if run.video != "none" else None
        # Set by `write` when the video's failure turned the episode into an env_error: the item errors.
        self.fault: EnvironmentFault | None = None

    def frame(self, images: Any, first_success: bool) -> None:
        if self.video is None:
            return
        try:
            self.video.add(images, first_success)
        except Exception as exc:  # noqa: BLE001 - a broken recorder is a harness fault
            raise EnvironmentFault(f"video writer failed for {self.cell.id}: {type(exc).__name__}: {exc}") from exc

    def write(self, result: Any) -> dict[str, Any]:
        """Commit (or drop) the video, then write the record; return the report row."""
        video = None
        if self.video is not None:
            if self.run.video == "all" or result.outcome != Outcome.SUCCESS:
                try:
                    committed = self.video.commit()
                except Exception as exc:  # noqa: BLE001 - a failed encode is the harness's fault, recorded
                    self._video_lost(result, exc)
                else:
                    if committed is not None:
                        video = dict(committed, path=str(self.video.path.relative_to(self.run_dir.path)))
            else:
                self.video.abandon()
        record = episode_record(result, adapter=self.run.adapter, context=self.run.context,
                                protocol=self.run.protocol.as_dict(), policy_profile=self.profile, video=video,
                                worker=self.worker, started=self.started, compute=self.compute,
                                shard=self.run.shard)
        write_record(self.run_dir, record)
        return episode_row(self.cell.id, record)

    def _video_lost(self, result: Any, exc: Exception) -> None:
        """The episode becomes an env_error naming the encoder's failure; what it measured is kept."""
        if result.outcome == Outcome.ENV_ERROR:
            # Already an environment fault (the frame sink's own report of this failure, or the
            # service's): that one is the episode's cause; the lost video is noted beside it.
            if "video writer failed" not in result.message:
                result.warnings.append(f"no video: {type(exc).__name__}: {exc}")
            return
        self.fault = EnvironmentFault(f"video encoder failed for {self.cell.id}: {type(exc).__name__}: {exc}")
        result.warnings.append(f"before its video failed the episode ended {result.outcome} "
                               f"({result.termination}): {result.message}")
        result.outcome, result.termination = Outcome.ENV_ERROR, Termination.ENV_ERROR
        result.message = str(self.fault)
        result.error = "".join(traceback.format_exception(exc))

    def write_unattempted(self, refused: Unattempted) -> dict[str, Any]:
        """Record a cell the benchmark refused to run (not_run, with its reason); return the report row."""
        if self.video is not None:
            self.video.abandon()
        record = placeholder_record(self.cell.id, "not_run", refused.message, adapter=self.run.adapter,
                                    context=self.run.context, protocol=self.run.protocol.as_dict(),
                                    identity=self.run.protocol.identity, policy_profile=self.profile,
                                    worker=self.worker, bulk=False,  # this process may host the policy
                                    shard=self.run.shard)
        record["cell"].setdefault("benchmark", {}).update(refused.benchmark_fields)
        write_record(self.run_dir, record)
        return episode_row(self.cell.id, record)
