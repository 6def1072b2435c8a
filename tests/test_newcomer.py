"""A newcomer's mistakes (issue 18): each is one line naming the cause and the fix, exit 4, before any
item runs, and nothing is recorded (least of all env_error, the simulator's fault)."""

from __future__ import annotations

import json

import pytest

ADAPTER = """
import numpy as np

class NoClose:
    def __init__(self, seed=0):
        self.seed = seed
    def reset(self, language):
        pass
    def act(self, observation):
        return np.zeros(7)

def build(seed=0):
    return NoClose(seed)

class NoReset:
    def act(self, observation):
        return np.zeros(7)

def broken():
    raise RuntimeError("no server at localhost:8000")
"""


@pytest.mark.parametrize(("args", "cause", "fix"), [
    (["--libero-policy", "my_policy.py:buld"], "has no attribute 'buld'", "use my_policy.py:build"),
    (["--libero-policy", "my_policy.py:build", "--libero-policy-kwargs", '{"sed": 1}'],
     "takes no keyword 'sed'", "only parameters of build(seed=0)"),
    (["--libero-policy", "my_policy.py:NoReset"], "without reset()", "give it reset(language)"),
    (["--libero-policy", "my_policy.py:broken"], "RuntimeError: no server at localhost:8000",
     "my_policy.py:"),
    (["--libero-policy", "my_policy.py:build", "-n", "1"], None, None),  # placeholder: replaced below
    # Under xdist a factory that raises fails on the worker (the controller's dry check cannot call it).
    (["--libero-policy", "my_policy.py:broken", "-n", "1"], "RuntimeError: no server at localhost:8000",
     "my_policy.py:"),
    (["--libero-policy", "my_policy.py"], "Unknown policy 'my_policy.py'", "my_policy.py:FACTORY"),
    (["--libero-policy", "my_policy:build"], "Unknown policy 'my_policy:build'", "my_policy.py:build"),
])
def test_a_policy_that_cannot_be_built_is_one_line_and_exit_4(pytester, args, cause, fix):
    if cause is None:  # under xdist the controller checks the factory and its kwargs
        args, cause, fix = ([*args[:2], "--libero-policy-kwargs", '{"sed": 1}', "-n", "1"],
                            "takes no keyword 'sed'", "only parameters of build(seed=0)")
    pytester.makepyfile(my_policy=ADAPTER)
    run = pytester.runpytest_subprocess if "-n" in args else pytester.runpytest  # in-process: cheaper
    # Under xdist the controller's preflight would build a cell before a worker tried the policy.
    preflight = ["--libero-preflight", "off"] if "-n" in args else []
    result = run(*args, *preflight, "--libero-output", "out", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.errlines
    assert cause in errors[0] and fix in errors[0], errors[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    records = [json.loads(path.read_text()) for path in (pytester.path / "out").glob("*/*/episodes/*.json")]
    if "-n" in args and "broken" in args[1]:  # stopped on a worker, after the controller made the run folder
        assert records and {r["outcome"]["outcome"] for r in records} == {"not_run"}
        assert all("no server at localhost:8000" in r["outcome"]["message"] for r in records)
    else:
        assert not (pytester.path / "out").exists()  # no record at all, so none says env_error


def test_close_is_optional_and_a_conftest_make_policy_hook_alone_serves_a_name(pytester):
    """No pytest_libero_policy_names hook: the make_policy hook serves 'downgrasp'; its policy has no
    close(). The policy is built before the first item; an unknown name is refused in one line."""
    pytester.makepyfile(my_policy=ADAPTER)
    pytester.makeconftest("""
        import my_policy

        BUILT = []

        def pytest_libero_make_policy(spec):
            if spec.name == "downgrasp":
                BUILT.append(spec.kwargs)
                return my_policy.build(**spec.kwargs)

        BEFORE_ITEMS = []

        def pytest_runtestloop(session):
            BEFORE_ITEMS.append(list(BUILT))
    """)
    pytester.makepyfile(test_probe="""
        import conftest

        def test_built_once_before(libero_cell, libero_policy):
            assert conftest.BEFORE_ITEMS == [[{"seed": 3}]]  # built once, before the first item
            assert conftest.BUILT == [{"seed": 3}] and libero_policy.seed == 3
    """)
    result = pytester.runpytest_subprocess("test_probe.py", "--libero-policy", "downgrasp",
                                           "--libero-policy-kwargs", '{"seed": 3}', "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result = pytester.runpytest_subprocess("test_probe.py", "--libero-policy", "downgrap")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and "Unknown policy 'downgrap'" in errors[0], result.errlines


@pytest.mark.parametrize("xdist", [False, True])
def test_paths_that_hold_no_libero_case_fail_with_one_line_saying_why(pytester, xdist):
    """A LIBERO run (its header selects cells) whose named paths hold no LIBERO case: not `collected 0
    items` or a silent pass of the folder's own tests, but exit 4 and the line naming the fix."""
    pytester.makepyfile(test_mine="def test_plain():\n    pass\n")
    # Under xdist the controller's preflight (before any worker collects) would build a cell first.
    xdist_args = ["-n", "1", "--libero-preflight", "off"] if xdist else []
    args = ["test_mine.py", "--libero-scope", "development", "-p", "no:cacheprovider", *xdist_args]
    result = (pytester.runpytest_subprocess if xdist else pytester.runpytest)(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.errlines
    assert "the header selects 2 cell(s), but the paths collected (test_mine.py) hold no LIBERO case" in errors[0]
    assert "name no path to run the bundled cases" in errors[0]
    deselected = pytester.runpytest("test_mine.py", "--libero-scope", "development", "-k", "plain")
    assert deselected.ret == pytest.ExitCode.USAGE_ERROR  # checked before -k deselects anything
