"""What the bench service (pytest_libero.runtime.server) loads: a benchmark's service module.

A benchmark adapter names its service module (`BenchmarkAdapter.service_module`); the bench
service imports it by that name, in its own process, and calls nothing else of the benchmark.
`ServiceModule` is that interface as a Protocol a module satisfies (mypy checks a module against
a Protocol); `conformance_problems` checks a loaded module at run time, so a module missing a
member is named when the service starts, not when a request first needs the member.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Protocol


class ServiceCache(Protocol):
    """What the module keeps between episodes of one service process (built environments)."""

    def close(self) -> None:
        """Release what it holds; the service process is ending."""


class ServiceEpisode(Protocol):
    """One episode in the service, built by the `start` request.

    `first_raw` is the native observation after reset and settling; `observation` and `state`
    turn a native observation into the contract's images and state (None: no state track).
    """

    language: str
    first_raw: Any
    settling_controls: int

    def observation(self, raw: Any) -> dict[str, Any]: ...

    def state(self, raw: Any) -> Any: ...

    def submit(self, chunk: Any, deliver: bool, frames: bool = False) -> dict[str, Any]: ...

    def finish(self, final_frame: bool = False) -> dict[str, Any]: ...

    def close(self) -> None: ...


class ServiceModule(Protocol):
    """A benchmark's service module, the only code of the benchmark that imports its simulator.

    `prepare_process_environment(work_dir)` runs first (environment variables, asset links; the
    service's working directory is `work_dir` afterwards); `import_simulator()` pays the imports
    while the worker sets up. What either raises is the answer to every request. `EnvCache()` is made
    once per process; `Episode(**start payload, cache=cache)` per `start` request.
    `check_sources(cache)` is the installed-files check: None, or the mismatch message.
    `SERVICE_OPS` are the module's extra requests, each called as `op(cache, payload)`.
    """

    def prepare_process_environment(self, work_dir: str, /) -> None: ...

    def import_simulator(self) -> None: ...

    def check_sources(self, cache: Any, /) -> str | None: ...

    @property
    def EnvCache(self) -> Callable[[], ServiceCache]: ...  # noqa: N802 - a class of the module

    @property
    def Episode(self) -> Callable[..., ServiceEpisode]: ...  # noqa: N802 - a class of the module

    @property
    def SERVICE_OPS(self) -> Mapping[str, Callable[[Any, Any], Any]]: ...  # noqa: N802 - a module constant


# Each function of the module, with the number of positional arguments the service passes it.
_FUNCTIONS = {"prepare_process_environment": 1, "import_simulator": 0, "check_sources": 1}
_EPISODE_METHODS = ("observation", "state", "submit", "finish", "close")


def conformance_problems(module: Any) -> list[str]:
    """What `module` lacks of `ServiceModule`, one line each (an empty list: it conforms).

    Checked without calling anything: members, that they are callable with the arguments the
    service passes, and the methods of its EnvCache and Episode classes.
    """
    problems = []
    for name, arguments in _FUNCTIONS.items():
        problems += _callable_with(module, name, (None,) * arguments)
    problems += _callable_with(module, "EnvCache", ()) or _methods(module.EnvCache, "EnvCache", ("close",))
    episode = getattr(module, "Episode", None)
    if not callable(episode):
        problems.append("Episode is missing or not a class (built as Episode(**start payload, cache=cache))")
    else:
        problems += _methods(episode, "Episode", _EPISODE_METHODS)
    ops = getattr(module, "SERVICE_OPS", None)
    if not isinstance(ops, Mapping):
        problems.append("SERVICE_OPS is missing or not a mapping of request name to op(cache, payload) "
                        "(an empty dict when the module has no extra requests)")
    else:
        problems += [line for op in ops for line in _callable_with(ops, op, (None, None), f"SERVICE_OPS[{op!r}]")]
    return problems


def _callable_with(owner: Any, name: str, arguments: tuple[Any, ...], shown: str | None = None) -> list[str]:
    shown = shown or name
    member = owner.get(name) if isinstance(owner, Mapping) else getattr(owner, name, None)
    if member is None or not callable(member):
        return [f"{shown} is missing or not callable (called with {len(arguments)} positional arguments)"]
    try:
        signature = inspect.signature(member)
    except (TypeError, ValueError):
        return []  # a builtin without a signature: trusted
    try:
        signature.bind(*arguments)
    except TypeError as exc:
        return [f"{shown}{signature} cannot be called with {len(arguments)} positional arguments: {exc}"]
    return []


def _methods(cls: Any, shown: str, names: tuple[str, ...]) -> list[str]:
    return [f"{shown}.{name} is missing or not callable" for name in names if not callable(getattr(cls, name, None))]
