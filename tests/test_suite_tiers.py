"""The suite's own tiers and budget (tests/suite_tiers.py): the simulator check fails an unmarked test
that starts a bench service and passes a marked one; the budget names the file over its share, only
in the full gate; the area markers select the files of one area."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import suite_tiers

TESTS = Path(__file__).resolve().parent

# The inner runs use a stand-in name for the service, so the outer run's own watch (which looks for
# the real module's name) does not charge this test with the stand-in processes.
STAND_IN = "stand-in-bench-service-for-the-tier-check"
INNER_CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import suite_tiers
from suite_tiers import SuiteTiers

suite_tiers.SERVER_MODULE = {STAND_IN.encode()!r}
suite_tiers.BUDGET_SHARE = 0.6
suite_tiers.TESTS = __import__("pathlib").Path(__file__).resolve().parent / "tests"

def pytest_configure(config):
    config.addinivalue_line("markers", "real_libero: real")
    config.pluginmanager.register(SuiteTiers(config), "suite-tiers")
"""
STARTS_A_SERVICE = f"""
import subprocess, sys, pytest

def start():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)", {STAND_IN!r}])
    child.wait()

@pytest.mark.real_libero
def test_marked():
    start()

def test_unmarked():
    start()

def test_plain():
    pass
"""


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(INNER_CONFTEST)
    return pytester


def test_an_unmarked_test_that_starts_a_bench_service_fails_and_a_marked_one_passes(inner):
    (inner.path / "tests").mkdir()
    (inner.path / "tests" / "test_services.py").write_text(STARTS_A_SERVICE)
    # -k: not the full gate, whose budget this one-file run would fail
    result = inner.runpytest_subprocess("tests", "-p", "no:cacheprovider", "-k", "not nothing")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_unmarked*",
                                 "*test_unmarked started a bench service (pid *) but is not marked real_libero*"])
    assert "test_marked started" not in result.stdout.str()


def test_the_full_gate_fails_naming_the_file_over_its_share_and_a_selection_does_not(inner):
    (inner.path / "tests").mkdir()
    (inner.path / "tests" / "test_slow.py").write_text("import time\ndef test_slow():\n    time.sleep(1.2)\n")
    (inner.path / "tests" / "test_quick.py").write_text("def test_quick():\n    pass\n")
    result = inner.runpytest_subprocess("tests", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*time per test file (full gate; budget 60% of * s each)*",
                                 "*FAILED budget: tests/test_slow.py took * s, *% of the suite's * s (at most 60%)*"])
    assert "test_quick.py took" not in result.stdout.str()
    for selection in (["tests/test_slow.py"], ["tests", "-m", "not real_libero"]):
        again = inner.runpytest_subprocess(*selection, "-p", "no:cacheprovider")
        assert again.ret == pytest.ExitCode.OK, (selection, again.stdout.str())
        assert "budget" not in again.stdout.str()


@pytest.mark.parametrize(("durations", "over"), [
    ({f"f{i}": 1.0 for i in range(20)}, []),
    ({"a": 95.0, "b": 5.0}, ["a"]),
    ({"a": 1.0, "b": 1.0}, ["a", "b"]),
    ({"a": 10.0, **{f"f{i}": 10.0 for i in range(9)}}, []),  # exactly the share is within it
    ({}, []),
])
def test_over_budget_is_a_share_of_the_summed_file_times(durations, over):
    assert [f.file for f in suite_tiers.over_budget(durations, 0.10)] == over


def test_area_markers_select_their_files_and_every_area_has_a_file():
    files = sorted(p.name for p in TESTS.glob("test_*.py"))
    for area, prefixes in suite_tiers.AREAS.items():
        assert any(name.startswith(prefixes) for name in files), f"area {area}: no file matches {prefixes}"
    assert suite_tiers.areas_of("test_robomemarena_real.py") == ["robomemarena"]
    assert suite_tiers.areas_of("test_liberoplus_control.py") == ["libero_plus"]
    assert suite_tiers.areas_of("test_contract.py") == []


def test_the_watch_finds_a_service_below_this_process_at_any_depth():
    # The child's command line names the service only in pieces; its child's names it whole.
    inner_code = (f"import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(3)', "
                  f"{STAND_IN!r} + '-depth'])")
    child = subprocess.Popen([sys.executable, "-c", inner_code])
    try:
        watch = suite_tiers.SimulatorWatch(os.getpid(), STAND_IN.encode() + b"-depth")
        for _ in range(40):
            found = watch.take()
            if found:
                break
            time.sleep(0.05)
        assert found and child.pid not in found  # the grandchild, not the child
        assert watch.take() == set()  # a live service is charged once
    finally:
        child.kill()
        child.wait()
