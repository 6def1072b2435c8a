"""On a real one-node Slurm cluster (tools/local_slurm.py): real LIBERO shards submitted, watched,
cancelled, killed, resubmitted and merged, compared with a local `pytest -n 0` run of the selection.

Needs root and Debian's slurm-wlm and munge; a cluster that cannot start errors every test here
(never a skip). Deselect with -m 'not slurm' where there is no Slurm.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest

from evidence_helpers import records, run_dirs
from pytest_libero.results.cluster.status import gather_status, job_state
from scale_helpers import comparable, summary_core

pytestmark = [pytest.mark.slurm, pytest.mark.real_libero]

# Five LIBERO-10 cells (the development scope allows task ids 0-4): 4 shards all hold work (shard 1
# two cells), and with 3 shards, shards 1 and 2 hold two cells each, so one can lose its second.
CELLS = [f"libero_10-t{t:02d}-s00" for t in range(5)]
SELECTION = ["--libero-scope", "development", "--libero-task-ids", "0,1,2,3,4", "--libero-policy", "random",
             "--libero-policy-kwargs", '{"seed": 3}', "--libero-budget", "decisions", "--libero-max-policy-calls",
             "2", "--libero-video", "none"]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
         "PREEMPTED"}


def _tool() -> Any:
    path = Path(__file__).resolve().parents[1] / "tools" / "local_slurm.py"
    spec = importlib.util.spec_from_file_location("local_slurm", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def slurm_conf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running one-node cluster for the session, stopped at the end; its SLURM_CONF."""
    cluster = _tool().LocalSlurm(tmp_path_factory.mktemp("slurm"))
    cluster.start()  # LocalSlurmError names the daemon and its log: an error, not a skip
    try:
        yield str(cluster.conf)
    finally:
        cluster.stop()


def clean_env(slurm_conf: str | None = None) -> dict[str, str]:
    """This environment without the outer pytest's or an outer scheduler's variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "SLURM_")) and k not in ("JOB_COMPLETION_INDEX", "LIBERO_SHARD_COUNT")}
    if slurm_conf is not None:
        env["SLURM_CONF"] = slurm_conf
    return env


def runner(slurm_conf: str) -> Callable[[Sequence[str]], tuple[int, str, str]]:
    def run(argv: Sequence[str]) -> tuple[int, str, str]:
        done = subprocess.run(list(argv), capture_output=True, text=True, env=clean_env(slurm_conf), timeout=60)
        return done.returncode, done.stdout, done.stderr
    return run


def cli(slurm_conf: str, workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_libero", *args], cwd=workdir, capture_output=True,
                          text=True, env=clean_env(slurm_conf), timeout=300)


def wait_for(condition: Callable[[], Any], what: str, timeout_s: float = 900) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def wait_ended(slurm_conf: str, job: str) -> str:
    return str(wait_for(lambda: (s := job_state(job, runner(slurm_conf))) in ENDED and s, f"job {job} to end"))


def first_record(shard_dir: Path) -> Path:
    def found() -> Path | None:
        done = [p for p in shard_dir.glob("*/*/episodes/*.json") if not p.name.startswith(".")]
        return done[0] if done else None
    return wait_for(found, f"a record in {shard_dir}", 600)  # type: ignore[no-any-return]


def job_ids(text: str) -> tuple[str, str]:
    match = re.search(r"array job (\d+) .*merge job (\d+)", text)
    assert match, text
    return match.group(1), match.group(2)


def kill_shard(shard_dir: Path) -> int:
    """A node failure: SIGKILL the shard's batch script, its pytest and the bench service under it."""
    parents: dict[int, int] = {}
    pytest_pid = None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if b"--libero-output" in argv and str(shard_dir).encode() in argv and b"pytest" in argv:
            pytest_pid = int(entry.name)
    assert pytest_pid is not None, f"no pytest process writes {shard_dir}"
    batch = parents[pytest_pid]
    tree = [batch, pytest_pid] if b"slurm_script" in Path(f"/proc/{batch}/cmdline").read_bytes() else [pytest_pid]
    while True:
        more = [pid for pid, parent in parents.items() if parent in tree and pid not in tree]
        if not more:
            break
        tree += more
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pytest_pid


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("evaluation")


@pytest.fixture(scope="module")
def local_run(workdir: Path) -> tuple[Path, float]:
    """The same selection in one local process: the reference, and its wall time."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", *SELECTION,
                           "--libero-output", "local"], cwd=workdir, capture_output=True, text=True,
                          env=clean_env(), timeout=900)
    wall = time.monotonic() - started
    assert "LIBERO: selected 5 = passed 0 + failed 5 + errored 0 + unattempted 0" in done.stdout, done.stdout[-3000:]
    (run_dir,) = run_dirs(workdir / "local")
    return run_dir, wall


def same_as_local(merged: Path, reference: Path) -> dict[str, dict[str, Any]]:
    """Per-cell outcomes, counters, final-state hashes, chunks and the summary equal the local run's."""
    assert summary_core(merged) == summary_core(reference)
    final, expected = records(merged), records(reference)
    assert sorted(final) == CELLS
    assert {c: comparable(r) for c, r in final.items()} == {c: comparable(r) for c, r in expected.items()}
    assert all(r["private"]["final_state_sha256"] for r in final.values())
    return final


