"""The pytest11 entry point: options, collection of cells, fixtures, and report plumbing.

Imports nothing heavy: no simulator module is imported on collection or on the controller.
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any, Generator, Iterator

import pytest

from pytest_libero import catalog
from pytest_libero.catalog import Cell
from pytest_libero.errors import EnvironmentFault, InventoryMismatch, PolicyLoadError
from pytest_libero.options import LiberoRun, addoptions, build_run, is_libero_run

RUN_KEY = pytest.StashKey[LiberoRun]()
RESULT_KEY = pytest.StashKey[Any]()


class LiberoSourceWarning(UserWarning):
    """Installed LIBERO files differ from the frozen inventory and the user chose to run anyway."""


def pytest_addoption(parser: pytest.Parser) -> None:
    addoptions(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_libero import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(trylast=True)
def pytest_libero_make_policy(config: pytest.Config, spec: Any) -> Any:
    from pytest_libero.policy import build_builtin

    return build_builtin(spec)


def pytest_configure(config: pytest.Config) -> None:
    for suite in catalog.SUITES:
        config.addinivalue_line("markers", f"{suite}: LIBERO cells of suite {suite}")
    config.stash[RUN_KEY] = build_run(config)
    if is_libero_run(config) and config.args_source != pytest.Config.ArgsSource.ARGS:
        # No paths given: run the bundled evaluation cases (this works the same in this
        # checkout and when pytest-libero is pip-installed into another project).
        spec = importlib.util.find_spec("pytest_libero.cases")
        assert spec is not None and spec.submodule_search_locations
        config.args[:] = [list(spec.submodule_search_locations)[0]]
    if not hasattr(config, "workerinput"):
        from pytest_libero.accounting import Accounting

        config.pluginmanager.register(Accounting(config), "libero-accounting")


def pytest_report_header(config: pytest.Config) -> str:
    run = config.stash[RUN_KEY]
    p = run.protocol
    budget = (f"decisions D={p.max_policy_calls} K={p.replan_interval}" if p.budget == "decisions"
              else f"horizon (per-suite reference), K={p.replan_interval}")
    return (f"libero: scope {p.scope}, {len(run.cells)} cell(s), policy {run.policy.name}, "
            f"budget {budget}, protocol {p.identity}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "libero_cell" not in metafunc.fixturenames:
        return
    run = metafunc.config.stash[RUN_KEY]
    metafunc.parametrize(
        "libero_cell",
        [pytest.param(cell, id=cell.id, marks=getattr(pytest.mark, cell.suite)) for cell in run.cells],
    )


def pytest_itemcollected(item: pytest.Item) -> None:
    cell = getattr(getattr(item, "callspec", None), "params", {}).get("libero_cell")
    if isinstance(cell, Cell):
        # -k matches task names, e.g. -k KITCHEN_SCENE3
        item.extra_keyword_matches.add(catalog.entry(cell.suite, cell.task_index)["task_name"])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    result = item.stash.get(RESULT_KEY, None)
    if result is not None and (report.when == "call" or (report.when == "setup" and report.failed)):
        report.libero = result.as_dict()  # type: ignore[attr-defined]  # builtins: crosses xdist
    return report


@pytest.fixture(scope="session")
def libero_run(pytestconfig: pytest.Config) -> LiberoRun:
    """The frozen run settings: protocol, selected cells, policy spec."""
    return pytestconfig.stash[RUN_KEY]


@pytest.fixture(scope="session")
def libero_policy(pytestconfig: pytest.Config, libero_run: LiberoRun) -> Iterator[Any]:
    """The policy under evaluation, built once per worker."""
    from pytest_libero.policy import check_policy_object

    spec = libero_run.policy
    policy = pytestconfig.hook.pytest_libero_make_policy(config=pytestconfig, spec=spec)
    if policy is None:
        raise PolicyLoadError(f"no adapter built policy {spec.name!r}")
    policy = check_policy_object(policy, spec)
    yield policy
    policy.close()


@pytest.fixture(scope="session")
def libero_source_check(libero_run: LiberoRun) -> list[str]:
    """Installed LIBERO files checked against the frozen inventory, once per worker."""
    from pytest_libero.inventory import check_installation

    try:
        check_installation()
    except InventoryMismatch as exc:
        if not libero_run.allow_source_mismatch:
            raise
        warnings.warn(LiberoSourceWarning(str(exc)), stacklevel=1)
        return [str(exc)]
    return []


@pytest.fixture(scope="session")
def libero_service(libero_run: LiberoRun) -> Iterator[Any]:
    """The worker's bench service (a separate simulator process), restarted after a fault."""
    from pytest_libero.service import BenchService

    service = BenchService(timeout_s=libero_run.service_timeout_s)
    yield service
    service.close()


class Episode:
    """What a case receives: the finished episode, and the protocol's verdict on it."""

    def __init__(self, result: Any) -> None:
        self.result = result

    def check(self) -> None:
        """Pass on native success; fail (with the counters) on truncation, stop or policy fault."""
        r = self.result
        if r.outcome == "success":
            return
        reason = "policy_error" if r.outcome == "policy_error" else "failure"
        pytest.fail(f"{reason}: {r.message}", pytrace=False)


@pytest.fixture
def libero_episode(request: pytest.FixtureRequest, libero_cell: Cell, libero_run: LiberoRun,
                   libero_policy: Any, libero_service: Any, libero_source_check: list[str]) -> Episode:
    """Run one episode of the policy on this item's cell (environment faults error the item)."""
    from pytest_libero.policy import profile_of
    from pytest_libero.rollout import run_episode

    try:
        result = run_episode(libero_service, libero_policy, libero_cell, libero_run.protocol,
                             allow_source_mismatch=libero_run.allow_source_mismatch)
    except EnvironmentFault as exc:
        partial = getattr(exc, "partial", None)
        if partial is not None:
            partial.warnings.extend(libero_source_check)
            partial.policy = profile_of(libero_policy, libero_run.policy)
        request.node.stash[RESULT_KEY] = partial
        pytest.fail(f"env_error: {exc}", pytrace=False)
    result.warnings.extend(libero_source_check)
    result.policy = profile_of(libero_policy, libero_run.policy)
    request.node.stash[RESULT_KEY] = result
    return Episode(result)
