"""The pytest11 entry point: options, collection of cells, fixtures, and report plumbing.

Imports nothing heavy: no simulator module is imported on collection or on the controller.

Installed, this plugin loads in every pytest run of the environment, most of them someone else's.
So it does nothing unless the run is a LIBERO run (options.is_libero_run): otherwise it only adds
its options and markers. No run is built, so there is no header line, no GPU discovery (nvidia-smi),
no pinning of CUDA_VISIBLE_DEVICES on the process or its xdist workers, no run folder, no
terminal lines and no accounting or pytest-html plugin; a test that asks for `libero_cell` or
`libero_run` (so every LIBERO case) errors at setup with NOT_A_LIBERO_RUN, which names the fix.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
import warnings
from pathlib import Path
from typing import Any, Generator, Iterator

import pytest

from pytest_libero.core.cells import Cell
from pytest_libero.core.outcomes import COMPLETED, Outcome
from pytest_libero.errors import EnvironmentFault, InventoryMismatch, PolicyLoadError
from pytest_libero.plugin.options import LiberoRun, addoptions, all_suites, build_run, is_libero_run
from pytest_libero.plugin.options import no_case_line, with_recorded_options
from pytest_libero.plugin.policy_build import build_policy, policy_paths
from pytest_libero.results.records import RunDir, new_run_id, profile_slug

RUN_KEY = pytest.StashKey[LiberoRun]()
RUN_DIR_KEY = pytest.StashKey[RunDir]()
RESULT_KEY = pytest.StashKey[Any]()
RESUMED_KEY = pytest.StashKey[frozenset[str]]()  # cells whose records a resumed run keeps
RECORDED_KEY = pytest.StashKey[list[str]]()  # the options `--libero-resume RUN` alone took from run.json
CLEANED_KEY = pytest.StashKey[str]()  # what a resumed run removed of a killed session's temporaries
POLICY_KEY = pytest.StashKey[Any]()  # the policy built before the first item, until its fixture takes it

NOT_A_LIBERO_RUN = ("not a LIBERO run: give a --libero-* option such as --libero-scope development, "
                    "select cells with -m libero, or set libero = true in the pytest ini")


def _cell_of(item: pytest.Item) -> Any:
    """The `libero_cell` an item is parametrized with (None for any other item)."""
    return getattr(getattr(item, "callspec", None), "params", {}).get("libero_cell")


def libero_run_of(config: pytest.Config) -> LiberoRun | None:
    """The run's settings; None when this is not a LIBERO run (the plugin then stays out of the way)."""
    return config.stash.get(RUN_KEY, None)


class PolicyNotBuilt(Exception):
    """The policy could not be built on an xdist worker: its items error with this one line and are
    recorded not_run (the run stops before any item when there is no xdist)."""


class LiberoSourceWarning(UserWarning):
    """Installed LIBERO files differ from the frozen inventory and the user chose to run anyway."""


