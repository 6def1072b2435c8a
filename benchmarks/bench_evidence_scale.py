"""Side-by-side: reading run folders of thousands of records, before and after issue 15.

Builds synthetic run folders of schema-valid records (tests/synthetic_runs.py: records made by the
real record functions from made-up 200-control episodes at K=5, observation hashes, 60% successes),
each as two shard folders, and times what reads every record:

    merge    `python -m pytest_libero merge OUT SHARD1 SHARD2` (in-process; it also rebuilds OUT's report)
    report   `python -m pytest_libero report OUT` (in-process): summary.json, chart, report.html
    resume   the scan `--libero-resume OUT` makes before a session (results.resume.completed_cells)

    before   schema-1 records (every chunk row as JSON numbers, indented, as main wrote them) read
             with jsonschema's Draft202012Validator, as main did
    after    records as written now (schema 3) read as now: orjson, the compiled bulk validator
             (results/validation.py), helper processes from 1,500 records on (results/reading.py)

`before` costs about 40-60 ms a record, so it runs on a sample (--sample records); `after` runs on
the same sample (same fixed costs: the ratio) and on the full folders (2,000 LIBERO full-mode ids;
10,030 LIBERO-plus variants). The report's parts (reading and checking, summary, chart, page)
are printed apart (the page is being redesigned separately).

    python benchmarks/bench_evidence_scale.py                   # 2,000 and 10,030 records
    python benchmarks/bench_evidence_scale.py --sizes 2000 --sample 100

Absolute times drift on a shared machine: read the ratios, and `cat /proc/loadavg`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import synthetic_runs  # noqa: E402  (tests/: the builder the browser tests can share)

from pytest_libero.__main__ import main as cli  # noqa: E402
from pytest_libero.results import reading  # noqa: E402
from pytest_libero.results import summary as summary_module  # noqa: E402


@contextlib.contextmanager
def old_validator() -> Iterator[None]:
    """The validation main did: jsonschema's Draft202012Validator.is_valid on every record (in this
    process: the sample is under results/reading.py's PARALLEL_FROM)."""
    import json

    import jsonschema

    from pytest_libero.core.data import SCHEMA_DIR

    validator = jsonschema.Draft202012Validator(
        json.loads((SCHEMA_DIR / "episode_record.schema.json").read_text(encoding="utf-8")))
    fast = reading.is_valid_record
    reading.is_valid_record = validator.is_valid  # type: ignore[assignment]
    try:
        yield
    finally:
        reading.is_valid_record = fast  # type: ignore[assignment]


def timed(call: Callable[[], Any]) -> float:
    with contextlib.redirect_stdout(io.StringIO()):  # the commands' own lines
        tick = time.perf_counter()
        call()
        return time.perf_counter() - tick


def build(kind: str, folder: Path, work: Path, count: int, schema: int) -> list[Path]:
    if kind == "libero":
        return synthetic_runs.write_libero_run(folder, count, schema=schema, shards=2)
    return synthetic_runs.write_libero_plus_run(folder, work, count=count, schema=schema, shards=2)


def measure(shards: list[Path], out: Path) -> dict[str, float]:
    """Seconds of merge, report and a resume's scan over the folders `shards` (merged into `out`)."""
    import json

    from pytest_libero.results.resume import completed_cells

    found = {"merge": timed(lambda: cli(["merge", str(out), *map(str, shards)])),
             "report": timed(lambda: cli(["report", str(out)]))}
    manifest = json.loads((out / "run.json").read_text(encoding="utf-8"))
    protocol = manifest["protocol"]

    def scan() -> None:
        kept = completed_cells(out, protocol["settings"], protocol["identity"], synthetic_runs.POLICY)
        assert kept, "the resume scan kept nothing: the folder is not what the benchmark built"

    found["resume scan"] = timed(scan)
    return found


def page_share(out: Path) -> dict[str, float]:
    """Seconds of the report's parts: reading and checking the records, the summary's counts and
    rates, the chart, the page (report.html)."""
    from pytest_libero import benchmarks
    from pytest_libero.results.page import render_page

    adapter = benchmarks.for_run_folder(out)
    found: dict[str, Any] = {}
    parts = {"read + check": timed(lambda: found.update(loaded=summary_module.read_records(out)))}
    parts["summary"] = timed(lambda: found.update(s=summary_module.build_summary(out, adapter, found["loaded"][0])))
    parts["chart"] = timed(lambda: found.update(c=summary_module.success_chart_png(found["s"])))
    parts["page"] = timed(lambda: render_page(found["s"], found["c"], adapter))
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="2000,10030",
                        help="record counts; up to 2,000 are LIBERO full-mode ids, more are LIBERO-plus variants")
    parser.add_argument("--sample", type=int, default=200, help="records of the before/after sample (default 200)")
    parser.add_argument("--keep", type=Path, default=None, help="build the folders here and keep them")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_evidence_"))
    root.mkdir(parents=True, exist_ok=True)
    work = root / "work"
    rows = []
    try:
        for size in sizes:
            kind = "libero" if size <= 2000 else "libero_plus"
            label = f"{size} {'LIBERO full-mode' if kind == 'libero' else 'LIBERO-plus'} records"
            sample = min(args.sample, size)
            tick = time.perf_counter()
            before = build(kind, root / f"{size}-before", work, sample, schema=1)
            same = build(kind, root / f"{size}-sample", work, sample, schema=3)
            full = build(kind, root / f"{size}-after", work, size, schema=3)
            print(f"{label}: built in {time.perf_counter() - tick:.0f} s ({sample}-record samples of schema 1 "
                  f"and 3, {size} records of schema 3, each as two shard folders)", flush=True)
            with old_validator():
                old = measure(before, root / f"{size}-before-merged")
            new_sample = measure(same, root / f"{size}-sample-merged")
            new = measure(full, root / f"{size}-after-merged")
            parts = page_share(root / f"{size}-after-merged")
            rows.append((label, size, sample, old, new_sample, new, parts))
            shutil.rmtree(root / f"{size}-after", ignore_errors=True)  # the largest: gone once measured
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(f"{'':34} {'before ms/rec':>13} {'after ms/rec':>13} {'ratio':>7} {'after ms/rec':>13} "
          f"{'after total':>12} {'before total':>13}")
    print(f"{'':34} {'(sample)':>13} {'(sample)':>13} {'':>7} {'(all)':>13} {'(all)':>12} {'(projected)':>13}")
    for label, size, sample, old, new_sample, new, parts in rows:
        print(label)
        for step in ("merge", "report", "resume scan"):
            b, a, full = 1000 * old[step] / sample, 1000 * new_sample[step] / sample, 1000 * new[step] / size
            verdict = "under 5 s" if new[step] < 5 else "OVER 5 s"
            print(f"  {step:32} {b:13.2f} {a:13.2f} {b / a:6.1f}x {full:13.2f} {new[step]:10.1f} s "
                  f"{b * size / 1000:11.0f} s  {verdict}")
        total = sum(parts.values())
        print("  report's parts (all records): " + ", ".join(
            f"{name} {seconds:.1f} s ({100 * seconds / total:.0f}%)" for name, seconds in parts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
