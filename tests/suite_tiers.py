"""The suite's tiers and its time budget (a plugin of this test suite only, registered by conftest).

Tiers. Every test carries the markers of its area (AREAS, by file name), so the real tests of one
area run alone (`-m 'robomemarena and real_libero'`). The fast tier is the tests without
`real_libero` (README: the block after `<!-- fast tier -->`). It stays fast because a test that
starts a bench service (a simulator) without `real_libero` fails: SimulatorWatch sees every
`pytest_libero.runtime.server` process below this pytest process (in-process pytester runs,
subprocess runs, their own children), whatever the environment the test gave it.

Budget. In the full gate (README's CI command: every test of tests/, no selection) the run fails
when one test file's summed setup, call and teardown time is over BUDGET_SHARE of all files' time,
naming the file, so a slow file is seen the day it lands. Shares, not seconds: a loaded machine
slows every file alike. It is checked on the process that sees every report (the xdist
controller, or the only process), after the run.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SERVER_MODULE = b"pytest_libero.runtime.server"
POLL_S = 0.2  # a bench service lives for seconds (LIBERO's import alone takes longer)
BUDGET_SHARE = 0.10

# Area marker -> the test files (name prefixes) that carry it.
AREAS: dict[str, tuple[str, ...]] = {
    "libero_plus": ("test_liberoplus",),
    "robomemarena": ("test_robomemarena",),
    "policy_host": ("test_policy_host",),
    "sequential": ("test_sequential",),
    "install": ("test_install_check", "test_packaging", "test_order_independence", "test_inert"),
    "servers": ("test_openpi", "test_vla_eval", "test_openvla_rest"),
    "scale_out": ("test_slurm_real", "test_cluster", "test_scale_real", "test_shards", "test_gpus"),
    "evidence": ("test_evidence", "test_resume", "test_record_schema", "test_reading", "test_compare",
                 "test_page_browser", "test_schedule_summary", "test_video_writer"),
}


def areas_of(file_name: str) -> list[str]:
    """The area markers of a test file, by its name."""
    return [area for area, prefixes in AREAS.items() if file_name.startswith(prefixes)]


def _parent_of(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            return int(stream.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def service_descendants(root: int, name: bytes = SERVER_MODULE) -> set[int]:
    """The processes below `root` at any depth (Linux /proc) whose command line holds `name`."""
    children: dict[int, list[int]] = defaultdict(list)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        parent = _parent_of(pid)
        if parent is not None:
            children[parent].append(int(pid))
    found, stack = set(), list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, ()))
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as stream:
                if name in stream.read():
                    found.add(pid)
        except OSError:
            continue
    return found


class SimulatorWatch:
    """Polls for bench services below this process, so each test knows whether it started one."""

    def __init__(self, root: int, name: bytes | None = None) -> None:
        self.root = root
        self.name = SERVER_MODULE if name is None else name
        self.seen: set[int] = set()
        self.known: set[int] = set()  # a service kept alive across tests is charged once, to its starter
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="suite-simulator-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            self.scan()

    def scan(self) -> None:
        found = service_descendants(self.root, self.name)
        with self._lock:
            self.seen |= found - self.known
            self.known |= found

    def take(self) -> set[int]:
        """The services seen since the last take (one last scan first)."""
        self.scan()
        with self._lock:
            seen, self.seen = self.seen, set()
        return seen


def unmarked_simulator_message(nodeid: str, pids: Iterable[int]) -> str:
    return (f"{nodeid} started a bench service (pid {', '.join(map(str, sorted(pids)))}) but is not marked "
            "real_libero, so the fast tier would run a simulator: add @pytest.mark.real_libero "
            "(or the module's pytestmark)")


@dataclass(frozen=True)
class FileShare:
    file: str
    seconds: float
    share: float


def file_shares(durations: dict[str, float]) -> list[FileShare]:
    """Each file's seconds and share of the sum, largest first."""
    total = sum(durations.values())
    if total <= 0:
        return []
    shares = [FileShare(file, s, s / total) for file, s in durations.items()]
    return sorted(shares, key=lambda f: f.seconds, reverse=True)


def over_budget(durations: dict[str, float], share: float = BUDGET_SHARE) -> list[FileShare]:
    return [f for f in file_shares(durations) if f.share > share]


def is_full_gate(config: pytest.Config) -> bool:
    """Whether this run is the whole suite: the tests folder alone, nothing selected away."""
    option = config.option
    if getattr(option, "markexpr", "") or getattr(option, "keyword", "") or getattr(option, "deselect", None):
        return False
    if getattr(option, "lf", False) or getattr(option, "failedfirst", False) or getattr(option, "exitfirst", False):
        return False
    if getattr(option, "maxfail", 0):
        return False
    args = [arg for arg in config.args if arg]
    return len(args) == 1 and Path(config.invocation_params.dir, args[0]).resolve() == TESTS


class SuiteTiers:
    """The plugin object: area markers, the simulator check, the per-file budget."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.worker = hasattr(config, "workerinput")
        self.durations: dict[str, float] = defaultdict(float)
        self.watch: SimulatorWatch | None = None
        self.failed_budget: list[FileShare] = []

    # Tiers ---------------------------------------------------------------------------------
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            for area in areas_of(item.path.name):
                item.add_marker(area)

    def pytest_sessionstart(self) -> None:
        if os.path.isdir("/proc"):
            self.watch = SimulatorWatch(os.getpid())
            self.watch.start()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.watch is not None:
            self.watch.take()  # what earlier tests left running is theirs

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        outcome = yield
        if call.when != "teardown" or self.watch is None or item.get_closest_marker("real_libero"):
            return
        pids = self.watch.take()
        if pids:
            report = outcome.get_result()
            report.outcome = "failed"
            report.longrepr = unmarked_simulator_message(item.nodeid, pids)

    # Budget --------------------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.worker:
            self.durations[report.nodeid.split("::", 1)[0]] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.watch is not None:
            self.watch.stop()
        if self.worker or exitstatus == pytest.ExitCode.INTERRUPTED or not is_full_gate(self.config):
            return
        self.failed_budget = over_budget(self.durations)
        if self.failed_budget and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.worker or not is_full_gate(self.config) or not self.durations:
            return
        shares = file_shares(self.durations)
        total = sum(f.seconds for f in shares)
        title = f"time per test file (full gate; budget {BUDGET_SHARE:.0%} of {total:.0f} s each)"
        terminalreporter.write_sep("=", title)
        for f in shares[:10]:
            terminalreporter.write_line(f"{f.seconds:8.1f} s {f.share:6.1%}  {f.file}")
        for f in self.failed_budget:
            terminalreporter.write_line(
                f"FAILED budget: {f.file} took {f.seconds:.0f} s, {f.share:.1%} of the suite's {total:.0f} s "
                f"(at most {BUDGET_SHARE:.0%}): share its expensive setup (tests/conftest.py's session fixtures) "
                "or split the file", red=True)
