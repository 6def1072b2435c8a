"""A Slurm submission's status (Slurm's state of each shard and the accounting of its records) and
its resubmission: only the shards with unattempted or errored cells run again."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from pytest_libero.core.shards import Shard
from pytest_libero.core.outcomes import STATUSES, status
from pytest_libero.results.cluster.jobs import ACTIVE_STATES, ClusterError, Runner, run_command
from pytest_libero.results.summary import load_run
from pytest_libero.results.cluster.slurm import (SlurmSpec, Submission, load_submission, save_submission, sbatch_round,
                                                 write_scripts)


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
    """The JobState of a plain job from `scontrol show job -o` output."""
    match = re.search(r"JobState=(\S+)", text)
    return match.group(1) if match else None


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
        return {k: sum(s.counts[k] for s in self.shards) for k in STATUSES}

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
    records = load_run(run_folder)[2] if run_folder is not None else {}
    counts = dict.fromkeys(STATUSES, 0)
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
    widths = tuple(zip(STATUSES, (7, 7, 8, 12), strict=True))
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


def resubmit_slurm(run_dir: Path, runner: Runner = run_command) -> tuple[Submission, list[ShardStatus]]:
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
    submission = sbatch_round(spec, [s.index - 1 for s in again], runner)
    save_submission(spec, state["cells"], [*state["submissions"], submission.as_dict()])
    return submission, again
