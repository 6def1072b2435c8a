"""Benchmark adapters, registered by name (seed 000: "LiberoBenchmarkAdapter, registered as libero").

Built in: `libero` (the bundled LIBERO suites and LIBERO-PRO; the default) and `libero_plus`
(LIBERO-plus's 10,030 perturbed variants). Installed distributions add more through the
`pytest_libero.benchmarks` entry-point group (`name = "module:ADAPTER"`). Each is a
`pytest_libero.core.benchmark.BenchmarkAdapter`. Every pytest start loads every adapter (their
options and suites are part of the command line), so an adapter module stays light: catalogs
and selection, nothing that renders or simulates.

This is the one place generic code reaches a benchmark: the plugin and the command line ask the
registry, and hand the adapter to the results code.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
from pathlib import Path
from typing import Any, Mapping

from pytest_libero.core.benchmark import SERVICE_MODULE_ENV, BenchmarkAdapter
from pytest_libero.errors import OptionError

DEFAULT = "libero"
BUILTIN: dict[str, str] = {
    "libero": "pytest_libero.benchmarks.libero.adapter:ADAPTER",
    "libero_plus": "pytest_libero.benchmarks.libero_plus.adapter:ADAPTER",
    "robomemarena": "pytest_libero.benchmarks.robomemarena.adapter:ADAPTER",
}
ENTRY_POINT_GROUP = "pytest_libero.benchmarks"


@functools.cache  # reading every installed distribution's metadata is the slow part; once per process
def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def names() -> list[str]:
    """Every registered benchmark name: the built-ins first, then installed ones."""
    return list(BUILTIN) + sorted(n for n in _entry_points() if n not in BUILTIN)


@functools.cache
def get(name: str | None = None) -> BenchmarkAdapter:
    """The adapter registered as `name` (default libero); OptionError with suggestions otherwise."""
    name = name or DEFAULT
    if name in BUILTIN:
        module, _, attr = BUILTIN[name].partition(":")
        adapter = getattr(importlib.import_module(module), attr)
    else:
        ep = _entry_points().get(name)
        if ep is None:
            known = names()
            close = difflib.get_close_matches(name, known, n=3)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise OptionError(f"Unknown benchmark {name!r}.{hint} Available: {', '.join(known)}")
        try:
            adapter = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken adapter package is named, not a traceback
            raise OptionError(f"cannot load benchmark {name!r} ({ep.value}): {type(exc).__name__}: {exc}") from exc
    if getattr(adapter, "name", None) != name:
        raise OptionError(f"benchmark {name!r} is registered with an adapter named {getattr(adapter, 'name', None)!r}")
    return adapter  # type: ignore[no-any-return]


def adapters() -> list[BenchmarkAdapter]:
    return [get(name) for name in names()]


def for_settings(settings: Mapping[str, Any] | None) -> BenchmarkAdapter:
    """The adapter of a run from its protocol settings (LIBERO's leave the benchmark out)."""
    return get((settings or {}).get("benchmark") or DEFAULT)


def for_run_folder(run_dir: Path) -> BenchmarkAdapter:
    """The adapter of a run folder, from run.json's protocol settings (libero without one)."""
    from pytest_libero.results.summary import load_manifest

    return for_settings((load_manifest(run_dir).get("protocol") or {}).get("settings"))


def service_env(adapter: BenchmarkAdapter, context: Any) -> dict[str, str]:
    """The bench service's environment for a run of `adapter`."""
    return {SERVICE_MODULE_ENV: adapter.service_module, **adapter.service_env(context)}
