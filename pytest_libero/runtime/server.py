"""The bench service process: owns one benchmark adapter and answers the worker over a pipe.

Requests are tuples `(op, payload)`; every reply is `("ok", value)` or
`("error", exception type name, message, traceback text)`. The worker (pytest_libero.runtime.service)
starts it as `python -m pytest_libero.runtime.server FD` with one end of a socket pair, so nothing of
the worker's heap (the policy included) exists here, and nothing of this process (the
simulator) exists there.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from multiprocessing.connection import Connection
from typing import Any

# The worker names the benchmark's service module in the service's environment
# (pytest_libero.benchmarks.service_env); LIBERO's when it names none.
SERVICE_MODULE_ENV = "PYTEST_LIBERO_SERVICE_MODULE"
DEFAULT_SERVICE_MODULE = "pytest_libero.benchmarks.libero.service"


def serve(conn: Any) -> None:
    """Answer requests until `close` or until the pipe closes."""
    import importlib

    adapter = importlib.import_module(os.environ.get(SERVICE_MODULE_ENV) or DEFAULT_SERVICE_MODULE)
    with tempfile.TemporaryDirectory(prefix="pytest-libero-service-") as work_dir:
        startup_error: Exception | None = None
        try:
            adapter.prepare_process_environment(work_dir)
        except Exception as exc:  # noqa: BLE001 - answered to the worker, see _answer
            startup_error = exc
        # MuJoCo appends warnings to MUJOCO_LOG.TXT in the working directory: keep it out of
        # the user's tree.
        os.chdir(work_dir)
        try:
            _answer(conn, adapter, startup_error)
        finally:
            os.chdir("/")


def _answer(conn: Any, adapter: Any, startup_error: Exception | None = None) -> None:
    """Answer requests. A failed start-up (a missing library, an asset folder that cannot be linked)
    is the answer to every request but `close`, so the worker reports its message instead of a
    service that died."""
    if startup_error is None:
        try:
            # The service exists to run the simulator: pay the imports while the worker sets up.
            adapter.import_simulator()
        except Exception as exc:  # noqa: BLE001
            startup_error = exc
    # Every service module offers: prepare_process_environment, import_simulator, EnvCache,
    # Episode (built by `start`; submit/finish/close), check_sources(cache) and SERVICE_OPS (its
    # extra requests, each called as op(cache, payload)). What a module keeps between requests
    # lives on its EnvCache, made once per process here.
    episode_class, check_sources, extra_ops = adapter.Episode, adapter.check_sources, adapter.SERVICE_OPS

    cache = adapter.EnvCache()
    episode: Any = None
    while True:
        try:
            op, payload = conn.recv()
        except EOFError:
            break
        try:
            if startup_error is not None and op != "close":
                raise startup_error
            if op == "start":
                if episode is not None:
                    episode.close()
                episode = None
                episode = episode_class(**payload, cache=cache)
                value: Any = {"language": episode.language,
                              "observation": episode.observation(episode.first_raw),
                              "state": episode.state(episode.first_raw),
                              "settling_controls": episode.settling_controls}
            elif op == "submit":
                assert episode is not None, "submit before start"
                value = episode.submit(**payload)
            elif op == "finish":
                assert episode is not None, "finish before start"
                value, episode = episode.finish(**(payload or {})), None
            elif op == "check_sources":
                value = check_sources(cache)
            elif op in extra_ops:
                value = extra_ops[op](cache, payload)
            elif op == "close":
                conn.send(("ok", None))
                break
            else:
                raise ValueError(f"unknown request {op!r}")
            conn.send(("ok", value))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the worker as data
            conn.send(("error", type(exc).__name__, str(exc), traceback.format_exc()))
    if episode is not None:
        episode.close()
    cache.close()


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
