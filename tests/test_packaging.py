"""The wheel carries everything a project that pip-installs pytest-libero needs."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_catalog_cases_adapters_and_entry_point(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    (wheel,) = tmp_path.glob("pytest_libero-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "pytest_libero/plugin/__init__.py", "pytest_libero/runtime/server.py",
        "pytest_libero/catalog_data/libero_catalog.json", "pytest_libero/catalog_data/source_inventory.json",
        "pytest_libero/catalog_data/schemas/libero_catalog.schema.json",
        "pytest_libero/catalog_data/schemas/source_inventory.schema.json",
        "pytest_libero/adapters/builtin.py", "pytest_libero/cases/test_libero.py",
        "pytest_libero/adapters/demo.py", "pytest_libero/adapters/demo_logs/libero_10-t00-s00.json",
        "pytest_libero/catalog_data/schemas/episode_record.schema.json",
    ):
        assert required in names, required
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "libero = pytest_libero.plugin" in zipfile.ZipFile(wheel).read(entry_points).decode()
