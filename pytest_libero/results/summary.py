"""Derived results: summary.json, the success-rate chart and a standalone HTML page.

Everything here is rebuilt from a run folder's files alone (run.json, selection.json,
episodes/*.json): `python -m pytest_libero report RUN_DIR`. Partial runs are fine: a selected
cell without a record is unattempted.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
from collections import Counter
from operator import itemgetter
from pathlib import Path
from typing import Any, Mapping

from pytest_libero.core.benchmark import BenchmarkAdapter
from pytest_libero.results.files import is_temporary, write_bytes_atomic, write_json_atomic
from pytest_libero.results.records import RunDir
from pytest_libero.results.run_kind import run_kind
from pytest_libero.results.sequential import Against, Settings
from pytest_libero.results.telemetry import throughput
from pytest_libero.results.reading import gc_paused, read_checked, read_document
from pytest_libero.core.cells import parse_cell_id, parse_run_seed
from pytest_libero.core.outcomes import STATUSES, Outcome, status
from pytest_libero.core.statistics import rate_text, wilson

SUMMARY_SCHEMA_VERSION = 1


def load_manifest(run_dir: Path) -> dict[str, Any]:
    """The folder's run.json ({} when missing or unreadable), without reading the records."""
    return _read(run_dir / "run.json") or {}  # type: ignore[no-any-return]


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[str], dict[str, dict[str, Any]], list[str]]:
    """(manifest, selected cell ids, records by cell id, unreadable files) of a run folder."""
    records, _, problems = read_records(run_dir)
    return load_manifest(run_dir), load_selection(run_dir), records, problems


def load_selection(run_dir: Path) -> list[str]:
    """The selected cell ids of selection.json ([] when missing or unreadable)."""
    return list((_read(run_dir / "selection.json") or {}).get("cells", []))


def read_records(run_dir: Path) -> tuple[dict[str, dict[str, Any]], dict[str, str], list[str]]:
    """(schema-valid records by cell id, the file each came from, unreadable files) of episodes/, each
    file read once, in file-name order (a later file of the same cell wins). The records come without
    their evidence blocks, `observations` and `chunks` (results/reading.py); read a file for those."""
    return read_folders([run_dir])[0]


def read_folders(run_dirs: list[Path]) -> list[tuple[dict[str, dict[str, Any]], dict[str, str], list[str]]]:
    """read_records of each folder, all read together (merge: one set of helper processes)."""
    listed = []
    for run_dir in run_dirs:
        episodes = str(RunDir(run_dir).episodes)
        try:
            names = sorted(name for name in os.listdir(episodes) if name.endswith(".json"))
        except OSError:  # no episodes/ (yet)
            names = []
        listed.append([os.path.join(episodes, name) for name in names if not is_temporary(name)])
    found = iter(read_checked([path for files in listed for path in files]))
    folders = []
    with gc_paused():
        for files in listed:
            records: dict[str, dict[str, Any]] = {}
            paths: dict[str, str] = {}
            problems: list[str] = []
            for path, record in zip(files, itertools.islice(found, len(files)), strict=True):
                if record is None:
                    problems.append(path)
                    continue
                records[record["cell"]["id"]] = record
                paths[record["cell"]["id"]] = path
            folders.append((records, paths, problems))
    return folders


def _read(path: Path) -> Any:
    return read_document(str(path))


# Each outcome's value -> (its value, its pytest status): group_stats reads thousands of records a report.
_STATUS_OF = {outcome.value: (outcome.value, status(outcome)) for outcome in Outcome}
Fact = tuple[str, str, Any]  # a record's outcome, its pytest status, its first-success control (successes)
_NO_RECORD: Fact = (*_STATUS_OF[Outcome.NOT_RUN.value], None)


def outcome_facts(records: Mapping[str, dict[str, Any]]) -> dict[str, Fact]:
    """What group_stats counts of each record, by cell: read once for the many groups of a summary."""
    facts = {}
    for cell, record in records.items():
        ended = record["outcome"]
        known = _STATUS_OF.get(ended["outcome"])
        # A name not in Outcome raises UnknownOutcome, as before.
        value, state = known if known is not None else _STATUS_OF[Outcome(ended["outcome"]).value]
        facts[cell] = (value, state, ended["first_success_control"] if value == "success" else None)
    return facts


