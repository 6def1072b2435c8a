"""`--libero-breaker N`: a run stops when one infrastructure fault ends cell after cell.

    worker       (each process that runs cells) `note_report`: when N cells in a row end env_error
                 with the same cause (the first line of the fault, with digits, hex strings and
                 paths made alike: `cause_shape`), the worker stops as -x does (session.shouldstop)
                 and its report carries the reason
    controller   `BreakerStop`: a report with the reason stops the session (under xdist through
                 xdist's own flag too, so that no more cells are dispatched: each worker finishes the
                 cell it runs and those already sent to it); so does a policy host that could not be
                 rebuilt (runtime/host.py gives up after MAX_REBUILDS)

Only env_error counts: a fault of the simulator or the bench service, or a setup error that is an
EnvironmentFault (a bench service that cannot start) or an InventoryMismatch. A policy error, a
success or a failure ends the streak, and a policy that fails every episode never trips it. Cells never run are recorded
not_run with the reason (plugin/accounting.py), their records are what --libero-resume re-runs, and
the evidence already written is kept. The exit status is 2 (pytest's "interrupted", what a stop
from session.shouldstop gives), not 1 (episodes failed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_libero.core.cells import Cell
from pytest_libero.core.outcomes import Outcome
from pytest_libero.errors import EnvironmentFault, InventoryMismatch

DEFAULT_LIMIT = 5
EXIT_STATUS = pytest.ExitCode.INTERRUPTED
REPORT_FIELD = "libero_breaker"  # on a worker's report: why the run stops (crosses xdist)

_PATH = re.compile(r"(?:[A-Za-z]:)?(?:/[^\s/:'\"()]+)+/?")
_HEX = re.compile(r"\b(?:0x)?[0-9a-f]{8,}\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def cause_shape(message: str) -> str:
    """The shape of a fault's message: its first line, paths, long hex strings and numbers made alike."""
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    return _NUMBER.sub("N", _HEX.sub("X", _PATH.sub("PATH", first)))[:300]


@dataclass(slots=True)
class Streak:
    """The env_error causes that ended this worker's last cells in a row (no pytest here)."""

    limit: int
    shape: str | None = None
    count: int = 0

    def note(self, cause: str | None) -> bool:
        """A cell ended: `cause` is its env_error message (None: any other end). True when it trips."""
        if cause is None:
            self.shape, self.count = None, 0
            return False
        shape = cause_shape(cause)
        self.count = self.count + 1 if shape == self.shape else 1
        self.shape = shape
        return self.limit > 0 and self.count >= self.limit


STREAK_KEY = pytest.StashKey[Streak]()


def limit_of(text: str) -> int:
    """--libero-breaker's value: a count of cells, 0 turning the breaker off."""
    import argparse

    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of cells; give e.g. 5 (0 turns the breaker off)")
    return int(text)


def _cause(call: pytest.CallInfo[Any], report: pytest.TestReport) -> tuple[bool, str | None]:
    """(whether this report ends a cell, its env_error cause or None)."""
    row = getattr(report, "libero", None)
    if isinstance(row, dict):
        if row.get("resumed"):
            return False, None  # a kept record says nothing of this machine
        return True, str(row.get("message") or "") if row.get("outcome") == Outcome.ENV_ERROR.value else None
    if report.when == "setup" and report.failed and call.excinfo is not None:
        # A bench service that cannot start, installed files that differ from the inventory: every cell alike.
        if call.excinfo.errisinstance((EnvironmentFault, InventoryMismatch)):
            return True, f"{call.excinfo.typename}: {call.excinfo.value}"
        return False, None  # another setup error (a policy not built stops the run by itself)
    return report.when == "call", None


def note_report(item: pytest.Item, call: pytest.CallInfo[Any], report: pytest.TestReport, run_dir: Any) -> None:
    """On the process that ran `item`: count its end; past the limit, stop the session (as -x does)
    and put the reason on the report for the controller."""
    if not isinstance(getattr(getattr(item, "callspec", None), "params", {}).get("libero_cell"), Cell):
        return
    if report.skipped or (report.when == "setup" and report.passed) or report.when == "teardown":
        return
    ends, cause = _cause(call, report)
    if not ends:
        return
    config = item.config
    streak = config.stash.get(STREAK_KEY, None)
    if streak is None:
        streak = config.stash[STREAK_KEY] = Streak(config.getoption("libero_breaker"))
    if not streak.note(cause):
        return
    from pytest_libero.plugin.worker import worker_name

    reason = (f"libero breaker: {streak.count} cells in a row on worker {worker_name(config)} ended env_error with "
              f"the same cause ({streak.shape}); the run stops as -x does (exit {int(EXIT_STATUS)}): the cells not "
              f"run are recorded not_run. Fix the cause, then `pytest --libero-resume {run_dir}` runs them "
              "(--libero-breaker N sets the count, 0 turns it off)")
    setattr(report, REPORT_FIELD, reason)
    item.session.shouldstop = reason


class BreakerStop:
    """Controller plugin (or the one process): stop the session when a worker's breaker tripped or a
    policy host gave up; the exit status is EXIT_STATUS and the reason goes on every cell not run."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.session: pytest.Session | None = None
        self.stopped: str | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.stopped is not None:
            return
        reason = getattr(report, REPORT_FIELD, None) or self._host_gave_up()
        if reason:
            self.stop(str(reason))

    def _host_gave_up(self) -> str | None:
        from pytest_libero.plugin.policy_host import HOSTS_KEY

        for host in self.config.stash.get(HOSTS_KEY, {}).values():
            if getattr(host, "gave_up", None):
                return (f"libero breaker: {host.gave_up}; the run stops as -x does (exit {int(EXIT_STATUS)}): the "
                        "cells not run are recorded not_run; fix the policy, then --libero-resume runs them")
        return None

    def stop(self, reason: str) -> None:
        self.stopped = reason
        accounting = self.config.pluginmanager.get_plugin("libero-accounting")
        if accounting is not None:
            accounting.stop_reason = f"never ran: {reason}"
        if self.session is not None:
            self.session.shouldstop = reason
        dsession = self.config.pluginmanager.get_plugin("dsession")
        if dsession is not None:  # xdist's controller loop watches its own flag
            dsession.shouldstop = reason

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.stopped is not None:
            session.exitstatus = EXIT_STATUS
