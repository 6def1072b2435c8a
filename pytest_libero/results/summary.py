"""Derived results: summary.json, the success-rate chart and a standalone HTML page.

Everything here is rebuilt from a run folder's files alone (run.json, selection.json,
episodes/*.json): `python -m pytest_libero report RUN_DIR`. Partial runs are fine: a selected
cell without a record is unattempted.
"""

from __future__ import annotations

import functools
import gc
import json
import statistics
from pathlib import Path
from typing import Any, Mapping

from pytest_libero.core.benchmark import BenchmarkAdapter
from pytest_libero.results.files import is_temporary, write_bytes_atomic, write_json_atomic
from pytest_libero.results.records import RunDir
from pytest_libero.results.run_kind import run_kind
from pytest_libero.results.telemetry import throughput
from pytest_libero.core.outcomes import STATUSES, Outcome, status
from pytest_libero.core.statistics import wilson

SUMMARY_SCHEMA_VERSION = 1


def load_manifest(run_dir: Path) -> dict[str, Any]:
    """The folder's run.json ({} when missing or unreadable), without reading the records."""
    return _read(run_dir / "run.json") or {}  # type: ignore[no-any-return]


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[str], dict[str, dict[str, Any]], list[str]]:
    """(manifest, selected cell ids, records by cell id, unreadable files) of a run folder."""
    run = RunDir(run_dir)
    manifest = load_manifest(run_dir)
    selection = (_read(run_dir / "selection.json") or {}).get("cells", [])
    records: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    # Records are trees of JSON values (no reference cycles), kept alive until the end: the cyclic
    # garbage collector, triggered again and again while thousands are read, would only walk them
    # (a third of the time of reading 10,000 records; benchmarks/bench_evidence_scale.py).
    collecting = gc.isenabled()
    gc.disable()
    try:
        for path in sorted(run.episodes.glob("*.json")) if run.episodes.is_dir() else []:
            if is_temporary(path):
                continue
            record = _read(path)
            if record is None or not _valid(record):
                problems.append(str(path))
                continue
            records[record["cell"]["id"]] = record
    finally:
        if collecting:
            gc.enable()
    return manifest, list(selection), records, problems


@functools.cache  # one compiled validator per process, not one per record
def _record_validator() -> Any:
    """catalog/schemas/episode_record.schema.json (the one schema) compiled to Python by
    fastjsonschema: about 50x faster than jsonschema's interpreted Draft202012Validator on a
    record (benchmarks/bench_evidence_scale.py), and a schema-2 record's actions are one string."""
    import fastjsonschema

    from pytest_libero.core.data import SCHEMA_DIR

    schema = json.loads((SCHEMA_DIR / "episode_record.schema.json").read_text(encoding="utf-8"))
    return fastjsonschema.compile(schema)


def record_problem(record: Any) -> str | None:
    """Why `record` is not a schema-valid episode record (schema 1 or 2), or None when it is."""
    import fastjsonschema

    try:
        _record_validator()(record)
    except fastjsonschema.JsonSchemaException as exc:
        return str(exc.message)
    return None


