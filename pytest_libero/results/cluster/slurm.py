"""Past one machine: a sharded run as a Slurm array job and a merge job after it.

    python -m pytest_libero submit slurm --shards 4 -- --libero-scope plan --libero-policy my.py:build
    python -m pytest_libero status RUN
    python -m pytest_libero submit slurm --resume RUN
    python -m pytest_libero submit k8s --shards 8 --dry-run -- <pytest options>

A Slurm submission lives in one folder, RUN:

    submit.json          the settings (shard count, pytest options, interpreter, folder submitted from),
                         the selection's cells, and every submission (array job, array indices, merge job)
    shards.sbatch        the array job: array task i runs shard i+1 (`pytest --libero-shard i+1/N`) into
                         RUN/shard-<i+1>/, continuing that folder with --libero-resume when it holds a run
    merge.sbatch         `python -m pytest_libero merge RUN/merged <every shard's run folder>`,
                         submitted with --dependency=afterany:<array job>
    logs/                each job's output
    shard-K/<profile>/<run-id>/   shard K's run folder (records name the Slurm job they ran under)
    merged/              the merged run: summary.json, report.html; `compare` takes it like any run

The shard is passed as --libero-shard, not read from SLURM_ARRAY_TASK_COUNT, so a resubmission of
some array indices (`sbatch --array=0,2`) still runs shards 1 and 3 of N.

Plain text in and out: scripts and the manifest are strings, Slurm's answers are parsed from
squeue, sacct and scontrol text, and every command goes through a `Runner` the caller may replace.
No pytest import here (the shards' pytest runs in its own process).
"""

from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pytest_libero.results.cluster.jobs import (ClusterError, Runner, check_counts, check_pytest_args, run_command,
                                               shard_command)
from pytest_libero.core.shards import int_ranges
from pytest_libero.results.files import write_bytes_atomic, write_json_atomic

SUBMIT_SCHEMA_VERSION = 1
OWNED_SBATCH_OPTIONS = ("--array", "-a", "--dependency", "-d", "--output", "-o", "--error", "-e", "--parsable")


@dataclass(frozen=True)
class SlurmSpec:
    """Everything the two sbatch scripts are written from (kept in RUN/submit.json)."""

    run_dir: Path
    shards: int
    pytest_args: tuple[str, ...]
    python: str
    workdir: Path
    sbatch_options: tuple[str, ...] = ()
    gpus_per_shard: int | None = None
    max_parallel: int | None = None
    job_name: str = "libero"

    def __post_init__(self) -> None:
        check_counts(self, "gpus_per_shard", "max_parallel")
        check_pytest_args(self.pytest_args)
        check_sbatch_options(self.sbatch_options)

    def shard_dir(self, index: int) -> Path:
        return self.run_dir / f"shard-{index}"

    @property
    def logs(self) -> Path:
        return self.run_dir / "logs"

    @property
    def merged(self) -> Path:
        return self.run_dir / "merged"

    def as_dict(self) -> dict[str, Any]:
        found = asdict(self)
        found.update(run_dir=str(self.run_dir), workdir=str(self.workdir), pytest_args=list(self.pytest_args),
                     sbatch_options=list(self.sbatch_options))
        return found

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SlurmSpec":
        return cls(**dict(data, run_dir=Path(data["run_dir"]), workdir=Path(data["workdir"]),
                          pytest_args=tuple(data["pytest_args"]), sbatch_options=tuple(data["sbatch_options"])))


def check_sbatch_options(options: Sequence[str]) -> None:
    for option in options:
        if not option.startswith("-") or "\n" in option:
            raise ClusterError(f"--sbatch-option {option!r}: give one sbatch option as it would follow "
                               "#SBATCH, e.g. --sbatch-option=--partition=gpu or --sbatch-option='--time=12:00:00'")
        if option.split("=", 1)[0].split(" ", 1)[0] in OWNED_SBATCH_OPTIONS:
            raise ClusterError(f"--sbatch-option {option!r}: submit sets the array, the dependency and the "
                               "log files itself (--shards, --max-parallel); drop it")


