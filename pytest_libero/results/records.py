"""The run folder and the episode record: what one episode leaves on disk.

    <root>/<profile>/<run-id>/
        run.json            manifest (identities, protocol, command line, machine), by the controller
        selection.json      the selected cell ids, by the controller once collection is known
        episodes/<cell>.json  one record per episode, by the process that ran (or lost) it
        videos/<cell>.mp4   agentview | wrist, one frame per delivered observation (or per control with
                            --libero-video-rate control) + the last state
        summary.json, success_rates.png, report.html   derived: rebuilt from the files above
"""

from __future__ import annotations

import os
import platform
import re
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from pytest_libero.core.benchmark import BenchmarkAdapter
from pytest_libero.core.chunk_evidence import chunk_block, observation_block
from pytest_libero.results.files import RECORD_SCHEMA_VERSION, versions, write_json_atomic
from pytest_libero.core.outcomes import Outcome, Termination



def profile_slug(policy_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", policy_name).strip("-.") or "policy"


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


@dataclass(frozen=True, slots=True)
class RunDir:
    path: Path

    @property
    def episodes(self) -> Path:
        return self.path / "episodes"

    @property
    def videos(self) -> Path:
        return self.path / "videos"

    def record_path(self, cell_id: str) -> Path:
        return self.episodes / f"{cell_id}.json"

    def video_path(self, cell_id: str) -> Path:
        return self.videos / f"{cell_id}.mp4"


def machine(gpus: list[str]) -> dict[str, Any]:
    """The machine a run started on; `gpus` as nvidia-smi lists them (pytest_libero.runtime.gpus)."""
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "memory_gib": _memory_gib(), "gpus": gpus,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "mujoco_gl": os.environ.get("MUJOCO_GL", "egl (default)")}


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as stream:
            kib = int(stream.readline().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return round(kib / 2**20, 1)


def run_manifest(run_id: str, profile: str, protocol: dict[str, Any], identity: str,
                 policy: dict[str, Any], argv: list[str], *, source: Any, gpus: list[str]) -> dict[str, Any]:
    return {"schema_version": RECORD_SCHEMA_VERSION, "run_id": run_id, "profile": profile,
            "protocol": {"identity": identity, "settings": protocol}, "policy": policy,
            "source": dict(source), "versions": versions(), "command_line": argv, "machine": machine(gpus),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def scheduler_fields(shard: Any, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Where a record was produced: its shard (a shards.Shard or None) and the Slurm job or the
    Kubernetes Indexed Job index it ran under (None outside one), read from the environment."""
    env = os.environ if environ is None else environ
    slurm = None
    if "SLURM_JOB_ID" in env:
        task = env.get("SLURM_ARRAY_TASK_ID")
        slurm = {"job_id": env["SLURM_JOB_ID"], "array_job_id": env.get("SLURM_ARRAY_JOB_ID"),
                 "array_task_id": int(task) if task and task.isdigit() else None,
                 "node": env.get("SLURMD_NODENAME")}
    index = env.get("JOB_COMPLETION_INDEX")
    kubernetes = {"job_completion_index": int(index), "pod": env.get("HOSTNAME")} if index and index.isdigit() else None
    return {"shard": {"index": shard.index, "count": shard.count} if shard is not None else None,
            "slurm": slurm, "kubernetes": kubernetes}


def episode_record(result: Any, *, adapter: BenchmarkAdapter, context: Any, protocol: dict[str, Any],
                   policy_profile: dict[str, Any], video: dict[str, Any] | None, worker: str, started: float,
                   compute: dict[str, Any], shard: Any = None) -> dict[str, Any]:
    """The record of a finished (or failed) episode, from the engine's EpisodeResult.

    The benchmark `adapter` gives the `cell` object and adds its own evidence (`context`: its run
    settings from the selection).
    `compute` says where it ran: the GPU and the rendering backend (pytest_libero.runtime.gpus);
    `shard` (a core.shards.Shard) goes into `scheduler` with the Slurm/Kubernetes job it ran under.
    """
    private = dict(result.private)
    timing = dict(result.timing)
    timing["wall_s"] = time.time() - started
    record = {
        "schema_version": RECORD_SCHEMA_VERSION,
        # The instruction the service delivered (a LIBERO-PRO cell's depends on the instruction source).
        "cell": dict(adapter.cell_fields(result.cell_id, protocol, context), seed=result.seed,
                     **({"language": result.language} if result.language else {})),
        "identities": {"source": dict(adapter.source), "versions": versions(),
                       "protocol": {"identity": result.protocol_identity, "settings": protocol},
                       "model_profile": policy_profile},
        "private": {k: private.get(k) for k in ("bddl_sha256", "init_states_file_sha256",
                                                "selected_state_sha256", "final_state_sha256")},
        "counters": {k: getattr(result, k) for k in (
            "policy_calls", "action_decisions", "executed_controls", "settling_controls", "control_cap",
            "max_policy_calls", "replan_interval")} | {"cap_source": result.cap_source},
        # Plain strings (.value): the record becomes the report row that crosses xdist.
        "outcome": {"outcome": Outcome(result.outcome).value, "termination": Termination(result.termination).value,
                    "terminated": result.outcome == Outcome.SUCCESS,
                    "truncated": result.termination == Termination.TRUNCATION,
                    "first_success_control": result.first_success_control,
                    "first_success_policy_call": result.first_success_policy_call,
                    "message": result.message, "settle_success": private.get("settle_success")},
        "errors": [{"message": result.message, "traceback": result.error}] if result.error else [],
        "warnings": list(result.warnings),
        "observations": observation_block(result.observations),  # blocks of columns (core/chunk_evidence.py)
        "chunks": chunk_block(result.chunks),
        "timing": timing,
        "video": video,
        "worker": worker,
        "compute": dict(compute, env_reused=private.get("env_reused")),
        "seeding": private.get("seeding"),  # the service's own account (benchmarks/seeding.py)
        "scheduler": scheduler_fields(shard),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if getattr(result, "install_check", None) is not None:
        record["install"] = result.install_check  # the install check (docs/install-check.md)
    if private.get("progress") is not None:
        record["progress"] = private["progress"]  # goal progress: evidence, from a service that reports it
    adapter.record_fields(record, private)
    return record


def placeholder_record(cell_id: str, outcome: str, message: str, *, adapter: BenchmarkAdapter, context: Any,
                       protocol: dict[str, Any], identity: str, policy_profile: dict[str, Any], worker: str,
                       bulk: bool = True, shard: Any = None) -> dict[str, Any]:
    """A record for an episode nobody could record: a crashed worker's, or one never run.

    `bulk` (the controller, writing many) lets the adapter keep what it reads between calls; a
    worker that may host an in-process policy passes False."""
    cell = adapter.cell_fields(cell_id, protocol, context, bulk=bulk)
    outcome = Outcome(outcome).value
    return {
        "schema_version": RECORD_SCHEMA_VERSION, "cell": cell,
        "identities": {"source": dict(adapter.source), "versions": versions(),
                       "protocol": {"identity": identity, "settings": protocol},
                       "model_profile": policy_profile},
        "private": None, "counters": None,
        "outcome": {"outcome": outcome, "termination": outcome, "terminated": False, "truncated": False,
                    "first_success_control": None, "first_success_policy_call": None, "message": message},
        "errors": [{"message": message, "traceback": None}] if outcome != Outcome.NOT_RUN else [],
        "warnings": [], "observations": observation_block([]), "chunks": chunk_block([]), "timing": {},
        "video": None, "worker": worker,
        "scheduler": scheduler_fields(shard), "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_record(run: RunDir, record: dict[str, Any]) -> Path:
    path = run.record_path(record["cell"]["id"])
    write_json_atomic(path, record, compact=True)  # bounded by executed controls: < 64 KB at 520 (docs)
    return path
