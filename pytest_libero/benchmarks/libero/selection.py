"""LIBERO's selection: the default cells, the development scope, task coverage and the plan.

Pure data: collection runs it on the controller and on every worker, in the same order.
"""

from __future__ import annotations

import warnings

from pytest_libero.benchmarks.libero import catalog
from pytest_libero.core.cells import Cell
from pytest_libero.core.fullmode import parse_int_list
from pytest_libero.errors import OptionError

DEFAULT_SELECTION = ("libero_10", (0, 1))
DEVELOPMENT_IDS = range(0, 5)


def parse_task_ids(text: str) -> list[int]:
    return sorted(parse_int_list("--libero-task-ids", text, "a task index"))


def select_cells(scope: str | None, suite: str | None, ids_text: str | None) -> tuple[Cell, ...]:
    """The cells of a selection, in native order (suite order, then task index)."""
    if suite is not None and suite not in catalog.ALL_SUITES:
        # --libero-suite accepts every registered benchmark's suites; this one is not LIBERO's.
        raise OptionError(f"--libero-suite {suite}: not a LIBERO suite (one of {', '.join(catalog.ALL_SUITES)}); "
                          "select another benchmark's suites with --libero-benchmark")
    ids = parse_task_ids(ids_text) if ids_text is not None else None
    if scope in (None, "plan"):
        if suite is not None or ids is not None:
            flag = "--libero-suite" if suite is not None else "--libero-task-ids"
            raise OptionError(
                f"{flag} does not apply to {'--libero-scope plan' if scope else 'the default selection'}; "
                "use --libero-scope development (LIBERO-10 ids 0-4) or --libero-scope task_coverage "
                "--libero-suite SUITE")
        if scope is None:
            return tuple(Cell(DEFAULT_SELECTION[0], i) for i in DEFAULT_SELECTION[1])
        return tuple(Cell(e["suite"], e["task_index"]) for e in catalog.entries())
    if scope == "development":
        if suite not in (None, "libero_10"):
            raise OptionError(f"--libero-suite {suite}: scope development is LIBERO-10 only; "
                                    "use --libero-scope task_coverage for other suites")
        wanted: list[int] = ids if ids is not None else list(DEFAULT_SELECTION[1])
        bad = [i for i in wanted if i not in DEVELOPMENT_IDS]
        if bad:
            raise OptionError(
                f"--libero-task-ids {ids_text}: task id {bad[0]} is outside scope development, "
                f"which allows LIBERO-10 task ids 0-4; use --libero-scope task_coverage "
                "--libero-suite libero_10 for the others")
        return tuple(Cell("libero_10", i) for i in wanted)
    if suite is None:
        raise OptionError("--libero-scope task_coverage needs --libero-suite "
                                f"(one of {', '.join(catalog.ALL_SUITES)})")
    available: list[int] = [e["task_index"] for e in catalog.entries(suite)]
    wanted = ids if ids is not None else available
    bad = [i for i in wanted if i not in available]
    if bad:
        raise OptionError(f"--libero-task-ids {ids_text}: {suite} has task ids "
                                f"0-{len(available) - 1}, not {bad[0]}")
    return tuple(Cell(suite, i) for i in wanted)


class LiberoProInstructionWarning(UserWarning):
    """The task map's instruction is delivered on LIBERO-PRO suites whose perturbation is the instruction."""


def instruction_source(given: str | None, cells: tuple[Cell, ...]) -> str | None:
    """The LIBERO-PRO instruction source (--libero-pro-instruction, default bddl) when a LIBERO-PRO
    suite is selected, else None; the option is refused then (it would change nothing). task-map
    warns (LiberoProInstructionWarning) about the _lan and _task suites it blinds."""
    pro = [s for s in catalog.PRO_SUITES if any(c.suite == s for c in cells)]
    if not pro:
        if given is not None:
            raise OptionError(f"--libero-pro-instruction {given} applies only to LIBERO-PRO suites "
                              "(--libero-suite <suite>_lan, _object, _swap or _task); none is selected")
        return None
    if given == "task-map":
        blind = [s for s in pro if catalog.perturbation(s) in ("lan", "task")]
        if blind:
            warnings.warn(LiberoProInstructionWarning(
                f"--libero-pro-instruction task-map: {', '.join(blind)} deliver the unperturbed task-map "
                "instruction, so their instruction perturbation never reaches the policy (as in OpenVLA-style "
                "scripts); use the default bddl to send it"), stacklevel=2)
    return given or catalog.DEFAULT_INSTRUCTION_SOURCE
