"""The worker's handle on its bench service process: start, submit, finish, and recovery.

Any failure of the service (an exception in it, its death, a reply that does not come within
the deadline) raises EnvironmentFault and discards the process; the next episode gets a fresh
one. The policy never holds this object's process or pipe. The deadline the engine sets is the
episode's plus a grace (pytest_libero.core.rollout.service_grace_s): a service that misses it
missed its own deadline; a reply in the grace is charged by the engine to whoever held the time.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from pytest_libero.errors import EnvironmentFault
from pytest_libero.runtime.child import Child, Faults

DEFAULT_TIMEOUT_S = 600.0
# Building and closing MuJoCo/EGL environments leaves memory behind in the service process: on
# Mesa llvmpipe here it holds about 1.5 GiB after its first environment, about 2.0 GiB after the
# second, then grows slowly (2.2 GiB after 30 alternating-task episodes; docs/performance.md).
# With SERVICE_MALLOC it holds more (benchmarks/bench_service_malloc.py, 30 episodes, libero_10
# tasks 0 and 1 in turn: 2.4 GiB after the first, 2.9 GiB at the most, against 2.1 and 2.6 GiB
# under glibc's defaults). Past this resident size the service is restarted between episodes.
DEFAULT_MAX_RSS_MIB = 4096.0


# glibc's malloc in a bench service: large blocks come from the heap (mmap threshold 1 GiB) and the
# heap is shrunk only past 256 MiB free at its top, so memory freed by one environment (the render
# context's textures, the compiled model) serves the next build instead of going back to the kernel
# and being faulted in, zeroed, again. benchmarks/bench_service_malloc.py (real services, libero_10
# tasks alternating, 2026-12-07): system time 0.50x, CPU 0.88x, wall 0.87x, peak resident size
# 1.14-1.28x, every delivered observation identical. docs/performance.md has the figures.
SERVICE_MALLOC = "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=268435456"


def service_malloc_env() -> dict[str, str]:
    """GLIBC_TUNABLES for a new service: SERVICE_MALLOC, unless this process's environment sets
    GLIBC_TUNABLES (set, even empty, it is the service's as it is: the user's choice, and the way
    back to glibc's defaults)."""
    return {} if "GLIBC_TUNABLES" in os.environ else {"GLIBC_TUNABLES": SERVICE_MALLOC}


def rss_mib(pid: int) -> float | None:
    """Resident memory of a process (Linux /proc), None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as stream:
            for line in stream:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


# The service's side of pytest_libero.runtime.child: every failure is an EnvironmentFault, and a
# service whose request raised is discarded too (its simulator may be left in any state).
SERVICE_FAULTS = Faults(
    fault=EnvironmentFault,
    before_deadline="episode deadline (--libero-episode-timeout, with its grace) passed before {op!r}",
    past_deadline="episode deadline (--libero-episode-timeout, with its grace) passed while the bench service "
                  "worked on {op!r}; it was killed",
    no_reply="bench service gave no reply to {op!r} within {timeout:g} s; it was killed",
    died="bench service process died during {op!r} (exit code {exit_code}): {cause}",
    raised="bench service failed during {op!r}: {type_name}: {message}\n{trace}",
    discard_on_error=True,
)


class BenchService:
    """A lazily started bench service process (one per worker).

    `env` is the service process's extra environment: the benchmark's service module
    (pytest_libero.benchmarks.service_env names it; the service starts no benchmark unnamed) and
    e.g. MUJOCO_EGL_DEVICE_ID of the worker's GPU. Beside it the service gets service_malloc_env()
    (a GLIBC_TUNABLES in `env` wins).
    """

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S, env: dict[str, str] | None = None,
                 max_rss_mib: float | None = DEFAULT_MAX_RSS_MIB) -> None:
        self.timeout_s = timeout_s
        self.max_rss_mib = max_rss_mib
        self.recycled = 0
        self._child = Child("pytest_libero.runtime.server", SERVICE_FAULTS, {**service_malloc_env(), **(env or {})})
        # (payload, reply, service pid, seconds it took) of an episode started ahead of its cell (`prestart`).
        self._started: tuple[dict[str, Any], dict[str, Any], int | None, float] | None = None

    @property
    def pid(self) -> int | None:
        return self._child.pid

    @property
    def deadline(self) -> float | None:
        return self._child.deadline

    def set_deadline(self, deadline: float | None) -> None:
        """Bound every request until `deadline` (time.monotonic()) by the time left; None lifts it."""
        self._child.set_deadline(deadline)

    def request(self, op: str, payload: Any = None, timeout_s: float | None = None) -> Any:
        return self._child.request(op, payload, self.timeout_s if timeout_s is None else timeout_s)

    def start(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Start an episode: reset, settle, the first observation. The reply of an episode started
        ahead with this very payload (`prestart`) in this same service process is that episode's."""
        started, self._started = self._started, None
        if started is not None and started[0] == payload and self.pid is not None and started[2] == self.pid:
            return started[1]
        return self.request("start", payload)  # type: ignore[no-any-return]

    def prestart(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Start an episode ahead of its cell (the preflight builds the run's first cell): the next
        `start` of the same payload is answered with this reply, so the cell's episode is this one
        (the same build, reset and settling: nothing is done twice). Another `start` starts afresh
        (the service drops the episode started ahead)."""
        tick = time.monotonic()
        reply = self.start(payload)
        self._started = (payload, reply, self.pid, time.monotonic() - tick)
        return reply

    def started_ahead_s(self, payload: dict[str, Any]) -> float:
        """Seconds the episode of `payload` started ahead took (0.0: none is): its cell's record
        counts them in its wall time, as if its own `start` had built it."""
        started = self._started
        return started[3] if started is not None and started[0] == payload else 0.0

    def submit(self, chunk: np.ndarray, deliver: bool, frames: bool = False) -> dict[str, Any]:
        payload = {"chunk": chunk, "deliver": deliver, "frames": frames}
        return self.request("submit", payload)  # type: ignore[no-any-return]

    def check_sources(self) -> str | None:
        """None when installed LIBERO files match the inventory, else the mismatch message."""
        return self.request("check_sources")  # type: ignore[no-any-return]

    def finish(self, final_frame: bool = False) -> dict[str, Any]:
        evidence: dict[str, Any] = self.request("finish", {"final_frame": final_frame})
        self._recycle_if_grown()
        return evidence

    def _recycle_if_grown(self) -> None:
        """Restart the service between episodes once its memory passed the allowance."""
        if self.max_rss_mib is None or self.pid is None:
            return
        rss = rss_mib(self.pid)
        if rss is not None and rss > self.max_rss_mib:
            self.close()
            self.recycled += 1

    def close(self) -> None:
        self._started = None
        self._child.close(timeout_s=10)
