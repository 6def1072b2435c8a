"""`python -m pytest_libero merge OUT_DIR RUN_DIR...`: one run folder from the folders of its shards.

Each shard's selection.json names the whole (unsharded) selection and the shard's part of it,
so the merged selection is the whole selection even when a shard folder is missing, and the
cells of a missing or dead shard come out unattempted. Records and videos are hard-linked
(copied across file systems) into OUT_DIR: a shard writes each record atomically and never
rewrites one in place. summary.json and report.html are then rebuilt there, from the records as
read from the shards (read once). Folders of different protocol identities or policies are
refused. A cell recorded by two folders (a shard run twice) keeps its most complete record, then
the latest.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from pytest_libero.core.outcomes import completeness
from pytest_libero.errors import LiberoError
from pytest_libero.core.benchmark import BenchmarkAdapter
from pytest_libero.core.protocol import setting_differences
from pytest_libero.results.files import fsync_dir, write_bytes_atomic, write_json_atomic
from pytest_libero.results.records import RunDir


class MergeError(LiberoError):
    """The folders cannot be merged (different identities, not run folders, a foreign OUT_DIR)."""


def _load(run_dirs: list[Path]) -> dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, Any]],
                                                   dict[str, str]]]:
    """By folder: (run.json, selection.json, records by cell id, the file of each record) of each shard
    folder (the records of all of them read together)."""
    from pytest_libero.results.summary import load_manifest, read_folders

    for run_dir in run_dirs:
        if not (run_dir / "run.json").is_file() or not (run_dir / "selection.json").is_file():
            raise MergeError(f"{run_dir} is not a pytest-libero run folder with run.json and selection.json")
    loaded = {}
    for run_dir, (records, paths, _) in zip(run_dirs, read_folders(run_dirs), strict=True):
        selection = json.loads((run_dir / "selection.json").read_text(encoding="utf-8"))
        loaded[str(run_dir)] = (load_manifest(run_dir), selection, records, paths)
    return loaded


def _same(values: dict[str, Any], what: str) -> None:
    distinct = {json.dumps(v, sort_keys=True) for v in values.values()}
    if len(distinct) > 1:
        listing = "; ".join(f"{folder}: {json.dumps(v, sort_keys=True)[:200]}" for folder, v in values.items())
        raise MergeError(f"the folders differ in {what}, so their results never merge: {listing}")


def _same_protocol(protocols: dict[str, dict[str, Any]]) -> None:
    """Refuse folders of different protocol identities, naming each differing setting."""
    (first, reference), *others = protocols.items()
    differences = [text for folder, protocol in others if protocol.get("identity") != reference.get("identity")
                   for text in (setting_differences(reference.get("settings"), protocol.get("settings"),
                                                    f"in {first}", f"in {folder}") or [
                                    f"identity {reference.get('identity')} in {first}, {protocol.get('identity')} "
                                    f"in {folder}"])]
    if differences:
        raise MergeError("the folders differ in protocol identity, so their results never merge: "
                         + "; ".join(differences))


def _prepare_out(out_dir: Path) -> None:
    if out_dir.exists() and any(out_dir.iterdir()):
        if not (out_dir / "merge.json").is_file():
            raise MergeError(f"{out_dir} exists and is not an earlier merge (no merge.json); give a new folder")
        # A re-merge replaces the earlier merged evidence entirely.
        for sub in ("episodes", "videos"):
            shutil.rmtree(out_dir / sub, ignore_errors=True)
    out_dir.mkdir(parents=True, exist_ok=True)


def _link_or_copy(source: str, target: str, folders: set[str]) -> None:
    """Hard-link (or copy) `source` to `target`, making target's folder once (`folders`: those made)."""
    folder = os.path.dirname(target)
    if folder not in folders:
        os.makedirs(folder, exist_ok=True)
        folders.add(folder)
    try:
        os.link(source, target)
    except FileExistsError:
        os.unlink(target)
        _link_or_copy(source, target, folders)
    except OSError:
        write_bytes_atomic(Path(target), Path(source).read_bytes())