# -- the scripts ----------------------------------------------------------------------------------


def array_range(indices: Sequence[int], max_parallel: int | None = None) -> str:
    """sbatch's --array value: 0-3, or 0,2 for some indices; %M caps how many run at once."""
    if not indices:
        raise ClusterError("no array index to submit")
    return int_ranges(indices) + (f"%{max_parallel}" if max_parallel else "")


def _directives(spec: SlurmSpec) -> list[str]:
    return [f"#SBATCH {option}" for option in spec.sbatch_options]


def shard_script(spec: SlurmSpec) -> str:
    """The array job: array task i runs shard i+1 of spec.shards."""
    q = shlex.quote
    every = array_range(range(spec.shards), spec.max_parallel)
    lines = [
        "#!/bin/bash",
        f"# pytest-libero: {spec.shards} shard(s) of one selection; array task i runs shard i+1.",
        "# Written by `python -m pytest_libero submit slurm`. To submit by hand (all shards, or some again):",
        f"#   sbatch {spec.run_dir / 'shards.sbatch'}",
        f"#   sbatch --array=0,2 {spec.run_dir / 'shards.sbatch'}   # shards 1 and 3 only",
        f"#SBATCH --job-name={spec.job_name}-shards",
        f"#SBATCH --array={every}",
        f"#SBATCH --output={spec.logs}/shard-%a-job-%A.out",
        "#SBATCH --cpus-per-task=1",
    ]
    if spec.gpus_per_shard:
        lines.append(f"#SBATCH --gres=gpu:{spec.gpus_per_shard}")
    lines += _directives(spec)
    lines += ["set -euo pipefail", f"cd {q(str(spec.workdir))}"]
    lines += shard_command(spec.python, q(str(spec.run_dir)), "SLURM_ARRAY_TASK_ID", spec.shards, spec.pytest_args)
    return "\n".join(lines) + "\n"


def merge_script(spec: SlurmSpec) -> str:
    """The merge job: every shard run folder there is into RUN/merged (missing cells: unattempted)."""
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"# pytest-libero: merge the shards of {spec.run_dir} into {spec.merged} (summary.json, report.html).",
        "# Submitted after the array job ends, however it ends; by hand:",
        f"#   sbatch --dependency=afterany:<array job id> {spec.run_dir / 'merge.sbatch'}",
        f"#SBATCH --job-name={spec.job_name}-merge",
        f"#SBATCH --output={spec.logs}/merge-job-%j.out",
        "#SBATCH --cpus-per-task=1",
        *_directives(spec),
        "set -euo pipefail",
        f"cd {q(str(spec.workdir))}",
        "FOLDERS=()",
        f"for run in {q(str(spec.run_dir))}/shard-*/*/*/run.json; do",
        '    if [ -f "$run" ]; then FOLDERS+=("$(dirname "$run")"); fi',
        "done",
        'if [ "${#FOLDERS[@]}" -eq 0 ]; then',
        f'    echo "no shard of {spec.run_dir} has written a run folder (shard-K/<profile>/<run-id>/run.json): '
        'nothing to merge; see the shard logs" >&2',
        "    exit 1",
        "fi",
        f'exec {q(spec.python)} -m pytest_libero merge {q(str(spec.merged))} "${{FOLDERS[@]}}"',
    ]
    return "\n".join(lines) + "\n"


# -- the selection --------------------------------------------------------------------------------


def collect_cells(python: str, pytest_args: Sequence[str], runner: Runner = run_command) -> tuple[str, ...]:
    """The cell ids these pytest options select (a collect-only run: no simulator, a second or two).

    Run before anything is submitted, so bad options fail here and not in N queued jobs."""
    argv = [python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *pytest_args]
    code, out, err = runner(argv)
    cells = tuple(m.group(1) for m in re.finditer(r"::test_rollout\[([^\]\s]+)\]\s*$", out, re.MULTILINE))
    if code != 0 or not cells:
        tail = "\n".join((out + err).strip().splitlines()[-12:])
        raise ClusterError(f"the pytest options {shlex.join(pytest_args) or '(none)'} select no LIBERO cell "
                           f"(collect-only exit {code}):\n{tail}\nFix the options after `--`; nothing was submitted")
    return cells


