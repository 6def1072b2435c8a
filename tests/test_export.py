"""`python -m pytest_libero export RUN --format csv|parquet`: one row per episode, every column
checked against the records it came from (synthetic run folders: tests/synthetic_runs.py), read
back with the csv module and with pyarrow. And the numbers the sinks log (results/sinks)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from synthetic_runs import write_libero_plus_run, write_libero_run

# Every fixed column (docs/sinks-and-export.md) and where the test expects it in a record; written
# out here, apart from pytest_libero/results/export.py, so that a wrong path there fails.
FIXED = {
    "cell": ("cell", "id"), "suite": ("cell", "suite"), "task_index": ("cell", "task_index"),
    "task_name": ("cell", "task_name"), "init_index": ("cell", "init_index"), "seed": ("cell", "seed"),
    "run_seed": ("cell", "run_seed"), "language": ("cell", "language"),
    "outcome": ("outcome", "outcome"), "termination": ("outcome", "termination"),
    "terminated": ("outcome", "terminated"), "truncated": ("outcome", "truncated"),
    "first_success_control": ("outcome", "first_success_control"),
    "first_success_policy_call": ("outcome", "first_success_policy_call"),
    "settle_success": ("outcome", "settle_success"), "message": ("outcome", "message"),
    "policy_calls": ("counters", "policy_calls"), "action_decisions": ("counters", "action_decisions"),
    "executed_controls": ("counters", "executed_controls"), "settling_controls": ("counters", "settling_controls"),
    "control_cap": ("counters", "control_cap"), "cap_source": ("counters", "cap_source"),
    "max_policy_calls": ("counters", "max_policy_calls"), "replan_interval": ("counters", "replan_interval"),
    "progress.fraction_at_end": ("progress", "fraction_at_end"), "progress.max_fraction": ("progress", "max_fraction"),
    "worker": ("worker",), "finished": ("finished",), "video": ("video", "path"),
    "protocol_identity": ("identities", "protocol", "identity"),
    "source_revision": ("identities", "source", "revision"),
    "pytest_libero_git": ("identities", "versions", "pytest-libero-git"),
    "policy": ("identities", "model_profile", "spec", "name"), "policy_kind": ("identities", "model_profile", "kind"),
    "adapter_sha256": ("identities", "model_profile", "adapter_sha256"),
}


def at(record: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = record
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def expected_row(record: dict[str, Any], run_id: str) -> dict[str, Any]:
    row = {name: at(record, path) for name, path in FIXED.items()}
    row.update(run_id=run_id, benchmark=(record["cell"].get("benchmark") or {}).get("name", "libero"),
               success=record["outcome"]["outcome"] == "success",
               policy_kwargs=json.dumps(record["identities"]["model_profile"]["spec"]["kwargs"], sort_keys=True))
    predicates = (record.get("progress") or {}).get("predicates")
    row["progress.predicates"] = None if predicates is None else len(predicates)
    row["progress.predicates_reached"] = (None if predicates is None
                                          else sum(p["first_control"] is not None for p in predicates))
    row["progress.predicates_held_at_end"] = None if predicates is None else sum(p["held_at_end"] for p in predicates)
    row.update((f"benchmark.{k}", v) for k, v in (record["cell"].get("benchmark") or {}).items() if k != "name")
    row.update((f"timing.{k}", v) for k, v in record["timing"].items())
    return row


def as_csv_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def records_of(folder: Path) -> list[dict[str, Any]]:
    """The records in the selection's order (the export's row order)."""
    cells = json.loads((folder / "selection.json").read_text())["cells"]
    return [json.loads((folder / "episodes" / f"{cell}.json").read_text()) for cell in cells]


def export(*args: str) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it (a process of its own)."""
    return subprocess.run([sys.executable, "-m", "pytest_libero", "export", *args], capture_output=True, text=True,
                          timeout=120)


