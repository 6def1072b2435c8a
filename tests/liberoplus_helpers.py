"""A synthetic LIBERO-plus task_classification.json for the tests.

The real file (LIBERO-plus's libero/libero/benchmark/task_classification.json) ships in no
package, so the tests write their own: full size (2402/2518/2591/2519 entries, the installed task
map's names in order, id = task index + 1), with MADE-UP categories and difficulties from a
simple rule, so that every count the tests expect can be computed independently. A few variants
get their true category (`TRUE`, from the real file) where a test runs them for real.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_libero.benchmarks.libero_plus import catalog as lp
# Variants the real-rollout tests run, with their category and difficulty in the real file.
TRUE: dict[str, tuple[str, int | None]] = {
    "libero_plus-libero_spatial-v00609": ("Camera Viewpoints", 1),
    "libero_plus-libero_spatial-v00259": ("Robot Initial States", 1),
    "libero_plus-libero_spatial-v00985": ("Language Instructions", 2),
    "libero_plus-libero_spatial-v01375": ("Sensor Noise", 1),
    "libero_plus-libero_spatial-v01750": ("Objects Layout", 3),
    "libero_plus-libero_object-v00023": ("Background Textures", 3),
    "libero_plus-libero_spatial-v02111": ("Light Conditions", 2),
}


def synthetic(index: int) -> tuple[str, int | None]:
    """Made-up category and difficulty of the variant at `index` (the same rule in every suite)."""
    return lp.CATEGORIES[index % 7], None if index % 100 == 99 else index % 5 + 1


def classification(overrides: dict[str, tuple[str, int | None]] | None = None) -> dict[str, list[dict[str, Any]]]:
    overrides = TRUE if overrides is None else overrides
    catalog = lp.load_catalog()
    data: dict[str, list[dict[str, Any]]] = {}
    for suite in lp.SUITES:
        rows = []
        for index, entry in enumerate(catalog["suites"][suite]):
            category, level = overrides.get(lp.variant_id(suite, index), synthetic(index))
            rows.append({"id": index + 1, "name": entry["name"], "category": category, "difficulty_level": level})
        data[suite] = rows
    return data


def write_classification(path: Path, data: Any = None) -> Path:
    path.write_text(json.dumps(classification() if data is None else data), encoding="utf-8")
    return path
