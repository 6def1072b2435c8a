"""Plugin behaviour through pytester: options, collection ids, outcome mapping, accounting.

The bench service is replaced by the scripted FakeService (conftest fixture override), so these
tests exercise the plugin's own logic; tests/test_real_libero.py runs the real simulator.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes import fake_conftest
from pytest_libero.benchmarks.libero import catalog
FAKES = (Path(__file__).parent / "fakes.py").read_text()


POLICIES = """
import os
import numpy as np

HOLD = [0.0] * 6 + [-1.0]

class Hold:
    def __init__(self, n=8):
        self.n = n
    def reset(self, language): pass
    def act(self, observation): return np.tile(HOLD, (self.n, 1))
    def close(self): pass

class Broken(Hold):
    def act(self, observation): raise RuntimeError("weights not found")

def build(**kwargs):
    with open("builds.txt", "a") as f:
        f.write("built\\n")
    return Hold(**kwargs)

def broken():
    return Broken()

class Crash(Hold):
    def act(self, observation): os._exit(3)

def crash():
    return Crash()
"""


@pytest.fixture
def fake_run(pytester: pytest.Pytester):
    pytester.makepyfile(fakes=FAKES, policies=POLICIES)

    def run(*args: str, **service_kwargs):
        pytester.makeconftest(fake_conftest(**service_kwargs))
        return pytester.runpytest(*args)

    return run


def test_plan_collects_130_readable_ids(pytester):
    result = pytester.runpytest("--collect-only", "-q", "--libero-scope", "plan")
    ids = [line.split("[")[1].rstrip("]") for line in result.outlines if "::test_rollout[" in line]
    expected = [f"{e['suite']}-t{e['task_index']:02d}-s00" for e in catalog.entries()]
    assert ids == expected
    result.stdout.fnmatch_lines(["*130 tests collected*"])


@pytest.mark.parametrize("args, ids", [
    (["--libero-scope", "development"], ["libero_10-t00-s00", "libero_10-t01-s00"]),
    (["--libero-policy", "zero"], ["libero_10-t00-s00", "libero_10-t01-s00"]),
    (["--libero-scope", "task_coverage", "--libero-suite", "libero_goal", "--libero-task-ids", "7,2"],
     ["libero_goal-t02-s00", "libero_goal-t07-s00"]),
    (["--libero-scope", "plan", "-m", "libero_10"], [f"libero_10-t{i:02d}-s00" for i in range(10)]),
    # No --libero-* option: a -m expression that selects cells is a LIBERO run (the bundled cases).
    (["-m", "libero"], ["libero_10-t00-s00", "libero_10-t01-s00"]),
    (["-m", "libero_10 and not slow"], ["libero_10-t00-s00", "libero_10-t01-s00"]),
    (["--libero-video", "failures"], ["libero_10-t00-s00", "libero_10-t01-s00"]),
])
def test_collection_selects_cells(pytester, args, ids):
    result = pytester.runpytest("--collect-only", "-q", *args)
    assert [line.split("[")[1].rstrip("]") for line in result.outlines if "[" in line] == ids


def test_the_libero_ini_setting_is_a_libero_run_and_a_negated_marker_is_not(pytester):
    pytester.makepyfile(test_other="def test_plain():\n    pass\n")
    negated = pytester.runpytest("--collect-only", "-q", "-m", "not libero")
    assert negated.ret == pytest.ExitCode.OK  # this folder's own test, nothing bundled
    assert "1 test collected" in negated.stdout.str() and "[" not in negated.stdout.str()
    (pytester.path / "test_other.py").unlink()
    pytester.makeini("[pytest]\nlibero = true\n")
    result = pytester.runpytest("--collect-only", "-q")
    assert [line.split("[")[1].rstrip("]") for line in result.outlines if "[" in line] == [
        "libero_10-t00-s00", "libero_10-t01-s00"]


def test_k_matches_task_names(pytester):
    result = pytester.runpytest("--collect-only", "-q", "--libero-scope", "plan", "-k", "KITCHEN_SCENE3")
    expected = [e for e in catalog.entries() if "KITCHEN_SCENE3" in e["task_name"]]
    assert len(expected) >= 2
    result.stdout.fnmatch_lines([f"*{len(expected)}/130 tests collected*"])


@pytest.mark.parametrize("args, message", [
    (["--libero-scope", "development", "--libero-task-ids", "5"], "*allows LIBERO-10 task ids 0-4*"),
    (["--libero-policy", "zer0"], "*Unknown policy 'zer0'. Did you mean 'zero'? Available: *random, *zero*"),
    (["--libero-budget", "horizon", "--libero-max-policy-calls", "3"], "*applies only with --libero-budget decisions*"),
    (["--libero-policy", "missing.py:build"], "*file 'missing.py' does not exist*"),
    (["--libero-policy-kwargs", "{bad"], "*not valid JSON*"),
    (["--libero-replan-interval", "0"], "*--libero-replan-interval 0: must be at least 1*"),
    (["--libero-max-chunk-rows", "0"], "*--libero-max-chunk-rows 0: must be at least 1 (default 1024)*"),
])
def test_bad_options_are_usage_errors(pytester, args, message):
    result = pytester.runpytest("--collect-only", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_collection_imports_no_simulator_module(pytester):
    pytester.makeconftest("""
import sys
def pytest_collection_finish(session):
    heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('robosuite', 'mujoco', 'libero', 'torch'))
    print('HEAVY-MODULES', heavy, len(session.items))