def group_stats(cells: list[str], records: Mapping[str, dict[str, Any]],
                facts: Mapping[str, Fact] | None = None) -> dict[str, Any]:
    """Counts, both success rates with Wilson intervals and the median first-success control of `cells`
    (`facts`: outcome_facts of the records, when the caller counts many groups)."""
    if facts is None:
        facts = outcome_facts({cell: records[cell] for cell in cells if cell in records})
    found = [facts.get(cell, _NO_RECORD) for cell in cells]
    counts = {"selected": len(cells), **dict.fromkeys(STATUSES, 0)}
    counts.update(Counter(map(itemgetter(1), found)))
    by_outcome = {outcome.value: 0 for outcome in Outcome}
    by_outcome.update(Counter(map(itemgetter(0), found)))
    first_success = [fact[2] for fact in found if fact[2] is not None]
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


def build_summary(run_dir: Path, adapter: BenchmarkAdapter,
                  records: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """summary.json of a run folder of `adapter`'s benchmark. `records`: the folder's episodes/ as
    read_records would return them (its order), when the caller already holds them (merge wrote them);
    episodes/ is then not read again."""
    if records is None:
        manifest, selection, records, problems = load_run(run_dir)
    else:
        manifest, selection, problems = load_manifest(run_dir), load_selection(run_dir), []
    chosen = set(selection)
    cells = list(selection) + [c for c in records if c not in chosen]
    facts = outcome_facts(records)
    by_suite = _by_suite(cells, records, adapter)
    suites = {s: group_stats(members, records, facts) for s, members in by_suite.items()}
    identities = sorted({r["identities"]["protocol"]["identity"] for r in records.values()})
    task = {c: task_of(c, records.get(c), adapter) for c in cells}
    by_task: dict[str, list[str]] = {}
    for cell in cells:
        by_task.setdefault(task[cell], []).append(cell)
    summary = {
        "schema_version": SUMMARY_SCHEMA_VERSION, "run_kind": run_kind(records.values()), "run": manifest,
        "overall": group_stats(cells, records, facts),
        "suites": suites,
        "tasks": {label: dict(group_stats(members, records, facts), suite=_suite(members[0], records, adapter))
                  for label, members in by_task.items()},
        "protocol_identities": identities,
        "episodes": [episode_row(cell, records.get(cell), task=task[cell], suite=_suite(cell, records, adapter))
                     for cell in cells],
        "unattempted": [c for c in cells if c not in records or records[c]["outcome"]["outcome"] == Outcome.NOT_RUN],
        "unreadable_records": problems,
        "throughput": throughput(records),
    }
    # Goal progress beside the success rates (results/progress.py): only when records carry it.
    from pytest_libero.results.progress import add_progress

    add_progress(summary, cells, records, by_suite, by_task)
    from pytest_libero.results.schedule_summary import extend

    def group(group_cells: list[str]) -> dict[str, Any]:
        return group_stats(group_cells, records, facts)

    extend(summary, cells, group, by_suite)
    for seed_cells, block in _seed_blocks(summary, cells):  # full mode: per task x run seed
        seed_tasks: dict[str, list[str]] = {}
        for cell in seed_cells:
            seed_tasks.setdefault(task[cell], []).append(cell)
        block["tasks"] = {label: group(members) for label, members in seed_tasks.items()}
    summary.update(adapter.summary_blocks(cells, records, group, summary))
    if manifest.get("comparison"):  # a run against a finished run A (--libero-against)
        summary["sequential"] = sequential_block(manifest["comparison"], records, adapter)
    from pytest_libero.results.install import install_block

    install = install_block(records)  # the install check (docs/install-check.md)
    if install is not None:
        summary["install"] = install
    add_earlier_attempts(summary, run_dir)
    return summary


def load_against(comparison: Mapping[str, Any], adapter: BenchmarkAdapter,
                 records_a: dict[str, dict[str, Any]] | None = None) -> Against:
    """Run A's side of a comparison (run.json's "comparison"): its cells in their fixed order, and
    its outcomes. A's cells are its selection (its records when selection.json is missing); their
    tasks are the adapter's task labels of A's records (`records_a`, when the caller holds them)."""
    settings = Settings.from_dict(comparison)
    selection = load_selection(Path(settings.against))
    if records_a is None:
        records_a = read_records(Path(settings.against))[0]
    cells = selection or list(records_a)
    return Against.build(settings, cells, {c: task_of(c, records_a.get(c), adapter) for c in cells}, records_a)


def sequential_block(comparison: Mapping[str, Any], records: Mapping[str, dict[str, Any]],
                     adapter: BenchmarkAdapter) -> dict[str, Any]:
    """summary.json's "sequential": the comparison replayed from run.json, A's records and these."""
    against = load_against(comparison, adapter)
    if not against.order:
        return {**comparison, "error": f"run A's folder {comparison['against']} has no cells (moved or emptied?)"}
    return against.block({cell: record["outcome"]["outcome"] for cell, record in records.items()})


def add_earlier_attempts(summary: dict[str, Any], run_dir: Path) -> None:
    """summary.json's "earlier_attempts": the attempts a resume kept under attempts/ (never counted)."""
    from pytest_libero.results.attempts import earlier_attempts

    summary["earlier_attempts"] = earlier_attempts(run_dir)


def task_of(cell: str, record: dict[str, Any] | None, adapter: BenchmarkAdapter) -> str:
    """The per-task group of a cell: the adapter's task label of its record (LIBERO `libero_10-t03`;
    LIBERO-plus, one episode per variant, `libero_goal Camera Viewpoints`; RoboMemArena `robomemarena
    task 2`), the default id grammar's `suite-tNN` without a record, else "no record"."""
    if record is not None:
        label = adapter.task_label(record["cell"])
        if label is not None:
            return label
    parsed = parse_cell_id(cell)
    return f"{parsed[0]}-t{parsed[1]:02d}" if parsed is not None else "no record"


def _by_suite(cells: list[str], records: Mapping[str, dict[str, Any]],
              adapter: BenchmarkAdapter) -> dict[str, list[str]]:
    """The cells of each suite, the suite read from each record's `cell.suite` (any id grammar), in the
    adapter's suite order, then suites it does not list in the order they first appear."""
    members: dict[str, list[str]] = {suite: [] for suite in adapter.suites()}
    for cell in cells:
        suite = _suite(cell, records, adapter)
        if suite is not None:
            members.setdefault(suite, []).append(cell)
    return {suite: found for suite, found in members.items() if found}


def _suite(cell: str, records: Mapping[str, dict[str, Any]], adapter: BenchmarkAdapter) -> str | None:
    record = records.get(cell)
    if record is not None:
        return str(record["cell"]["suite"])
    return next((s for s in adapter.suites() if cell.startswith(s + "-")), None)


def _seed_blocks(summary: dict[str, Any], cells: list[str]) -> list[tuple[list[str], dict[str, Any]]]:
    """(cells of the seed, its block in summary["seeds"]["per_seed"]) for every run seed."""
    per_seed = (summary.get("seeds") or {}).get("per_seed") or {}
    by_seed: dict[str, list[str]] = {}
    for cell in cells:
        seed = parse_run_seed(cell)
        if seed is not None:
            by_seed.setdefault(str(seed), []).append(cell)
    return [(members, per_seed[seed]) for seed, members in by_seed.items() if seed in per_seed]


def episode_row(cell: str, record: dict[str, Any] | None, *, task: str | None = None,
                suite: str | None = None) -> dict[str, Any]:
    """One episode as the page, pytest-html and the terminal show it; `task` and `suite` as the summary
    groups it (task_of)."""
    where = {"task": task, "suite": suite, "init_index": None, "run_seed": parse_run_seed(cell),
             "category": None, "difficulty": None}
    if record is None:
        return {"cell": cell, "outcome": Outcome.NOT_RUN.value, "status": status(Outcome.NOT_RUN),
                "message": "no record", "counters": None, "video": None, "first_success_control": None,
                "recorded": False, **where}
    outcome = record["outcome"]
    video = record.get("video")
    benchmark = record["cell"].get("benchmark") or {}
    where.update(suite=record["cell"]["suite"], init_index=record["cell"].get("init_index"),
                 category=benchmark.get("category"), difficulty=benchmark.get("difficulty"))
    return {"cell": cell, "outcome": outcome["outcome"], "status": status(outcome["outcome"]),
            "termination": outcome["termination"], "message": outcome["message"], "counters": record["counters"],
            "first_success_control": outcome["first_success_control"],
            "first_success_policy_call": outcome["first_success_policy_call"],
            "video": video["path"] if video else None, "language": record["cell"]["language"],
            "progress": _progress_row(record.get("progress")),
            "kind": (record["identities"].get("model_profile") or {}).get("kind"), "recorded": True, **where}


def _progress_row(block: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An episode's goal progress as its row shows it: the shares, and which predicates held and when."""
    if block is None:
        return None
    return {"fraction_at_end": block["fraction_at_end"], "max_fraction": block["max_fraction"],
            "predicates": [[p["text"], p["held_at_end"], p["first_control"]] for p in block["predicates"]]}


def _short(stat: Mapping[str, Any]) -> str:
    return "-" if stat["rate"] is None else f"{100 * stat['rate']:.1f}% (n={stat['trials']})"


def rate_lines(summary: Mapping[str, Any]) -> list[str]:
    """Terminal lines: each suite's and each task's success rate (errors excluded) with its Wilson
    interval; in full mode with run seeds, each task's rate per seed on its line."""
    lines = [f"LIBERO suite {name}: {rate_text(g['success_rate_errors_excluded'])}"
             for name, g in summary["suites"].items()]
    per_seed = (summary.get("seeds") or {}).get("per_seed") or {}
    for label, group in (summary.get("tasks") or {}).items():
        line = f"LIBERO task {label}: {rate_text(group['success_rate_errors_excluded'])}"
        seeds = [f"seed {seed} {_short(block['tasks'][label]['success_rate_errors_excluded'])}"
                 for seed, block in per_seed.items() if label in block.get("tasks", {})]
        lines.append(line + ("; " + ", ".join(seeds) if seeds else ""))
    return lines


_CHART_KEY = "pytest-libero-chart"


def success_chart_png(summary: dict[str, Any], previous: bytes | None = None) -> bytes:
    """Bar chart of per-suite success rates (errors excluded) with their Wilson intervals
    (results/chart.py draws it).

    The chart's inputs are hashed into a PNG text chunk; when `previous` (the chart already in the
    run folder) carries the same hash it is returned as it is, so a rebuild whose rates did not
    change draws nothing.
    """
    import hashlib

    from pytest_libero.results.chart import Bar, draw_png

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
    key = hashlib.sha256(json.dumps([names, rates, lows, highs]).encode()).hexdigest()
    if previous is not None and f"{_CHART_KEY}\0{key}".encode() in previous:
        return previous
    bars = [Bar(name, rate, rate - low, rate + high) for name, rate, low, high in zip(names, rates, lows, highs,
                                                                                          strict=True)]
    return draw_png(bars, {_CHART_KEY: key})


def rebuild(run_dir: Path, adapter: BenchmarkAdapter,
            records: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write summary.json, success_rates.png and report.html into the run folder (`records`: see
    build_summary)."""
    from pytest_libero.results.page import render_page

    with gc_paused():
        summary = build_summary(run_dir, adapter, records)
    if len(summary["protocol_identities"]) > 1:
        from pytest_libero.errors import LiberoError

        raise LiberoError(f"{run_dir} mixes protocol identities {summary['protocol_identities']}: results of "
                          "different protocols (track, budget, scope, ...) never merge; split the records")
    write_json_atomic(run_dir / "summary.json", summary, sort_keys=False)  # the run's kind first
    chart_path = run_dir / "success_rates.png"
    previous = chart_path.read_bytes() if chart_path.is_file() else None
    chart = success_chart_png(summary, previous)
    if chart is not previous:
        write_bytes_atomic(run_dir / "success_rates.png", chart)
    write_bytes_atomic(run_dir / "report.html", render_page(summary, chart, adapter).encode())
    return summary