def _link_record(source: str, target: str) -> bool:
    """Hard-link a shard's record file into OUT_DIR/episodes (the shard wrote it atomically and never
    rewrites it in place: a resume replaces records, moving the old file); False when no link can be
    made (another file system), and the caller writes the record instead."""
    try:
        os.link(source, target)
    except OSError:
        return False
    return True


def merge(out_dir: Path, run_dirs: list[Path], adapter: BenchmarkAdapter) -> dict[str, Any]:
    """Merge shard folders of `adapter`'s benchmark into `out_dir`; return the rebuilt summary plus
    `merge` (what came from where)."""
    from pytest_libero.results.summary import rebuild

    loaded = _load(run_dirs)
    _same_protocol({d: m.get("protocol") or {} for d, (m, _, _, _) in loaded.items()})
    _same({d: m.get("policy") for d, (m, _, _, _) in loaded.items()}, "policy (model profile spec)")
    _same({d: s.get("unsharded_cells", s.get("cells")) for d, (_, s, _, _) in loaded.items()},
          "their unsharded selection (scope, suite or task ids)")
    _same({d: (s.get("shard") or {}).get("count") for d, (_, s, _, _) in loaded.items()}, "shard count")
    first_manifest, first_selection, _, _ = next(iter(loaded.values()))
    cells: list[str] = list(first_selection.get("unsharded_cells", first_selection.get("cells", [])))
    chosen: dict[str, tuple[str, dict[str, Any], str]] = {}  # cell: (folder, record, its file)
    for folder, (_, _, records, paths) in loaded.items():
        for cell, record in records.items():
            # A completed episode over an error over one that never ran; then the latest.
            key = (completeness(record["outcome"]["outcome"]), record.get("finished", ""))
            held = chosen.get(cell)
            if held is None or key > (completeness(held[1]["outcome"]["outcome"]), held[1].get("finished", "")):
                chosen[cell] = (folder, record, paths[cell])
    _prepare_out(out_dir)
    target = RunDir(out_dir)
    target.episodes.mkdir(parents=True, exist_ok=True)
    # The merged records, in the order summary.read_records reads the folder (file names), so that the
    # summary is built from them without reading every record again. A record is the shard's file,
    # hard-linked (one directory fsync for them all), or, where no link can be made or the file is not
    # named after its cell, copied under its cell's name.
    # Paths as strings: thousands of records.
    merged: dict[str, dict[str, Any]] = {}
    episodes, out, folders = str(target.episodes), str(out_dir), set[str]()
    for cell, (source, record, path) in sorted(chosen.items(), key=lambda item: f"{item[0]}.json"):
        video = record.get("video")
        if video:
            _link_or_copy(os.path.join(source, video["path"]), os.path.join(out, video["path"]), folders)
        name = f"{cell}.json"  # RunDir.record_path's name
        if not (os.path.basename(path) == name and _link_record(path, os.path.join(episodes, name))):
            # The shard's file as it is (the record read holds no evidence blocks: results/reading.py).
            write_bytes_atomic(target.record_path(cell), Path(path).read_bytes())
        merged[cell] = record
    fsync_dir(target.episodes)
    shards = {d: s.get("shard") for d, (_, s, _, _) in loaded.items()}
    count = next((s["count"] for s in shards.values() if s), None)
    present = sorted({s["index"] for s in shards.values() if s})
    provenance = {
        "schema_version": 1, "sources": [{"folder": d, "run_id": m.get("run_id"), "shard": s.get("shard"),
                                          "records": sum(1 for f, _, _ in chosen.values() if f == d)}
                                         for d, (m, s, _, _) in loaded.items()],
        "missing_shards": [k for k in range(1, count + 1) if k not in present] if count else [],
    }
    manifest = dict(first_manifest, run_id=out_dir.name, merged_from=provenance["sources"])
    manifest.pop("shard", None)
    write_json_atomic(out_dir / "run.json", manifest)
    write_json_atomic(out_dir / "selection.json", {"schema_version": 1, "cells": cells})
    write_json_atomic(out_dir / "merge.json", provenance)
    summary = rebuild(out_dir, adapter, merged)
    summary["merge"] = provenance
    return summary
