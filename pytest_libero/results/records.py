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
from typing import Any

from pytest_libero.benchmarks.libero import catalog
from pytest_libero.results.files import RECORD_SCHEMA_VERSION, versions, write_json_atomic
from pytest_libero.benchmarks.libero.inventory import UPSTREAM
from pytest_libero.core.cells import FAST_SEED, parse_cell_id, parse_run_seed
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


def machine() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "memory_gib": _memory_gib(), "gpus": _gpus(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "mujoco_gl": os.environ.get("MUJOCO_GL", "egl (default)")}


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as stream:
            kib = int(stream.readline().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return round(kib / 2**20, 1)


def _gpus() -> list[str]:
    """GPU index, name and UUID from nvidia-smi when there is one; empty on CPU-only machines."""
    from pytest_libero.runtime.gpus import nvidia_smi_gpus

    return [f"{g.index}, {g.name}, {g.uuid}" for g in nvidia_smi_gpus()]


def run_manifest(run_id: str, profile: str, protocol: dict[str, Any], identity: str,
                 policy: dict[str, Any], argv: list[str]) -> dict[str, Any]:
    return {"schema_version": RECORD_SCHEMA_VERSION, "run_id": run_id, "profile": profile,
            "protocol": {"identity": identity, "settings": protocol}, "policy": policy,
            "source": UPSTREAM, "versions": versions(), "command_line": argv, "machine": machine(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def cell_fields(cell_id: str, bulk: bool = False) -> dict[str, Any]:
    from pytest_libero.benchmarks.libero_plus import catalog as liberoplus_catalog
    if liberoplus_catalog.parse_variant_id(cell_id) is not None:
        return liberoplus_catalog.cell_fields(cell_id, bulk)
    parsed = parse_cell_id(cell_id)
    assert parsed is not None, cell_id
    suite, task, init = parsed
    entry = catalog.public_entry(suite, task)
    fields = {"id": cell_id, "suite": suite, "task_index": task, "task_name": entry["task_name"],
              "language": entry["language"], "init_index": init, "task_order_index": 0,
              "seed": FAST_SEED}
    run_seed = parse_run_seed(cell_id)
    if run_seed is not None:
        fields["run_seed"] = run_seed  # the schedule repetition (--libero-seeds); "seed" is env.seed
    return fields


def episode_record(result: Any, *, protocol: dict[str, Any], policy_profile: dict[str, Any],
                   video: dict[str, Any] | None, worker: str, started: float,
                   compute: dict[str, Any] | None = None) -> dict[str, Any]:
    """The record of a finished (or failed) episode, from the engine's EpisodeResult.

    `compute` (GPU and rendering backend) defaults to this worker's pinned GPU (pytest_libero.runtime.gpus).
    """
    if compute is None:
        from pytest_libero.runtime.gpus import record_fields

        compute = record_fields()
    private = dict(result.private)
    timing = dict(result.timing)
    timing["wall_s"] = time.time() - started
    record = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "cell": dict(cell_fields(result.cell_id), seed=result.seed),
        "identities": {"source": UPSTREAM, "versions": versions(),
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
        "observations": result.observations,
        "chunks": result.chunks,
        "timing": timing,
        "video": video,
        "worker": worker,
        "compute": dict(compute, env_reused=private.get("env_reused")),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if "benchmark" in record["cell"]:
        from pytest_libero.benchmarks.libero_plus.results import add_record_fields

        add_record_fields(record, private)
    return record


def placeholder_record(cell_id: str, outcome: str, message: str, *, protocol: dict[str, Any],
                       identity: str, policy_profile: dict[str, Any], worker: str, bulk: bool = True) -> dict[str, Any]:
    """A record for an episode nobody could record: a crashed worker's, or one never run.

    `bulk` (the controller, writing many): LIBERO-plus's category table stays read between calls.
    A worker that may host an in-process policy passes False."""
    from pytest_libero.core.schedules import env_seed_for

    outcome = Outcome(outcome).value
    cell = cell_fields(cell_id, bulk=bulk)
    env_seed = env_seed_for(protocol, cell_id)
    if env_seed is not None:
        cell["seed"] = env_seed
    return {
        "schema_version": RECORD_SCHEMA_VERSION, "cell": cell,
        "identities": {"source": UPSTREAM, "versions": versions(),
                       "protocol": {"identity": identity, "settings": protocol},
                       "model_profile": policy_profile},
        "private": None, "counters": None,
        "outcome": {"outcome": outcome, "termination": outcome, "terminated": False, "truncated": False,
                    "first_success_control": None, "first_success_policy_call": None, "message": message},
        "errors": [{"message": message, "traceback": None}] if outcome != Outcome.NOT_RUN else [],
        "warnings": [], "observations": [], "chunks": [], "timing": {}, "video": None, "worker": worker,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_record(run: RunDir, record: dict[str, Any]) -> Path:
    path = run.record_path(record["cell"]["id"])
    write_json_atomic(path, record)
    return path
