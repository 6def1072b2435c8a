"""Outside a LIBERO run the plugin stays out of the way (plugin/__init__.py's docstring), and a test
that needs one says how to make one.

The installed wheel's side (environment, nvidia-smi, files, xdist workers, with a fake nvidia-smi
listing two GPUs) is tests/test_packaging.py's; these run in process on the development install.
"""

from __future__ import annotations

import importlib.util

import pytest

from pytest_libero.plugin import NOT_A_LIBERO_RUN

# In process, pytester's run finds this package already imported (not a plugin line of its own).
QUIET = ("-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning")
CASES = list(importlib.util.find_spec("pytest_libero.cases").submodule_search_locations)[0]


def plugin_lines(result: pytest.RunResult) -> list[str]:
    """Output lines that mention LIBERO, but for pytest's own list of the installed plugins."""
    return [line for line in result.outlines + result.errlines
            if "libero" in line.lower() and not line.startswith("plugins:")]


@pytest.mark.parametrize("args", [[], ["-m", "not libero"], ["-m", "slow"]])
def test_a_plain_run_has_no_header_no_lines_and_no_files(pytester, args):
    pytester.makepyfile(test_user="def test_plain():\n    pass\n")
    result = pytester.runpytest(*QUIET, *args)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    assert plugin_lines(result) == []
    assert sorted(p.name for p in pytester.path.iterdir()) == ["test_user.py"]


def test_a_test_asking_for_a_libero_fixture_outside_a_run_errors_naming_the_fix(pytester):
    pytester.makepyfile(test_user="""
        def test_cell(libero_cell):
            pass

        def test_run(libero_run):
            pass
    """)
    result = pytester.runpytest(*QUIET)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_cell*", NOT_A_LIBERO_RUN,
                                 "*ERROR at setup of test_run*", NOT_A_LIBERO_RUN])
    assert not (pytester.path / "reports").exists()


def test_the_bundled_cases_named_without_a_libero_option_error_naming_the_fix(pytester):
    """What plain `pytest` does in this checkout (its testpaths is cases/): one item, errored with
    the fix; nothing is simulated, nothing is written."""
    result = pytester.runpytest(*QUIET, CASES)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_rollout*", NOT_A_LIBERO_RUN])
    assert sorted(p.name for p in pytester.path.iterdir()) == []


def test_the_same_cases_with_a_libero_option_are_a_run(pytester):
    result = pytester.runpytest(*QUIET, "--collect-only", "-q", "--libero-scope", "development",
                                CASES)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*test_rollout[[]libero_10-t00-s00]", "*test_rollout[[]libero_10-t01-s00]"])
