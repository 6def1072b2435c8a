"""The controller calls the results hooks (`pytest_libero_record`, `pytest_libero_summary`;
plugin/hookspecs.py) and registers the built-in sinks `--libero-sink` names (results/sinks/).

Records are written by whoever ran the episode (an xdist worker, or this process); the
controller learns that a cell ended from its report (`report.libero`, the row the worker put on
it, which names the cell) and reads the record file then: the worker wrote it, atomically,
before the report left. The records the controller writes itself (a crashed worker's cell, in
pytest_handlecrashitem before the report reaches this hook; the session end's not_run records)
are read when the session ends, before the summary is reported.

Each implementation is called on its own (not through one pluggy call), so one that raises is
warned about once, in one line naming it (a built-in sink's with its fix), its plugin gets no
more results calls (a sink that failed on a record is not asked for the summary), and it stops
no other: the run's files, exit status and terminal summary are never its to change.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.results.reading import read_document
from pytest_libero.results.records import RunDir


def add_options(group: Any) -> None:
    from pytest_libero.results.sinks.registry import NAMES

    group.addoption("--libero-sink", dest="libero_sink", default=None, metavar="NAMES",
                    help=f"Also send each episode and the summary to these trackers, comma-separated: "
                         f"{', '.join(NAMES)} (extras pytest-libero[wandb], [mlflow], [tensorboard]; "
                         "docs/sinks-and-export.md). A sink that fails is warned about once; the run goes on")
    group.addoption("--libero-sink-dir", dest="libero_sink_dir", default=None, metavar="DIR",
                    help="Folder of the sinks' own files: wandb/ (W&B) and runs/ (TensorBoard). Default: the "
                         "current folder")


def chosen_sinks(config: pytest.Config) -> list[Any]:
    """The sinks --libero-sink names (a usage error names an unknown one and the choices)."""
    from pytest_libero.results.sinks.registry import NAMES, kinds

    given = config.getoption("libero_sink")
    folder = config.getoption("libero_sink_dir")
    if given is None:
        if folder is not None:
            raise pytest.UsageError(f"--libero-sink-dir {folder} applies only with --libero-sink "
                                    f"(one or more of {', '.join(NAMES)})")
        return []
    names = [name.strip() for name in given.split(",") if name.strip()]
    unknown = [name for name in names if name not in NAMES]
    if unknown or not names:
        raise pytest.UsageError(f"--libero-sink {given}: unknown sink {', '.join(unknown) or '(none given)'}; "
                                f"choose from {', '.join(NAMES)}, comma-separated")
    root = Path(folder) if folder is not None else Path(config.invocation_params.dir)
    found = kinds()
    return [(found[name], found[name].make(root.resolve())) for name in dict.fromkeys(names)]


class ResultsHook:
    """Calls the results hooks on the controller: each record once, then the summary once."""

    def __init__(self, config: pytest.Config, run_dir: RunDir, accounting: Any) -> None:
        self.config, self.run_dir, self.accounting = config, run_dir, accounting
        self.reported: set[str] = set()
        self.fixes: dict[str, str] = {}  # a built-in sink's plugin name -> its fix
        self.sinks: dict[str, Any] = {}  # plugin name -> a built-in sink
        self.broken: set[str] = set()  # plugins with an implementation that raised: called no more
        self.summarized = False

    def add_sinks(self, chosen: list[Any]) -> None:
        for kind, sink in chosen:
            name = f"libero-sink-{kind.name}"
            self.config.pluginmanager.register(sink, name)
            self.fixes[name] = kind.fix
            self.sinks[name] = sink

    @pytest.hookimpl(trylast=True)  # after Accounting noted the report (and wrote a crash's record)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = getattr(report, "libero", None)
        if isinstance(row, dict) and isinstance(row.get("cell"), str):
            self.report_cell(row["cell"])

    def report_cell(self, cell: str) -> None:
        if cell in self.reported:
            return
        record = read_document(str(self.run_dir.record_path(cell)))
        if not isinstance(record, dict):
            return  # no record yet (an unrecorded setup error): the session end writes and reports it
        self.reported.add(cell)
        self.call("pytest_libero_record", "record", record)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.summarized:
            return
        final = self.accounting.final_summary()  # written once, whichever session-end hook asks first
        if final is None:
            return
        self.summarized = True
        for nodeid in self.accounting.selected:
            self.report_cell(self.accounting.cell_id_of(nodeid) or nodeid)
        summary = read_document(str(self.run_dir.path / "summary.json"))
        self.call("pytest_libero_summary", "summary", summary if isinstance(summary, dict) else final[0])

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """A sink the summary never reached (an interrupted run) still closes its tracker's run; one
        that failed is left alone (closing it may wait on the server that just refused it)."""
        for name, sink in self.sinks.items():
            if name in self.broken:
                continue
            try:
                sink.close()
            except Exception:  # noqa: BLE001, S110 - it was warned about when it failed, if it did
                pass

    def call(self, hook: str, arg: str, payload: dict[str, Any]) -> None:
        """Call every implementation of `hook`, each on its own with its own copy of `payload` (as
        `arg`); warn once about one that raises."""
        caller = getattr(self.config.hook, hook)
        # pluggy calls the last registered first; tryfirst/trylast order is kept by get_hookimpls.
        for impl in reversed(caller.get_hookimpls()):
            name = impl.plugin_name
            if name in self.broken or impl.hookwrapper or impl.wrapper:
                continue
            kwargs = {"config": self.config, "run_dir": self.run_dir.path, arg: copy.deepcopy(payload)}
            try:
                impl.function(*[kwargs[key] for key in impl.argnames])
            except Exception as exc:  # noqa: BLE001 - a results hook never changes the run's outcome
                self.broken.add(name)
                self._warn(name, hook, exc)

    def _warn(self, name: str, hook: str, exc: Exception) -> None:
        fix = self.fixes.get(name)
        who = f"sink {name.removeprefix('libero-sink-')}" if fix else f"{hook} in {name}"
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        line = (f"WARNING libero: {who} failed ({detail}); it gets no more results this run, whose files are "
                f"unaffected" + (f"; fix: {fix}" if fix else ""))
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.write_line(line, yellow=True)
        else:
            sys.stderr.write(line + "\n")


def register(config: pytest.Config, run_dir: RunDir, accounting: Any) -> None:
    """On the controller: the results hooks' caller, with the sinks --libero-sink names."""
    hook = ResultsHook(config, run_dir, accounting)
    hook.add_sinks(chosen_sinks(config))
    config.pluginmanager.register(hook, "libero-results-hook")
