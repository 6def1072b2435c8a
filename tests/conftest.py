from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


# The suite itself runs under xdist (README's test command: -n 3). Its workers' variables must not
# reach the pytest runs the tests make (subprocesses and pytester's in-process runs), whose own
# fakes and helpers read them (the plugin names its worker from xdist's config, not from these:
# test_gpus.py checks a run started with them set still records worker main).
XDIST_WORKER_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")

# The PYTEST_ADDOPTS of every pytest run the tests make (this process's own options were read before
# this conftest: its xdist workers take the controller's, not these), in place of an outer value,
# which never reaches them. Each of those runs loads every installed pytest plugin; anyio's (installed
# with the test extras for vla-eval and MLflow) imports trio (installed for selenium) and costs about
# 0.5 s of CPU per process, a third of a toy run's start, and no run the tests make uses it.
# pytester's runs get it too (the `pytester` fixture below: Pytester drops PYTEST_ADDOPTS).
CHILD_ADDOPTS = "-p no:anyio"

# Where every process the tests start keeps its byte-code (PYTHONPYCACHEPREFIX: a tree beside the
# LeRobot venvs, mirroring each source's absolute path), in place of PYTHONDONTWRITEBYTECODE, which
# this machine's environment sets: with it, every pytest run the tests make compiled this suite's
# modules and pytest rewrote and compiled each plugin's anew, and every bench service compiled what
# it imports, hundreds of times a gate. Under the prefix they are compiled once (stale files are
# recompiled as always: a .pyc names its source's size and time), and no __pycache__ appears in
# this checkout, a test's project folder or a RoboMemArena checkout. A user's shell made by a test
# (test_packaging.user_env) has neither variable.
PYCACHE_PREFIX = Path(os.environ.get("PYTEST_LIBERO_PYCACHE", Path.home() / ".cache" / "pytest-libero" / "pycache"))


def pytest_configure(config: pytest.Config) -> None:
    for name in XDIST_WORKER_VARIABLES:
        os.environ.pop(name, None)
    os.environ["PYTEST_ADDOPTS"] = CHILD_ADDOPTS
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(PYCACHE_PREFIX)
    config.addinivalue_line("markers", "real_libero: runs real LIBERO rollouts (CPU rendering; slower)")
    config.addinivalue_line("markers", "lerobot: builds (once, cached by its requirements) a LeRobot 0.4.4 venv from "
                                       "the package index and runs small random LeRobot policies")
    config.addinivalue_line("markers", "slurm: starts a real one-node Slurm cluster (needs root and the slurm-wlm and "
                                       "munge packages; deselect with -m 'not slurm')")
    config.addinivalue_line("markers", "browser: opens the review page in headless Chromium (Debian's chromium and "
                                       "chromium-driver packages, selenium); deselect with -m 'not browser'")
    # The tiers (area markers, `fast`, the simulator refusal for tests not marked real_libero) and the
    # full gate's per-file budget: tests/suite_tiers.py (docs/testing.md).
    import suite_tiers

    suite_tiers.register(config)
    start_lerobot_venv_build(config)


