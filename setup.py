"""What the wheel ships, found rather than listed (the metadata is pyproject.toml's).

Four folders of this checkout become one import package: pytest_libero/ itself, and catalog/,
adapters/ and cases/, which ship inside it as pytest_libero.catalog_data, pytest_libero.adapters
and pytest_libero.cases. Every package under them is found (a hand-kept list once left out a
whole benchmark, and the installed plugin then broke every pytest run), and every file that is
not Python source ships as package data, so a new schema, schedule or page asset cannot be
forgotten either. tests/test_packaging.py checks the built wheel against `git ls-files`.
"""

from __future__ import annotations

import os

from setuptools import find_packages, setup

# import name -> folder of this checkout
ROOTS = {
    "pytest_libero": "pytest_libero",
    "pytest_libero.catalog_data": "catalog",
    "pytest_libero.adapters": "adapters",
    "pytest_libero.cases": "cases",
}
# Build and tool leftovers that may sit in a working tree: never shipped.
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
SKIPPED_SUFFIXES = (".py", ".pyc", ".pyo")


def packages() -> list[str]:
    found = []
    for name, folder in ROOTS.items():
        found.append(name)
        found.extend(f"{name}.{sub}" for sub in find_packages(folder))
    return found


def package_data(package_names: list[str]) -> dict[str, list[str]]:
    """Each non-Python file, under the package whose folder holds it most closely."""
    folders = {name: package_folder(name) for name in package_names}
    data: dict[str, list[str]] = {}
    for name, folder in folders.items():
        for directory, subdirs, files in os.walk(folder):
            # A sub-folder that is a package of its own lists its files itself.
            subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and not d.startswith(".")
                                and os.path.join(directory, d) not in folders.values())
            for file in sorted(files):
                if not file.endswith(SKIPPED_SUFFIXES):
                    path = os.path.join(directory, file)
                    data.setdefault(name, []).append(os.path.relpath(path, folder).replace(os.sep, "/"))
    return data


def package_folder(name: str) -> str:
    root = max((r for r in ROOTS if name == r or name.startswith(r + ".")), key=len)
    return os.path.join(ROOTS[root], *name[len(root):].split(".")[1:])


PACKAGES = packages()
setup(packages=PACKAGES, package_dir=ROOTS, package_data=package_data(PACKAGES))