def _valid(record: Any) -> bool:
    return record_problem(record) is None


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def group_stats(cells: list[str], records: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Counts, both success rates with Wilson intervals and the median first-success control of `cells`."""
    counts = {"selected": len(cells), **dict.fromkeys(STATUSES, 0)}
    by_outcome = {outcome.value: 0 for outcome in Outcome}
    first_success = []
    for cell in cells:
        record = records.get(cell)
        outcome = Outcome(record["outcome"]["outcome"]) if record else Outcome.NOT_RUN
        by_outcome[outcome.value] += 1
        counts[status(outcome)] += 1
        if outcome == Outcome.SUCCESS and record and record["outcome"]["first_success_control"] is not None:
            first_success.append(record["outcome"]["first_success_control"])
    completed = counts["passed"] + counts["failed"]
    return {
        **counts, "by_outcome": by_outcome,
        "success_rate_errors_excluded": {
            "label": "passed / (passed + failed); errored and unattempted episodes excluded",
            **wilson(counts["passed"], completed)},
        "success_rate_errors_as_failures": {
            "label": "passed / (passed + failed + errored); unattempted episodes excluded",
            **wilson(counts["passed"], completed + counts["errored"])},
        "median_first_success_control": statistics.median(first_success) if first_success else None,
    }


Loaded = tuple[dict[str, Any], list[str], dict[str, dict[str, Any]], list[str]]  # what load_run returns


def build_summary(run_dir: Path, adapter: BenchmarkAdapter, loaded: Loaded | None = None) -> dict[str, Any]:
    """summary.json of a run folder of `adapter`'s benchmark; `loaded`: what load_run(run_dir)
    returns, when the caller has it already (merge: it just read and checked every record)."""
    manifest, selection, records, problems = loaded if loaded is not None else load_run(run_dir)
    cells = list(selection) + [c for c in records if c not in selection]
    suites = {s: group_stats([c for c in cells if c.startswith(s + "-")], records) for s in adapter.suites()}
    identities = sorted({r["identities"]["protocol"]["identity"] for r in records.values()})
    summary = {
        "schema_version": SUMMARY_SCHEMA_VERSION, "run_kind": run_kind(records.values()), "run": manifest,
        "overall": group_stats(cells, records),
        "suites": {s: g for s, g in suites.items() if g["selected"]},
        "protocol_identities": identities,
        "episodes": [episode_row(cell, records.get(cell)) for cell in cells],
        "unattempted": [c for c in cells if c not in records or records[c]["outcome"]["outcome"] == Outcome.NOT_RUN],
        "unreadable_records": problems,
        "throughput": throughput(records),
    }
    from pytest_libero.results.schedule_summary import extend

    def group(group_cells: list[str]) -> dict[str, Any]:
        return group_stats(group_cells, records)

    extend(summary, cells, group, adapter.suites())
    summary.update(adapter.summary_blocks(cells, records, group, summary))
    return summary


def episode_row(cell: str, record: dict[str, Any] | None) -> dict[str, Any]:
    if record is None:
        return {"cell": cell, "outcome": Outcome.NOT_RUN.value, "status": status(Outcome.NOT_RUN),
                "message": "no record", "counters": None, "video": None, "first_success_control": None}
    outcome = record["outcome"]
    video = record.get("video")
    return {"cell": cell, "outcome": outcome["outcome"], "status": status(outcome["outcome"]),
            "termination": outcome["termination"], "message": outcome["message"], "counters": record["counters"],
            "first_success_control": outcome["first_success_control"],
            "first_success_policy_call": outcome["first_success_policy_call"],
            "video": video["path"] if video else None, "language": record["cell"]["language"],
            "kind": (record["identities"].get("model_profile") or {}).get("kind")}


def success_chart_png(summary: dict[str, Any]) -> bytes:
    """Bar chart of per-suite success rates (errors excluded) with their Wilson intervals."""
    import io

    # The object API, not pyplot: no global figure state, no interactive backend selection.
    from matplotlib.figure import Figure

    groups = [(s, g) for s, g in summary["suites"].items()] + [("overall", summary["overall"])]
    names, rates, lows, highs = [], [], [], []
    for name, group in groups:
        stat = group["success_rate_errors_excluded"]
        rate = stat["rate"] or 0.0
        low, high = stat["ci95"] or (0.0, 0.0)
        names.append(f"{name}\n(n={stat['trials']})")
        rates.append(100 * rate)
        lows.append(100 * (rate - low))
        highs.append(100 * (high - rate))
    figure = Figure(figsize=(max(1.6 * len(groups) + 2, 5.0), 3.2), dpi=100)
    axis = figure.subplots()
    axis.bar(names, rates, yerr=[lows, highs], capsize=6, color="#4c72b0")
    axis.set_ylim(0, 100)
    axis.set_ylabel("success rate, % (95% Wilson CI)")
    axis.set_title("Success rate by suite (errored episodes excluded)")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def rebuild(run_dir: Path, adapter: BenchmarkAdapter, loaded: Loaded | None = None) -> dict[str, Any]:
    """Write summary.json, success_rates.png and report.html into the run folder."""
    from pytest_libero.results.page import render_page

    summary = build_summary(run_dir, adapter, loaded)
    if len(summary["protocol_identities"]) > 1:
        from pytest_libero.errors import LiberoError

        raise LiberoError(f"{run_dir} mixes protocol identities {summary['protocol_identities']}: results of "
                          "different protocols (track, budget, scope, ...) never merge; split the records")
    write_json_atomic(run_dir / "summary.json", summary, sort_keys=False)  # the run's kind first
    chart = success_chart_png(summary)
    write_bytes_atomic(run_dir / "success_rates.png", chart)
    write_bytes_atomic(run_dir / "report.html", render_page(summary, chart, adapter).encode())
    return summary