# The slowest files, slowest first (seconds in one process on a 2-core CPU machine, 2026-12-02). Run
# first, they leave the short files to fill in the end, so the workers of `-n 3 --dist loadfile
# --no-loadscope-reorder` (which hands out files in collection order; without that option xdist
# orders files by their number of tests, which put these few-test files last) finish together
# instead of one running a long file alone at the end. The other files, and the tests inside each
# file, keep their order.
SLOWEST_FILES = ("test_packaging.py", "test_robomemarena_real.py", "test_performance_identity.py",
                 "test_sequential_real.py", "test_liberoplus_real.py", "test_slurm_real.py",
                 "test_install_check_real.py", "test_scale_real.py", "test_lerobot.py", "test_real_libero.py",
                 "test_order_independence.py", "test_resume.py", "test_adapters_real.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # a stable sort


# The zero policy over the development scope's default cells (libero_10 tasks 0 and 1): 3 policy
# calls of 5 controls, with the HTML page. Shared by the tests that check it (the decisions budget
# and evidence; the zero policy failing the demo's cell), so the real run is made once.
ZERO_DEVELOPMENT_RUN = ("--libero-scope", "development", "--libero-policy", "zero", "--libero-budget", "decisions",
                        "--libero-max-policy-calls", "3", "--libero-replan-interval", "5", "--html=report.html")


@contextlib.contextmanager
def made_once_per_run(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory,
                      name: str) -> Iterator[tuple[Path, bool]]:
    """A folder for what a session fixture makes, made once per test run: (the folder, whether it was
    made already). Under xdist a session fixture is set up once per worker, so two workers whose
    files ask for it would each make it; here the first worker to ask makes it under a lock in the
    run's folder (the parent of every worker's basetemp) and the others wait and reuse it. Made
    means the body finished: when it raised, the next worker to ask makes it anew. Without xdist it
    is this session's own new folder."""
    if not hasattr(config, "workerinput"):
        yield tmp_path_factory.mktemp(name), False
        return
    run_folder = tmp_path_factory.getbasetemp().parent
    folder, made = run_folder / name, run_folder / f"{name}.made"
    with open(run_folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the lock file closes, also when the body raises
        if made.exists():
            yield folder, True
            return
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        yield folder, False
        made.touch()


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester's, whose runs get CHILD_ADDOPTS as every other run the tests make (Pytester drops
    PYTEST_ADDOPTS when it is made; this puts CHILD_ADDOPTS back, undone before Pytester's own undo)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", CHILD_ADDOPTS)
    return pytester


@pytest.fixture(scope="session")
def zero_development_run(request: pytest.FixtureRequest,
                         tmp_path_factory: pytest.TempPathFactory) -> tuple[pytest.RunResult, Path]:
    """ZERO_DEVELOPMENT_RUN in a subprocess, as Pytester.runpytest_subprocess runs it (an empty folder
    that is also HOME, CHILD_ADDOPTS, no colours): its result and its folder. Made once
    per test run (made_once_per_run: its four files can land on both workers); its tests only read it."""
    with made_once_per_run(request.config, tmp_path_factory, "zero_development_run") as (path, made):
        saved = path / "result.json"
        if not made:
            env = {k: v for k, v in os.environ.items() if k != "TOX_ENV_DIR"}
            env.update(HOME=str(path), USERPROFILE=str(path), PY_COLORS="0")
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-mpytest", f"--basetemp={path / 'basetemp'}",
                                   *ZERO_DEVELOPMENT_RUN], cwd=path, env=env, capture_output=True, text=True,
                                  timeout=1800)
            saved.write_text(json.dumps({"ret": done.returncode, "stdout": done.stdout.splitlines(),
                                         "stderr": done.stderr.splitlines(),
                                         "duration": time.monotonic() - started}))
        result = json.loads(saved.read_text())
    return pytest.RunResult(result["ret"], result["stdout"], result["stderr"], result["duration"]), path


@pytest.fixture(scope="session")
def libero_10_service() -> Iterator[object]:
    """One LIBERO bench service per worker for the in-process episodes of test_demo.py and
    test_real_libero.py (libero_10 task 0): its environment is built once and kept between them (the
    service's cache), so a later episode costs its controls only. A kept environment gives the bits
    of a fresh one (test_performance_identity.py); the service recycles itself past its memory cap."""
    from pytest_libero.benchmarks import get, service_env
    from pytest_libero.runtime.service import BenchService

    service = BenchService(env=service_env(get("libero"), None))
    yield service
    service.close()


@pytest.fixture(scope="session")
def robomemarena_checkout(tmp_path_factory: pytest.TempPathFactory) -> object:
    """A RoboMemArena checkout (b175708) assembled from ../shared/data into a temporary folder (it has no
    licence: never copied into the project)."""
    from robomemarena_helpers import assemble

    return assemble(tmp_path_factory.mktemp("robomemarena") / "checkout")


