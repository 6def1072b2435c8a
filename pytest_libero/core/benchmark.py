"""What generic code needs of a benchmark: the `BenchmarkAdapter` protocol and its plain values.

A benchmark adapter owns everything benchmark-specific on the controller and worker side: its
options, selection into cells, its id grammar, the record's `cell` object and the fields it adds
to a record, its summary, page and terminal blocks, the environment and module of its bench
service, and a check that may leave a cell unattempted before it runs. Its service module (run
inside the bench service process) owns the simulator side. Adapters are registered by name in
pytest_libero.benchmarks; generic code (plugin, results) is handed one, never imports one.

Stdlib only: collection and the controller use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from pytest_libero.core.cells import Cell
from pytest_libero.core.spec import BenchmarkSpec

# The bench service (pytest_libero.runtime.server) imports the service module this names.
SERVICE_MODULE_ENV = "PYTEST_LIBERO_SERVICE_MODULE"
# ... and runs under this interpreter when an adapter's service_env names one (default: the worker's).
SERVICE_PYTHON_ENV = "PYTEST_LIBERO_SERVICE_PYTHON"

# Summary groups are computed by the generic code (counts, rates, Wilson intervals) and handed
# to an adapter's summary block as this function of a list of cell ids.
Group = Callable[[list[str]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One command-line option of an adapter, as data: `flags` and the keyword arguments of
    argparse's add_argument (dest, default, help, choices, action, metavar, type)."""

    flags: tuple[str, ...]
    kwargs: Mapping[str, Any]

    @property
    def dest(self) -> str:
        return str(self.kwargs["dest"])

    @property
    def default(self) -> Any:
        return self.kwargs.get("default", False if self.kwargs.get("action") == "store_true" else None)


@dataclass(frozen=True, slots=True)
class Selection:
    """What an adapter's selection decides: the cells in native order, the protocol fields they
    imply (mode, schedule, benchmark options...; all part of the protocol identity), the
    adapter's own run settings that are not protocol (where its files are) and the fields it adds
    to run.json (plain JSON, read back by its summary blocks from summary["run"]: a control run)."""

    cells: tuple[Cell, ...]
    protocol: Mapping[str, Any] = field(default_factory=dict)
    context: Any = None
    run_fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Unattempted:
    """A cell the adapter will not run (its files are missing, say): the message and the fields it
    adds to the placeholder record's `cell.benchmark` object."""

    message: str
    benchmark_fields: Mapping[str, Any] = field(default_factory=dict)


class BenchmarkAdapter(Protocol):
    """The controller- and worker-side half of a benchmark (its service module is the other).

    Optional, read with getattr: `marker_help` (marker name -> description, registered at start),
    `markers(cell)` (those markers of a cell's item, besides its suite's) and `schedules()` (its
    own presets, name -> (title, description), for `python -m pytest_libero schedule`) and
    `policy_paths(context)` (folders appended to the worker's import path before the policy is built). A selection's
    `protocol` may set any Protocol field (RoboMemArena fixes K, the track and settling); a
    `control_cap` (and `control_cap_source`) among its benchmark options is the episode cap.
    """

    name: str
    description: str
    service_module: str  # run by the bench service (pytest_libero.runtime.server)
    source: Mapping[str, Any]  # the upstream source identity on every record: at least repository, revision
    # What its observations and actions are (cameras, image shape, action size and bounds), its
    # settling action and reference horizons: the contract's checks and the protocol read them here.
    spec: BenchmarkSpec

    def options(self) -> Sequence[OptionSpec]:
        """The adapter's own options (refused unless this adapter is selected)."""

    def select(self, settings: Mapping[str, Any]) -> Selection:
        """The selected cells from every option's value (by dest); OptionError on bad input."""

    def cell_id(self, text: str) -> str | None:
        """The cell id in an id or a node id ending in `[<id>]`; None when it is not this grammar."""

    def suites(self) -> Sequence[str]:
        """Suite names in native order (markers, summary rows, comparison order)."""

    def keywords(self, cell: Cell) -> Sequence[str]:
        """Extra `-k` keywords of a cell's item (task names)."""

    def cell_fields(self, cell_id: str, settings: Mapping[str, Any], context: Any, *,
                    bulk: bool = False) -> dict[str, Any]:
        """The record's `cell` object: id, suite, task_index, task_name, language, init_index,
        task_order_index, seed (and run_seed, benchmark... as the adapter has them). `settings` are
        the protocol settings; `context` the Selection's. `bulk`: the caller writes many records
        at once (the controller), so what the adapter reads may be kept between calls; a worker,
        which may host an in-process policy, passes False."""

    def record_fields(self, record: dict[str, Any], evidence: Mapping[str, Any]) -> None:
        """Add the service's benchmark-specific evidence of a finished episode to its record."""

    def unattempted(self, service: Any, cell: Cell) -> Unattempted | None:
        """Asked before an episode: a reason not to run the cell, or None to run it."""

    def service_env(self, context: Any) -> dict[str, str]:
        """Extra environment of the bench service process for this run."""

    def summary_blocks(self, cells: list[str], records: Mapping[str, dict[str, Any]], group: Group,
                       summary: Mapping[str, Any]) -> dict[str, Any]:
        """Extra top-level keys of summary.json (none when the run has nothing of the kind)."""

    def html_block(self, summary: Mapping[str, Any]) -> str:
        """HTML (already escaped) added under the summary block of the page; '' for none."""

    def terminal_lines(self, summary: Mapping[str, Any]) -> list[str]:
        """Lines added to the terminal summary."""

    def task_label(self, cell: Mapping[str, Any]) -> str | None:
        """The per-task group of a record's cell object in comparisons (None: no per-task rows)."""
