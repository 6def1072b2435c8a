"""The preflight's checks, without pytest: can each render target of a run build the run's first cell?

A render target is a pinned GPU's EGL device, or the CPU renderer (no GPU). For each one the check
is what a worker on it does first, on the bench service it would get: the GPU's EGL device from its
CUDA index (runtime.gpus.service_env, one EGL probe for every GPU: fast, and it names libEGL_nvidia
when EGL cannot map the GPU), then a bench service with that worker's environment (the benchmark's
service module and settings, the EGL device) is sent the `start` of the run's first cell, the very
payload that cell's episode sends (core.rollout.start_payload): one environment of the run's
benchmark built and reset, settled, its first observation rendered with the run's cameras.

What it catches: a GPU that EGL cannot map, a MuJoCo or benchmark that does not import, a GL backend
that cannot render, a task that does not build, a missing asset. A cell the benchmark refuses (its
adapter's `unattempted`) is passed over for the next; installed files that differ from the frozen
inventory are left to the cells (each reports the mismatch, or runs with
--libero-allow-source-mismatch). The controller never imports the simulator: the service does.

Cost. One process (no xdist): the service that built the first cell is kept (`Checked.kept`) and
the worker's session uses it: the first cell's `start` is answered with the reply of the episode
started here (BenchService.prestart), so nothing is built twice and the first record is the one it
would have been. Under xdist the controller starts one service per target, all at once, and closes
them: that build is the preflight's whole cost (printed).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pytest_libero.core.cells import Cell
from pytest_libero.errors import EnvironmentFault
from pytest_libero.runtime import gpus
from pytest_libero.runtime.service import BenchService


@dataclass(frozen=True, slots=True)
class Target:
    """One render target: a GPU (`Gpu.as_dict()`) or None (the CPU renderer)."""

    gpu: dict[str, Any] | None

    def describe(self, egl_device: int | None = None) -> str:
        backend = gpus.rendering_backend()
        if self.gpu is None:
            return f"the CPU renderer (no GPU; MUJOCO_GL={backend})"
        g = self.gpu
        known = ", ".join(str(v) for v in (g.get("name"), g.get("uuid")) if v)
        egl = f", EGL device {egl_device}" if egl_device is not None else ""
        return f"GPU {g['id']}{f' ({known})' if known else ''} (MUJOCO_GL={backend}{egl})"


@dataclass(frozen=True, slots=True)
class Job:
    """What every target builds: the run's benchmark, its pending cells (the first selected first),
    each cell's `start` payload, and whether the benchmark refuses a cell (None: it does not)."""

    benchmark: str
    cells: Sequence[Cell]
    payload: Callable[[Cell], dict[str, Any]]
    refused: Callable[[Any, Cell], Any]  # (service, cell): why the benchmark will not run it (None: it will)
    allow_source_mismatch: bool = False


@dataclass(frozen=True, slots=True)
class Checked:
    """What the preflight found: each target's line, the first failure (None: all passed), the cost,
    and the one service kept for the session (one process: it holds the first cell's episode)."""

    lines: tuple[str, ...]
    failure: str | None
    seconds: float
    kept: BenchService | None = None


# Opens the bench service a worker on a target gets: (service, the EGL device it renders on).
OpenService = Callable[[Target, list[dict[str, Any]] | None], tuple[BenchService, int | None]]

RENDER_FIX = ("check that MuJoCo imports and renders here (MUJOCO_GL=egl needs an EGL library: Mesa's libEGL_mesa "
              "on the CPU, the driver's libEGL_nvidia on an NVIDIA GPU; MUJOCO_GL=osmesa renders on the CPU "
              "without EGL)")
BUILD_FIX = ("fix the benchmark's install or the file named (`python -m pytest_libero doctor` builds its reference "
             f"cells one by one and compares them), and {RENDER_FIX}")