def pytest_addoption(parser: pytest.Parser) -> None:
    addoptions(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_libero.plugin import hookspecs
    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(trylast=True)
def pytest_libero_make_policy(config: pytest.Config, spec: Any) -> Any:
    from pytest_libero.runtime.policies import build_builtin

    return build_builtin(spec)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """`pytest --libero-resume RUN` alone: the run's recorded --libero-* options join the command line."""
    recorded = with_recorded_options(args)
    args.extend(recorded)
    early_config.stash[RECORDED_KEY] = recorded


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "libero: every LIBERO cell (-m libero alone runs the bundled cases)")
    for suite in all_suites():
        config.addinivalue_line("markers", f"{suite}: cells of suite {suite}")
    from pytest_libero import benchmarks

    for adapter in benchmarks.adapters():  # a benchmark's own markers (RoboMemArena's memory types)
        for name, text in getattr(adapter, "marker_help", {}).items():
            config.addinivalue_line("markers", f"{name}: {text}")
    if not is_libero_run(config):
        return  # inert: see the module docstring
    run = config.stash[RUN_KEY] = build_run(config)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "libero_run_dir" in workerinput:
        config.stash[RUN_DIR_KEY] = RunDir(Path(workerinput["libero_run_dir"]))
        config.stash[RESUMED_KEY] = frozenset(workerinput.get("libero_resumed", ()))
    else:
        _configure_controller_run(config, run)
    if workerinput is not None:
        from pytest_libero.plugin.gpus import configure_worker

        # Before collection and before the policy fixture imports anything that grabs a GPU.
        configure_worker(config, workerinput)
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        # No paths given: run the bundled evaluation cases (this works the same in this
        # checkout and when pytest-libero is pip-installed into another project).
        spec = importlib.util.find_spec("pytest_libero.cases")
        assert spec is not None and spec.submodule_search_locations
        config.args[:] = [list(spec.submodule_search_locations)[0]]
    if workerinput is None:
        from pytest_libero.plugin.accounting import Accounting

        accounting = Accounting(config, config.stash[RUN_DIR_KEY], run, config.stash[RESUMED_KEY])
        config.pluginmanager.register(accounting, "libero-accounting")
        from pytest_libero.plugin.results_hook import register as register_results_hook

        register_results_hook(config, config.stash[RUN_DIR_KEY], accounting)  # the results hooks and sinks
        if run.comparison is not None and not config.option.collectonly:
            from pytest_libero.plugin.sequential import SequentialStop

            config.pluginmanager.register(SequentialStop(config, run, config.stash[RUN_DIR_KEY].path,
                                                         config.stash[RESUMED_KEY]), "libero-sequential")
        if not config.option.collectonly:
            from pytest_libero.plugin.breaker import BreakerStop

            config.pluginmanager.register(BreakerStop(config), "libero-breaker")
        if run.require_reference:
            from pytest_libero.plugin.install_check import InstallStop

            config.pluginmanager.register(InstallStop(config), "libero-install-stop")
        if config.pluginmanager.hasplugin("html"):
            from pytest_libero.plugin.html_report import HtmlReport

            config.pluginmanager.register(HtmlReport(accounting), "libero-html")


