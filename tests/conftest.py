from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# Pytester's in-process runs drop the modules a run imported when it ends. Tests that import
# LIBERO in this process load part of matplotlib (LIBERO imports matplotlib.cm); a later
# in-process run that draws the summary chart would then import the rest of matplotlib anew
# beside the old part, with two copies of its classes. Importing what the chart uses here, once,
# keeps one copy.
import matplotlib.backends.backend_agg  # noqa: E402,F401
import matplotlib.figure  # noqa: E402,F401


# The suite itself runs under xdist (README's test command: -n 2). Its workers' variables must not
# reach the pytest runs the tests make (subprocesses and pytester's in-process runs), whose own
# fakes and helpers read them (the plugin names its worker from xdist's config, not from these:
# test_gpus.py checks a run started with them set still records worker main).
XDIST_WORKER_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


def pytest_configure(config: pytest.Config) -> None:
    for name in XDIST_WORKER_VARIABLES:
        os.environ.pop(name, None)
    config.addinivalue_line("markers", "real_libero: runs real LIBERO rollouts (CPU rendering; slower)")
    config.addinivalue_line("markers", "slurm: starts a real one-node Slurm cluster (needs root and the slurm-wlm and "
                                       "munge packages; deselect with -m 'not slurm')")
    config.addinivalue_line("markers", "browser: opens the review page in headless Chromium (Debian's chromium and "
                                       "chromium-driver packages, selenium); deselect with -m 'not browser'")
    # The tiers (area markers, `fast`, the simulator refusal for tests not marked real_libero) and the
    # full gate's per-file budget: tests/suite_tiers.py (docs/testing.md).
    import suite_tiers

    suite_tiers.register(config)


# The slowest files, slowest first (seconds in one process on a 2-core CPU machine, 2026-12-02). Run
# first, they leave the short files to fill in the end, so the two workers of `-n 2 --dist loadfile
# --no-loadscope-reorder` (which hands out files in collection order; without that option xdist
# orders files by their number of tests, which put these few-test files last) finish together
# instead of one running a long file alone at the end. The other files, and the tests inside each
# file, keep their order.
SLOWEST_FILES = ("test_packaging.py", "test_robomemarena_real.py", "test_performance_identity.py",
                 "test_sequential_real.py", "test_liberoplus_real.py", "test_slurm_real.py",
                 "test_install_check_real.py", "test_scale_real.py", "test_real_libero.py",
                 "test_order_independence.py", "test_resume.py", "test_adapters_real.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # a stable sort


# The zero policy over the development scope's default cells (libero_10 tasks 0 and 1): 3 policy
# calls of 5 controls, with the HTML page. Shared by the tests that check it (the decisions budget
# and evidence; the zero policy failing the demo's cell), so the real run is made once.
ZERO_DEVELOPMENT_RUN = ("--libero-scope", "development", "--libero-policy", "zero", "--libero-budget", "decisions",
                        "--libero-max-policy-calls", "3", "--libero-replan-interval", "5", "--html=report.html")


@pytest.fixture(scope="session")
def zero_development_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pytest.RunResult, Path]:
    """ZERO_DEVELOPMENT_RUN in a subprocess, as Pytester.runpytest_subprocess runs it (an empty folder
    that is also HOME, outer PYTEST_ADDOPTS dropped, no colours): its result and its folder."""
    path = tmp_path_factory.mktemp("zero_development_run")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "TOX_ENV_DIR")}
    env.update(HOME=str(path), USERPROFILE=str(path), PY_COLORS="0")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-mpytest", f"--basetemp={path / 'basetemp'}", *ZERO_DEVELOPMENT_RUN],
                          cwd=path, env=env, capture_output=True, text=True, timeout=1800)
    result = pytest.RunResult(done.returncode, done.stdout.splitlines(), done.stderr.splitlines(),
                              time.monotonic() - started)
    return result, path


@pytest.fixture(scope="session")
def robomemarena_checkout(tmp_path_factory: pytest.TempPathFactory) -> object:
    """A RoboMemArena checkout (b175708) assembled from ../shared/data into a temporary folder (it has no
    licence: never copied into the project)."""
    from robomemarena_helpers import assemble

    return assemble(tmp_path_factory.mktemp("robomemarena") / "checkout")
