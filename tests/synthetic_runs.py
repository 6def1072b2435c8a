"""Synthetic run folders of realistic, schema-valid records, at any scale.

Each record is made by the real record functions (results.records.episode_record from an
EpisodeResult made up here, chunk entries by core.chunk_evidence.chunk_entry): episodes of
`controls` executed controls at K=5 (one observation and one chunk per policy call, random
float32 actions, random image hashes), a share of successes, a video entry. Used by
benchmarks/bench_evidence_scale.py (which adds tests/ to sys.path) and by the tests; the
browser tests of the review page can import it too.

    write_libero_run(path, count=2000)            # LIBERO full-mode ids: 4 suites x 10 tasks x 50 init states
    write_libero_plus_run(path, work, shards=2)   # the 10,030 LIBERO-plus variants, in two shard folders
    as_schema_1(record)                       # the same record as schema 1 kept it (chunks as numbers)
    as_schema_2(record)                       # ... as schema 2 kept it (digests in hex)
"""

from __future__ import annotations

import random
import textwrap
import time
import zlib
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from pytest_libero.core.benchmark import BenchmarkAdapter
from pytest_libero.core.cells import Cell
from pytest_libero.core.chunk_evidence import chunk_entry, digests_hex, executed_actions, observation_entries
from pytest_libero.benchmarks.libero.spec import CAMERAS
from pytest_libero.core.outcomes import Outcome, Termination
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.protocol import Protocol
from pytest_libero.core.rollout import EpisodeResult
from pytest_libero.results.files import write_json_atomic
from pytest_libero.results.records import RunDir, episode_record, run_manifest, write_record

FULL_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
POLICY = {"name": "synthetic", "kwargs": {}}
PROFILE = {"spec": POLICY, "kind": "unknown", "label": "synthetic records (benchmarks)"}
K = 5


