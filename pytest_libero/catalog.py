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
    seed: int = 20260907

    @property
    def id(self) -> str:
        return f"{self.suite}-t{self.task_index:02d}-s{self.init_index:02d}"


_CELL_ID = re.compile(r"(?P<suite>libero_[a-z0-9_]+?)-t(?P<task>\d{2,})-s(?P<init>\d{2,})")


def parse_cell_id(text: str) -> tuple[str, int, int] | None:
    """Invert `Cell.id` from an id or a node id ending in `[<cell id>]`; None when absent."""
    match = re.search(r"\[(?P<id>[^\[\]]+)\]$", text)
    candidate = match.group("id") if match else text
    found = _CELL_ID.fullmatch(candidate)
    if found is None:
        return None
    return found.group("suite"), int(found.group("task")), int(found.group("init"))


def cell_id_of(text: str) -> str | None:
    """The cell id (of any benchmark) in an id or a node id ending in `[<cell id>]`; None when absent."""
    parsed = parse_cell_id(text)
    if parsed is not None:
        suite, task, init = parsed
        return f"{suite}-t{task:02d}-s{init:02d}"
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
    return tuple({k: v for k, v in e.items() if k not in FILE_FIELDS} for e in load_catalog()["entries"])


@functools.cache
def load_inventory() -> dict[str, Any]:
    """The source inventory; read by the bench service and maintainer tools only."""
    return _read_json("source_inventory.json")


def entries(suite: str | None = None) -> list[dict[str, Any]]:
    """Public catalog entries (no file names) in native order (suite order of SUITES, task order 0)."""
    return [e for e in _public_entries() if suite is None or e["suite"] == suite]


def public_entry(suite: str, task_index: int) -> dict[str, Any]:
    for candidate in entries(suite):
        if candidate["task_index"] == task_index:
            return candidate
    raise CatalogError(f"no catalog entry for {suite} task {task_index}")


def entry(suite: str, task_index: int) -> dict[str, Any]:
    """The full entry, with BDDL and init-state file names (bench service, tools, tests)."""
    for candidate in load_catalog()["entries"]:
        if candidate["suite"] == suite and candidate["task_index"] == task_index:
            return candidate  # type: ignore[no-any-return]
    raise CatalogError(f"no catalog entry for {suite} task {task_index}")


def inventory_entry(suite: str, task_index: int) -> dict[str, Any]:
    for candidate in load_inventory()["entries"]:
        if candidate["suite"] == suite and candidate["task_index"] == task_index:
            return candidate  # type: ignore[no-any-return]
    raise CatalogError(f"no inventory entry for {suite} task {task_index}")
