"""The bench service process: owns one benchmark adapter and answers the worker over a pipe.

Requests and replies are pytest_libero.runtime.channel's: `(op, payload)`, answered `("ok", value)`
or `("error", exception type name, message, traceback text)`. The worker (pytest_libero.runtime.service)
starts it as `python -m pytest_libero.runtime.server FD` with one end of a socket pair, so nothing of
the worker's heap (the policy included) exists here, and nothing of this process (the
simulator) exists there.
"""

from __future__ import annotations

import os
import sys
import tempfile
from multiprocessing.connection import Connection
from typing import Any

from pytest_libero.core.benchmark import SERVICE_MODULE_ENV
from pytest_libero.runtime.channel import serve as serve_requests

# The worker names the benchmark's service module in the service's environment
# (pytest_libero.benchmarks.service_env). A service started without one (tests, benchmark
# scripts) runs the registry's default benchmark, libero.
DEFAULT_SERVICE_MODULE = "pytest_libero.benchmarks.libero.service"


def serve(conn: Any) -> None:
    """Answer requests until `close` or until the pipe closes."""
    import importlib

    adapter = importlib.import_module(os.environ.get(SERVICE_MODULE_ENV) or DEFAULT_SERVICE_MODULE)
    with tempfile.TemporaryDirectory(prefix="pytest-libero-service-") as work_dir:
        startup_error: Exception | None = None
        try:
            adapter.prepare_process_environment(work_dir)
        except Exception as exc:  # noqa: BLE001 - answered to the worker, see answer
            startup_error = exc
        # MuJoCo appends warnings to MUJOCO_LOG.TXT in the working directory: keep it out of
        # the user's tree.
        os.chdir(work_dir)
        try:
            answer(conn, adapter, startup_error)
        finally:
            os.chdir("/")


def answer(conn: Any, adapter: Any, startup_error: Exception | None = None) -> None:
    """Answer requests. A failed start-up (a missing library, an asset folder that cannot be linked)
    is the answer to every request but `close`, so the worker reports its message instead of a
    service that died."""
    if startup_error is None:
        try:
            # The service exists to run the simulator: pay the imports while the worker sets up.
            adapter.import_simulator()
        except Exception as exc:  # noqa: BLE001
            startup_error = exc
    requests = _Requests(adapter, startup_error)
    try:
        serve_requests(conn, requests)
    finally:
        requests.release()


class _Requests:
    """The service's requests on one benchmark adapter's service module.

    Every service module offers: prepare_process_environment, import_simulator, EnvCache,
    Episode (built by `start`; submit/finish/close), check_sources(cache) and SERVICE_OPS (its extra
    requests, each called as op(cache, payload)). What a module keeps between requests lives on its
    EnvCache, made once per process here.
    """

    def __init__(self, adapter: Any, startup_error: Exception | None) -> None:
        self.episode_class, self.check_sources = adapter.Episode, adapter.check_sources
        self.extra_ops: dict[str, Any] = adapter.SERVICE_OPS
        self.startup_error = startup_error
        self.cache = adapter.EnvCache()
        self.episode: Any = None

    def __call__(self, op: str, payload: Any) -> Any:
        if self.startup_error is not None and op != "close":
            raise self.startup_error
        if op == "start":
            if self.episode is not None:
                self.episode.close()
            self.episode = None
            episode = self.episode = self.episode_class(**payload, cache=self.cache)
            return {"language": episode.language,
                    "observation": episode.observation(episode.first_raw),
                    "state": episode.state(episode.first_raw),
                    "settling_controls": episode.settling_controls}
        if op == "submit":
            assert self.episode is not None, "submit before start"
            return self.episode.submit(**payload)
        if op == "finish":
            assert self.episode is not None, "finish before start"
            evidence = self.episode.finish(**(payload or {}))
            self.episode = None
            return evidence
        if op == "check_sources":
            return self.check_sources(self.cache)
        if op in self.extra_ops:
            return self.extra_ops[op](self.cache, payload)
        if op == "close":
            return None  # answered, then `serve` ends and `release` closes the episode and cache
        raise ValueError(f"unknown request {op!r}")

    def release(self) -> None:
        if self.episode is not None:
            self.episode.close()
        self.cache.close()


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
