"""The `robomemarena` benchmark adapter: RoboMemArena's tasks 1-26 from the user's checkout.

Controller and worker side: its options and selection (pytest_libero.benchmarks.robomemarena.options),
the id grammar `robomemarena-tNN-seedS`, the record's task, memory type, scoring and provenance
(commit and scorer hashes), and the TSR / CSR / stage tables. Its service module
(pytest_libero.benchmarks.robomemarena.service) is the only code importing the checkout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_libero.benchmarks.robomemarena import options, presets, results
from pytest_libero.benchmarks.robomemarena.checkout import MEMORY_WORDS, SCRIPTS, memory_words
from pytest_libero.core.benchmark import Group, OptionSpec, Selection, Unattempted
from pytest_libero.core.cells import Cell


class RoboMemArenaAdapter:
    name = options.BENCHMARK
    description = "RoboMemArena: memory tasks 1-26, run and scored by your checkout (--libero-robomemarena-checkout)"
    service_module = "pytest_libero.benchmarks.robomemarena.service"
    spec = options.SPEC  # no reference horizons: episodes run to its max_steps (the control_cap option)
    # The user's checkout is the source; its commit and scorer hashes are on every record (cell.benchmark).
    source: Mapping[str, Any] = {"repository": "https://github.com/OpenHelix-Team/RoboMemArena",
                                 "revision": "the user's checkout (cell.benchmark.provenance)"}
    marker_help: Mapping[str, str] = {f"memory_{word}": f"RoboMemArena tasks whose memory type includes {word}"
                                      for word in MEMORY_WORDS.values()}

    def options(self) -> Sequence[OptionSpec]:
        return options.OPTIONS

    def schedules(self) -> dict[str, tuple[str, str]]:
        """Its presets for `python -m pytest_libero schedule [NAME]`: name -> (title, description)."""
        return {name: (f"RoboMemArena (--libero-benchmark robomemarena): {p.trials} trials from seed "
                       f"{p.seed_start}, K {p.replan_steps}", "\n".join(p.describe()))
                for name, p in presets.PRESETS.items()}

    def select(self, settings: Mapping[str, Any]) -> Selection:
        return options.select(settings)

    def cell_id(self, text: str) -> str | None:
        parsed = options.parse(text)
        return f"{options.SUITE}-t{parsed[0]:02d}-seed{parsed[1]}" if parsed is not None else None

    def suites(self) -> Sequence[str]:
        return (options.SUITE,)

    def keywords(self, cell: Cell) -> Sequence[str]:
        return (getattr(cell, "stem", ""),) if getattr(cell, "stem", "") else ()

    def markers(self, cell: Cell) -> Sequence[str]:
        return tuple(f"memory_{word}" for word in memory_words(getattr(cell, "memory_type", "")))

    def cell_fields(self, cell_id: str, settings: Mapping[str, Any], context: Any, *,
                    bulk: bool = False) -> dict[str, Any]:
        parsed = options.parse(cell_id)
        if parsed is None:
            raise ValueError(f"{cell_id!r} is not a RoboMemArena cell id (robomemarena-tNN-seedS)")
        task_id, seed = parsed
        seed_start = dict(settings.get("benchmark_options") or {}).get("seed_start", seed)
        benchmark: dict[str, Any] = {"name": self.name, "task_id": task_id}
        name = language = f"task{task_id}"
        if context is not None:
            task = context.checkout.task(task_id)
            name, language = task.stem, task.prompt
            benchmark.update(memory_type=task.memory_type, task_name=task.name, bddl=task.bddl,
                             bddl_sha256=task.bddl_sha256, provenance=context.checkout.provenance())
        return {"id": self.cell_id(cell_id), "suite": options.SUITE, "task_index": task_id - 1, "task_name": name,
                "language": language, "init_index": seed - seed_start, "task_order_index": 0, "seed": seed,
                "benchmark": benchmark}

    def record_fields(self, record: dict[str, Any], evidence: Mapping[str, Any]) -> None:
        results.add_record_fields(record, evidence)

    def unattempted(self, service: Any, cell: Cell) -> Unattempted | None:
        return None

    def service_env(self, context: Any) -> dict[str, str]:
        return options.service_env(context)

    def policy_paths(self, context: Any) -> Sequence[str]:
        """The checkout's scripts folder, appended to the worker's path: RoboMemArena adapters import
        their base class from its policy_adapter.py (which imports numpy and opencv only)."""
        return (str(Path(context.checkout.root) / SCRIPTS),) if context is not None else ()

    def summary_blocks(self, cells: list[str], records: Mapping[str, dict[str, Any]], group: Group,
                       summary: Mapping[str, Any]) -> dict[str, Any]:
        block = results.results(cells, records, group)
        return {"robomemarena": block} if block is not None else {}

    def html_block(self, summary: Mapping[str, Any]) -> str:
        return results.html(summary["robomemarena"]) if summary.get("robomemarena") else ""

    def terminal_lines(self, summary: Mapping[str, Any]) -> list[str]:
        return results.terminal_lines(summary["robomemarena"]) if summary.get("robomemarena") else []

    def task_label(self, cell: Mapping[str, Any]) -> str | None:
        return f"robomemarena task {cell['task_index'] + 1}"


ADAPTER = RoboMemArenaAdapter()
