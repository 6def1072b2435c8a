"""Episode records as stored: the record schema (any benchmark's cell object, every schema version
still read), its two validators (the full one and the bulk one that checks block columns as blocks),
and the record's size at the longest horizon."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.chunk_evidence import executed_actions, observation_entries


def test_the_record_schema_takes_any_benchmarks_cell_object_with_its_name():
    import jsonschema

    from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
    from pytest_libero.core.data import SCHEMA_DIR
    from pytest_libero.core.protocol import Protocol
    from pytest_libero.results.records import placeholder_record

    validator = jsonschema.Draft202012Validator(
        json.loads((SCHEMA_DIR / "episode_record.schema.json").read_text(encoding="utf-8")))
    protocol = Protocol(spec=LIBERO_SPEC, scope="test", budget="horizon", replan_interval=5, max_policy_calls=None)
    record = placeholder_record("libero_10-t00-s00", "not_run", "never ran", adapter=LIBERO, context=None,
                                protocol=protocol.as_dict(), identity=protocol.identity,
                                policy_profile={"spec": {"name": "zero", "kwargs": {}}}, worker="main")
    other = json.loads(json.dumps(record))
    other["cell"].update(id="toy_red-n1", benchmark={"name": "toy", "colour": "red"})
    assert validator.is_valid(other)
    plus = json.loads(json.dumps(record))
    plus["cell"].update(id="libero_plus-libero_goal-v00003",
                        benchmark={"name": "libero_plus", "variant_id": 3, "category": "Light Conditions",
                                   "difficulty": 2})
    assert validator.is_valid(plus)
    del plus["cell"]["benchmark"]["variant_id"]
    assert validator.is_valid(plus)  # a benchmark's own shape is its package's (test_liberoplus.py checks it)
    del plus["cell"]["benchmark"]["name"]
    assert not validator.is_valid(plus)  # the generic schema needs the benchmark's name
    other["cell"]["id"] = "../escape"
    assert not validator.is_valid(other)  # an id is a file name in episodes/


def _episode_record(policy, protocol, service=None):
    """The record the plugin writes for one episode of `policy` against the fake service."""
    from fakes import FakeService
    from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
    from pytest_libero.core.cells import Cell
    from pytest_libero.core.rollout import run_episode
    from pytest_libero.results.records import episode_record

    result = run_episode(service or FakeService(), policy, Cell("libero_10", 0), protocol)
    return result, episode_record(result, adapter=LIBERO, context=None, protocol=protocol.as_dict(),
                                  policy_profile={"spec": {"name": "policy", "kwargs": {}}}, video=None,
                                  worker="main", started=time.time(),
                                  compute={"gpu": None, "rendering_backend": "egl"})


class RandomChunks:
    def __init__(self, rows, dtype=np.float32):
        self.rows, self.dtype, self.rng = rows, dtype, np.random.default_rng(0)

    def reset(self, language):
        pass

    def act(self, observation):
        return self.rng.uniform(-1, 1, (self.rows, 7)).astype(self.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [5, 500, 1024])
def test_a_520_control_record_stays_under_64_kb_whatever_the_chunk_length(tmp_path, rows, dtype):
    from pytest_libero.core.protocol import Protocol
    from pytest_libero.results.records import RunDir, write_record
    from pytest_libero.results.validation import record_problem

    protocol = Protocol(spec=LIBERO_SPEC, scope="test", budget="horizon", replan_interval=5, max_policy_calls=None)
    result, record = _episode_record(RandomChunks(rows, dtype), protocol)
    assert (result.executed_controls, result.policy_calls, result.outcome) == (520, 104, "failure")
    path = write_record(RunDir(tmp_path), record)
    assert path.stat().st_size < 64_000, path.stat().st_size  # float64 (numpy's default) is the larger
    stored = json.loads(path.read_text())
    assert record_problem(stored) is None and stored["schema_version"] == 3
    assert {shape[0] for shape in stored["chunks"]["shape"]} == {rows} and set(stored["chunks"]["dtype"]) == {
        np.dtype(dtype).name}
    assert executed_actions(stored["chunks"]).shape == (520, 7)
    assert observation_entries(stored["observations"]) == result.observations  # the engine's hex digests back


def _schema_1(record):
    """`record` as schema 1 stored it: every returned row as numbers (tests/synthetic_runs.as_schema_1)."""
    from synthetic_runs import as_schema_1

    return json.loads(json.dumps(as_schema_1(record)))


@pytest.fixture(scope="module")
def small_record():
    from pytest_libero.core.protocol import Protocol

    protocol = Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=5, max_policy_calls=3)
    return json.loads(json.dumps(_episode_record(RandomChunks(8), protocol)[1]))


@pytest.mark.parametrize("benchmark", ["libero", "libero_plus", "robomemarena"])
def test_every_benchmarks_protocol_settings_make_a_valid_record(small_record, benchmark):
    """The protocol settings are the benchmark's spec's: one without reference horizons (RoboMemArena is
    capped by its own control_cap) writes none, and its records must still read (they once did not)."""
    from pytest_libero import benchmarks
    from pytest_libero.core.protocol import Protocol
    from pytest_libero.results.validation import is_valid_record, record_problem

    protocol = Protocol(spec=benchmarks.get(benchmark).spec, scope="test", budget="decisions", replan_interval=5,
                        max_policy_calls=3)
    record = json.loads(json.dumps(small_record))
    record["identities"]["protocol"] = {"identity": protocol.identity, "settings": protocol.as_dict()}
    assert ("horizons" in protocol.as_dict()) == (benchmark != "robomemarena")
    assert record_problem(record) is None and is_valid_record(record)


def test_schema_1_records_still_read_by_report_merge_resume_and_the_action_reader(tmp_path, small_record):
    from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
    from pytest_libero.core.protocol import Protocol
    from pytest_libero.results.records import RunDir
    from pytest_libero.results.resume import completed_cells
    from pytest_libero.results.summary import build_summary, load_run
    from pytest_libero.results.validation import record_problem
    from synthetic_runs import write_run, full_mode_cells

    old = _schema_1(small_record)
    assert record_problem(old) is None and old["chunks"][0]["returned"] and isinstance(old["observations"], list)
    np.testing.assert_array_equal(executed_actions(old["chunks"]), executed_actions(small_record["chunks"]))
    protocol = Protocol(spec=LIBERO_SPEC, scope="test", budget="horizon", replan_interval=5, max_policy_calls=None)
    (run,) = write_run(tmp_path / "old", full_mode_cells(3), protocol, LIBERO, controls=20, schema=1)
    assert json.loads(RunDir(run).record_path("libero_spatial-t00-s00").read_text())["schema_version"] == 1
    _, _, records, problems = load_run(run)
    assert len(records) == 3 and problems == []
    assert build_summary(run, LIBERO)["overall"]["selected"] == 3
    kept = completed_cells(run, protocol.as_dict(), protocol.identity, {"name": "synthetic", "kwargs": {}})
    assert sorted(kept) == sorted(records)


def test_schema_2_records_with_hex_digests_still_read_everywhere(tmp_path, small_record):
    from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
    from pytest_libero.core.protocol import Protocol
    from pytest_libero.results.resume import completed_cells
    from pytest_libero.results.summary import build_summary, load_run
    from pytest_libero.results.validation import record_problem
    from synthetic_runs import as_schema_2, full_mode_cells, write_run

    old = json.loads(json.dumps(as_schema_2(small_record)))
    assert record_problem(old) is None and len(old["chunks"]["sha256"]) == 64 * len(old["chunks"]["policy_call"])
    assert observation_entries(old["observations"]) == observation_entries(small_record["observations"])
    assert len(small_record["chunks"]["sha256"]) == 44 * len(small_record["chunks"]["policy_call"])  # schema 3
    protocol = Protocol(spec=LIBERO_SPEC, scope="test", budget="horizon", replan_interval=5, max_policy_calls=None)
    (run,) = write_run(tmp_path / "old", full_mode_cells(3), protocol, LIBERO, controls=20, schema=2)
    _, _, records, problems = load_run(run)
    assert len(records) == 3 and problems == [] and {r["schema_version"] for r in records.values()} == {2}
    assert build_summary(run, LIBERO)["overall"]["selected"] == 3
    kept = completed_cells(run, protocol.as_dict(), protocol.identity, {"name": "synthetic", "kwargs": {}})
    assert sorted(kept) == sorted(records)


@pytest.mark.parametrize("mutate", [
    pytest.param(lambda r: r.pop("counters"), id="missing-required-field"),
    pytest.param(lambda r: r["chunks"]["executed"].__setitem__(1, "5"), id="wrong-type-in-array"),
    pytest.param(lambda r: r["chunks"]["shape"].__setitem__(0, [5, 7, 1]), id="three-dimensional-shape"),
    pytest.param(lambda r: r["observations"]["sha256"].update(agentview="x" * 64), id="hash-not-base64"),
    pytest.param(lambda r: r["observations"]["sha256"].update(agentview="a" * 64), id="hex-hash-in-schema-3"),
    pytest.param(lambda r: r["chunks"].update(sha256=r["chunks"]["sha256"][:-1]), id="hash-column-cut-short"),
    pytest.param(lambda r: r["chunks"].pop("sha256"), id="chunks-without-hashes"),
    pytest.param(lambda r: r["chunks"].update(returned=[[0.0] * 7]), id="schema-2-with-numbers"),
    pytest.param(lambda r: r.update(schema_version=4), id="unknown-schema-version"),
    pytest.param(lambda r: r.update(schema_version=2), id="base64-hashes-in-schema-2"),
    pytest.param(lambda r: r.update(chunks=[]), id="schema-2-with-an-array-of-chunks"),
    pytest.param(lambda r: r["chunks"].update(end={"policy_call": 3, "stop": False}), id="stop-not-true"),
])
def test_fast_validation_rejects_what_the_schema_rejects(small_record, mutate):
    import copy

    import jsonschema

    from pytest_libero.core.data import SCHEMA_DIR
    from pytest_libero.results.validation import is_valid_record, record_problem

    schema = jsonschema.Draft202012Validator(
        json.loads((SCHEMA_DIR / "episode_record.schema.json").read_text(encoding="utf-8")))
    assert schema.is_valid(small_record) and record_problem(small_record) is None
    assert is_valid_record(small_record)
    record = copy.deepcopy(small_record)
    mutate(record)
    assert not schema.is_valid(record)
    assert record_problem(record) is not None
    assert not is_valid_record(record)  # the bulk validator (block columns) agrees


def test_the_bulk_validator_checks_the_block_columns_as_blocks_and_defers_to_the_schema(small_record):
    """The bulk validator takes the per-element `items` of every block column out of the compiled
    schema (the speed: benchmarks/bench_evidence_scale.py) and checks the columns itself, at least as
    strictly; what it refuses, the full schema decides (5.0 is an integer to JSON Schema)."""
    import copy

    from pytest_libero.results.validation import _schema, bulk_schema, is_valid_record, record_problem

    stripped, columns, rules = bulk_schema(_schema())
    assert rules is not None and "allOf" not in stripped  # the version rules are checked in Python
    assert {(block, column) for block, column, _ in columns} == {
        ("observations", "policy_call"), ("observations", "executed_controls"), ("observations", "state"),
        ("chunks", "policy_call"), ("chunks", "executed"), ("chunks", "dtype"), ("chunks", "shape"),
        ("chunks", "actions_b64")}
    assert all("items" not in stripped["properties"][block]["properties"][column] for block, column, _ in columns)
    record = copy.deepcopy(small_record)
    record["chunks"]["executed"][0] = 5.0
    assert record_problem(record) is None and is_valid_record(record)
    record["chunks"]["shape"][0] = [5, 0]  # a zero-length dimension: minimum 1
    assert record_problem(record) is not None and not is_valid_record(record)
    state = copy.deepcopy(small_record)
    state["observations"]["state"] = [[0.0] * 8 for _ in state["observations"]["policy_call"]]
    assert record_problem(state) is None and is_valid_record(state)
    state["observations"]["state"][1] = [0.0] * 10
    assert record_problem(state) is not None and not is_valid_record(state)


@pytest.mark.parametrize("mutate", [
    pytest.param(lambda r: r["chunks"][0]["returned"][1].__setitem__(3, "0.5"), id="string-among-numbers"),
    pytest.param(lambda r: r["chunks"][0]["returned"][0].__setitem__(0, 1.5), id="number-out-of-bounds"),
    pytest.param(lambda r: r.update(chunks={}), id="schema-1-with-a-block"),
    pytest.param(lambda r: r["observations"][0]["sha256"].update(agentview=7), id="wrong-type-in-observations"),
])
def test_fast_validation_rejects_what_the_schema_rejects_in_schema_1(small_record, mutate):
    import jsonschema

    from pytest_libero.core.data import SCHEMA_DIR
    from pytest_libero.results.validation import is_valid_record, record_problem

    schema = jsonschema.Draft202012Validator(
        json.loads((SCHEMA_DIR / "episode_record.schema.json").read_text(encoding="utf-8")))
    record = _schema_1(small_record)
    assert schema.is_valid(record) and record_problem(record) is None and is_valid_record(record)
    mutate(record)
    assert not schema.is_valid(record)
    assert record_problem(record) is not None and not is_valid_record(record)
