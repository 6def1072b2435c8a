"""`--libero-preflight build`: before any cell, on the controller, does every render target of the run
build the run's first cell?

The checks are pytest_libero.runtime.preflight's: each pinned GPU's EGL device (or the CPU renderer),
then the bench service a worker there gets is sent the first pending cell's `start` (one environment
of the run's benchmark built, reset, settled, its first frame rendered). A failure stops the run
before any cell with exit status 4 (pytest's usage error: the machine, not the policy, is wrong) and
one message naming the GPU, the renderer, the library or the benchmark's cell and cause, and the
fix; run.json, selection.json and a `not_run` record of every selected cell are written first, so
`pytest --libero-resume RUN` continues after the fix.

One process (no xdist): the check runs once collection knows the selection (-k and -m apply) and the
policy is built, on the first pending item's cell, and its line is printed after `collected N items`.
Its service is the session's (the `libero_service` fixture takes it), holding the first cell's
episode: the preflight costs nothing the first cell would not pay. Under xdist it runs at session
start (its line in the header) before any worker starts, on the run's first pending cell (-k and -m
have not been applied yet), one service per target at once, closed after.

A run whose `libero_service` fixture is replaced (a conftest's fake service) has no bench service to
check: the preflight says so and checks nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from pytest_libero.core.cells import Cell
from pytest_libero.plugin.gpus import pinned
from pytest_libero.runtime import preflight
from pytest_libero.runtime.service import BenchService

CHECKED_KEY = pytest.StashKey[preflight.Checked]()
SKIPPED_KEY = pytest.StashKey[str]()  # why nothing was checked (a replaced libero_service)
SERVICE_KEY = pytest.StashKey[BenchService]()  # the service holding the first cell's episode
EXIT_STATUS = pytest.ExitCode.USAGE_ERROR


def used_gpus(config: pytest.Config) -> list[dict[str, Any] | None]:
    """The GPUs this run renders on: the one process's, or those its xdist workers get (None: CPU)."""
    xdist = config.pluginmanager.get_plugin("libero-gpus")
    if xdist is None:
        return [pinned(config)]
    listed: list[dict[str, Any] | None] = [gpu.as_dict() for gpu in xdist.assignment.gpus]
    workers = getattr(config.option, "numprocesses", None)
    if isinstance(workers, int) and workers > 0:
        listed = listed[:workers]  # workers get GPUs round-robin from the first (runtime.gpus.GpuAssignment)
    return listed or [None]


def replaced_service(config: pytest.Config) -> str | None:
    """The plugin (a conftest) that replaces the `libero_service` fixture, None when none does."""
    ours = sys.modules[__name__.rpartition(".")[0]]
    for plugin in config.pluginmanager.get_plugins():
        if plugin is not ours and getattr(plugin, "libero_service", None) is not None:
            return str(getattr(plugin, "__file__", None) or config.pluginmanager.get_name(plugin))
    return None


def _wanted(config: pytest.Config) -> bool:
    """Whether to check at all (on, not --collect-only, the bench service not replaced)."""
    if config.getoption("libero_preflight") == "off" or config.option.collectonly:
        return False
    replaced = replaced_service(config)
    if replaced is not None:
        config.stash[SKIPPED_KEY] = f"skipped: libero_service is replaced by {replaced} (no bench service to build)"
        return False
    return True


def _job(run: Any, cells: list[Cell]) -> preflight.Job:
    from pytest_libero.core.rollout import start_payload

    return preflight.Job(
        benchmark=run.benchmark, cells=cells,
        payload=lambda cell: start_payload(cell, run.protocol, run.episode_settings(cell.suite)),
        refused=run.adapter.unattempted, allow_source_mismatch=run.allow_source_mismatch)


def run_here(config: pytest.Config, run: Any, cells: list[Cell], new_service: Callable[[], BenchService]) -> None:
    """One process: build `cells[0]` (the first pending item's) on the service the session will use
    (`new_service`, the fixture's own), kept for the session when it passes."""
    if not cells or not _wanted(config):
        return

    def open_service(target: preflight.Target, devices: Any) -> tuple[BenchService, int | None]:
        service = new_service()  # maps this process's GPU to its EGL device (plugin.gpus.service_env)
        gpu = pinned(config)
        return service, gpu.get("egl_device") if gpu is not None else None

    checked = preflight.check(preflight.targets(used_gpus(config)), _job(run, cells), open_service, keep=True)
    config.stash[CHECKED_KEY] = checked
    if checked.kept is not None:
        config.stash[SERVICE_KEY] = checked.kept


def run_for_xdist(config: pytest.Config, run: Any, cells: list[Cell]) -> None:
    """The xdist controller: build `cells[0]` on one service per render target, all at once; closed."""
    if not cells or not _wanted(config):
        return
    from pytest_libero import benchmarks
    from pytest_libero.runtime import gpus

    bench_env = benchmarks.service_env(run.adapter, run.context)

    def open_service(target: preflight.Target, devices: Any) -> tuple[BenchService, int | None]:
        env, egl = gpus.service_env(target.gpu, devices)
        return BenchService(timeout_s=run.service_timeout_s, env=dict(env, **bench_env)), egl

    config.stash[CHECKED_KEY] = preflight.check(preflight.targets(used_gpus(config)), _job(run, cells), open_service)


def take_service(config: pytest.Config) -> BenchService | None:
    """The service the preflight kept for this session (once), None when there is none."""
    service = config.stash.get(SERVICE_KEY, None)
    if service is not None:
        del config.stash[SERVICE_KEY]
    return service


def close_kept(config: pytest.Config) -> None:
    """Close a kept service no item took (a run stopped before its first cell)."""
    service = take_service(config)
    if service is not None:
        service.close()


def header_line(config: pytest.Config) -> str | None:
    """The preflight's line: what was checked and what it cost."""
    checked = config.stash.get(CHECKED_KEY, None)
    if checked is None:
        skipped = config.stash.get(SKIPPED_KEY, None)
        return f"libero: preflight {skipped}" if skipped else None
    found = "FAILED: " + checked.failure if checked.failure else "; ".join(checked.lines)
    return f"libero: preflight ({checked.seconds:.1f} s, --libero-preflight off skips it): {found}"


def stop_if_failed(config: pytest.Config, selected: list[str], run_dir: Any) -> None:
    """pytest.UsageError (exit 4) when the preflight failed, after the run folder records every
    `selected` cell (node or cell ids) not_run with the cause."""
    checked = config.stash.get(CHECKED_KEY, None)
    if checked is None or checked.failure is None:
        return
    accounting = config.pluginmanager.get_plugin("libero-accounting")
    if accounting is not None:
        accounting.stop_before_cells(selected, f"never ran: the preflight stopped the run: {checked.failure}")
    count = len(accounting.selected) if accounting is not None else len(selected)
    raise pytest.UsageError(
        f"libero preflight: {checked.failure}. The run stopped before any cell (exit {int(EXIT_STATUS)}); its "
        f"{count} selected cell(s) are recorded not_run in {run_dir}: after the fix, `pytest --libero-resume "
        f"{run_dir}` runs them (--libero-preflight off skips this check)")