def pytest_report_header(config: pytest.Config) -> str | None:
    run = libero_run_of(config)
    if run is None:
        return None
    p = run.protocol
    budget = (f"decisions D={p.max_policy_calls} K={p.replan_interval}" if p.budget == "decisions"
              else f"horizon (per-suite reference), K={p.replan_interval}")
    shard = f" (shard {run.shard.index}/{run.shard.count} from {run.shard.source})" if run.shard else ""
    mode = f", {p.describe_schedule()}" if p.schedule is not None else ""
    from pytest_libero import benchmarks

    bench = f"benchmark {run.benchmark}, " if run.benchmark != benchmarks.DEFAULT else ""  # only another is named
    options = "".join(f", {name} {value}" for name, value in p.benchmark_options)  # the adapter's protocol options
    recorded = config.stash.get(RECORDED_KEY, [])
    resumed = f"libero: resuming {run.resume} with its recorded options: {' '.join(recorded)}\n" if recorded else ""
    resumed += config.stash.get(CLEANED_KEY, "")
    if run.comparison is not None:
        c = run.comparison.settings
        resumed += (f"libero: against {c.against}: {len(run.cells)} cells in order (seed {c.order_seed}), sequential "
                    f"test, stop {c.stop}, alpha {c.alpha:g}, power {c.power:g}, min effect {c.min_effect:g}\n")
    from pytest_libero.plugin.preflight import header_line

    checked = header_line(config)
    resumed += f"{checked}\n" if checked else ""
    return (f"{resumed}libero: {bench}scope {p.scope}, {len(run.cells)} cell(s){shard}, policy {run.policy.name}, "
            f"budget {budget}, track {p.track}{mode}{options}, protocol {p.identity}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    run = libero_run_of(metafunc.config)
    if "libero_cell" not in metafunc.fixturenames or run is None:
        return  # not a LIBERO run: the libero_cell fixture errors the item, naming the fix
    markers = getattr(run.adapter, "markers", lambda cell: ())  # optional: a benchmark's own markers
    metafunc.parametrize(
        "libero_cell",
        [pytest.param(cell, id=cell.id,
                      marks=[getattr(pytest.mark, name) for name in ("libero", cell.suite, *markers(cell))])
         for cell in run.cells],
    )


def pytest_itemcollected(item: pytest.Item) -> None:
    cell = _cell_of(item)
    run = libero_run_of(item.config)
    if isinstance(cell, Cell) and run is not None:  # not pytest's placeholder of an empty parametrization
        item.extra_keyword_matches.update(run.adapter.keywords(cell))


def _configure_controller_run(config: pytest.Config, run: LiberoRun) -> None:
    """The run folder (new, or the resumed one with the cells it keeps) and the GPU assignment."""
    from pytest_libero.plugin import gpus
    resumed: frozenset[str] = frozenset()
    if run.resume is not None:
        from pytest_libero.plugin.options import usage_errors
        from pytest_libero.results.resume import completed_cells

        run_dir = Path(run.resume).resolve()
        if not config.option.collectonly:
            with usage_errors():
                kept = completed_cells(run_dir, run.protocol.as_dict(), run.protocol.identity, run.policy.as_dict(),
                                       run.resume_keep_errors)
            resumed = frozenset(kept) & {cell.id for cell in run.cells}
            from pytest_libero.results.attempts import describe_removed, remove_temporaries

            removed = describe_removed(remove_temporaries(run_dir))
            config.stash[CLEANED_KEY] = f"libero: resume {removed}\n" if removed else ""
    else:
        root = Path(run.output_root) if run.output_root else config.rootpath / "reports"
        run_dir = root.resolve() / profile_slug(run.policy.name) / new_run_id()
    config.stash[RUN_DIR_KEY] = RunDir(run_dir)
    config.stash[RESUMED_KEY] = resumed
    if config.option.collectonly:
        return
    gpus.configure_controller(config, run.gpus)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "setup" and call.excinfo is not None and call.excinfo.errisinstance(PolicyNotBuilt):
        report.longrepr = str(call.excinfo.value)  # one line, no traceback
        report.libero_not_built = str(call.excinfo.value)  # type: ignore[attr-defined]
    row = item.stash.get(RESULT_KEY, None)
    if row is not None and (report.when == "call" or (report.when == "setup" and not report.passed)):
        report.libero = row  # type: ignore[attr-defined]  # plain builtins: crosses xdist
        html_path = item.config.getoption("htmlpath", None)
        if row.get("video") and html_path:
            from pytest_html import extras

            video = item.config.stash[RUN_DIR_KEY].path / row["video"]
            relative = os.path.relpath(video, Path(html_path).resolve().parent)
            report.extras = [*getattr(report, "extras", []),  # type: ignore[attr-defined]
                             extras.video(relative, name=row["cell"])]
    if RUN_DIR_KEY in item.config.stash:
        from pytest_libero.plugin.breaker import note_report

        note_report(item, call, report, item.config.stash[RUN_DIR_KEY].path)  # env_error cell after cell: stop
    return report


@pytest.fixture(scope="session")
def libero_run(pytestconfig: pytest.Config) -> LiberoRun:
    """The frozen run settings: protocol, selected cells, policy spec."""
    run = libero_run_of(pytestconfig)
    if run is None:
        pytest.fail(NOT_A_LIBERO_RUN, pytrace=False)
    return run


@pytest.fixture
def libero_cell() -> Cell:
    """This item's cell. A LIBERO run parametrizes `libero_cell` directly (pytest_generate_tests),
    which overrides this fixture: its body runs only outside a LIBERO run, to say so."""
    pytest.fail(NOT_A_LIBERO_RUN, pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Before -k/-m deselect anything: a LIBERO run whose header selects cells but whose paths hold
    no LIBERO case fails with one line saying why (instead of `collected 0 items`)."""
    run = libero_run_of(config)
    if run is None or not run.cells or hasattr(config, "workerinput"):
        return
    if any(isinstance(_cell_of(item), Cell)
           for item in items):
        return
    raise pytest.UsageError(no_case_line(config, len(run.cells)))



@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Build and check the policy once, before any item runs (in each process that runs items; an
    xdist controller collects nothing), then the preflight on the first pending cell. A policy that
    cannot be built, or a failed preflight, stops the run: one line, exit 4."""
    config = session.config
    if (libero_run_of(config) is None or config.option.collectonly or POLICY_KEY in config.stash
            or hasattr(config, "workerinput")):
        # Not a LIBERO run; or an xdist worker: it builds the policy in the fixture (a usage error
        # here would end the worker).
        return
    resumed = config.stash.get(RESUMED_KEY, frozenset())
    cells = [_cell_of(item) for item in session.items]
    pending = [cell for cell in cells if isinstance(cell, Cell) and cell.id not in resumed]
    if not pending:
        return  # nothing will run an episode (a resumed run's kept cells build nothing)
    from pytest_libero.plugin import preflight

    run = config.stash[RUN_KEY]
    config.stash[POLICY_KEY] = build_policy(config, run)
    # The first pending cell built on the session's own service (kept for it: plugin/preflight.py),
    # among the items that run an episode (a test that only takes the policy builds nothing).
    episodes = [cell for item in session.items
                if "libero_episode" in getattr(item, "fixturenames", ()) and isinstance(cell := _cell_of(item), Cell)]
    preflight.run_here(config, run, [cell for cell in episodes if cell.id not in resumed],
                       lambda: _new_service(config, run))
    preflight.stop_if_failed(config, [item.nodeid for item in session.items], config.stash[RUN_DIR_KEY].path)


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    """One process: the preflight's line, after `collected N items` (it ran once the selection was known)."""
    if libero_run_of(config) is None or hasattr(config, "workerinput") or config.pluginmanager.hasplugin("dsession"):
        return None
    from pytest_libero.plugin.preflight import header_line

    return header_line(config)


def pytest_sessionstart(session: pytest.Session) -> None:
    """The xdist controller runs no item: it checks what it can without building the policy (the
    factory loads and takes the kwargs), then runs the preflight (plugin/preflight.py: its header
    line), so that a typo, or a failed preflight, stops the run before any worker starts."""
    config = session.config
    run = libero_run_of(config)
    if run is None or hasattr(config, "workerinput"):
        return
    if not config.pluginmanager.hasplugin("dsession"):
        return  # one process: the policy and the preflight once collection knows the selection
    from pytest_libero.plugin import preflight
    from pytest_libero.plugin.policy_build import check_on_controller

    hosted = run.isolation == "host" and not config.option.collectonly
    check_on_controller(config, run, hosted)
    # Before any worker starts (the run's cells: -k and -m are applied by the workers' collection).
    resumed = config.stash.get(RESUMED_KEY, frozenset())
    preflight.run_for_xdist(config, run, [cell for cell in run.cells if cell.id not in resumed])  # its header line
    preflight.stop_if_failed(config, [cell.id for cell in run.cells], config.stash[RUN_DIR_KEY].path)
    if hosted:
        from pytest_libero.plugin import policy_host

        from pytest_libero.runtime.policies import build_failure_line

        try:
            policy_host.start_for_xdist(config, run, policy_paths(run))  # built before any worker starts
        except Exception as exc:  # noqa: BLE001 - reported once, as a usage error
            raise pytest.UsageError(build_failure_line(run.policy, exc)) from None


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the policy hosts this process started (--libero-policy-isolation host)."""
    run = libero_run_of(config)
    if run is not None and run.isolation == "host":
        from pytest_libero.plugin.policy_host import close_hosts

        close_hosts(config)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Close a policy built before the run that no item took (-x, a deselected or failed start), and
    the preflight's service if no item took it."""
    from pytest_libero.plugin.preflight import close_kept

    close_kept(session.config)
    policy = session.config.stash.get(POLICY_KEY, None)
    if policy is not None:
        from pytest_libero.runtime.policies import close_policy

        del session.config.stash[POLICY_KEY]
        close_policy(policy)


@pytest.fixture(scope="session")
def libero_policy(request: pytest.FixtureRequest, pytestconfig: pytest.Config, libero_run: LiberoRun) -> Iterator[Any]:
    """The policy under evaluation, built once per worker before its first item (in its own process
    with isolation); see pytest_collection_finish.

    A policy whose profile declares another K, budget, track or image convention than the run's is
    refused here, before any episode: every item errors with both values named."""
    from pytest_libero.core.policy import check_declarations
    from pytest_libero.runtime.policies import close_policy

    policy = pytestconfig.stash.get(POLICY_KEY, None)
    if policy is None:  # an xdist worker: a build failure errors its item with the one line and stops
        try:             # the run (the controller ends it with exit 4; see Accounting.pytest_sessionfinish)
            policy = build_policy(pytestconfig, libero_run)
        except pytest.UsageError as exc:
            request.session.shouldstop = str(exc)
            raise PolicyNotBuilt(str(exc)) from None
    else:
        del pytestconfig.stash[POLICY_KEY]
    try:
        # What the policy declares it was built for (K, budget, track, images) against this run.
        check_declarations(libero_run.policy.name, getattr(policy, "profile", None), libero_run.protocol)
    except PolicyLoadError:
        with contextlib.suppress(Exception):  # a failing close() never hides the refusal
            close_policy(policy)
        raise
    yield policy
    close_policy(policy)


@pytest.fixture(scope="session")
def libero_source_check(libero_run: LiberoRun, libero_service: Any) -> list[str]:
    """Installed LIBERO files checked against the frozen inventory, once per worker (in the service)."""
    mismatch = libero_service.check_sources()
    if mismatch is None:
        return []
    if not libero_run.allow_source_mismatch:
        raise InventoryMismatch(mismatch)
    warnings.warn(LiberoSourceWarning(mismatch), stacklevel=1)
    return [mismatch]


@pytest.fixture(scope="session")
def libero_service(pytestconfig: pytest.Config, libero_run: LiberoRun) -> Iterator[Any]:
    """The worker's bench service (a separate simulator process), restarted after a fault: the
    preflight's (holding the first cell's episode) when it kept one, else a new one."""
    from pytest_libero.plugin.preflight import take_service

    service = take_service(pytestconfig) or _new_service(pytestconfig, libero_run)
    yield service
    service.close()


def _new_service(config: pytest.Config, run: LiberoRun) -> Any:
    """A bench service with this process's environment (a worker's; the preflight's in one process)."""
    from pytest_libero import benchmarks
    from pytest_libero.plugin.gpus import service_env
    from pytest_libero.runtime.service import BenchService

    # On a GPU worker: render on that GPU (its EGL index); a failed mapping errors every item.
    # The benchmark adapter's service module and settings go in the service's environment.
    env = dict(service_env(config), **benchmarks.service_env(run.adapter, run.context))
    return BenchService(timeout_s=run.service_timeout_s, env=env)


class EpisodeVerdict:
    """What a case receives: the finished episode, and the protocol's verdict on it."""

    def __init__(self, result: Any) -> None:
        self.result = result

    def check(self) -> None:
        """Pass on native success; fail (with the counters) on truncation, stop or policy fault."""
        r = self.result
        if r.outcome == Outcome.SUCCESS:
            return
        reason = Outcome.POLICY_ERROR if r.outcome == Outcome.POLICY_ERROR else Outcome.FAILURE
        pytest.fail(f"{reason}: {r.message}", pytrace=False)


@pytest.fixture
def libero_episode(request: pytest.FixtureRequest, libero_cell: Cell, libero_run: LiberoRun) -> EpisodeVerdict:
    """Run one episode of the policy on this item's cell and write its evidence.

    Environment faults error the item; its record (and video so far) is written all the same.
    A cell a resumed run keeps reports its record instead (no policy, no simulator).
    """
    from pytest_libero.core.rollout import run_episode
    from pytest_libero.plugin.episode_files import EpisodeFiles
    from pytest_libero.plugin.gpus import record_fields
    from pytest_libero.plugin.worker import worker_name

    if libero_cell.id in request.config.stash.get(RESUMED_KEY, frozenset()):
        return _resumed_episode(request, libero_cell)
    if libero_run.comparison is not None:
        from pytest_libero.results.sequential import read_stop

        stopped = read_stop(request.config.stash[RUN_DIR_KEY].path)
        # The comparison decided while this item waited (or a resume's kept prefix decides): it never
        # runs, and the controller records it not_run with the reason. Skipping, not stopping, lets the
        # kept cells still queued report their records.
        if stopped is not None:
            pytest.skip(stopped)
    # Requested here, not as parameters, so that a run of resumed cells builds nothing.
    libero_policy = request.getfixturevalue("libero_policy")
    libero_service = request.getfixturevalue("libero_service")
    libero_source_check: list[str] = request.getfixturevalue("libero_source_check")
    if libero_run.resume is not None:
        from pytest_libero.results.attempts import keep_attempt

        # Run again: the earlier attempt's record and video move to attempts/ (kept, not overwritten).
        keep_attempt(request.config.stash[RUN_DIR_KEY].path, libero_cell.id)
    from pytest_libero.core.rollout import start_payload

    settings = libero_run.episode_settings(libero_cell.suite)
    # The preflight's build of this cell (its episode is this one) counts in its wall time.
    ahead = getattr(libero_service, "started_ahead_s", lambda payload: 0.0)(
        start_payload(libero_cell, libero_run.protocol, settings))
    files = EpisodeFiles(request.config.stash[RUN_DIR_KEY], libero_run, libero_cell, libero_policy,
                         worker=worker_name(request.config), started=time.time() - ahead,
                         compute=record_fields(request.config))
    # The benchmark may refuse a cell (a LIBERO-plus variant whose asset files are missing): it is
    # never run, and recorded unattempted with the reason.
    refused = libero_run.adapter.unattempted(libero_service, libero_cell)
    if refused is not None:
        request.node.stash[RESULT_KEY] = files.write_unattempted(refused)
        pytest.skip(refused.message)
    fault: EnvironmentFault | None = None
    try:
        result = run_episode(libero_service, libero_policy, libero_cell, libero_run.protocol, settings,
                             on_frame=files.frame)
    except EnvironmentFault as exc:
        fault, result = exc, exc.partial  # type: ignore[attr-defined]
    host_timing = getattr(libero_policy, "episode_timing", None)  # the policy host's queue wait, batch sizes
    if callable(host_timing):
        result.timing.update(host_timing())
    episode_over = getattr(libero_policy, "episode_over", None)  # the policy host stops waiting for this worker
    if callable(episode_over):
        episode_over()
    result.warnings.extend(libero_source_check)
    from pytest_libero.plugin.install_check import STOP_FIELD, check_episode

    stop = check_episode(request.config, libero_run, libero_cell, result)  # the install check
    row = request.node.stash[RESULT_KEY] = files.write(result)
    fault = fault or files.fault  # a video that could not be encoded (plugin/episode_files.py)
    if stop is not None:
        row[STOP_FIELD] = stop  # the controller stops the session (plugin/install_check.py)
        request.session.shouldstop = stop
    if fault is not None:
        pytest.fail(f"{Outcome.ENV_ERROR}: {fault}", pytrace=False)
    if stop is not None:
        pytest.fail(stop, pytrace=False)
    return EpisodeVerdict(result)


def _resumed_episode(request: pytest.FixtureRequest, cell: Cell) -> EpisodeVerdict:
    """The verdict of a kept record, reported as if the episode had just run."""
    import json
    from types import SimpleNamespace

    from pytest_libero.results.summary import episode_row

    record = json.loads(request.config.stash[RUN_DIR_KEY].record_path(cell.id).read_text(encoding="utf-8"))
    row = dict(episode_row(cell.id, record), resumed=True)
    request.node.stash[RESULT_KEY] = row
    outcome, message = record["outcome"]["outcome"], record["outcome"]["message"]
    if Outcome(outcome) not in COMPLETED:
        pytest.fail(f"{outcome} (kept by --libero-resume-keep-errors): {message}", pytrace=False)
    return EpisodeVerdict(SimpleNamespace(outcome=outcome, message=f"{message} [resumed: recorded earlier]"))
