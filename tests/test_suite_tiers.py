"""The suite's own tiers and budget (tests/suite_tiers.py): a bench service started under the fast
tier's variable refuses the simulator, and the suite fails the unmarked test that asked for it
(even one that swallowed the error) while a real_libero test runs without it; the budget names the
file over its share, only in the full gate; the area markers select the files of one area."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import suite_tiers

from pytest_libero.runtime.server import NO_SIMULATOR_ENV, RefuseSimulator

TESTS = Path(__file__).resolve().parent

INNER_CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from pathlib import Path
import suite_tiers

def pytest_configure(config):
    for name in suite_tiers.SLOW_MARKERS:
        config.addinivalue_line("markers", name + ": slow")
    suite_tiers.register(config, tests=Path(__file__).resolve().parent / "tests", share=0.6)
"""
STARTS_A_SERVICE = """
import os, pytest
from pytest_libero.benchmarks import get, service_env
from pytest_libero.errors import EnvironmentFault
from pytest_libero.runtime.server import NO_SIMULATOR_ENV
from pytest_libero.runtime.service import BenchService

def test_unmarked_swallows_the_refusal():
    service = BenchService(env=service_env(get("libero"), None))
    try:
        with pytest.raises(EnvironmentFault, match="mujoco .*may not be imported here: " + NO_SIMULATOR_ENV
                                                   + " is set .*mark the test real_libero"):
            service.check_sources()
    finally:
        service.close()

def test_unmarked_imports_nothing():
    assert os.environ[NO_SIMULATOR_ENV]

@pytest.mark.real_libero
def test_marked_runs_without_the_variable():
    assert NO_SIMULATOR_ENV not in os.environ
"""


def test_this_unmarked_test_runs_under_the_variable_and_its_process_refuses_the_simulator(tmp_path):
    assert os.environ[NO_SIMULATOR_ENV]
    (suites,) = [f for f in sys.meta_path if isinstance(f, RefuseSimulator)]
    assert suites.record == os.environ[NO_SIMULATOR_ENV]
    own = RefuseSimulator(str(tmp_path / "own.txt"))  # not the suite's: that one would fail this test
    assert own.find_spec("json") is None and own.find_spec("mujocoish") is None
    with pytest.raises(ImportError, match="mujoco._structs .*may not be imported here.*mark the test real_libero"):
        own.find_spec("mujoco._structs")
    assert "imported mujoco._structs" in (tmp_path / "own.txt").read_text(encoding="utf-8")


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(INNER_CONFTEST)
    (pytester.path / "tests").mkdir()
    return pytester


def test_an_unmarked_test_whose_service_refused_fails_naming_the_marker_and_a_marked_one_passes(inner):
    """The inner unmarked test's bench service (LIBERO's service module) refuses MuJoCo, naming the
    variable and the marker; the test swallows that, and the suite fails it at teardown all the same."""
    (inner.path / "tests" / "test_services.py").write_text(STARTS_A_SERVICE)
    outer = os.environ[NO_SIMULATOR_ENV]
    # -k: not the full gate, whose budget this one-file run would fail
    result = inner.runpytest("tests", "-p", "no:cacheprovider", "-k", "not zzz")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_unmarked_swallows_the_refusal*",
                                 "*test_unmarked_swallows_the_refusal is not marked real_libero but tried to run "
                                 "the simulator*",
                                 "*pid * (*runtime/server.py *) imported mujoco*"])
    assert "ERROR at teardown of test_unmarked_imports_nothing" not in result.stdout.str()
    assert os.environ[NO_SIMULATOR_ENV] == outer  # the inner run's tests gave the outer value back
    fast = inner.runpytest("tests", "-p", "no:cacheprovider", "-m", "fast", "--collect-only", "-q")
    fast.stdout.fnmatch_lines(["*2/3 tests collected (1 deselected)*"])


