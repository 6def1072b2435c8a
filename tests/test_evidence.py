"""Evidence: records, videos, summary, HTML, crash handling and crash-safe writes (fake service)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fakes import fake_conftest
from evidence_helpers import check_videos, html_rows, records, run_dirs
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.chunk_evidence import executed_actions, observation_entries
from pytest_libero.results.files import is_temporary, write_json_atomic
from pytest_libero.core.statistics import wilson

FAKES = (Path(__file__).parent / "fakes.py").read_text()
POLICY = """
import os, time
import numpy as np

class Hold:
    def __init__(self, crash_on=None, pause=0.0):
        self.crash_on, self.pause = crash_on, pause
    def reset(self, language): pass
    def act(self, observation):
        if self.crash_on and os.environ.get("PYTEST_XDIST_WORKER") == self.crash_on:
            os._exit(7)
        time.sleep(self.pause)
        return np.tile([0.0] * 6 + [-1.0], (5, 1))
    def close(self): pass
"""


@pytest.fixture
def project(pytester):
    pytester.makepyfile(fakes=FAKES, policy=POLICY)

    def configure(success_at=None):
        pytester.makeconftest(fake_conftest(success_at=success_at))

    configure()
    return configure


def test_wilson_interval_is_scipys_to_the_last_bit_and_brackets_the_rate():
    import random

    from scipy.special import ndtri
    from scipy.stats import binomtest

    from pytest_libero.core.statistics import Z95

    stat = wilson(3, 10)
    assert stat["rate"] == 0.3 and stat["ci95"] == pytest.approx([0.1078, 0.6032], abs=1e-4)
    assert wilson(0, 0) == {"rate": None, "ci95": None, "successes": 0, "trials": 0}
    assert Z95 == float(ndtri(0.975))
    pick = random.Random(15)
    pairs = [(k, n) for n in range(1, 41) for k in range(n + 1)]
    pairs += [(k, n) for n in (pick.randint(41, 20000) for _ in range(300)) for k in (0, n, pick.randint(0, n))]
    for k, n in pairs:  # the same floats as scipy's: summary.json stays byte-identical
        interval = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson(k, n)["ci95"] == [float(interval.low), float(interval.high)], (k, n)


def test_atomic_json_leaves_no_temporary(tmp_path):
    write_json_atomic(tmp_path / "a" / "x.json", {"k": 1})
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["x.json"]
    assert is_temporary(Path(".x.123.tmp.json")) and not is_temporary(Path("x.json"))


def test_two_cells_leave_records_videos_summary_and_html(pytester, project):
    project(success_at=12)
    result = pytester.runpytest("--libero-scope", "development", "--libero-policy", "policy.py:Hold",
                                "--libero-budget", "decisions", "--libero-max-policy-calls", "2",
                                "--html=review/report.html")
    result.assert_outcomes(failed=2)
    (run_dir,) = run_dirs(pytester.path / "reports")
    found = records(run_dir)
    assert sorted(found) == ["libero_10-t00-s00", "libero_10-t01-s00"]
    check_videos(run_dir, found)
    record = found["libero_10-t00-s00"]
    assert record["video"]["frames"] == 3  # two delivered observations + the final state
    assert record["observations"]["policy_call"] == [1, 2]
    assert record["chunks"]["executed"] == [5, 5] and record["chunks"]["shape"] == [[5, 7], [5, 7]]
    assert executed_actions(record["chunks"]).tolist() == [[0.0] * 6 + [-1.0]] * 10
    assert record["private"]["bddl_sha256"] == "0" * 64 and record["cell"]["seed"] == 20260907
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["overall"]["selected"] == 2 and summary["overall"]["failed"] == 2
    assert summary["overall"]["success_rate_errors_excluded"]["ci95"] == pytest.approx([0.0, 0.6576], abs=1e-4)
    assert summary["run"]["command_line"] and summary["run"]["protocol"]["identity"].startswith("sha256:")
    html = (pytester.path / "review" / "report.html").read_text()
    for cell in found:
        assert f"../reports/policy.py-Hold/{run_dir.name}/videos/{cell}.mp4" in html
    assert "LIBERO results" in html and "data:image/png;base64," in html
    assert f'href="../reports/policy.py-Hold/{run_dir.name}/report.html"' in html  # the review page, linked
    assert "<h2 id=\"per-task\">Per task</h2>" in html and "libero_10-t01" in html
    standalone = (run_dir / "report.html").read_text()
    assert '"videos/libero_10-t01-s00.mp4"' in standalone and "selected 2 = passed 0" in standalone
    assert standalone.count("<video") == 0  # a video element is made only when an episode is opened
    assert summary["tasks"]["libero_10-t00"]["failed"] == 1 and summary["tasks"]["libero_10-t01"]["selected"] == 1
    assert summary["episodes"][0]["task"] == "libero_10-t00" and summary["episodes"][0]["suite"] == "libero_10"
    assert "LIBERO task libero_10-t00: 0.0% [0.0, 79.3] (n=1)" in result.stdout.str()
    assert "LIBERO suite libero_10: 0.0% [0.0, 65.8] (n=2)" in result.stdout.str()


def test_success_marks_the_first_success_frame_and_keeps_only_failure_videos_on_request(pytester, project):
    project(success_at=7)
    result = pytester.runpytest("--libero-scope", "development", "--libero-task-ids", "0",
                                "--libero-policy", "policy.py:Hold", "--libero-video", "failures")
    result.assert_outcomes(passed=1)
    (run_dir,) = run_dirs(pytester.path / "reports")
    record = records(run_dir)["libero_10-t00-s00"]
    assert record["video"] is None and not list((run_dir / "videos").glob("*"))
    assert record["outcome"]["first_success_control"] == 7 and record["outcome"]["terminated"]
    assert record["outcome"]["settle_success"] is False  # the service's settling evidence is kept


def test_settle_success_is_optional_so_older_records_stay_valid():
    import jsonschema

    from pytest_libero.core.data import SCHEMA_DIR
    from pytest_libero.core.policy import PolicySpec
    from pytest_libero.core.protocol import Protocol
    from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
    from pytest_libero.results.records import placeholder_record

    schema = json.loads((SCHEMA_DIR / "episode_record.schema.json").read_text(encoding="utf-8"))
    protocol = Protocol(spec=LIBERO_SPEC, scope="test", budget="horizon", replan_interval=5, max_policy_calls=None)
    record = placeholder_record("libero_10-t00-s00", "not_run", "never ran", adapter=LIBERO, context=None,
                                protocol=protocol.as_dict(),
                                identity=protocol.identity,
                                policy_profile={"spec": PolicySpec("zero").as_dict(), "kind": "unknown"},
                                worker="main")
    assert "settle_success" not in record["outcome"]
    jsonschema.validate(json.loads(json.dumps(record)), schema)
    for value in (True, False, None):
        record["outcome"]["settle_success"] = value
        jsonschema.validate(record, schema)


def test_report_command_rebuilds_from_episode_files_alone(pytester, project):
    pytester.runpytest("--libero-scope", "development", "--libero-policy", "policy.py:Hold",
                       "--libero-budget", "decisions", "--libero-max-policy-calls", "1")
    (run_dir,) = run_dirs(pytester.path / "reports")
    before = json.loads((run_dir / "summary.json").read_text())
    for derived in ("summary.json", "report.html", "success_rates.png"):
        (run_dir / derived).unlink()
    done = subprocess.run([sys.executable, "-m", "pytest_libero", "report", str(run_dir)],
                          capture_output=True, text=True, check=True)
    assert "selected 2 = passed 0 + failed 2 + errored 0 + unattempted 0" in done.stdout
    after = json.loads((run_dir / "summary.json").read_text())
    assert after["overall"] == before["overall"] and after["episodes"] == before["episodes"]


def test_report_command_names_a_wrong_folder(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pytest_libero", "report", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "is not a pytest-libero run folder" in done.stderr


def test_xdist_worker_crash_is_an_errored_row_everywhere(pytester, project):
    result = pytester.runpytest("-n", "2", "--libero-scope", "development", "--libero-policy", "policy.py:Hold",
                                "--libero-policy-kwargs", '{"crash_on": "gw0"}', "--libero-budget", "decisions",
                                "--libero-max-policy-calls", "1", "--html=report.html")
    result.stdout.fnmatch_lines(["*worker crashed while running libero_10-t0?-s00*",
                                 "LIBERO: selected 2 = passed 0 + failed 1 + errored 1 + unattempted 0"])
    (run_dir,) = run_dirs(pytester.path / "reports")
    outcomes = {c: r["outcome"]["outcome"] for c, r in records(run_dir).items()}
    assert sorted(outcomes.values()) == ["crashed", "failure"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["overall"]["errored"] == 1 and summary["overall"]["by_outcome"]["crashed"] == 1
    crashed = next(c for c, o in outcomes.items() if o == "crashed")
    rows = html_rows((pytester.path / "report.html").read_text())
    results = {nodeid.split("[")[1].rstrip("]"): [r["result"] for r in entries] for nodeid, entries in rows.items()}
    assert results[crashed] == ["Error"] and sorted(results) == sorted(outcomes)
    row = json.dumps(rows[f"test_libero.py::test_rollout[{crashed}]"])
    assert "crashed while running" in row and "<td>crashed</td>" in row


@pytest.mark.parametrize("records_before_kill", [0, 1, 3])
def test_sigkill_of_the_whole_run_leaves_consistent_evidence(pytester, project, records_before_kill):
    env = dict(os.environ, PYTHONPATH=str(pytester.path))
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--libero-scope", "development",
         "--libero-task-ids", "0,1,2,3,4", "--libero-policy", "policy.py:Hold", "--libero-policy-kwargs",
         '{"pause": 0.05}', "--libero-budget", "decisions", "--libero-max-policy-calls", "6"],
        cwd=pytester.path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    reports = pytester.path / "reports"
    while time.monotonic() < deadline and process.poll() is None:
        done = [p for p in reports.glob("*/*/episodes/*.json") if not is_temporary(p)]
        if len(done) >= records_before_kill and list(reports.glob("*/*/selection.json")):
            break
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    (run_dir,) = run_dirs(pytester.path / "reports")
    found = records(run_dir)
    assert len(found) >= records_before_kill
    check_videos(run_dir, found)
    for partial in run_dir.rglob(".*"):
        assert is_temporary(partial), partial
    done = subprocess.run([sys.executable, "-m", "pytest_libero", "report", str(run_dir)],
                          capture_output=True, text=True, check=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    o = summary["overall"]
    assert o["selected"] == 5 == o["passed"] + o["failed"] + o["errored"] + o["unattempted"]
    assert o["unattempted"] == 5 - len(found) and summary["unreadable_records"] == []
    assert f"unattempted {5 - len(found)}" in done.stdout


def test_report_refuses_to_merge_different_protocols(pytester, project):
    pytester.runpytest("--libero-scope", "development", "--libero-policy", "policy.py:Hold",
                       "--libero-budget", "decisions", "--libero-max-policy-calls", "1")
    (run_dir,) = run_dirs(pytester.path / "reports")
    path = run_dir / "episodes" / "libero_10-t01-s00.json"
    record = json.loads(path.read_text())
    record["identities"]["protocol"]["identity"] = "sha256:" + "f" * 16
    path.write_text(json.dumps(record))
    done = subprocess.run([sys.executable, "-m", "pytest_libero", "report", str(run_dir)],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "mixes protocol identities" in done.stderr and "never merge" in done.stderr


def test_control_rate_video_has_a_frame_per_control(pytester, project):
    project(success_at=8)
    result = pytester.runpytest("--libero-scope", "development", "--libero-task-ids", "0", "--libero-policy",
                                "policy.py:Hold", "--libero-video-rate", "control")
    result.assert_outcomes(passed=1)
    (run_dir,) = run_dirs(pytester.path / "reports")
    record = records(run_dir)["libero_10-t00-s00"]
    check_videos(run_dir, records(run_dir))
    # the first observation, then one frame per executed control; the 8th control succeeded
    assert record["video"] == {"path": "videos/libero_10-t00-s00.mp4", "frames": 9, "fps": 20,
                               "first_success_frame": 8}


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


def test_a_chunk_over_the_bound_fails_the_item_as_a_policy_fault_of_its_own_protocol(pytester, project):
    result = pytester.runpytest("--libero-scope", "development", "--libero-task-ids", "0", "--libero-policy",
                                "policy.py:Hold", "--libero-budget", "decisions", "--libero-max-policy-calls", "2",
                                "--libero-max-chunk-rows", "4", "--libero-video", "none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*chunk of 5 rows is longer than the bound of 4 rows per chunk*"])
    (run_dir,) = run_dirs(pytester.path / "reports")
    record = records(run_dir)["libero_10-t00-s00"]
    assert record["outcome"]["outcome"] == "policy_error"
    assert "--libero-max-chunk-rows N" in record["outcome"]["message"]
    assert record["chunks"]["end"]["invalid"]["shape"] == [5, 7] and record["chunks"]["executed"] == []
    assert record["identities"]["protocol"]["settings"]["max_chunk_rows"] == 4


def test_merge_links_the_records_it_read_and_summarizes_them_as_a_report_would(tmp_path):
    from pytest_libero.__main__ import main
    from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
    from pytest_libero.results.records import RunDir
    from pytest_libero.results.summary import build_summary
    from synthetic_runs import as_schema_1, write_libero_run

    shards = write_libero_run(tmp_path / "shards", 12, controls=20, shards=2)
    old = RunDir(shards[1]).record_path("libero_spatial-t00-s01")  # one shard still holds a schema-1 record
    write_json_atomic(old, as_schema_1(json.loads(old.read_text())))
    out = tmp_path / "merged"
    assert main(["merge", str(out), *map(str, shards)]) == 0
    merged = json.loads((out / "summary.json").read_text())
    fresh = json.loads(json.dumps(build_summary(out, LIBERO)))  # reads and checks every merged record
    assert merged["overall"] == fresh["overall"] and merged["episodes"] == fresh["episodes"]
    assert merged["overall"]["selected"] == 12 and merged["unreadable_records"] == fresh["unreadable_records"] == []
    linked = RunDir(out).record_path("libero_spatial-t00-s01")
    assert linked.stat().st_ino == old.stat().st_ino and json.loads(linked.read_text())["schema_version"] == 1