def made_up_result(cell: Cell, protocol: Protocol, *, controls: int, success: bool,
                   rng: np.random.Generator, chunk_rows: int = K) -> EpisodeResult:
    """An EpisodeResult as the engine would leave it after `controls` executed controls."""
    result = EpisodeResult(cell_id=cell.id, suite=cell.suite, task_index=cell.task_index,
                           init_index=cell.init_index, seed=cell.seed, language="pick up the synthetic bowl",
                           control_cap=max(controls, 220), cap_source="synthetic",
                           replan_interval=protocol.replan_interval, protocol_identity=protocol.identity,
                           settling_controls=protocol.settle_controls)
    calls = -(-controls // protocol.replan_interval)
    hashes = iter(textwrap.wrap(rng.bytes(32 * len(CAMERAS) * calls).hex(), 64))  # one draw, not one per image
    done = 0
    while done < controls:
        result.policy_calls += 1
        result.observations.append({"policy_call": result.policy_calls, "executed_controls": done,
                                    "sha256": {camera: next(hashes) for camera in CAMERAS}})
        returned = rng.uniform(-1, 1, (chunk_rows, 7)).astype(np.float32)
        returned[:, 6] = np.sign(returned[:, 6])  # gripper open/close, as policies return it
        executed = min(protocol.replan_interval, controls - done)
        done += executed
        result.action_decisions += 1
        result.chunks.append(chunk_entry(result.policy_calls, returned.astype(np.float64), returned.dtype,
                                         returned.shape, executed))
    result.executed_controls = done
    if success:
        result.outcome, result.termination = Outcome.SUCCESS, Termination.SUCCESS
        result.first_success_control, result.first_success_policy_call = done, result.policy_calls
        result.message = f"native success at control {done}: {result.counters_line()}"
    else:
        result.outcome, result.termination = Outcome.FAILURE, Termination.TRUNCATION
        result.message = f"no native success within the cap: {result.counters_line()}"
    result.private = {"bddl_sha256": rng.bytes(32).hex(), "init_states_file_sha256": rng.bytes(32).hex(),
                      "selected_state_sha256": rng.bytes(32).hex(), "final_state_sha256": rng.bytes(32).hex(),
                      "settle_success": False, "env_reused": True,
                      "progress": made_up_progress(cell.id, controls, success)}
    result.timing = {"setup_s": 0.4, "settle_s": 0.3, "simulation_s": 2.5, "rendering_s": 0.6, "policy_s": 1.2}
    return result


GOAL = ("(in synthetic_bowl_1 basket_1_contain_region)", "(on synthetic_plate_1 table_1)")


def made_up_progress(cell_id: str, controls: int, success: bool) -> dict[str, Any]:
    """A two-predicate goal's progress block: a success holds both (the second at its last control); a
    failure, chosen by its id (no random draw, so the other evidence is as before), none, the first
    at the end, or the first reached and lost."""
    kind = 3 if success else zlib.crc32(cell_id.encode()) % 3
    first = [controls // 2 if kind else None, controls if kind == 3 else None]
    held = [kind in (1, 3), kind == 3]
    return {"predicates": [{"text": text, "held_at_end": h, "first_control": f}
                           for text, h, f in zip(GOAL, held, first, strict=True)],
            "fraction_at_end": sum(held) / 2, "max_fraction": 1.0 if kind == 3 else 0.5 if kind else 0.0}


def as_schema_1(record: dict[str, Any]) -> dict[str, Any]:
    """`record` as schema 1 kept it: arrays of entries, every chunk's rows as JSON numbers (here
    its executed rows: the whole chunk when chunks have K rows), no hash or shape."""
    old = dict(record, schema_version=1, observations=observation_entries(record["observations"]))
    old.pop("progress", None)  # goal progress came with schema 3 records (issue 35)
    block = record["chunks"]
    chunks: list[dict[str, Any]] = []
    for call, executed, dtype, b64 in zip(block["policy_call"], block["executed"], block["dtype"],
                                          block["actions_b64"], strict=True):
        rows = executed_actions({"policy_call": [call], "executed": [executed], "dtype": [dtype],
                                 "actions_b64": [b64]})
        chunks.append({"policy_call": call, "returned": rows.tolist(), "dtype": dtype, "executed": executed})
    if block["end"] is not None:
        chunks.append(block["end"])
    old["chunks"] = chunks
    return old


def as_schema_2(record: dict[str, Any]) -> dict[str, Any]:
    """`record` as schema 2 kept it: the same blocks, with the digest columns in hex."""
    observations, chunks = dict(record["observations"]), dict(record["chunks"])
    count = len(observations["policy_call"])
    observations["sha256"] = {camera: "".join(digests_hex(text, count))
                              for camera, text in observations["sha256"].items()}
    chunks["sha256"] = "".join(digests_hex(chunks["sha256"], len(chunks["policy_call"])))
    old = dict(record, schema_version=2, observations=observations, chunks=chunks)
    old.pop("progress", None)
    return old


class _Bulk:
    """A benchmark's selection context that keeps what it reads between records (as the controller
    does, `bulk`), so that writing thousands of records does not re-read a file per record."""

    def __init__(self, context: Any) -> None:
        self.context = context

    def rows(self, bulk: bool) -> Any:
        return self.context.rows(True)


def write_run(path: Path, cells: Iterable[Cell], protocol: Protocol, adapter: BenchmarkAdapter, *,
              context: Any = None, controls: int = 200, success_share: float = 0.6, schema: int = 3,
              seed: int = 0, shards: int = 1) -> list[Path]:
    """A finished run: run.json, selection.json and one record per cell (`success_share` of them
    successes, in a fixed random order; each names an empty stand-in video), in one folder, or
    with `shards` > 1 in that many shard folders (path/shard-K, each with its part of the cells,
    to be merged). `schema` 1 writes the records as schema 1 kept them (arrays of entries, chunks as
    numbers, indented JSON), 2 with hex digests. Returns the folders."""
    cells = list(cells)
    settings, identity = protocol.as_dict(), protocol.identity
    folders = [path] if shards == 1 else [path / f"shard-{k}" for k in range(1, shards + 1)]
    for k, folder in enumerate(folders, start=1):
        write_json_atomic(folder / "run.json", run_manifest(folder.name, "synthetic", settings, identity, POLICY,
                                                            ["pytest", "--libero-policy", "synthetic"],
                                                            source=adapter.source, gpus=[]))
        selection: dict[str, Any] = {"schema_version": 1, "cells": [c.id for c in cells[k - 1::shards]]}
        if shards > 1:
            selection.update(shard={"index": k, "count": shards}, unsharded_cells=[c.id for c in cells])
        write_json_atomic(folder / "selection.json", selection)
    rng = np.random.default_rng(seed)
    order = list(range(len(cells)))
    random.Random(seed).shuffle(order)
    successes = set(order[: round(success_share * len(cells))])
    context = _Bulk(context) if context is not None else None
    started = time.time() - 6.0
    for index, cell in enumerate(cells):
        run = RunDir(folders[index % shards])
        result = made_up_result(cell, protocol, controls=controls, success=index in successes, rng=rng)
        video = {"path": f"videos/{cell.id}.mp4", "frames": result.policy_calls + 1, "fps": 4,
                 "first_success_frame": result.policy_calls if index in successes else None}
        (run.path / video["path"]).parent.mkdir(exist_ok=True)
        (run.path / video["path"]).touch()  # an empty stand-in: merge links every record's video
        record = episode_record(result, adapter=adapter, context=context, protocol=settings,
                                policy_profile=PROFILE, video=video, worker=f"gw{index % 8}", started=started,
                                compute={"gpu": None, "rendering_backend": "egl"})
        if schema == 1:
            write_json_atomic(run.record_path(cell.id), as_schema_1(record))  # indented, as schema 1 was
        elif schema == 2:
            write_json_atomic(run.record_path(cell.id), as_schema_2(record), compact=True)
        else:
            write_record(run, record)
    return folders


def full_mode_cells(count: int) -> list[Cell]:
    """The first `count` LIBERO full-mode cells: 4 suites x 10 tasks x 50 init states (2,000)."""
    cells = [Cell(suite, task, init_index=init, seed=7) for suite in FULL_SUITES for task in range(10)
             for init in range(50)]
    if count > len(cells):
        raise ValueError(f"full mode has {len(cells)} cells of 4 suites, not {count}")
    return cells[:count]


def full_mode_protocol() -> Protocol:
    from pytest_libero.core.schedules import load

    controls, action = load("standard").settling()
    return Protocol(spec=LIBERO_SPEC, scope="task_coverage", budget="horizon", replan_interval=K, max_policy_calls=None,
                    mode="full", schedule="standard", seeds=(7,), settle_controls=controls, settle_action=action)


def write_libero_run(path: Path, count: int = 2000, **kwargs: Any) -> list[Path]:
    from pytest_libero.benchmarks.libero.adapter import ADAPTER

    return write_run(path, full_mode_cells(count), full_mode_protocol(), ADAPTER, **kwargs)


def libero_plus_selection(work: Path) -> Any:
    """The whole LIBERO-plus selection (10,030 variants) over a synthetic classification file."""
    from liberoplus_helpers import write_classification

    from pytest_libero.benchmarks.libero_plus.adapter import ADAPTER

    work.mkdir(parents=True, exist_ok=True)
    return ADAPTER.select({"libero_plus_classification": str(write_classification(work / "classification.json")),
                           "libero_plus_robot_init": "upstream"})


def write_libero_plus_run(path: Path, work: Path, count: int | None = None, **kwargs: Any) -> list[Path]:
    from pytest_libero.benchmarks.libero_plus.adapter import ADAPTER

    selection = libero_plus_selection(work)
    cells = list(selection.cells)[:count]
    protocol = Protocol(spec=ADAPTER.spec, scope="libero_plus", budget="horizon", replan_interval=K,
                        max_policy_calls=None,
                        **selection.protocol)
    return write_run(path, cells, protocol, ADAPTER, context=selection.context, **kwargs)