def test_what_a_test_sets_in_the_environment_does_not_reach_the_next_test(inner, monkeypatch):
    # Here too: a real_libero test's in-process simulator sets LIBERO_CONFIG_PATH, and a later file's
    # nested run (test_liberoplus_real.py's adversary) found it in its policy's process.
    monkeypatch.setenv("PYTEST_LIBERO_OUTER", "outer")
    monkeypatch.delenv("PYTEST_LIBERO_LEAKED", raising=False)
    (inner.path / "tests" / "test_env.py").write_text(
        "import os, pytest\n"
        "@pytest.fixture\n"
        "def sets_too():\n"
        "    os.environ['PYTEST_LIBERO_FROM_FIXTURE'] = '1'\n"
        "    yield\n"
        "def test_sets(sets_too):\n"
        "    os.environ['PYTEST_LIBERO_LEAKED'] = '1'\n"
        "    os.environ['PYTEST_LIBERO_OUTER'] = 'changed'\n"
        "def test_next_sees_the_environment_the_first_found():\n"
        "    assert 'PYTEST_LIBERO_LEAKED' not in os.environ and 'PYTEST_LIBERO_FROM_FIXTURE' not in os.environ\n"
        "    assert os.environ['PYTEST_LIBERO_OUTER'] == 'outer'\n")
    result = inner.runpytest("tests/test_env.py", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert os.environ["PYTEST_LIBERO_OUTER"] == "outer" and "PYTEST_LIBERO_LEAKED" not in os.environ


def test_the_full_gate_fails_naming_the_file_over_its_share_and_a_selection_does_not(inner):
    (inner.path / "tests" / "test_slow.py").write_text("import time\ndef test_slow():\n    time.sleep(1.2)\n")
    (inner.path / "tests" / "test_quick.py").write_text("def test_quick():\n    pass\n")
    result = inner.runpytest("tests", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*time per test file (full gate; budget 60% of * s each)*",
                                 "*FAILED budget: tests/test_slow.py took * s, *% of the suite's * s (at most 60%)*"])
    assert "test_quick.py took" not in result.stdout.str()
    for selection in (["tests/test_slow.py"], ["tests", "-m", "fast"]):
        again = inner.runpytest(*selection, "-p", "no:cacheprovider")
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
    assert suite_tiers.areas_of("test_robomemarena_real.py") == ["memarena"]
    assert suite_tiers.areas_of("test_liberoplus_control.py") == ["libero_plus"]
    assert suite_tiers.areas_of("test_contract.py") == []


def test_a_plain_subprocess_inherits_the_variable():
    """Subprocess pytest runs and venvs see it (the refusal itself is the bench service's)."""
    done = subprocess.run([sys.executable, "-c", f"import os; print(os.environ[{NO_SIMULATOR_ENV!r}])"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == os.environ[NO_SIMULATOR_ENV], done.stderr


FAKE_INSTALL = ("mkdir -p .venv/bin && printf '#!/bin/sh\\necho pytest ran with \"$*\"\\nexit $CODE\\n' "
                "> .venv/bin/pytest && chmod +x .venv/bin/pytest")


@pytest.mark.parametrize(("code", "status"), [(0, 0), (1, 1), (5, 1)])
def test_ci_run_times_its_install_and_tests_phases_split_at_the_pytest_invocation(tmp_path, code, status):
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_bytes((TESTS.parent / ".ci" / "run").read_bytes())
    (tmp_path / "README.md").write_text(f"<!-- ci: test command -->\n```sh\n{FAKE_INSTALL} && .venv/bin/pytest "
                                        "tests -n 2 --durations=30\n```\n")
    done = subprocess.run(["bash", ".ci/run"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "CODE": str(code)})
    assert done.returncode == status, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == f"ci: phase install: {FAKE_INSTALL}"
    assert re.fullmatch(r"ci: phase install took \d+ s \(exit status 0; CPU \d+ s user \+ \d+ s system\)", lines[2])
    assert lines[3:5] == ["ci: phase tests: .venv/bin/pytest tests -n 2 --durations=30",
                          "pytest ran with tests -n 2 --durations=30"]
    assert re.fullmatch(rf"ci: phase tests took \d+ s \(exit status {code}; CPU \d+ s user \+ \d+ s system\)",
                        lines[5]), lines[5]
    assert lines[6].startswith("ci: total ")


def test_ci_run_refuses_a_command_without_the_pytest_invocation(tmp_path):
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_bytes((TESTS.parent / ".ci" / "run").read_bytes())
    (tmp_path / "README.md").write_text("<!-- ci: test command -->\n```sh\ntrue && pytest tests\n```\n")
    done = subprocess.run(["bash", ".ci/run"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "has no ' && .venv/bin/pytest '" in done.stderr, done.stderr
