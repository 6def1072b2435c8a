"""Past one machine: a sharded run as a Slurm array job (or a Kubernetes Indexed Job), its status,
its resubmission and its merge.

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
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from pytest_libero.errors import LiberoError
from pytest_libero.results.files import write_bytes_atomic, write_json_atomic
from pytest_libero.core.shards import Shard

SUBMIT_SCHEMA_VERSION = 1
# Options every shard gets from submit itself; the user's copy would fight them.
OWNED_PYTEST_OPTIONS = ("--libero-shard", "--libero-shard-count", "--libero-output", "--libero-resume")
OWNED_SBATCH_OPTIONS = ("--array", "-a", "--dependency", "-d", "--output", "-o", "--error", "-e", "--parsable")
# Slurm job states in which a job may still run (anything else has ended).
ACTIVE_STATES = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
                           "REQUEUE_FED", "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "STOPPED"})
COUNTS = ("passed", "failed", "errored", "unattempted")

# argv -> (exit code, stdout, stderr)
Runner = Callable[[Sequence[str]], "tuple[int, str, str]"]


class ClusterError(LiberoError):
    """A submission or status request that cannot go ahead; the message names the value and the fix."""


def run_command(argv: Sequence[str]) -> tuple[int, str, str]:
    """The default Runner: run `argv` here; a missing program is exit 127 with a message."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True)
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: command not found"
    return done.returncode, done.stdout, done.stderr