def test_four_shards_run_and_merge_by_themselves_into_the_local_run(slurm_conf, workdir, local_run):
    reference, local_wall = local_run
    started = time.monotonic()
    done = cli(slurm_conf, workdir, "submit", "slurm", "--shards", "4", "--run-dir", "four", "--", *SELECTION)
    assert done.returncode == 0, done.stderr
    array_job, merge_job = job_ids(done.stdout)
    assert wait_ended(slurm_conf, merge_job) == "COMPLETED"
    wall = time.monotonic() - started
    run_dir = workdir / "four"

    report = gather_status(run_dir, runner(slurm_conf))
    assert [(s.state, s.job, len(s.cells)) for s in report.shards] == [
        ("COMPLETED", f"{array_job}_{i}", n) for i, n in enumerate((2, 1, 1, 1))]
    assert report.totals() == {"passed": 0, "failed": 5, "errored": 0, "unattempted": 0}
    final = same_as_local(run_dir / "merged", reference)
    for cell, record in final.items():
        shard = CELLS.index(cell) % 4 + 1
        assert record["scheduler"]["shard"] == {"index": shard, "count": 4}
        slurm = record["scheduler"]["slurm"]
        assert (slurm["array_job_id"], slurm["array_task_id"]) == (array_job, shard - 1), cell
        assert slurm["job_id"].isdigit() and slurm["node"]
    assert (run_dir / "merged" / "report.html").is_file()
    compared = cli(slurm_conf, workdir, "compare", str(reference), str(run_dir / "merged"))
    assert compared.returncode == 0, compared.stderr
    print(f"\nwall time, 5 cells: 4-shard Slurm run {wall:.1f} s (submit to merged), "
          f"local pytest -n 0 {local_wall:.1f} s")


def test_a_cancelled_and_a_killed_shard_keep_their_records_and_resume_runs_only_them(slurm_conf, workdir, local_run):
    reference, _ = local_run
    done = cli(slurm_conf, workdir, "submit", "slurm", "--shards", "3", "--run-dir", "three", "--", *SELECTION)
    assert done.returncode == 0, done.stderr
    array_job, merge_job = job_ids(done.stdout)
    run_dir = workdir / "three"
    # Shard 1 holds t00 and t03, shard 2 t01 and t04, shard 3 t02. Each of the first two loses its second
    # cell mid-run: shard 1 to scancel, shard 2 to a node failure (every process of it killed).
    first_record(run_dir / "shard-1")
    cancel = subprocess.run(["scancel", f"{array_job}_0"], capture_output=True, text=True, env=clean_env(slurm_conf))
    assert cancel.returncode == 0, cancel.stderr
    first_record(run_dir / "shard-2")
    kill_shard(run_dir / "shard-2")
    assert wait_ended(slurm_conf, merge_job) == "FAILED"  # merged, with cells unattempted (exit 3)

    report = gather_status(run_dir, runner(slurm_conf))
    states = [(s.state, s.counts["failed"], s.counts["unattempted"]) for s in report.shards]
    assert states == [("CANCELLED", 1, 1), ("FAILED", 1, 1), ("COMPLETED", 1, 0)]
    assert report.merged is not None and report.merged["unattempted"] == 2
    status = cli(slurm_conf, workdir, "status", str(run_dir))
    assert f"CANCELLED ({array_job}_0" in status.stdout and "shards with unattempted or errored cells: 1, 2;" \
        in status.stdout, status.stdout
    kept = {}
    for shard in (1, 2):
        (folder,) = run_dirs(run_dir / f"shard-{shard}")
        kept.update(records(folder))  # whole records, evidence blocks included
    assert sorted(kept) == ["libero_10-t00-s00", "libero_10-t01-s00"]

    done = cli(slurm_conf, workdir, "submit", "slurm", "--resume", str(run_dir))
    assert done.returncode == 0, done.stderr
    assert "resubmitted shard(s) 1, 2 as array job" in done.stdout and "(--array=0,1)" in done.stdout, done.stdout
    again, merge_again = job_ids(done.stdout)
    assert wait_ended(slurm_conf, merge_again) == "COMPLETED"
    report = gather_status(run_dir, runner(slurm_conf))
    assert [s.job for s in report.shards] == [f"{again}_0", f"{again}_1", f"{array_job}_2"]
    assert report.totals() == {"passed": 0, "failed": 5, "errored": 0, "unattempted": 0}
    final = same_as_local(run_dir / "merged", reference)
    # Nothing ran twice: the records of the first round are kept as they were, the rest ran in the second.
    for cell, record in kept.items():
        assert final[cell] == record
    ran_in = {cell: r["scheduler"]["slurm"]["array_job_id"] for cell, r in final.items()}
    assert ran_in == {CELLS[0]: array_job, CELLS[1]: array_job, CELLS[2]: array_job, CELLS[3]: again,
                      CELLS[4]: again}
    log = (run_dir / "logs" / f"shard-0-job-{again}.out").read_text()
    assert re.search(r"^libero_10-t00-s00 .*\[resumed: recorded earlier\]$", log, re.MULTILINE), log
    assert not re.search(r"^libero_10-t03-s00 .*\[resumed", log, re.MULTILINE), log
