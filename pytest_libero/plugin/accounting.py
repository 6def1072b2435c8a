"""Controller-side accounting: selected = passed + failed + errored + unattempted, everywhere.

Registered only on the controller (or the single process without xdist). It learns the
selection from collection (or from the first xdist worker's collection) and writes run.json and
selection.json; it learns outcomes from the reports that reach it. An item whose worker crashed
(xdist's report with when == "???") gets a `crashed` record written here and is turned into a
setup error with a synthetic teardown, so the terminal, pytest-html and summary.json all show
it as errored. At session end, selected cells without a record get a `not_run` record, and the
derived files (summary.json, chart, report.html) are rebuilt from the run folder.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from pytest_libero.core.outcomes import STATUSES, Outcome, status
from pytest_libero.results.files import write_json_atomic
from pytest_libero.results.page import counters_text
from pytest_libero.plugin.options import LiberoRun, is_libero_run, no_case_line
from pytest_libero.results.records import RunDir, placeholder_record, run_manifest, write_record
from pytest_libero.runtime import gpus


class Accounting:
    def __init__(self, config: pytest.Config, run_dir: RunDir, run: LiberoRun, resumed: frozenset[str]) -> None:
        self.config = config
        self.run_dir = run_dir
        self.run = run
        self.resumed = resumed
        self.cell_id_of = run.adapter.cell_id
        self.selected: list[str] = []
        self.status: dict[str, str] = {}
        self.rows: dict[str, dict[str, Any]] = {}
        self.unrecorded_errors: dict[str, str] = {}
        self.not_built: dict[str, str] = {}  # cells a worker could not build the policy for: one line each
        self.no_case: str | None = None  # why xdist workers collected no LIBERO case (None: they did)
        self.stop_reason: str | None = None  # why the run stopped early (preflight, breaker): cells not run say so
        self._summary: tuple[dict[str, Any], bytes] | None = None

    # -- selection -----------------------------------------------------------------------
    def _note_selection(self, nodeids: list[str]) -> None:
        if self.selected:
            return
        self.selected = [n for n in nodeids if self.cell_id_of(n) is not None]
        if not self.selected or self.config.option.collectonly:
            return
        run = self.run
        manifest = run_manifest(self.run_dir.path.name, self.run_dir.path.parent.name, run.protocol.as_dict(),
                                run.protocol.identity, run.policy.as_dict(), list(sys.argv),
                                source=run.adapter.source, gpus=gpus.nvidia_smi_descriptions())
        manifest.update(run.run_fields)  # the benchmark's own (a LIBERO-plus control run)
        selection: dict[str, Any] = {"schema_version": 1, "cells": [self._cell(n) for n in self.selected]}
        if run.comparison is not None:  # --libero-against: what resume, report and compare need
            manifest["comparison"] = run.comparison.settings.as_dict()
        if run.resume is not None:
            from pytest_libero.results.resume import previous_sessions

            manifest["previous_sessions"] = previous_sessions(self.run_dir.path)
        if run.shard is not None:
            # The whole selection too, so a merge knows the cells of a shard that never wrote anything.
            manifest["shard"] = selection["shard"] = run.shard.as_dict()
            selection["unsharded_cells"] = [cell.id for cell in run.all_cells]
        write_json_atomic(self.run_dir.path / "run.json", manifest)
        write_json_atomic(self.run_dir.path / "selection.json", selection)

    def stop_before_cells(self, nodeids: list[str], reason: str) -> None:
        """The run stops before any cell (plugin/preflight.py): run.json, selection.json and every
        selected cell's not_run record (`reason`) are written now, so that --libero-resume continues."""
        self._note_selection(nodeids)
        self.stop_reason = reason
        self.final_summary()

    def _cell(self, nodeid: str) -> str:
        return self.cell_id_of(nodeid) or nodeid

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._note_selection([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._note_selection(list(ids))
        option = self.config.option
        if (not self.selected and self.run.cells and is_libero_run(self.config)
                and not option.keyword and not option.markexpr):  # -k/-m may deselect every cell
            self.no_case = no_case_line(self.config, len(self.run.cells))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["libero_run_dir"] = str(self.run_dir.path)
        node.workerinput["libero_resumed"] = sorted(self.resumed)

    # -- outcomes ------------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        if self.cell_id_of(crashitem) is None:
            return
        cell = self._cell(crashitem)
        message = f"worker crashed while running {cell}: {report.longreprtext.strip()[:500]}"
        self._write_placeholder(cell, Outcome.CRASHED, message, getattr(report, "worker_id", "?"))
        report.when = "setup"  # an error, not a failure; pytest-html records it on the teardown below
        report.libero = {  # type: ignore[attr-defined]
            "cell": cell, "outcome": Outcome.CRASHED.value, "status": status(Outcome.CRASHED), "message": message}
        report._libero_teardown = pytest.TestReport(  # type: ignore[attr-defined]
            nodeid=report.nodeid, location=report.location, keywords={}, outcome="passed",
            longrepr=None, when="teardown")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Any:
        self._note_report(report)
        result = yield
        teardown = getattr(report, "_libero_teardown", None)
        if teardown is not None:
            report._libero_teardown = None  # type: ignore[attr-defined]
            self.config.hook.pytest_runtest_logreport(report=teardown)
        return result

    def _note_report(self, report: pytest.TestReport) -> None:
        if self.cell_id_of(report.nodeid) is None:
            return
        row = getattr(report, "libero", None)
        if row is not None:
            self.rows[report.nodeid] = row
        if report.when == "call":
            self.status[report.nodeid] = "passed" if report.passed else "failed"
        elif report.failed and report.when in ("setup", "teardown", "???"):
            self.status[report.nodeid] = "errored"
            if getattr(report, "libero_not_built", None):
                self.not_built[report.nodeid] = report.libero_not_built  # type: ignore[attr-defined]
            elif row is None and report.when == "setup":
                crash = getattr(report.longrepr, "reprcrash", None)
                self.unrecorded_errors[report.nodeid] = (
                    crash.message if crash is not None else report.longreprtext.strip()[-2000:] or "setup error")
        elif report.nodeid not in self.status and report.skipped:
            self.status[report.nodeid] = "unattempted"

    def counts(self) -> dict[str, int]:
        known = set(self.selected) | set(self.status)
        counts = dict.fromkeys(STATUSES, 0)
        for nodeid in known:
            counts[self.status.get(nodeid, "unattempted")] += 1
        counts["selected"] = len(known)
        return counts

    # -- session end ---------------------------------------------------------------------
    def _write_placeholder(self, cell: str, outcome: Outcome, message: str, worker: str) -> None:
        run = self.run
        write_record(self.run_dir, placeholder_record(
            cell, outcome, message, adapter=run.adapter, context=run.context, protocol=run.protocol.as_dict(),
            identity=run.protocol.identity,
            policy_profile={"spec": run.policy.as_dict(), "kind": "unknown"}, worker=worker, shard=run.shard))

    def final_summary(self) -> tuple[dict[str, Any], bytes] | None:
        """Write the missing records and the derived files once; None when nothing was selected."""
        if self._summary is not None or not self.selected or self.config.option.collectonly:
            return self._summary
        from pytest_libero.results.sequential import read_stop
        from pytest_libero.results.summary import rebuild

        decided = read_stop(self.run_dir.path) if self.run.comparison is not None else None
        for nodeid in self.selected:
            cell = self._cell(nodeid)
            if self.run_dir.record_path(cell).exists():
                continue
            if nodeid in self.not_built:
                self._write_placeholder(cell, Outcome.NOT_RUN, f"never ran: {self.not_built[nodeid]}", "main")
            elif nodeid in self.unrecorded_errors:
                self._write_placeholder(cell, Outcome.ENV_ERROR, self.unrecorded_errors[nodeid], "main")
            elif self.status.get(nodeid) in (None, "unattempted"):
                why = (f"never ran: the run stopped when {next(iter(self.not_built.values()))}" if self.not_built
                       else decided or self.stop_reason or "never ran (-x, interrupt, skip or lost worker)")
                self._write_placeholder(cell, Outcome.NOT_RUN, why, "main")
        summary = rebuild(self.run_dir.path, self.run.adapter)
        self._summary = (summary, (self.run_dir.path / "success_rates.png").read_bytes())
        return self._summary

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.no_case is not None:  # under xdist: the workers collected no LIBERO case
            sys.stderr.write(f"ERROR: {self.no_case}\n")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if self.config.option.collectonly or not self.selected:
            return
        self.final_summary()
        if self.not_built:  # an xdist worker could not build the policy: the run stopped there
            line = next(iter(self.not_built.values()))
            sys.stderr.write(f"ERROR: {line}\n")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        elif self._stopped_when_decided():
            # A comparison that decided is done, not interrupted: its status is that of what it ran.
            c = self.counts()
            failed = c["failed"] or c["errored"]
            session.exitstatus = pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK
        elif self.counts()["unattempted"] and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _stopped_when_decided(self) -> bool:
        if self.run.comparison is None:
            return False
        from pytest_libero.results.sequential import read_stop

        return read_stop(self.run_dir.path) is not None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.config.option.collectonly or not (self.selected or self.status):
            return
        tr = terminalreporter
        tr.write_sep("=", "LIBERO episodes")
        if self._summary is not None and self._summary[0].get("run_kind"):
            tr.write_line(f"LIBERO {self._summary[0]['run_kind']['text']}", bold=True)
        for nodeid in self.selected or sorted(self.status):
            row = self.rows.get(nodeid, {})
            status = self.status.get(nodeid, "unattempted")
            if row.get("counters"):
                detail = f"{row['outcome']}/{row['termination']}: {counters_text(row)}"
                if row.get("kind") == "diagnostic":
                    detail += " [infrastructure diagnostic]"
                if row.get("resumed"):
                    detail += " [resumed: recorded earlier]"
            else:
                detail = row.get("message", "")
            tr.write_line(f"{self._cell(nodeid):<22} {status.upper():<12} {detail}")
        c = self.counts()
        tr.write_line(f"LIBERO: selected {c['selected']} = passed {c['passed']} + failed {c['failed']} "
                      f"+ errored {c['errored']} + unattempted {c['unattempted']}", bold=True)
        if self._summary is not None:
            from pytest_libero.results.schedule_summary import lines as schedule_lines
            from pytest_libero.results.summary import rate_lines
            from pytest_libero.results.telemetry import throughput_lines

            summary = self._summary[0]
            for line in schedule_lines(summary) + rate_lines(summary) + self.run.adapter.terminal_lines(summary):
                tr.write_line(line)
            from pytest_libero.results.sequential import lines as sequential_lines

            for line in sequential_lines(summary):
                tr.write_line(line, bold=True)
            from pytest_libero.results.install import lines as install_lines

            for line in install_lines(summary):
                tr.write_line(line, bold=True, red=line.startswith("WARNING"))

            for line in throughput_lines(self._summary[0].get("throughput") or {}):
                tr.write_line(line)
            tr.write_line(f"LIBERO evidence: {self.run_dir.path} (summary.json, report.html, episodes/, videos/)")
