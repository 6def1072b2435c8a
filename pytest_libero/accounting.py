"""Controller-side accounting: selected = passed + failed + errored + unattempted, always printed.

Registered only on the controller (or the single process without xdist). It learns the
selection from collection (or from the first xdist worker's collection), the outcomes from
the reports that reach the controller, and counts every selected cell that never reported
as unattempted. A worker crash reaches it as a report with when == "???" and counts as errored.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_libero.catalog import parse_cell_id

_ORDER = ("passed", "failed", "errored", "unattempted")


class Accounting:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.selected: list[str] = []
        self.status: dict[str, str] = {}
        self.records: dict[str, dict[str, Any]] = {}

    def _note_selection(self, nodeids: list[str]) -> None:
        if not self.selected:
            self.selected = [n for n in nodeids if parse_cell_id(n) is not None]

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._note_selection([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._note_selection(list(ids))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if parse_cell_id(report.nodeid) is None:
            return
        record = getattr(report, "libero", None)
        if record is not None:
            self.records[report.nodeid] = record
        current = self.status.get(report.nodeid)
        if report.when == "call":
            self.status[report.nodeid] = "passed" if report.passed else "failed"
        elif report.failed and report.when in ("setup", "teardown", "???"):
            # "???" is xdist's report for an item whose worker crashed.
            self.status[report.nodeid] = "errored"
            if report.when == "???":
                self.records.setdefault(report.nodeid, {"outcome": "crashed",
                                                        "message": "worker crashed during this item"})
        elif current is None and report.skipped:
            self.status[report.nodeid] = "unattempted"

    def counts(self) -> dict[str, int]:
        known = set(self.selected) | set(self.status)
        counts = dict.fromkeys(_ORDER, 0)
        for nodeid in known:
            counts[self.status.get(nodeid, "unattempted")] += 1
        counts["selected"] = len(known)
        return counts

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.config.option.collectonly:
            return
        if self.counts()["unattempted"] and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.config.option.collectonly or not (self.selected or self.status):
            return
        tr = terminalreporter
        tr.write_sep("=", "LIBERO episodes")
        for nodeid in self.selected or sorted(self.status):
            suite, task, init = parse_cell_id(nodeid) or ("?", 0, 0)
            cell = f"{suite}-t{task:02d}-s{init:02d}"
            record = self.records.get(nodeid, {})
            status = self.status.get(nodeid, "unattempted")
            if "policy_calls" in record:
                detail = (f"{record['outcome']}/{record['termination']}: {record['policy_calls']} policy calls, "
                          f"{record['action_decisions']} decisions, {record['executed_controls']} controls "
                          f"(+{record['settling_controls']} settling), cap {record['control_cap']}")
                if record.get("first_success_control") is not None:
                    detail += (f", first success at control {record['first_success_control']} "
                               f"(policy call {record['first_success_policy_call']})")
                if record.get("policy", {}).get("kind") == "diagnostic":
                    detail += " [infrastructure diagnostic]"
            else:
                detail = record.get("message", "")
            tr.write_line(f"{cell:<22} {status.upper():<12} {detail}")
        c = self.counts()
        tr.write_line(f"LIBERO: selected {c['selected']} = passed {c['passed']} + failed {c['failed']} "
                      f"+ errored {c['errored']} + unattempted {c['unattempted']}", bold=True)
