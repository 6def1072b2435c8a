"""The bench service process: runs one benchmark's service module and answers the worker over a pipe.

Requests and replies are pytest_libero.runtime.channel's: `(op, payload)`, answered `("ok", value)`
or `("error", exception type name, message, traceback text)`. The worker (pytest_libero.runtime.service)
starts it as `python -m pytest_libero.runtime.server FD` with one end of a socket pair, so nothing of
the worker's heap (the policy included) exists here, and nothing of this process (the
simulator) exists there.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
import tempfile
from multiprocessing.connection import Connection
from typing import Any, cast

from pytest_libero.core.benchmark import SERVICE_MODULE_ENV
from pytest_libero.core.service_module import ServiceCache, ServiceEpisode, ServiceModule, conformance_problems
from pytest_libero.errors import EnvironmentFault
from pytest_libero.runtime.channel import serve as serve_requests

# A test suite's fast tier runs no simulator. Where this names a file, MuJoCo (under every benchmark's
# simulator: robosuite, LIBERO and the suites built on it) is not imported: its import raises, and
# the refusal is appended to the file, so the suite can fail the test that asked for it even where
# the test swallowed the error (this project's tests/suite_tiers.py sets it for every test not
# marked real_libero). A bench service installs the refusal at start; a test process can too.
NO_SIMULATOR_ENV = "PYTEST_LIBERO_NO_SIMULATOR"
SIMULATOR_MODULE = "mujoco"


class RefuseSimulator(importlib.abc.MetaPathFinder):
    """A sys.meta_path finder that refuses the simulator's import, noting each refusal in `record`."""

    def __init__(self, record: str) -> None:
        self.record = record

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.partition(".")[0] != SIMULATOR_MODULE:
            return None
        try:
            with open(self.record, "a", encoding="utf-8") as stream:
                stream.write(f"pid {os.getpid()} ({' '.join(sys.argv)}) imported {fullname}\n")
        except OSError:
            pass  # the import is refused all the same
        raise ImportError(f"{fullname} (the simulator) may not be imported here: {NO_SIMULATOR_ENV} is set "
                          f"({self.record}), as a test suite's fast tier sets it for a test that must not "
                          f"run a simulator: mark the test real_libero (this project's tests), or unset "
                          f"{NO_SIMULATOR_ENV}")


def refuse_simulator_if_asked() -> None:
    """Install RefuseSimulator when NO_SIMULATOR_ENV names a record file."""
    record = os.environ.get(NO_SIMULATOR_ENV)
    if record:
        sys.meta_path.insert(0, RefuseSimulator(record))


def load_service_module(name: str | None) -> ServiceModule:
    """The benchmark's service module `name` (SERVICE_MODULE_ENV); EnvironmentFault naming the fix."""
    import importlib

    if not name:
        raise EnvironmentFault(
            f"the bench service was started without {SERVICE_MODULE_ENV}, so it runs no benchmark: name the "
            "benchmark's service module in its environment, e.g. BenchService(env=pytest_libero.benchmarks."
            "service_env(adapter, context)), or set it to the adapter's service_module such as "
            "pytest_libero.benchmarks.libero.service")
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise EnvironmentFault(f"{SERVICE_MODULE_ENV}={name!r} cannot be imported ({type(exc).__name__}: {exc}); "
                               "name an installed benchmark's service module (its adapter's service_module)") from exc
    problems = conformance_problems(module)
    if problems:
        raise EnvironmentFault(f"{SERVICE_MODULE_ENV}={name!r} is not a bench service module "
                               f"(pytest_libero.core.service_module.ServiceModule): {'; '.join(problems)}")
    return cast(ServiceModule, module)


def serve(conn: Any) -> None:
    """Answer requests until `close` or until the pipe closes."""
    refuse_simulator_if_asked()
    try:
        module = load_service_module(os.environ.get(SERVICE_MODULE_ENV))
    except EnvironmentFault as exc:
        answer(conn, None, exc)  # no module: no working directory to prepare either
        return
    with tempfile.TemporaryDirectory(prefix="pytest-libero-service-") as work_dir:
        startup_error: Exception | None = None
        try:
            module.prepare_process_environment(work_dir)
        except Exception as exc:  # noqa: BLE001 - answered to the worker, see answer
            startup_error = exc
        # MuJoCo appends warnings to MUJOCO_LOG.TXT in the working directory: keep it out of
        # the user's tree.
        os.chdir(work_dir)
        try:
            answer(conn, module, startup_error)
        finally:
            os.chdir("/")


def answer(conn: Any, module: ServiceModule | None, startup_error: Exception | None = None) -> None:
    """Answer requests. A failed start-up (no service module named, a missing library, an asset
    folder that cannot be linked) is the answer to every request but `close`, so the worker reports
    its message instead of a service that died. `module` is None only with a `startup_error`."""
    if startup_error is None:
        assert module is not None
        try:
            # The service exists to run the simulator: pay the imports while the worker sets up.
            module.import_simulator()
        except Exception as exc:  # noqa: BLE001
            startup_error = exc
    requests = _Requests(module if startup_error is None else None, startup_error)
    try:
        serve_requests(conn, requests)
    finally:
        requests.release()


class _Requests:
    """The service's requests on one benchmark's service module (core.service_module.ServiceModule).

    What a module keeps between requests lives on its EnvCache, made once per process here. After
    a failed start-up there is no module to ask: every request but `close` raises the failure.
    """

    def __init__(self, module: ServiceModule | None, startup_error: Exception | None) -> None:
        self.module, self.startup_error = module, startup_error
        self.cache: ServiceCache | None = module.EnvCache() if module is not None else None
        self.episode: ServiceEpisode | None = None

    def __call__(self, op: str, payload: Any) -> Any:
        if op == "close":
            return None  # answered, then `serve` ends and `release` closes the episode and cache
        if self.startup_error is not None:
            raise self.startup_error
        module, cache = self.module, self.cache
        assert module is not None and cache is not None
        if op == "start":
            if self.episode is not None:
                self.episode.close()
            self.episode = None
            episode = self.episode = module.Episode(**payload, cache=cache)
            return {"language": episode.language,
                    "observation": episode.observation(episode.first_raw),
                    "state": episode.state(episode.first_raw),
                    "settling_controls": episode.settling_controls,
                    "fingerprint": _fingerprint(episode)}
        if op == "submit":
            assert self.episode is not None, "submit before start"
            return self.episode.submit(**payload)
        if op == "finish":
            assert self.episode is not None, "finish before start"
            evidence = self.episode.finish(**(payload or {}))
            self.episode = None
            return evidence
        if op == "check_sources":
            return module.check_sources(cache)
        if op in module.SERVICE_OPS:
            return module.SERVICE_OPS[op](cache, payload)
        raise ValueError(f"unknown request {op!r}")

    def release(self) -> None:
        if self.episode is not None:
            self.episode.close()
        if self.cache is not None:
            self.cache.close()


def _fingerprint(episode: Any) -> dict[str, Any] | None:
    """The install check's service half (docs/install-check.md); None for a module without one.
    A fingerprint that fails is reported, never a reason to lose the episode."""
    fingerprint = getattr(episode, "fingerprint", None)
    if fingerprint is None:
        return None
    try:
        return fingerprint()  # type: ignore[no-any-return]
    except Exception as exc:  # noqa: BLE001
        return {"unavailable": f"{type(exc).__name__}: {exc}"}


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