def targets(used: list[dict[str, Any] | None]) -> list[Target]:
    """The distinct render targets of the GPUs the run's processes render on (None: the CPU)."""
    seen: dict[str | None, Target] = {}
    for gpu in used:
        seen.setdefault(gpu["id"] if gpu is not None else None, Target(gpu))
    return list(seen.values())


def build_first(service: BenchService, job: Job) -> str:
    """Start the first cell of `job` the benchmark does not refuse on `service` (its episode is kept
    for that cell: BenchService.prestart); what was built. EnvironmentFault names the cell."""
    cell_id = job.cells[0].id if job.cells else "(none)"
    try:
        if service.check_sources() is not None and not job.allow_source_mismatch:
            return ("installed files differ from the frozen inventory: nothing built (each cell reports the "
                    "mismatch; --libero-allow-source-mismatch runs them)")
        for cell in job.cells:
            cell_id = cell.id
            if job.refused(service, cell) is not None:
                continue  # recorded unattempted by its own item; the next cell is what runs first
            tick = time.perf_counter()
            service.prestart(job.payload(cell))
            took = time.perf_counter() - tick
            return f"built {job.benchmark} {cell.id} (reset, settled, first frame rendered: {took:.1f} s)"
    except EnvironmentFault as exc:
        cause = str(exc).split("\n", 1)[0]  # the exception's own line (the trace is the service's)
        raise EnvironmentFault(f"cannot build {job.benchmark} cell {cell_id}: {cause}") from exc
    return f"every {job.benchmark} cell is refused by the benchmark: nothing built"


def _one(target: Target, job: Job, devices: list[dict[str, Any]] | None, open_service: OpenService,
         keep: bool) -> tuple[str | None, str | None, BenchService | None]:
    """(line, failure, kept service) of one target; a service not kept is closed."""
    egl: int | None = None
    service: BenchService | None = None
    try:
        try:
            service, egl = open_service(target, devices)
        except EnvironmentFault as exc:  # the EGL mapping (runtime.gpus.service_env)
            cause = re.sub(r"^cannot render on GPU [^:]*: ", "", str(exc))  # said once, below
            fix = "" if "libEGL_nvidia" in cause else f"; {RENDER_FIX}"
            return None, f"cannot render on {target.describe(egl)}: {cause}{fix}", None
        try:
            built = build_first(service, job)
        except EnvironmentFault as exc:
            return None, f"{exc} (on {target.describe(egl)}); {BUILD_FIX}", None
        line = f"{target.describe(egl)} {built}"
        if keep:
            service, kept = None, service  # not closed below: the session's worker takes it
            return line, None, kept
        return line, None, None
    finally:
        if service is not None:
            service.close()


def check(found: list[Target], job: Job, open_service: OpenService, keep: bool = False) -> Checked:
    """Build the first cell on every target, all at once; the first failure in target order.

    `keep` (one target: the session's own process, whose `open_service` maps its GPU itself): the
    service is kept for the session instead of closed, and no EGL probe is made here."""
    tick = time.perf_counter()
    devices: list[dict[str, Any]] | None = None
    try:
        if not keep and any(t.gpu is not None for t in found) and gpus.rendering_backend() == "egl":
            devices = gpus.probe_egl_devices(gpus.probe_environment(os.environ))  # once for every GPU
    except EnvironmentFault as exc:
        first = next(t for t in found if t.gpu is not None)
        return Checked((), f"cannot render on {first.describe()}: {exc}; {RENDER_FIX}", time.perf_counter() - tick)
    keep = keep and len(found) == 1
    with ThreadPoolExecutor(max_workers=max(1, len(found)), thread_name_prefix="libero-preflight") as pool:
        done = list(pool.map(lambda t: _one(t, job, devices, open_service, keep), found))
    lines = tuple(line for line, _, _ in done if line is not None)
    failure = next((failure for _, failure, _ in done if failure is not None), None)
    kept = next((service for _, _, service in done if service is not None), None)
    if failure is not None and kept is not None:
        kept.close()
        kept = None
    return Checked(lines, failure, time.perf_counter() - tick, kept)
