"""Architecture contracts: the layers, who may import pytest and the simulators, and no cycles.

The contracts are import-linter's, configured in pyproject.toml ([tool.importlinter]); the
cycle check reads grimp's import graph (the library import-linter is built on). A package with
a deliberate violation shows each check can fail.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pytest_libero"
ADAPTERS = ROOT / "adapters"  # shipped as pytest_libero.adapters
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(package_parent: Path) -> subprocess.CompletedProcess[str]:
    """Run the project's contracts on the `pytest_libero` and `adapters` found in `package_parent`."""
    env = dict(os.environ, PYTHONPATH=str(package_parent), NO_COLOR="1", COLUMNS="400")
    return subprocess.run([str(LINT_IMPORTS), str(ROOT / "pyproject.toml"), "--no-cache"],
                          cwd=package_parent, env=env, capture_output=True, text=True, timeout=300, check=False)


def imports(package: str) -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports. grimp's graph, plus the package
    a `from PACKAGE import submodule` statement runs first (its __init__), which grimp leaves out."""
    import ast
    import importlib.util

    graph = grimp.build_graph(package)
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m)} for m in graph.modules}
    packages = {m for m in graph.modules if graph.find_children(m)}
    for module in graph.modules:
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in packages \
                    and node.module != module and node.module != package:
                edges[module].add(node.module)
    return edges


def cycles(package: str) -> list[list[str]]:
    """Strongly connected groups of more than one module in the package's import graph (Tarjan)."""
    edges = imports(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in edges[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_the_package_keeps_every_contract():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout and "KEPT" in done.stdout


def test_the_package_has_no_import_cycle():
    assert cycles("pytest_libero") == []


def test_a_deliberate_violation_breaks_the_contracts(tmp_path, monkeypatch):
    copy = tmp_path / "pytest_libero"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ADAPTERS, tmp_path / "adapters", ignore=shutil.ignore_patterns("__pycache__", "demo_logs"))
    # core reaching up into the plugin, pytest outside the plugin, a simulator outside a service
    # module, libero reaching into libero_plus, and a cycle between two results modules.
    with (copy / "core" / "cells.py").open("a") as stream:
        stream.write("\nimport pytest  # noqa\nfrom pytest_libero.plugin import options  # noqa\n")
    with (copy / "results" / "telemetry.py").open("a") as stream:
        stream.write("\nimport mujoco  # noqa\nfrom pytest_libero.results import summary  # noqa\n")
    # A package whose __init__ imports a module that imports the package back (`from PACKAGE import x`).
    with (copy / "benchmarks" / "libero" / "__init__.py").open("a") as stream:
        stream.write("\nfrom pytest_libero.benchmarks.libero.adapter import ADAPTER  # noqa\n")
    # The plugin reaching past the registry into one benchmark.
    with (copy / "plugin" / "html_report.py").open("a") as stream:
        stream.write("\nfrom pytest_libero.benchmarks.libero import catalog as _libero  # noqa\n")
    with (copy / "benchmarks" / "libero" / "selection.py").open("a") as stream:
        stream.write("\nfrom pytest_libero.benchmarks.libero_plus import catalog as _plus  # noqa\n")
    # A policy adapter reaching past core into the runtime.
    with (tmp_path / "adapters" / "openpi.py").open("a") as stream:
        stream.write("\ndef _late():\n    from pytest_libero.runtime import policies  # noqa\n")
    done = lint_imports(tmp_path)
    assert done.returncode != 0
    assert "Contracts: 0 kept, 6 broken." in done.stdout, done.stdout
    assert "adapters.openpi -> pytest_libero.runtime.policies" in done.stdout
    assert "pytest_libero.core.cells -> pytest_libero.plugin.options" in done.stdout
    assert "pytest_libero.core.cells -> pytest" in done.stdout
    assert "pytest_libero.results.telemetry -> mujoco" in done.stdout
    assert "pytest_libero.plugin.html_report -> pytest_libero.benchmarks.libero.catalog" in done.stdout
    assert "pytest_libero.benchmarks.libero.selection -> pytest_libero.benchmarks.libero_plus.catalog" in done.stdout
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "pytest_libero" or m.startswith("pytest_libero.")]:
        monkeypatch.delitem(sys.modules, name)
    # (core.cells -> plugin.options also ties most of the package into one cycle.)
    found = cycles("pytest_libero")
    assert any({"pytest_libero.results.summary", "pytest_libero.results.telemetry"} <= set(group) for group in found)
    assert any({"pytest_libero.benchmarks.libero", "pytest_libero.benchmarks.libero.selection"} <= set(group)
               for group in found)


def private_names_crossing(package_dir: Path) -> list[str]:
    """`from pytest_libero.M import _name` and `module._name` on an imported pytest_libero module."""
    import ast

    found = []
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules: set[str] = set()  # local names bound to pytest_libero modules
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_libero"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(package_dir.parent)}:{node.lineno} imports {alias.name}")
                    modules.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                modules.update(a.asname or a.name.split(".")[0] for a in node.names
                               if a.name.startswith("pytest_libero"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                found.append(f"{path.relative_to(package_dir.parent)}:{node.lineno} uses {node.value.id}.{node.attr}")
    return found


def test_no_private_name_crosses_a_module(tmp_path):
    assert private_names_crossing(PACKAGE) == []
    copy = tmp_path / "pytest_libero"
    (copy / "results").mkdir(parents=True)
    (copy / "results" / "page.py").write_text("from pytest_libero.results.summary import _read\n"
                                              "from pytest_libero.core import cells\nx = cells._match\n")
    assert private_names_crossing(copy) == ["pytest_libero/results/page.py:1 imports _read",
                                            "pytest_libero/results/page.py:3 uses cells._match"]


def test_the_adapters_contract_sees_every_adapter_and_forbids_all_but_core_and_errors():
    try:
        import tomllib
    except ImportError:  # Python 3.10: import-linter's own TOML reader
        import tomli as tomllib  # type: ignore[no-redef]

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "adapters"]
    # The folder checked is the one that ships as pytest_libero.adapters (setup.py's ROOTS) ...
    assert shipped_folders()["pytest_libero.adapters"] == ADAPTERS.name
    assert contract["source_modules"] == [ADAPTERS.name]
    assert ADAPTERS.name in config["tool"]["importlinter"]["root_packages"]
    # ... and the graph lint-imports builds holds each of its modules (grimp walks the folder).
    graph = grimp.build_graph(ADAPTERS.name)
    assert {f"adapters.{path.stem}" for path in ADAPTERS.glob("*.py") if path.stem != "__init__"} <= graph.modules
    top_level = {f"pytest_libero.{path.stem}" for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    top_level |= {f"pytest_libero.{path.parent.name}" for path in PACKAGE.glob("*/__init__.py")}
    assert set(contract["forbidden_modules"]) == top_level - {"pytest_libero.core", "pytest_libero.errors"}


def shipped_folders() -> dict[str, str]:
    """setup.py's ROOTS (import name -> checkout folder), read without running setup()."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["ROOTS"]]
    roots: dict[str, str] = ast.literal_eval(value)
    return roots