def export_here(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """The same command line through the same `main`, in this process (no interpreter start)."""
    from pytest_libero.__main__ import main

    code = main(["export", *args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["export", *args], code, out, err)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("export")
    (libero,) = write_libero_run(base / "libero", count=6)
    (plus,) = write_libero_plus_run(base / "plus", base / "work", count=5)
    return {"libero": libero, "plus": plus}


@pytest.mark.parametrize("kind", ["libero", "plus"])
def test_csv_has_one_row_per_episode_and_every_column_from_its_record(folders, kind, capsys):
    folder = folders[kind]
    done = export(str(folder)) if kind == "libero" else export_here(capsys, str(folder))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {folder / 'episodes.csv'}: {len(records_of(folder))} episode(s)"
    with open(folder / "episodes.csv", newline="", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    records = records_of(folder)
    assert len(rows) == len(records)
    for row, record in zip(rows, records, strict=True):
        expected = expected_row(record, folder.name)
        assert set(row) == set(expected)  # no column the test does not check
        assert row == {name: as_csv_text(value) for name, value in expected.items()}
    if kind == "plus":  # LIBERO-plus's cell fields, flattened
        assert {"benchmark.category", "benchmark.difficulty", "benchmark.variant_id"} <= set(rows[0])
        assert rows[0]["benchmark"] == "libero_plus"


@pytest.mark.parametrize("kind", ["libero", "plus"])
def test_parquet_reads_back_with_pyarrow_typed_and_equal_to_the_records(folders, kind, tmp_path, capsys):
    import pyarrow.parquet as pq

    folder = folders[kind]
    out = tmp_path / "deep" / "table.parquet"
    done = export_here(capsys, str(folder), "--format", "parquet", "--output", str(out))
    assert done.returncode == 0, done.stderr
    table = pq.read_table(out)
    assert table.schema.metadata[b"pytest_libero.run_id"] == folder.name.encode()
    types = {field.name: str(field.type) for field in table.schema}
    assert types["executed_controls"] == "int64" and types["success"] == "bool"
    assert types["timing.wall_s"] == "double" and types["progress.fraction_at_end"] == "double"
    assert types["cell"] == "string" and types["first_success_control"] == "int64"
    rows = table.to_pylist()
    records = records_of(folder)
    assert len(rows) == len(records)
    for row, record in zip(rows, records, strict=True):
        expected = expected_row(record, folder.name)
        assert set(row) == set(expected)
        assert row == expected


def test_an_unreadable_record_is_named_and_left_out(tmp_path, capsys):
    (folder,) = write_libero_run(tmp_path / "run", count=3)
    (folder / "episodes" / "broken.json").write_text("{not json")
    done = export_here(capsys, str(folder), "--output", str(tmp_path / "out.csv"))
    assert done.returncode == 0, done.stderr
    assert f"unreadable record (not exported): {folder / 'episodes' / 'broken.json'}" in done.stderr
    assert "3 episode(s)" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["{run}", "--format", "xlsx"], "--format xlsx: unknown format; choose csv or parquet"),
    (["{tmp}"], "{tmp} is not a pytest-libero run folder (no run.json or episodes/); pass "
                "reports/<profile>/<run-id>"),
    (["{tmp}/missing"], "{tmp}/missing is not a pytest-libero run folder"),
])
def test_bad_input_is_an_error_naming_the_value_and_the_fix(folders, tmp_path, capsys, args, message):
    values = {"run": str(folders["libero"]), "tmp": str(tmp_path)}
    done = export_here(capsys, *(arg.format(**values) for arg in args))
    assert done.returncode == 2
    assert f"python -m pytest_libero export: error: {message.format(**values)}" in done.stderr
    assert not list(tmp_path.glob("*.csv"))


PROGRESS = {"predicates": [{"text": "(on bowl_1 plate_1)", "held_at_end": True, "first_control": 40},
                           {"text": "(on cup_1 plate_1)", "held_at_end": False, "first_control": 90}],
            "fraction_at_end": 0.5, "max_fraction": 1.0}


def test_progress_columns_and_sink_metrics_read_the_progress_block():
    """A record with goal progress (issue 35's optional block): its fractions and predicate counts."""
    from pytest_libero.results import export as exporting
    from pytest_libero.results.sinks.common import episode_metrics

    record = {"cell": {"id": "libero_10-t00-s00", "suite": "libero_10"}, "counters": {"executed_controls": 120},
              "outcome": {"outcome": "failure", "first_success_control": None}, "progress": PROGRESS}
    columns = {name: read(record) for name, _, read, _ in exporting.COLUMNS}
    assert columns["progress.fraction_at_end"] == 0.5 and columns["progress.max_fraction"] == 1.0
    assert columns["progress.predicates"] == 2 and columns["progress.predicates_reached"] == 2
    assert columns["progress.predicates_held_at_end"] == 1
    metrics = episode_metrics(record)
    assert metrics == {"success": 0.0, "executed_controls": 120.0, "progress_fraction_at_end": 0.5,
                       "progress_max_fraction": 1.0, "predicates_reached": 2.0, "predicates_held_at_end": 1.0}
    without = episode_metrics(dict(record, progress=None))
    assert "progress_fraction_at_end" not in without and without["success"] == 0.0


def test_every_column_is_documented_in_order():
    from pytest_libero.results import export as exporting

    doc = (Path(__file__).resolve().parents[1] / "docs" / "sinks-and-export.md").read_text(encoding="utf-8")
    table = doc.split("| column | type | what |", 1)[1].split("\n\n", 1)[0]
    documented = [line.split("`")[1] for line in table.splitlines() if line.startswith("| `")]
    names = ["run_id", *(name for name, _, _, _ in exporting.COLUMNS)]
    assert documented[:len(names)] == names