# -- settings -------------------------------------------------------------------------------------


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
        if self.shards < 1:
            raise ClusterError(f"--shards {self.shards}: give at least 1 shard")
        for name in ("gpus_per_shard", "max_parallel"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ClusterError(f"--{name.replace('_', '-')} {value}: give a positive number, or leave it out")
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


def check_pytest_args(args: Sequence[str]) -> None:
    for arg in args:
        if arg.split("=", 1)[0] in OWNED_PYTEST_OPTIONS:
            raise ClusterError(f"{arg!r} among the pytest options: submit gives every shard "
                               f"{', '.join(OWNED_PYTEST_OPTIONS[:3])} (RUN/shard-K) and --libero-resume on a "
                               "rerun itself; drop it")


def check_sbatch_options(options: Sequence[str]) -> None:
    for option in options:
        if not option.startswith("-") or "\n" in option:
            raise ClusterError(f"--sbatch-option {option!r}: give one sbatch option as it would follow "
                               "#SBATCH, e.g. --sbatch-option=--partition=gpu or --sbatch-option='--time=12:00:00'")
        if option.split("=", 1)[0].split(" ", 1)[0] in OWNED_SBATCH_OPTIONS:
            raise ClusterError(f"--sbatch-option {option!r}: submit sets the array, the dependency and the "
                               "log files itself (--shards, --max-parallel); drop it")


# -- the scripts ----------------------------------------------------------------------------------


def _shard_command(python: str, base: str, shard_var: str, count: int, args: Sequence[str]) -> list[str]:
    """Bash lines that run shard $SHARD of `count` into `base`/shard-$SHARD, resuming it when it exists.

    Shared by the sbatch script and the Kubernetes container, so both behave the same."""
    user = " ".join(shlex.quote(a) for a in args)
    return [
        f"SHARD=$(({shard_var} + 1))",
        f'OUT={base}/shard-"$SHARD"',
        "# Run again, a shard continues its own folder: completed episodes are kept, nothing runs twice.",
        "RESUME=()",
        'for previous in "$OUT"/*/*/run.json; do',
        '    if [ -f "$previous" ]; then RESUME=(--libero-resume "$(dirname "$previous")"); fi',
        "done",
        "STATUS=0",
        f'{shlex.quote(python)} -m pytest -p no:cacheprovider --libero-shard "$SHARD/{count}" '
        f'--libero-output "$OUT" "${{RESUME[@]}}"' + (f" \\\n    {user}" if user else "") + " || STATUS=$?",
        "# pytest's exit 1 says episodes failed (or were left unattempted): results, kept in the records.",
        "# The job itself fails only when pytest could not run (exit 2-5) or was killed.",
        'if [ "$STATUS" -eq 1 ]; then exit 0; fi',
        'exit "$STATUS"',
    ]


def array_range(indices: Sequence[int], max_parallel: int | None = None) -> str:
    """sbatch's --array value: 0-3, or 0,2 for some indices; %M caps how many run at once."""
    ordered = sorted(set(indices))
    if not ordered:
        raise ClusterError("no array index to submit")
    parts: list[str] = []
    start = prev = ordered[0]
    for index in [*ordered[1:], None]:
        if index is not None and index == prev + 1:
            prev = index
            continue
        parts.append(f"{start}-{prev}" if prev > start else f"{start}")
        if index is not None:
            start = prev = index
    return ",".join(parts) + (f"%{max_parallel}" if max_parallel else "")


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
    lines += _shard_command(spec.python, q(str(spec.run_dir)), "SLURM_ARRAY_TASK_ID", spec.shards, spec.pytest_args)
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


def _sbatch_round(spec: SlurmSpec, indices: Sequence[int], runner: Runner) -> Submission:
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


def _save(spec: SlurmSpec, cells: Sequence[str], submissions: list[dict[str, Any]]) -> None:
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
    _save(spec, cells, [])
    submission = _sbatch_round(spec, range(spec.shards), runner)
    _save(spec, cells, [submission.as_dict()])
    return submission


def resubmit_slurm(run_dir: Path, runner: Runner = run_command) -> tuple[Submission, list["ShardStatus"]]:
    """Submit again only the shards with unattempted or errored cells (they resume their folders), then
    a merge. Refused while any shard or merge job of this run may still run (its cells would run twice)."""
    state = load_submission(run_dir)
    spec = SlurmSpec.from_dict(state["spec"])
    report = gather_status(run_dir, runner)
    busy = [f"shard {s.index} ({s.job}: {s.state})" for s in report.shards if s.state in ACTIVE_STATES]
    if report.merge_state in ACTIVE_STATES:
        busy.append(f"merge job {report.merge_job} ({report.merge_state})")
    if busy:
        raise ClusterError(f"{run_dir}: {', '.join(busy)} may still run; resubmitting now could run cells twice "
                           "or merge while a shard writes. Wait for them (python -m pytest_libero status "
                           f"{run_dir}), or scancel them, then resume")
    again = [s for s in report.shards if s.needs_rerun]
    write_scripts(spec)  # the same settings; rewritten in case the folder was copied from elsewhere
    submission = _sbatch_round(spec, [s.index - 1 for s in again], runner)
    _save(spec, state["cells"], [*state["submissions"], submission.as_dict()])
    return submission, again


# -- status ---------------------------------------------------------------------------------------


def _indices(text: str) -> list[int]:
    """Array task ids as squeue/sacct/scontrol write them: 3, 0-3, [1-3], 1,3,5-7%2."""
    text = text.strip().strip("[]").split("%")[0]
    found: list[int] = []
    for part in text.split(","):
        low, dash, high = part.partition("-")
        if low.isdigit() and (not dash or high.isdigit()):
            found.extend(range(int(low), int(high) + 1) if dash else [int(low)])
    return found


def parse_squeue(text: str) -> dict[int, dict[str, str]]:
    """`squeue -h -r -j JOB -o %K|%T|%i` lines: array task id, state, job id."""
    states: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 3:
            for index in _indices(parts[0]):
                states[index] = {"state": parts[1], "job": parts[2], "exit_code": "", "source": "squeue"}
    return states


def parse_sacct(text: str) -> dict[int, dict[str, str]]:
    """`sacct -n -P -X -j JOB --format=JobID,State,ExitCode` lines: 12_3|COMPLETED|0:0."""
    states: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 3 or "_" not in parts[0] or "." in parts[0]:
            continue
        state = parts[1].split()[0]  # "CANCELLED by 0"
        for index in _indices(parts[0].split("_", 1)[1]):
            states[index] = {"state": state, "job": parts[0], "exit_code": parts[2], "source": "sacct"}
    return states


def parse_scontrol(text: str) -> dict[int, dict[str, str]]:
    """`scontrol show job -o JOB` lines (one per array task, or one for a pending range)."""
    states: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        fields = dict(token.split("=", 1) for token in line.split() if "=" in token)
        if "ArrayTaskId" not in fields or "JobState" not in fields:
            continue
        for index in _indices(fields["ArrayTaskId"]):
            states[index] = {"state": fields["JobState"], "job": f"{fields.get('ArrayJobId', '?')}_{index}",
                             "exit_code": fields.get("ExitCode", ""), "source": "scontrol"}
    return states


def parse_single_job(text: str) -> str | None:
    """The JobState of a plain job from `scontrol show job -o` or squeue/sacct's one-field output."""
    match = re.search(r"JobState=(\S+)", text)
    if match:
        return match.group(1)
    words = text.split()
    return words[0] if words else None


def slurm_states(array_job_id: str, runner: Runner = run_command) -> dict[int, dict[str, str]]:
    """Each array task's state: squeue for live tasks, then sacct (when accounting is on), then scontrol
    (finished jobs stay there for MinJobAge, 300 s by default). Tasks none of them knows are absent."""
    code, out, _ = runner(["squeue", "-h", "-r", "-j", array_job_id, "-o", "%K|%T|%i"])
    states = parse_squeue(out) if code == 0 else {}
    code, out, _ = runner(["sacct", "-n", "-P", "-X", "-j", array_job_id, "--format=JobID,State,ExitCode"])
    for index, found in (parse_sacct(out) if code == 0 else {}).items():
        states.setdefault(index, found)
    code, out, _ = runner(["scontrol", "show", "job", "-o", array_job_id])
    for index, found in (parse_scontrol(out) if code == 0 else {}).items():
        states.setdefault(index, found)
    return states


def job_state(job_id: str, runner: Runner = run_command) -> str:
    code, out, _ = runner(["squeue", "-h", "-j", job_id, "-o", "%T"])
    if code == 0 and out.strip():
        return out.split()[0]
    code, out, _ = runner(["sacct", "-n", "-P", "-X", "-j", job_id, "--format=State"])
    if code == 0 and out.strip():
        return out.split()[0]
    code, out, _ = runner(["scontrol", "show", "job", "-o", job_id])
    return (parse_single_job(out) if code == 0 else None) or "UNKNOWN"


@dataclass(frozen=True)
class ShardStatus:
    """One shard: where Slurm has it, and what its records say."""

    index: int
    cells: tuple[str, ...]
    state: str  # Slurm's JobState, UNKNOWN once Slurm forgot the job, NOT_SUBMITTED
    job: str | None  # <array job>_<array index> of the latest submission that ran it
    exit_code: str
    folder: str | None
    counts: dict[str, int]
    slurm_jobs: tuple[str, ...]  # every Slurm job (array task) its records name

    @property
    def needs_rerun(self) -> bool:
        return self.counts["errored"] + self.counts["unattempted"] > 0

    def as_dict(self) -> dict[str, Any]:
        return dict(asdict(self), cells=list(self.cells), slurm_jobs=list(self.slurm_jobs),
                    needs_rerun=self.needs_rerun)


@dataclass(frozen=True)
class RunStatus:
    run_dir: Path
    shards: tuple[ShardStatus, ...]
    merge_job: str | None
    merge_state: str
    merged: dict[str, Any] | None  # the merged summary's `overall`, when there is one

    def totals(self) -> dict[str, int]:
        return {k: sum(s.counts[k] for s in self.shards) for k in COUNTS}

    def as_dict(self) -> dict[str, Any]:
        return {"run_dir": str(self.run_dir), "shards": [s.as_dict() for s in self.shards],
                "totals": self.totals(), "merge_job": self.merge_job, "merge_state": self.merge_state,
                "merged": self.merged}


def shard_run_folder(shard_dir: Path) -> Path | None:
    """The run folder a shard wrote (the one with run.json), as the sbatch script finds it."""
    found = sorted(p.parent for p in shard_dir.glob("*/*/run.json"))
    return found[-1] if found else None


def record_counts(run_folder: Path | None, cells: Sequence[str]) -> tuple[dict[str, int], tuple[str, ...]]:
    """passed/failed/errored/unattempted of `cells` from the folder's records (no record: unattempted),
    and the Slurm jobs the records name."""
    from pytest_libero.core.outcomes import status
    from pytest_libero.results.summary import load_run

    records = load_run(run_folder)[2] if run_folder is not None else {}
    counts = dict.fromkeys(COUNTS, 0)
    jobs: set[str] = set()
    for cell in cells:
        record = records.get(cell)
        counts[status(record["outcome"]["outcome"]) if record else "unattempted"] += 1
        slurm = ((record or {}).get("scheduler") or {}).get("slurm")
        if slurm:
            jobs.add(f"{slurm['array_job_id']}_{slurm['array_task_id']}" if slurm["array_job_id"] else slurm["job_id"])
    return counts, tuple(sorted(jobs))


def gather_status(run_dir: Path, runner: Runner = run_command) -> RunStatus:
    """Each shard's Slurm state (under the latest submission that included it) and record accounting."""
    state = load_submission(run_dir)
    spec = SlurmSpec.from_dict(state["spec"])
    submissions: list[dict[str, Any]] = state["submissions"]
    asked: dict[str, dict[int, dict[str, str]]] = {}  # one squeue/sacct/scontrol round per array job
    shards = []
    for index in range(1, spec.shards + 1):
        cells = Shard(index, spec.shards, "submit").select(state["cells"])
        folder = shard_run_folder(spec.shard_dir(index))
        counts, jobs = record_counts(folder, cells)
        latest = next((s["array_job_id"] for s in reversed(submissions)
                       if s["array_job_id"] and index - 1 in s["array_indices"]), None)
        if latest is None:
            slurm = {"state": "NOT_SUBMITTED", "job": None, "exit_code": ""}
        else:
            if latest not in asked:
                asked[latest] = slurm_states(latest, runner)
            slurm = {"state": "UNKNOWN", "job": f"{latest}_{index - 1}", "exit_code": ""}
            slurm.update({k: v for k, v in asked[latest].get(index - 1, {}).items() if k in slurm})
        shards.append(ShardStatus(index, cells, str(slurm["state"]), slurm["job"], str(slurm["exit_code"]),
                                  str(folder) if folder else None, counts, jobs))
    merge_job = next((s["merge_job_id"] for s in reversed(submissions) if s["merge_job_id"]), None)
    merged_summary = spec.merged / "summary.json"
    merged = json.loads(merged_summary.read_text(encoding="utf-8"))["overall"] if merged_summary.is_file() else None
    return RunStatus(run_dir, tuple(shards), merge_job, job_state(merge_job, runner) if merge_job else "NOT_SUBMITTED",
                     merged)


def render_status(report: RunStatus) -> str:
    widths = tuple(zip(COUNTS, (7, 7, 8, 12), strict=True))
    rows = [f"{'shard':<6}{'cells':>6}  {'slurm':<26}{'passed':>7}{'failed':>7}{'errored':>8}{'unattempted':>12}"
            "  records from"]
    for s in report.shards:
        where = f"{s.state} ({s.job}{', exit ' + s.exit_code if s.exit_code else ''})" if s.job else s.state
        rows.append(f"{s.index:<6}{len(s.cells):>6}  {where:<26}" + "".join(
            f"{s.counts[k]:>{w}}" for k, w in widths) + f"  {', '.join(s.slurm_jobs) or '-'}")
    t = report.totals()
    rows.append(f"{'all':<6}{sum(len(s.cells) for s in report.shards):>6}  {'':<26}"
                + "".join(f"{t[k]:>{w}}" for k, w in widths))
    rows.append(f"merge job {report.merge_job}: {report.merge_state}" if report.merge_job else "merge: not submitted")
    if report.merged:
        o = report.merged
        rows.append(f"merged {report.run_dir / 'merged'}: selected {o['selected']} = passed {o['passed']} + failed "
                    f"{o['failed']} + errored {o['errored']} + unattempted {o['unattempted']}")
    again = [str(s.index) for s in report.shards if s.needs_rerun]
    running = any(s.state in ACTIVE_STATES for s in report.shards) or report.merge_state in ACTIVE_STATES
    if again and not running:
        rows.append(f"shards with unattempted or errored cells: {', '.join(again)}; "
                    f"`python -m pytest_libero submit slurm --resume {report.run_dir}` runs only those again")
    return "\n".join(rows)


# -- Kubernetes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class K8sSpec:
    """A batch/v1 Indexed Job: completion index i runs shard i+1 into <mount>/<name>/shard-<i+1>."""

    shards: int
    pytest_args: tuple[str, ...]
    image: str = "registry.example.com/libero-eval:latest"
    name: str = "libero-eval"
    parallelism: int | None = None
    gpus_per_shard: int | None = None
    claim: str = "libero-runs"
    mount: str = "/runs"
    python: str = "python"
    retries_per_shard: int = 2

    def __post_init__(self) -> None:
        if self.shards < 1:
            raise ClusterError(f"--shards {self.shards}: give at least 1 shard")
        for name in ("parallelism", "gpus_per_shard"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ClusterError(f"--{name.replace('_', '-')} {value}: give a positive number, or leave it out")
        if not self.image.strip():
            raise ClusterError("--image is empty: give the container image with pytest-libero installed")
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", self.name):
            raise ClusterError(f"--name {self.name!r}: a Job name is a DNS label (lower-case letters, digits and "
                               "'-', at most 63 characters), e.g. libero-eval")
        if not self.mount.startswith("/"):
            raise ClusterError(f"--mount {self.mount!r}: give an absolute path inside the container, e.g. /runs")
        check_pytest_args(self.pytest_args)

    @property
    def folder(self) -> str:
        return f"{self.mount.rstrip('/')}/{self.name}"


def k8s_manifest(spec: K8sSpec) -> dict[str, Any]:
    script = "\n".join(["set -euo pipefail", *_shard_command(spec.python, shlex.quote(spec.folder),
                                                            "JOB_COMPLETION_INDEX", spec.shards, spec.pytest_args)])
    container: dict[str, Any] = {"name": "eval", "image": spec.image, "command": ["bash", "-c"],
                                 "args": [script + "\n"],
                                 "volumeMounts": [{"name": "runs", "mountPath": spec.mount}]}
    if spec.gpus_per_shard:
        container["resources"] = {"limits": {"nvidia.com/gpu": spec.gpus_per_shard}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": spec.name},
        "spec": {
            "completionMode": "Indexed",
            "completions": spec.shards,
            "parallelism": spec.parallelism or spec.shards,
            # A failed shard is retried alone, continuing its folder.
            "backoffLimitPerIndex": spec.retries_per_shard,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [container],
                "volumes": [{"name": "runs", "persistentVolumeClaim": {"claimName": spec.claim}}],
            }},
        },
    }