def check_shard_count(shards: int, cells: Sequence[str]) -> None:
    if shards > len(cells):
        raise ClusterError(f"--shards {shards} for a selection of {len(cells)} cell(s): shards "
                           f"{len(cells) + 1}..{shards} would be empty; give --shards {len(cells)} or fewer, "
                           "or select more cells")


# -- submission -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Submission:
    """One sbatch round: the array job (None when nothing needed running again) and its merge job."""

    array_job_id: str | None
    array_indices: tuple[int, ...]
    merge_job_id: str | None
    submitted: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    def as_dict(self) -> dict[str, Any]:
        return dict(asdict(self), array_indices=list(self.array_indices))


def _sbatch(argv: list[str], runner: Runner) -> str:
    code, out, err = runner(argv)
    job = out.strip().split(";")[0]
    if code == 127:
        raise ClusterError(f"{argv[0]} not found: submit from a Slurm login node (with sbatch on PATH), or "
                           "add --dry-run to print the scripts")
    if code != 0 or not job.isdigit():
        raise ClusterError(f"`{shlex.join(argv)}` failed (exit {code}): {(err or out).strip()[-800:]}")
    return job


def write_scripts(spec: SlurmSpec) -> None:
    spec.logs.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(spec.run_dir / "shards.sbatch", shard_script(spec).encode())
    write_bytes_atomic(spec.run_dir / "merge.sbatch", merge_script(spec).encode())


def sbatch_round(spec: SlurmSpec, indices: Sequence[int], runner: Runner) -> Submission:
    array_job = None
    if indices:
        array_job = _sbatch(["sbatch", "--parsable", f"--array={array_range(indices, spec.max_parallel)}",
                             str(spec.run_dir / "shards.sbatch")], runner)
    dependency = [f"--dependency=afterany:{array_job}"] if array_job else []
    try:
        merge_job = _sbatch(["sbatch", "--parsable", *dependency, str(spec.run_dir / "merge.sbatch")], runner)
    except ClusterError as exc:
        raise ClusterError(f"array job {array_job} was submitted but its merge job was not: {exc}. Submit it "
                           f"by hand: sbatch {' '.join(dependency)} {spec.run_dir / 'merge.sbatch'}") from None
    return Submission(array_job, tuple(indices), merge_job)


def load_submission(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "submit.json"
    try:
        state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ClusterError(f"{run_dir} holds no submit.json: pass the folder `submit slurm` printed") from None
    if state.get("kind") != "slurm":
        raise ClusterError(f"{path} is not a Slurm submission (kind {state.get('kind')!r})")
    return state


def save_submission(spec: SlurmSpec, cells: Sequence[str], submissions: list[dict[str, Any]]) -> None:
    write_json_atomic(spec.run_dir / "submit.json", {
        "schema_version": SUBMIT_SCHEMA_VERSION, "kind": "slurm", "spec": spec.as_dict(), "cells": list(cells),
        "submissions": submissions})


def submit_slurm(spec: SlurmSpec, cells: Sequence[str], runner: Runner = run_command) -> Submission:
    """Write the scripts and submit.json into spec.run_dir, submit the array job and its merge job."""
    check_shard_count(spec.shards, cells)
    if (spec.run_dir / "submit.json").exists():
        raise ClusterError(f"{spec.run_dir} already holds a submission: give a new folder, or "
                           f"`submit slurm --resume {spec.run_dir}` to run its unfinished shards again")
    write_scripts(spec)
    save_submission(spec, cells, [])
    submission = sbatch_round(spec, range(spec.shards), runner)
    save_submission(spec, cells, [submission.as_dict()])
    return submission
