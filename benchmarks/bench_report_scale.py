"""The report, merge and resume path at scale: a 10,030-episode LIBERO-plus folder and a 2,000-episode
LIBERO full-mode folder, built in a temporary directory.

For each folder it times, in this process:

  report   what `python -m pytest_libero report RUN` does: summary.json, the chart and report.html
           (summary.rebuild with the folder's adapter)
  merge    `python -m pytest_libero merge OUT A B` of the folder split into two shard folders
           (selection.json of each names its half and the whole selection, as shards write it)
  resume   what `--libero-resume RUN` reads before running: results.resume.completed_cells and
           results.attempts.remove_temporaries

each with the per-record schema validation (results.reading.is_valid_record) switched off, and the validation's
share named apart: its cost per record measured on a sample of the folder's records, times the
records each command validates. `--full-validation` also runs every command with validation on
(slow while validation is jsonschema's; benchmarks/bench_evidence_scale.py is about validation).

`--before REV` runs the same commands with the code of git revision REV (exported to a temporary
folder, on the same folders, in a subprocess) and prints the ratios. Each figure is the best of
`--repeat` runs; absolute times drift on a shared machine (the load average is printed).

`--process N` times instead what a user waits for: `python -m pytest_libero report RUN` as a whole
process (interpreter start, imports, the report) on a fresh copy of the 2,000-episode folder, N runs
of each case: a folder an earlier report (or the session's end) wrote summary, chart and page into,
and a folder without them (the chart drawn); each run's wall and CPU seconds and
the load; with `--before REV`, each run times REV's code right after this checkout's, on its own
fresh copy, and prints the ratio (issue 35: under 2 s).

    python benchmarks/bench_report_scale.py
    python benchmarks/bench_report_scale.py --before main --repeat 2
    python benchmarks/bench_report_scale.py --process 3 --before 660852a
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 5.0


def build_plus(path: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from page_helpers import write_plus_run

    return write_plus_run(path)


def build_full(path: Path, episodes: int = 2000) -> Path:
    """A LIBERO full-mode folder (schedule standard, seeds 1000 and 2000): `episodes` placeholder-style
    records of made-up outcomes, written plainly (a fixture, not evidence)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from run_folders import TERMINATION, full_protocol

    from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
    from pytest_libero.results.files import write_json_atomic
    from pytest_libero.results.records import RunDir, placeholder_record, run_manifest

    protocol = full_protocol("standard", seeds=(1000, 2000), scope="default")
    settings, identity = protocol.as_dict(), protocol.identity
    spec = {"name": "zero", "kwargs": {}}
    run = RunDir(path)
    run.episodes.mkdir(parents=True)
    write_json_atomic(path / "run.json", run_manifest(path.name, "zero", settings, identity, spec, ["pytest"],
                                                      source=LIBERO.source, gpus=[]))
    outcomes = ("success", "failure", "success", "env_error", "policy_error", "failure", "not_run")
    cells = []
    for n in range(episodes):
        suite = ("libero_spatial", "libero_object", "libero_goal", "libero_10")[n // 500 % 4]
        cell = f"{suite}-t{n // 50 % 10:02d}-s{n // 2 % 25:02d}-seed{1000 * (1 + n % 2)}"
        outcome = outcomes[n % 11 % len(outcomes)]
        record = placeholder_record(cell, "not_run", outcome, adapter=LIBERO, context=None, protocol=settings,
                                    identity=identity, policy_profile={"spec": spec, "kind": "diagnostic"},
                                    worker="main")
        record["outcome"].update(outcome=outcome, termination=TERMINATION[outcome],
                                 terminated=outcome == "success", truncated=outcome == "failure")
        run.record_path(cell).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        cells.append(cell)
    write_json_atomic(path / "selection.json", {"schema_version": 1, "cells": cells})
    return path


def split(run_dir: Path, into: Path) -> list[Path]:
    """Two shard folders of `run_dir` (records hard-linked): each selection.json names its half, the
    whole selection and the shard, as a sharded run writes them."""
    cells = json.loads((run_dir / "selection.json").read_text(encoding="utf-8"))["cells"]
    manifest = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    halves = [cells[: len(cells) // 2], cells[len(cells) // 2:]]
    shards = []
    for index, half in enumerate(halves, start=1):
        shard = into / f"shard{index}"
        (shard / "episodes").mkdir(parents=True)
        (shard / "run.json").write_text(json.dumps(dict(manifest, run_id=shard.name,
                                                        shard={"index": index, "count": 2}), indent=1))
        (shard / "selection.json").write_text(json.dumps({
            "schema_version": 1, "cells": half, "unsharded_cells": cells, "shard": {"index": index, "count": 2}}))
        for cell in half:
            source = run_dir / "episodes" / f"{cell}.json"
            if source.is_file():
                os.link(source, shard / "episodes" / source.name)
        shards.append(shard)
    return shards


def best(repeat: int, action: Callable[[], Any], prepare: Callable[[], Any] | None = None) -> float:
    times = []
    for _ in range(repeat):
        if prepare is not None:
            prepare()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def commands_for(run_dir: Path) -> dict[str, tuple[Callable[[], Any], Callable[[], Any] | None]]:
    """command -> (what it does, what to do before each run of it) for one folder."""
    from pytest_libero import benchmarks
    from pytest_libero.results import summary as summary_module
    from pytest_libero.results.attempts import remove_temporaries
    from pytest_libero.results.merge import merge
    from pytest_libero.results.resume import completed_cells

    adapter = benchmarks.for_run_folder(run_dir)
    manifest = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    protocol, policy = manifest["protocol"], manifest["policy"]
    shards = [run_dir.parent / "shards" / "shard1", run_dir.parent / "shards" / "shard2"]
    out = run_dir.parent / "merged"

    def resume() -> None:
        completed_cells(run_dir, protocol["settings"], protocol["identity"], policy)
        remove_temporaries(run_dir)

    return {"report": (lambda: summary_module.rebuild(run_dir, adapter), None),
            "merge": (lambda: merge(out, shards, adapter), lambda: shutil.rmtree(out, ignore_errors=True)),
            "resume": (resume, None)}


def imports() -> float:
    """Seconds to import what the report path imports on first use (Pillow, Jinja), once a process."""
    start = time.perf_counter()
    import PIL.ImageDraw  # noqa: F401

    from pytest_libero.results import page  # noqa: F401

    return time.perf_counter() - start


@contextlib.contextmanager
def validation_off() -> Iterator[Callable[[Any], bool]]:
    """Record validation switched off in this process (and no helper processes, which would
    validate), for this checkout or an older one (`--before`): yields the validator it replaced."""
    from unittest import mock

    try:
        from pytest_libero.results import reading  # since issue 15's reader
    except ImportError:
        from pytest_libero.results import summary as old

        valid = old._valid  # type: ignore[attr-defined]
        with mock.patch.object(old, "_valid", return_value=True):
            yield valid
        return
    valid = reading.is_valid_record
    with mock.patch.object(reading, "is_valid_record", return_value=True), \
            mock.patch.object(reading, "PARALLEL_FROM", 10**9):
        yield valid


def measure(folders: dict[str, Path], repeat: int, full_validation: bool) -> dict[str, Any]:
    """{folder: {"records": n, "off": {command: s}, "on": {command: s}, "validate_ms": ms}}."""
    found: dict[str, Any] = {"imports_s": imports()}
    for name, run_dir in folders.items():
        commands = commands_for(run_dir)
        records = sorted((run_dir / "episodes").glob("*.json"))
        row: dict[str, Any] = {"records": len(records), "off": {}, "on": {}}
        with validation_off() as valid:
            for command, (action, prepare) in commands.items():
                row["off"][command] = best(repeat, action, prepare)
        sample = [json.loads(p.read_text(encoding="utf-8")) for p in records[:: max(1, len(records) // 100)]]
        valid(sample[0])  # the validator is built once per process
        start = time.perf_counter()
        assert all(valid(r) for r in sample)
        row["validate_ms"] = 1000 * (time.perf_counter() - start) / len(sample)
        if full_validation:
            for command, (action, prepare) in commands.items():
                row["on"][command] = best(1, action, prepare)
        found[name] = row
    return found


# Each command validates every record once (read through summary.read_records): merge the shards'
# records (it no longer reads the merged folder again: before, it validated each record twice).
VALIDATED = {"report": 1, "merge": 1, "resume": 1}


def print_table(found: dict[str, Any], before: dict[str, Any] | None) -> None:
    print(f"\nload average {open('/proc/loadavg').read().split()[:3]}; "
          "schema validation off (results.reading.is_valid_record "
          "patched to True) unless said; best of the runs")
    print(f"first-use imports of the report path (Pillow, Jinja), once a process, in the first report: "
          f"{found['imports_s']:.2f} s" + (f" (before: {before['imports_s']:.2f} s)" if before else ""))
    for name, row in found.items():
        if name == "imports_s":
            continue
        n = row["records"]
        print(f"\n{name}: {n} records; schema validation measured at {row['validate_ms']:.2f} ms a record")
        print(f"  {'command':8} {'off s':>8} {'ms/rec':>8} {'valid. s':>9} {'on s':>8}"
              f"{'  before s   ratio' if before else ''}")
        for command, seconds in row["off"].items():
            share = VALIDATED[command] * n * row["validate_ms"] / 1000
            on = row["on"].get(command)
            on_text = f"{on:8.2f}" if on is not None else f"{'~' + format(seconds + share, '.1f'):>8}"
            line = f"  {command:8} {seconds:8.2f} {1000 * seconds / n:8.3f} {share:9.2f} {on_text}"
            if before:
                old = before[name]["off"][command]
                line += f"  {old:8.2f} {old / seconds:6.1f}x"
            # A command line run pays the first-use imports once (report and merge build the page).
            total = seconds + (found["imports_s"] if command != "resume" else 0.0)
            verdict = "meets" if total < TARGET_S else "misses"
            print(line + f"   {total:.2f} s with the imports: {verdict} the {TARGET_S:.0f} s target, validation off")
    print("\n'valid. s': the validation's share (records validated x ms a record); 'on s': measured with "
          "--full-validation, else '~' the off time plus that share. 'before s': the same command, validation "
          "off, with the code of --before REV.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command (the best counts)")
    parser.add_argument("--full-validation", action="store_true", help="also run each command with validation on")
    parser.add_argument("--before", metavar="REV", help="also run the code of git revision REV and print ratios")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the folders here instead of a temporary dir")
    parser.add_argument("--process", type=int, metavar="N",
                        help="time `python -m pytest_libero report` as a whole process, N runs, on the 2,000 folder")
    parser.add_argument("--json", type=Path, help=argparse.SUPPRESS)  # the --before subprocess's answer
    parser.add_argument("--folders", type=Path, help=argparse.SUPPRESS)  # reuse these folders
    args = parser.parse_args()
    work = args.folders or args.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        folders = {"libero_plus 10,030": work / "plus" / "run", "libero full 2,000": work / "full" / "run"}
        for build, run_dir in zip((build_plus, build_full), folders.values(), strict=True):
            if not run_dir.is_dir():
                start = time.perf_counter()
                build(run_dir)
                split(run_dir, run_dir.parent / "shards")
                print(f"built {run_dir} in {time.perf_counter() - start:.1f} s", flush=True)
        if args.process:
            process_runs(folders["libero full 2,000"], args.process, args.before)
            return 0
        if args.json is not None:  # the --before subprocess: measure only
            args.json.write_text(json.dumps(measure(folders, args.repeat, False)))
            return 0
        before = None
        if args.before:
            before = run_before(args.before, work, args.repeat)
        found = measure(folders, args.repeat, args.full_validation)
        print_table(found, before)
        return 0
    finally:
        if args.keep is None and args.folders is None:
            shutil.rmtree(work, ignore_errors=True)


def exported(rev: str) -> Path:
    """Revision `rev`'s tree in a temporary folder (the caller removes it)."""
    code = Path(tempfile.mkdtemp(prefix="bench-report-code-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
    return code


def report_process(run_dir: Path, scratch: Path, code: Path | None, first: bool) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of `python -m pytest_libero report` on a fresh copy of
    `run_dir`, with this checkout's package or, given `code`, that tree's. `first`: the copy has no
    summary.json, chart or page (a merged folder's first report: the chart is drawn); else the copy
    keeps what an earlier report wrote (a finished run's folder: a chart whose rates did not change
    is kept, results-format.md)."""
    copy = scratch / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run_dir, copy)
    if first:
        for name in ("summary.json", "success_rates.png", "report.html"):
            (copy / name).unlink(missing_ok=True)
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code) + os.pathsep + env.get("PYTHONPATH", "")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest_libero", "report", str(copy)], check=True, env=env,
                   cwd=code or ROOT, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def process_runs(run_dir: Path, runs: int, rev: str | None) -> None:
    """Print N whole-process report runs of each case (and REV's beside each)."""
    code = exported(rev) if rev else None
    scratch = Path(tempfile.mkdtemp(prefix="bench-report-process-"))
    try:
        # The folder as a finished session leaves it: one report writes summary, chart and page.
        report_process(run_dir, scratch, None, first=True)
        shutil.rmtree(run_dir.parent / "reported", ignore_errors=True)
        shutil.copytree(scratch / "copy", run_dir.parent / "reported")
        reported = run_dir.parent / "reported"
        if code is not None:
            report_process(reported, scratch, code, first=False)  # Python's bytecode of REV's tree
        print(f"`python -m pytest_libero report` as a whole process, {run_dir} (2,000 records), target < 2 s")
        for case, first in (("rebuild of a reported folder", False), ("first report (chart drawn)", True)):
            for run in range(1, runs + 1):
                load = os.getloadavg()[0]
                wall, cpu = report_process(reported, scratch, None, first)
                line = f"{case}, run {run}: 1-min load {load:.2f}; this checkout {wall:.2f} s wall ({cpu:.2f} s CPU)"
                if code is not None:
                    old_wall, old_cpu = report_process(reported, scratch, code, first)
                    line += f"; {rev} {old_wall:.2f} s wall ({old_cpu:.2f} s CPU); ratio {old_wall / wall:.2f}x"
                print(line + ("; under" if wall < 2.0 else "; OVER") + " 2 s", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if code is not None:
            shutil.rmtree(code, ignore_errors=True)


def run_before(rev: str, work: Path, repeat: int) -> dict[str, Any]:
    """The figures of revision `rev`'s code, in a subprocess, on the same folders."""
    code = exported(rev)
    try:
        answer = code / "answer.json"
        env = dict(os.environ, PYTHONPATH=str(code) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        # This script (the new one) drives the old package: only pytest_libero comes from `code`.
        subprocess.run([sys.executable, __file__, "--folders", str(work), "--json", str(answer),
                        "--repeat", str(repeat)], check=True, env=env, cwd=code)
        print(f"(figures of {rev} measured)", flush=True)
        return json.loads(answer.read_text())  # type: ignore[no-any-return]
    finally:
        shutil.rmtree(code, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
