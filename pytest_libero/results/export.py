"""`python -m pytest_libero export RUN --format csv|parquet`: one row per episode, for analysis.

The rows are the final attempts in episodes/ (as `report` reads them: schema-valid records,
results/summary.py `read_records`), in the selection's order, then any recorded cell the selection
does not name. The columns are fixed (COLUMNS, documented in docs/sinks-and-export.md), then the
benchmark's own cell fields (`benchmark.<field>`, LIBERO-plus's category and difficulty) and the
timing entries (`timing.<name>`) the records have, in name order. CSV writes an absent value as an
empty field, booleans as true/false; parquet (pyarrow) gives each column one type.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Callable, Mapping

from pytest_libero.errors import LiberoError
from pytest_libero.results.summary import load_manifest, load_selection, read_records

FORMATS = ("csv", "parquet")
Row = dict[str, Any]


def _predicates(record: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    progress = record.get("progress")
    return list(progress.get("predicates") or []) if isinstance(progress, Mapping) else None


def _count(record: Mapping[str, Any], held: Callable[[Mapping[str, Any]], bool]) -> int | None:
    predicates = _predicates(record)
    return None if predicates is None else sum(1 for p in predicates if held(p))


def _path(*keys: str) -> Callable[[Mapping[str, Any]], Any]:
    def get(record: Mapping[str, Any]) -> Any:
        value: Any = record
        for key in keys:
            value = value.get(key) if isinstance(value, Mapping) else None
        return value
    return get


# (column, type, how it is read from a record, what it is). The run id comes from run.json.
COLUMNS: tuple[tuple[str, str, Callable[[Mapping[str, Any]], Any], str], ...] = (
    ("cell", "string", _path("cell", "id"), "the cell id"),
    ("suite", "string", _path("cell", "suite"), "its suite"),
    ("task_index", "int", _path("cell", "task_index"), "task index in the suite"),
    ("task_name", "string", _path("cell", "task_name"), "task name"),
    ("init_index", "int", _path("cell", "init_index"), "init-state index"),
    ("seed", "int", _path("cell", "seed"), "environment seed"),
    ("run_seed", "int", _path("cell", "run_seed"), "full mode --libero-seeds repetition (empty otherwise)"),
    ("language", "string", _path("cell", "language"), "the instruction delivered"),
    ("benchmark", "string", lambda r: _path("cell", "benchmark", "name")(r) or "libero", "benchmark adapter"),
    ("outcome", "string", _path("outcome", "outcome"), "success, failure, policy_error, env_error, crashed, not_run"),
    ("termination", "string", _path("outcome", "termination"), "what ended the episode"),
    ("success", "bool", lambda r: _path("outcome", "outcome")(r) == "success", "outcome is success"),
    ("terminated", "bool", _path("outcome", "terminated"), "ended by success or a stop"),
    ("truncated", "bool", _path("outcome", "truncated"), "ended by the control cap"),
    ("first_success_control", "int", _path("outcome", "first_success_control"), "control of first native success"),
    ("first_success_policy_call", "int", _path("outcome", "first_success_policy_call"), "its policy call"),
    ("settle_success", "bool", _path("outcome", "settle_success"), "success already during settling"),
    ("message", "string", _path("outcome", "message"), "the outcome's one line"),
    ("policy_calls", "int", _path("counters", "policy_calls"), "policy calls"),
    ("action_decisions", "int", _path("counters", "action_decisions"), "action chunks accepted"),
    ("executed_controls", "int", _path("counters", "executed_controls"), "controls executed"),
    ("settling_controls", "int", _path("counters", "settling_controls"), "settling controls before the policy"),
    ("control_cap", "int", _path("counters", "control_cap"), "the episode's control cap"),
    ("cap_source", "string", _path("counters", "cap_source"), "where the cap comes from"),
    ("max_policy_calls", "int", _path("counters", "max_policy_calls"), "D (decisions budget; empty otherwise)"),
    ("replan_interval", "int", _path("counters", "replan_interval"), "K"),
    ("progress.fraction_at_end", "float", _path("progress", "fraction_at_end"),
     "share of goal predicates holding at the end (empty: the record has no progress)"),
    ("progress.max_fraction", "float", _path("progress", "max_fraction"), "most of them that ever held together"),
    ("progress.predicates", "int", lambda r: _count(r, lambda p: True), "goal predicates"),
    ("progress.predicates_reached", "int", lambda r: _count(r, lambda p: p.get("first_control") is not None),
     "predicates that held at some control"),
    ("progress.predicates_held_at_end", "int", lambda r: _count(r, lambda p: bool(p.get("held_at_end"))),
     "predicates holding at the end"),
    ("worker", "string", _path("worker"), "the process that ran it"),
    ("finished", "string", _path("finished"), "UTC time the record was written"),
    ("video", "string", _path("video", "path"), "video path in the run folder (empty: none)"),
    ("protocol_identity", "string", _path("identities", "protocol", "identity"), "protocol identity hash"),
    ("source_revision", "string", _path("identities", "source", "revision"), "upstream benchmark source revision"),
    ("pytest_libero_git", "string", _path("identities", "versions", "pytest-libero-git"),
     "pytest-libero git revision"),
    ("policy", "string", _path("identities", "model_profile", "spec", "name"), "policy name"),
    ("policy_kwargs", "string", lambda r: _json(_path("identities", "model_profile", "spec", "kwargs")(r)),
     "policy kwargs (JSON)"),
    ("policy_kind", "string", _path("identities", "model_profile", "kind"), "profile kind (capability, ...)"),
    ("adapter_sha256", "string", _path("identities", "model_profile", "adapter_sha256"),
     "sha256 of the policy adapter's file (empty when not known)"),
)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def table(run_dir: Path) -> tuple[list[str], dict[str, str], list[Row], list[str]]:
    """(column names, column types, rows, unreadable record files) of a run folder."""
    manifest = load_manifest(run_dir)
    if not manifest and not (run_dir / "episodes").is_dir():
        raise LiberoError(f"{run_dir} is not a pytest-libero run folder (no run.json or episodes/); pass "
                          "reports/<profile>/<run-id>")
    records, _, problems = read_records(run_dir)
    order = [cell for cell in load_selection(run_dir) if cell in records]
    order += sorted(set(records) - set(order))
    run_id = str(manifest.get("run_id", run_dir.name))
    extra_benchmark = sorted({key for cell in order for key in (records[cell]["cell"].get("benchmark") or {})
                              if key != "name"})
    extra_timing = sorted({key for cell in order for key in (records[cell].get("timing") or {})})
    types = {"run_id": "string", **{name: kind for name, kind, _, _ in COLUMNS}}
    rows: list[Row] = []
    for cell in order:
        record = records[cell]
        row: Row = {"run_id": run_id}
        row.update((name, read(record)) for name, _, read, _ in COLUMNS)
        fields = record["cell"].get("benchmark") or {}
        row.update((f"benchmark.{key}", fields.get(key)) for key in extra_benchmark)
        timing = record.get("timing") or {}
        row.update((f"timing.{key}", timing.get(key)) for key in extra_timing)
        rows.append(row)
    for name in [f"benchmark.{key}" for key in extra_benchmark] + [f"timing.{key}" for key in extra_timing]:
        types[name] = _inferred([row[name] for row in rows])
    for row in rows:
        for name, kind in types.items():
            row[name] = _as(row[name], kind)
    return list(types), types, rows, problems


def _inferred(values: list[Any]) -> str:
    present = [value for value in values if value is not None]
    if present and all(isinstance(value, bool) for value in present):
        return "bool"
    if present and all(isinstance(value, int) and not isinstance(value, bool) for value in present):
        return "int"
    if present and all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in present):
        return "float"
    return "string"


def _as(value: Any, kind: str) -> Any:
    """`value` as a column of `kind` holds it (None stays None; a non-text value of a text column is JSON)."""
    if value is None:
        return None
    if kind == "float":
        return float(value)
    if kind == "string" and not isinstance(value, str):
        return json.dumps(value, sort_keys=True)
    return value


def write_csv(path: Path, columns: list[str], rows: list[Row]) -> None:
    def text(value: Any) -> Any:
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return value

    with open(path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([text(row[name]) for name in columns])


ARROW_TYPES = {"string": "string", "int": "int64", "float": "float64", "bool": "bool_"}


def write_parquet(path: Path, columns: list[str], types: Mapping[str, str], rows: list[Row], run_id: str) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise LiberoError("--format parquet needs pyarrow: pip install 'pytest-libero[parquet]' (or use "
                          "--format csv)") from None
    schema = pa.schema([(name, getattr(pa, ARROW_TYPES[types[name]])()) for name in columns],
                       metadata={"pytest_libero.run_id": run_id, "pytest_libero.export": "episodes"})
    data = {name: [row[name] for row in rows] for name in columns}
    pq.write_table(pa.Table.from_pydict(data, schema=schema), str(path))


def export(run_dir: Path, fmt: str, output: Path | None = None) -> tuple[Path, int, list[str]]:
    """Write the table of `run_dir` as `fmt` to `output` (default RUN/episodes.<fmt>); return (the
    file, its rows, unreadable record files)."""
    if fmt not in FORMATS:
        raise LiberoError(f"--format {fmt}: unknown format; choose csv or parquet")
    columns, types, rows, problems = table(run_dir)
    path = output if output is not None else run_dir / f"episodes.{fmt}"
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.part")  # a reader never sees half a table
    if fmt == "csv":
        write_csv(part, columns, rows)
    else:
        write_parquet(part, columns, types, rows, str(load_manifest(run_dir).get("run_id", run_dir.name)))
    part.replace(path)
    return path, len(rows), problems