def k8s_text(spec: K8sSpec) -> str:
    """The manifest as YAML, headed by how to apply it and merge afterwards."""
    folder = spec.folder
    return "\n".join([
        f"# pytest-libero: {spec.shards} shard(s) as a Kubernetes Indexed Job; index i runs shard i+1.",
        "# kubectl apply -f this.yaml; when it has finished, from any pod or machine mounting the volume:",
        f"#   python -m pytest_libero merge {folder}/merged {folder}/shard-*/*/*/",
        to_yaml(k8s_manifest(spec)),
    ])


def _scalar(value: Any) -> str:
    # JSON's strings, numbers, true/false/null are YAML too; quoting every string keeps "8" a string.
    return json.dumps(value)


def _block(text: str, pad: str) -> list[str]:
    return [f"{pad}{line}" if line else "" for line in text.rstrip("\n").split("\n")]


def _mapping(data: dict[str, Any], indent: int, out: list[str]) -> None:
    pad = " " * indent
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.append(f"{pad}{key}:")
            _mapping(value, indent + 2, out)
        elif isinstance(value, list) and value:
            out.append(f"{pad}{key}:")
            _sequence(value, indent + 2, out)
        elif isinstance(value, str) and "\n" in value:
            out.append(f"{pad}{key}: |")
            out.extend(_block(value, pad + "  "))
        else:
            out.append(f"{pad}{key}: {_scalar(value) if value not in ({}, []) else json.dumps(value)}")


def _sequence(items: list[Any], indent: int, out: list[str]) -> None:
    pad = " " * indent
    for item in items:
        if isinstance(item, dict) and item:
            nested: list[str] = []
            _mapping(item, indent + 2, nested)
            out.append(f"{pad}- {nested[0][indent + 2:]}")
            out.extend(nested[1:])
        elif isinstance(item, str) and "\n" in item:
            out.append(f"{pad}- |")
            out.extend(_block(item, pad + "  "))
        else:
            out.append(f"{pad}- {_scalar(item)}")


def to_yaml(data: dict[str, Any]) -> str:
    """Block-style YAML of plain dicts, lists, strings (multi-line ones as literal blocks) and numbers."""
    out: list[str] = []
    _mapping(data, 0, out)
    return "\n".join(out) + "\n"
