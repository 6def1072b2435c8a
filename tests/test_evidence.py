"""Evidence: records, videos, summary, HTML, crash handling and crash-safe writes (fake service)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakes import fake_conftest
from evidence_helpers import check_videos, html_rows, records, run_dirs
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.chunk_evidence import executed_actions
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


def test_chart_is_reused_when_its_rates_are_unchanged_and_redrawn_when_they_change() -> None:
    from pytest_libero.results.summary import success_chart_png

    stat = {"rate": 0.5, "ci95": [0.2, 0.8], "trials": 4}
    summary = {"suites": {"libero_10": {"success_rate_errors_excluded": dict(stat)}},
               "overall": {"success_rate_errors_excluded": dict(stat)}}
    first = success_chart_png(summary)
    assert first.startswith(b"\x89PNG")
    assert success_chart_png(summary, first) is first
    summary["overall"]["success_rate_errors_excluded"]["rate"] = 0.75
    redrawn = success_chart_png(summary, first)
    assert redrawn is not first and redrawn != first and redrawn.startswith(b"\x89PNG")
    assert success_chart_png(summary, b"\x89PNG not ours") != b"\x89PNG not ours"
