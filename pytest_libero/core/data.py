"""Where the frozen protocol data lives: catalog/ of the checkout, shipped in the wheel as the
package `pytest_libero.catalog_data` (catalogs, schedules, JSON Schemas). Stdlib only."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from pytest_libero.errors import CatalogError


def _data_dir() -> Path:
    spec = importlib.util.find_spec("pytest_libero.catalog_data")
    if spec is None or not spec.submodule_search_locations:
        raise CatalogError("pytest_libero.catalog_data is missing: reinstall pytest-libero")
    return Path(list(spec.submodule_search_locations)[0])


CATALOG_DIR = _data_dir()
SCHEMA_DIR = CATALOG_DIR / "schemas"


def read_json(name: str) -> dict[str, Any]:
    """A JSON document of the data folder; CatalogError (with the fix) when unreadable."""
    path = CATALOG_DIR / name
    try:
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    except (OSError, ValueError) as exc:
        raise CatalogError(f"cannot read {path}: {exc}. Reinstall pytest-libero.") from exc