""")
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-s", "--libero-scope", "plan")
    result.stdout.fnmatch_lines(["HEAVY-MODULES [] 130"])


def test_success_passes_and_records_first_success(fake_run):
    result = fake_run("--libero-policy", "policies.py:build", "--libero-task-ids", "0", "--libero-scope",
                      "development", success_at=7)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "libero_10-t00-s00 * PASSED * success/success: 2 calls, 2 decisions, 7 controls*"
        "first success at control 7 (policy call 2)*",
        "LIBERO: selected 1 = passed 1 + failed 0 + errored 0 + unattempted 0",
    ])


def test_truncation_fails_with_the_counters(fake_run):
    result = fake_run("--libero-policy", "policies.py:build", "--libero-budget", "decisions",
                      "--libero-max-policy-calls", "3", "--libero-replan-interval", "5")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "failure: no native success within the cap: 3 policy calls, 3 action decisions, "
        "15 executed controls, 10 settling controls*",
        "LIBERO: selected 2 = passed 0 + failed 2 + errored 0 + unattempted 0",
    ])


def test_adapter_exception_fails_as_policy_error(fake_run):
    result = fake_run("--libero-policy", "policies.py:broken", "--libero-task-ids", "1",
                      "--libero-scope", "development")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["policy_error: policy.act raised RuntimeError: weights not found*"])


def test_environment_fault_errors_the_item_only(fake_run):
    result = fake_run("--libero-policy", "policies.py:build", fault_at=1)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*env_error: fake simulator crashed*",
                                 "LIBERO: selected 2 = passed 0 + failed 0 + errored 2 + unattempted 0"])


def test_items_that_never_ran_are_unattempted_and_fail_the_run(fake_run):
    result = fake_run("--libero-scope", "development", "--libero-task-ids", "0,1,2", "-x",
                      "--libero-policy", "policies.py:build", "--libero-budget", "decisions",
                      "--libero-max-policy-calls", "1")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["libero_10-t02-s00 * UNATTEMPTED*",
                                 "LIBERO: selected 3 = passed 0 + failed 1 + errored 0 + unattempted 2"])


def test_policy_is_built_once_per_worker_with_kwargs(fake_run, pytester):
    result = fake_run("--libero-policy", "policies.py:build", "--libero-policy-kwargs", '{"n": 3}',
                      "--libero-budget", "decisions", "--libero-max-policy-calls", "2")
    result.stdout.fnmatch_lines(["*2 policy calls, 2 action decisions, 6 executed controls*"])
    assert (pytester.path / "builds.txt").read_text() == "built\n"


def test_conftest_hook_supplies_a_named_policy(pytester, fake_run):
    pytester.makepyfile(myhooks="""
import numpy as np
class Named:
    def reset(self, language): pass
    def act(self, observation): return np.zeros((4, 7))
    def close(self): pass
def pytest_libero_policy_names():
    return ["mymodel"]
def pytest_libero_make_policy(spec):
    return Named() if spec.name == "mymodel" else None
""")
    pytester.syspathinsert()
    result = fake_run("-p", "myhooks", "--libero-policy", "mymodel", "--libero-budget", "decisions",
                      "--libero-max-policy-calls", "2", success_at=6)
    result.assert_outcomes(passed=2)


def test_xdist_workers_report_the_same_ids_and_accounting(fake_run):
    result = fake_run("-n", "2", "--libero-scope", "development", "--libero-task-ids", "0,1,2,3",
                      "--libero-policy", "policies.py:build", "--libero-budget", "decisions",
                      "--libero-max-policy-calls", "2")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(["LIBERO: selected 4 = passed 0 + failed 4 + errored 0 + unattempted 0"])


def test_xdist_worker_crash_is_errored(fake_run):
    result = fake_run("-n", "2", "--libero-scope", "development", "--libero-task-ids", "0,1",
                      "--libero-policy", "policies.py:crash", "--libero-budget", "decisions",
                      "--libero-max-policy-calls", "2")
    result.stdout.fnmatch_lines(["LIBERO: selected 2 = passed 0 + failed 0 + errored 2 + unattempted 0"])
    assert result.ret != 0


MISMATCH_CONFTEST = """
import pytest
from fakes import FakeService

class Tampered(FakeService):
    mismatch = "1 installed LIBERO file(s) do not match: BDDL file differs: /x/libero_10/t.bddl"

@pytest.fixture(scope="session")
def libero_service():
    return Tampered()
"""


def test_source_mismatch_errors_every_item_naming_the_file(pytester):
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(MISMATCH_CONFTEST)
    result = pytester.runpytest("--libero-scope", "development")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*InventoryMismatch: 1 installed LIBERO file(s) do not match: "
                                 "BDDL file differs: /x/libero_10/t.bddl*"])


def test_source_mismatch_opt_out_warns_and_records_it_on_every_result(pytester):
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(MISMATCH_CONFTEST)
    result = pytester.runpytest("--libero-scope", "development", "--libero-allow-source-mismatch",
                                "--libero-budget", "decisions", "--libero-max-policy-calls", "1")
    result.assert_outcomes(failed=2, warnings=result.parseoutcomes()["warnings"])
    result.stdout.fnmatch_lines(["*LiberoSourceWarning: 1 installed LIBERO file(s) do not match*"])
    records = sorted((pytester.path / "reports").glob("zero/*/episodes/*.json"))
    assert [r.name for r in records] == ["libero_10-t00-s00.json", "libero_10-t01-s00.json"]
    for record in records:
        assert json.loads(record.read_text())["warnings"] == [
            "1 installed LIBERO file(s) do not match: BDDL file differs: /x/libero_10/t.bddl"]
