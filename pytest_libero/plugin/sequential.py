"""`--libero-against RUN_A`: run policy B on a finished run A's cells, in a fixed stratified order,
and stop as soon as the sequential paired test decides (docs/schedules-and-compare.md).

The controller decides everything: it reads A, checks that this run has A's protocol identity,
fixes the order from the recorded seed, and ships order and settings to xdist workers through
workerinput (the workers collect the same items in the same order without reading A). After each
B episode it consumes the pairs that are complete in order (results/sequential.py) and, when the
test decides, stops the session as -x does and writes STOP_FILE, which makes the items a worker
still holds skip instead of running. The options change neither the protocol identity nor the
episodes' records; run.json records the comparison for resume, `report` and `compare`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_libero.core.benchmark import BenchmarkAdapter
from pytest_libero.core.cells import Cell
from pytest_libero.core.sequential import SequentialTest
from pytest_libero.errors import OptionError
from pytest_libero.results import sequential
from pytest_libero.results.sequential import DEFAULT_ORDER_SEED, STOP_MODES, Against, Settings

# workerinput keys: the controller's decision, so workers never read run A.
ORDER_INPUT = "libero_sequential_order"
SETTINGS_INPUT = "libero_sequential_settings"


def add_options(group: Any) -> None:
    group.addoption("--libero-against", dest="libero_against", default=None, metavar="RUN_A",
                    help="Run this policy (B) on the cells of the finished run RUN_A, in a fixed stratified "
                         "order, and stop when the sequential paired test decides (same protocol identity "
                         "required; docs/schedules-and-compare.md)")
    group.addoption("--libero-stop", dest="libero_stop", choices=STOP_MODES, default=None,
                    help="With --libero-against: decided (default) stops when the test decides or is futile; "
                         "never runs all of RUN_A's cells and only reports the test")
    group.addoption("--libero-alpha", dest="libero_alpha", type=float, default=None, metavar="A",
                    help="With --libero-against: false-positive rate of the sequential test (default 0.05)")
    group.addoption("--libero-min-effect", dest="libero_min_effect", type=float, default=None, metavar="DELTA",
                    help="With --libero-against: smallest difference of success rates worth finding; below it "
                         "the test may stop as futile (default 0.1)")
    group.addoption("--libero-power", dest="libero_power", type=float, default=None, metavar="P",
                    help="With --libero-against: power against --libero-min-effect; beta = 1 - power (default 0.8)")
    group.addoption("--libero-order-seed", dest="libero_order_seed", type=int, default=None, metavar="N",
                    help=f"With --libero-against: seed of the order of RUN_A's cells (default {DEFAULT_ORDER_SEED}; "
                         "recorded in run.json)")


FLAGS = {"libero_stop": "--libero-stop", "libero_alpha": "--libero-alpha", "libero_min_effect": "--libero-min-effect",
         "libero_power": "--libero-power", "libero_order_seed": "--libero-order-seed"}


def prepare(config: pytest.Config, protocol: Any, cells: tuple[Cell, ...], adapter: BenchmarkAdapter,
            shard: Any, resume: str | None) -> tuple[Against | None, tuple[Cell, ...]]:
    """(run A's side of the comparison, the cells to run in their fixed order); (None, cells) without
    --libero-against. Every bad value is an OptionError naming it and the fix. On an xdist worker
    both come from the controller (A's outcomes are the controller's alone)."""
    opt = config.getoption
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and SETTINGS_INPUT in workerinput:
        by_id = {cell.id: cell for cell in cells}
        order = tuple(workerinput[ORDER_INPUT])
        return Against(Settings.from_dict(workerinput[SETTINGS_INPUT]), order, {}), tuple(by_id[c] for c in order)
    against = opt("libero_against")
    if against is None:
        given = [flag for dest, flag in FLAGS.items() if opt(dest) is not None]
        if given:
            raise OptionError(f"{given[0]} applies only with --libero-against RUN_A (a finished run to compare with)")
        _refuse_a_comparison_resumed_without(resume)
        return None, cells
    values = dict(stop=opt("libero_stop") or "decided", alpha=_given(opt("libero_alpha"), 0.05),
                  min_effect=_given(opt("libero_min_effect"), 0.1), power=_given(opt("libero_power"), 0.8),
                  order_seed=_given(opt("libero_order_seed"), DEFAULT_ORDER_SEED))
    Settings("", None, "", **values)  # a bad value is refused before run A is read
    if shard is not None:
        raise OptionError("--libero-against with --libero-shard: a sequential comparison runs its pairs in one "
                          "order and cannot be split; run it unsharded (-n N runs it on several workers)")
    run_a = Path(against).resolve()
    from pytest_libero.results.compare import CompareError, protocol_differences, run_protocol

    try:
        manifest_a, records_a, protocol_a = run_protocol(run_a)
    except CompareError as exc:
        raise OptionError(f"--libero-against {against}: {exc}") from None
    from pytest_libero.results.resume import as_stored

    mine = {"identity": protocol.identity, "settings": as_stored(protocol.as_dict())}  # as run.json holds it
    differences = protocol_differences(protocol_a, mine, "in RUN_A", "in this run")
    if differences is not None:
        raise OptionError(
            f"--libero-against {against}: its protocol identity {protocol_a.get('identity')} differs from this "
            f"run's {protocol.identity}, so its episodes do not pair with this run's ({'; '.join(differences[:8])}"
            f"{f'; and {len(differences) - 8} more' if len(differences) > 8 else ''}). "
            "Give the protocol options RUN_A ran with (its run.json's command_line)")
    settings = Settings(str(run_a), manifest_a.get("run_id"), str(protocol.identity), **values)
    _check_resumed(resume, settings)
    from pytest_libero.results.summary import load_against

    side_a = load_against(settings.as_dict(), adapter, records_a)
    by_id = {cell.id: cell for cell in cells}
    missing = [cell for cell in side_a.order if cell not in by_id]
    if not side_a.order or missing:
        what = "has no cells" if not side_a.order else f"has {len(missing)} cell(s) this run does not select " \
                                                       f"(e.g. {', '.join(missing[:3])})"
        raise OptionError(f"--libero-against {against}: RUN_A {what}; give the selection options RUN_A ran with "
                          "(--libero-scope, --libero-suite, --libero-task-ids, ...; its run.json's command_line)")
    return side_a, tuple(by_id[cell] for cell in side_a.order)


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value


def _refuse_a_comparison_resumed_without(resume: str | None) -> None:
    if resume is None:
        return
    from pytest_libero.results.summary import load_manifest

    recorded = load_manifest(Path(resume)).get("comparison")
    if recorded:
        raise OptionError(f"--libero-resume {resume}: the run is a comparison against {recorded['against']}; "
                          f"resume it with `pytest --libero-resume {resume}` alone (its recorded options) or "
                          "give its --libero-against options again")


def _check_resumed(resume: str | None, settings: Settings) -> None:
    """A resumed comparison continues the same sequence: the same run A, order seed and test."""
    if resume is None:
        return
    from pytest_libero.results.summary import load_manifest

    manifest = load_manifest(Path(resume))
    if not manifest:
        return
    recorded = manifest.get("comparison")
    if recorded is None:
        raise OptionError(f"--libero-resume {resume}: the run was not a comparison; --libero-against cannot "
                          "be added to it (start a new run)")
    now = settings.as_dict()
    # Run A is the same run when its id is (a relative RUN_A given from another directory, a moved A).
    same_a = recorded.get("against_run_id") is not None and recorded.get("against_run_id") == now["against_run_id"]
    differ = [f"{key}: {recorded.get(key)!r} in the folder, {now[key]!r} now" for key in now
              if key not in ("test", *(("against",) if same_a else ())) and recorded.get(key) != now[key]]
    if differ:
        raise OptionError(f"--libero-resume {resume}: the comparison's settings differ ({'; '.join(differ)}); "
                          f"resume with `pytest --libero-resume {resume}` alone to continue the same sequence")


class SequentialStop:
    """Controller plugin: the running test, updated after each B episode, and the stop."""

    def __init__(self, config: pytest.Config, run: Any, run_dir: Path, resumed: frozenset[str]) -> None:
        from pytest_libero.results.summary import read_records

        self.config = config
        self.against: Against = run.comparison
        self.settings = self.against.settings
        self.run_dir = run_dir
        self.session: pytest.Session | None = None
        self.stopped: str | None = None
        self.outcomes: dict[str, str] = {}
        sequential.clear_stop(run_dir)  # an earlier session's stop: this one decides afresh
        if resumed:
            records = read_records(run_dir)[0]
            self.outcomes = {cell: records[cell]["outcome"]["outcome"] for cell in resumed if cell in records}
        self.test: SequentialTest = self.against.advance(self.against.start(), self.outcomes)
        if self._decided():  # the kept prefix decides: nothing runs (the kept cells still report)
            self.stopped = sequential.stop_message(self.test)
            sequential.write_stop(run_dir, self.stopped)

    def _decided(self) -> bool:
        return self.settings.stop == "decided" and self.test.decision.stops

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[ORDER_INPUT] = list(self.against.order)
        node.workerinput[SETTINGS_INPUT] = self.settings.as_dict()

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = getattr(report, "libero", None)
        if row is None or self.stopped is not None or not sequential.has_ended(row.get("outcome")):
            return
        self.outcomes[row["cell"]] = row["outcome"]
        self.test = self.against.advance(self.test, self.outcomes)
        if self._decided():
            self.stopped = sequential.stop_message(self.test)
            sequential.write_stop(self.run_dir, self.stopped)
            if self.session is not None:
                self.session.shouldstop = self.stopped
            dsession = self.config.pluginmanager.getplugin("dsession")
            if dsession is not None:  # xdist's controller loop watches its own flag
                dsession.shouldstop = self.stopped