# -- The LeRobot venv (issue 32): built in the background from the session's start ---------------
# Building it (tests/lerobot_helpers.py) is mostly uv downloading torch and its CUDA libraries
# (4.3 GB of wheels), which costs minutes of wall time and about 80 s of CPU (docs/lerobot.md). The controller (the one
# process without xdist's workerinput) starts it in a detached process when the selected tests
# include test_lerobot.py's venv tests, so the download overlaps the other files' tests; the
# lerobot_python fixture waits for it on the venv's lock. test_lerobot.py's place in SLOWEST_FILES
# gives the download that time. The build is stopped if the session ends first.
LEROBOT_FILE = Path(__file__).resolve().with_name("test_lerobot.py")
LEROBOT_VENV_TESTS = ("test_the_adapter_hands_the_policy_what_lerobots_own_libero_path_gives",
                      "test_an_act_policy_from_its_own_venv_gives_equal_records_isolated_hosted_and_hosted_under_n2")
LEROBOT_MARKERS = ("lerobot", "real_libero")


def lerobot_venv_wanted(config: pytest.Config) -> bool:
    """Whether this session's arguments select a test of test_lerobot.py that needs the venv (the
    file or a folder above it among the paths; -m and -k not deselecting both of its venv tests)."""
    from _pytest.mark.expression import Expression

    if config.option.collectonly:
        return False
    tests: set[str] = set()
    for arg in config.args:
        path, _, name = arg.partition("::")
        path = (config.invocation_params.dir / path).resolve()
        if path in LEROBOT_FILE.parents or (path == LEROBOT_FILE and not name):
            tests.update(LEROBOT_VENV_TESTS)
        elif path == LEROBOT_FILE:
            tests.update(t for t in LEROBOT_VENV_TESTS if t == name.split("[")[0])
    if not tests:
        return False
    try:
        marks = Expression.compile(config.option.markexpr) if config.option.markexpr else None
        words = Expression.compile(config.option.keyword) if config.option.keyword else None
    except SyntaxError:
        return False  # pytest reports the expression itself
    if marks and not marks.evaluate(lambda name, **_: name in LEROBOT_MARKERS):
        return False
    if not words:
        return True
    keywords = [(test, LEROBOT_FILE.name, LEROBOT_FILE.parent.name, *LEROBOT_MARKERS) for test in sorted(tests)]
    return any(words.evaluate(lambda word, names=names, **_: any(word.lower() in n.lower() for n in names))
               for names in keywords)


def start_lerobot_venv_build(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not lerobot_venv_wanted(config):
        return
    from lerobot_helpers import BACKGROUND_LOG, start_background_build

    started = start_background_build()
    if started is not None:
        config.stash[LEROBOT_BUILD] = started
        os.environ[BACKGROUND_LOG] = str(started[1])  # the workers inherit it: the fixture reads the log


LEROBOT_BUILD = pytest.StashKey["tuple[subprocess.Popen[bytes], Path]"]()


def pytest_unconfigure(config: pytest.Config) -> None:
    started = config.stash.get(LEROBOT_BUILD, None)
    if started is not None:
        from lerobot_helpers import BACKGROUND_LOG, stop_background_build

        stop_background_build(*started)
        os.environ.pop(BACKGROUND_LOG, None)


@pytest.fixture(scope="session")
def lerobot_python(request: pytest.FixtureRequest) -> Path:
    """The python of the cached LeRobot venv (tests/lerobot_helpers.py: built once, under a file lock;
    a background build's wait is added to its log)."""
    from lerobot_helpers import BACKGROUND_LOG, lerobot_venv

    started = time.monotonic()
    python = lerobot_venv()
    if os.environ.get(BACKGROUND_LOG):
        worker = getattr(request.config, "workerinput", {}).get("workerid", "main")
        with open(os.environ[BACKGROUND_LOG], "a") as log:
            log.write(f"the lerobot_python fixture ({worker}) waited {time.monotonic() - started:.1f} s\n")
    return python


@pytest.fixture(scope="session")
def lerobot_act(lerobot_python: Path) -> Path:
    """A small random ACT policy (n_action_steps 5, seeded, no pretrained backbone) saved by LeRobot,
    kept beside the venv (made by the build's byte-code step: no LeRobot process of its own). Read-only."""
    from lerobot_helpers import kept_act_policy

    return kept_act_policy(lerobot_python)
