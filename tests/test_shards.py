"""Shards and merge: stride selection, cluster variables, and three shards merged into one run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evidence_helpers import check_videos, records, run_dirs
from pytest_libero.core.shards import Shard, resolve_shard
from scale_helpers import comparable, run, setup_project, summary_core


def test_shards_are_strides_that_cover_the_selection_once():
    cells = list(range(10))
    parts = [Shard(k, 3, "test").select(cells) for k in (1, 2, 3)]
    assert parts == [(0, 3, 6, 9), (1, 4, 7), (2, 5, 8)]
    assert sorted(c for part in parts for c in part) == cells


@pytest.mark.parametrize("option, count, env, expected", [
    ("2/3", None, {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "9"}, (2, 3)),
    (None, None, {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "8", "SLURM_ARRAY_TASK_MIN": "1"}, (5, 8)),
    (None, None, {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4"}, (1, 4)),
    (None, 6, {"JOB_COMPLETION_INDEX": "5"}, (6, 6)),
    (None, None, {"JOB_COMPLETION_INDEX": "0", "LIBERO_SHARD_COUNT": "2"}, (1, 2)),
    (None, None, {}, None),
])
def test_shard_comes_from_the_option_slurm_or_kubernetes(option, count, env, expected):
    shard = resolve_shard(option, count, env)
    assert (shard.index, shard.count) == expected if expected else shard is None


@pytest.mark.parametrize("option, count, env, message", [
    ("3", None, {}, "give K/N"),
    ("0/3", None, {}, "shard 0 does not exist in 1..3"),
    ("4/3", None, {}, "shard 4 does not exist"),
    (None, None, {"JOB_COMPLETION_INDEX": "1"}, "shard count is unknown"),
    (None, 2, {}, "--libero-shard-count applies to"),
])
def test_bad_shard_settings_name_the_fix(option, count, env, message):
    with pytest.raises(ValueError, match=message):
        resolve_shard(option, count, env)


def test_shard_option_collects_its_stride(pytester):
    result = pytester.runpytest("--collect-only", "-q", "--libero-scope", "plan", "--libero-shard", "2/40")
    ids = [line.split("[")[1].rstrip("]") for line in result.outlines if "::test_rollout[" in line]
    # positions 1, 41, 81, 121 of the 130 cells in native order (10 spatial, 10 object, 10 goal, 90, 10)
    assert ids == ["libero_spatial-t01-s00", "libero_90-t11-s00", "libero_90-t51-s00", "libero_10-t01-s00"]
    result = pytester.runpytest("--collect-only", "-q", "--libero-shard", "4/3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def merge(project, out, *folders):
    return subprocess.run([sys.executable, "-m", "pytest_libero", "merge", str(out), *map(str, folders)],
                          capture_output=True, text=True, cwd=project)


def test_three_shards_one_killed_then_rerun_merge_into_the_unsharded_run(pytester):
    project = pytester.path
    setup_project(project)
    pause = ["--libero-policy-kwargs", '{"pause": 0.1}']
    assert run(project, *pause, root="whole") == 0
    (whole,) = run_dirs(project / "whole")
    # shard 1/3 holds t00 and t03: kill it after its first record
    run(project, *pause, "--libero-shard", "1/3", root="s1", kill_after_records=1)
    assert run(project, *pause, "--libero-shard", "2/3", root="s2") == 0
    assert run(project, *pause, "--libero-shard", "3/3", root="s3") == 0
    (s1,), (s2,), (s3,) = (run_dirs(project / r) for r in ("s1", "s2", "s3"))
    assert json.loads((s2 / "selection.json").read_text())["cells"] == ["libero_10-t01-s00", "libero_10-t04-s00"]

    done = merge(project, project / "merged", s1, s2, s3)
    assert done.returncode == 3, done.stderr
    assert "selected 5 = passed 4 + failed 0 + errored 0 + unattempted 1" in done.stdout
    assert "unattempted cells: libero_10-t03-s00" in done.stdout
    done = merge(project, project / "merged-missing", s2, s3)
    assert "missing shards: [1]" in done.stdout and "unattempted 2" in done.stdout

    assert run(project, *pause, "--libero-shard", "1/3", "--libero-resume", str(s1), root="s1") == 0
    done = merge(project, project / "merged", s1, s2, s3)
    assert done.returncode == 0, done.stdout + done.stderr
    merged = project / "merged"
    assert summary_core(merged) == summary_core(whole)
    final, reference = records(merged), records(whole)
    assert {c: comparable(r) for c, r in final.items()} == {c: comparable(r) for c, r in reference.items()}
    check_videos(merged, final)


def test_merge_refuses_different_protocols(pytester):
    project = pytester.path
    setup_project(project)
    run(project, "--libero-shard", "1/2", "--libero-video", "none", root="a")
    run(project, "--libero-shard", "2/2", "--libero-video", "none", "--libero-replan-interval", "4", root="b")
    (a,), (b,) = run_dirs(project / "a"), run_dirs(project / "b")
    done = merge(project, project / "merged", a, b)
    assert done.returncode == 1 and "differ in protocol identity" in done.stderr


def test_merge_links_the_shards_records_and_summarizes_them_as_a_fresh_report_would(tmp_path):
    """merge builds summary.json from the records it read in the shards (not reading the merged folder
    again): the same bytes as `report` of the merged folder; the records are the shards' files, linked;
    a cell both shards recorded keeps the completed record."""
    from run_folders import full_protocol, write_run

    from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
    from pytest_libero.results.merge import merge as merge_folders
    from pytest_libero.results.summary import rebuild

    protocol = full_protocol("standard", seeds=(1000, 2000), scope="development")
    outcomes = {f"libero_10-t{t:02d}-s{i:02d}-seed{seed}": ("success", "failure", "env_error", "not_run")[(t + i) % 4]
                for t in range(3) for i in range(3) for seed in (1000, 2000)}
    cells = list(outcomes)
    halves = [cells[0::2], cells[1::2]]
    shards = []
    for index, half in enumerate(halves, start=1):
        shard = write_run(tmp_path / f"shard{index}", protocol, {c: outcomes[c] for c in half})
        (shard / "selection.json").write_text(json.dumps({"schema_version": 1, "cells": half, "unsharded_cells": cells,
                                                          "shard": {"index": index, "count": 2}}))
        shards.append(shard)
    # Shard 2 also holds an errored attempt of a cell shard 1 completed: the completed one is kept.
    twice = halves[0][0]
    write_run(tmp_path / "extra", protocol, {twice: "env_error"})
    (tmp_path / "extra" / "episodes" / f"{twice}.json").rename(shards[1] / "episodes" / f"{twice}.json")
    merged = tmp_path / "merged"
    summary = merge_folders(merged, shards, LIBERO)
    assert summary["overall"]["selected"] == len(cells)
    assert (merged / "episodes" / f"{twice}.json").samefile(shards[0] / "episodes" / f"{twice}.json")
    assert all((merged / "episodes" / f"{c}.json").samefile(shards[1] / "episodes" / f"{c}.json") for c in halves[1])
    written = {name: (merged / name).read_bytes() for name in ("summary.json", "report.html")}
    rebuild(merged, LIBERO)  # `python -m pytest_libero report merged`: reads every record
    assert {name: (merged / name).read_bytes() for name in written} == written
