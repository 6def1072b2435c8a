"""`--libero-preflight`: before any cell, on the controller, can every render target of the run render?

The checks are pytest_libero.runtime.preflight's (each pinned GPU's EGL device, or the CPU renderer;
one frame of a one-box MuJoCo model in a fresh process; no benchmark task is built). They run at
session start, so the header has their line and cost. A failure stops the run before any cell with
exit status 4 (pytest's usage error: the machine, not the policy, is wrong) and one message naming
the GPU, the renderer, the library and the fix; run.json, selection.json and a `not_run` record of
every selected cell are written first, so `pytest --libero-resume RUN` continues after the fix.
Without xdist the run stops once collection knows the selection (-k and -m apply); under xdist it
stops before any worker starts, with the run's cells (-k and -m have not been applied yet).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_libero.plugin.gpus import pinned
from pytest_libero.runtime import preflight

CHECKED_KEY = pytest.StashKey[preflight.Checked]()
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


def run_checks(config: pytest.Config, pending: bool) -> None:
    """At session start on the controller: check every render target (when a cell may run)."""
    if config.getoption("libero_preflight") == "off" or config.option.collectonly or not pending:
        return
    config.stash[CHECKED_KEY] = preflight.check(preflight.targets(used_gpus(config)))


def header_line(config: pytest.Config) -> str | None:
    """The header's preflight line: what was checked and what it cost."""
    checked = config.stash.get(CHECKED_KEY, None)
    if checked is None:
        return None
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
