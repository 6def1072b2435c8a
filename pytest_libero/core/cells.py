"""Cells (one schedulable episode each) and the default id grammar `<suite>-tNN-sNN[-seedN]`.

A benchmark with another grammar subclasses `Cell`, overrides `id`, and parses its own ids
(pytest_libero.benchmarks). Stdlib only: collection builds cells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FAST_SEED = 20260907  # the environment seed (env.seed) of every fast-mode episode


@dataclass(frozen=True, slots=True)
class Cell:
    """One schedulable episode: a suite-task entry with its released init state and seed."""

    suite: str
    task_index: int
    init_index: int = 0
    task_order_index: int = 0
    seed: int = FAST_SEED  # the environment seed (env.seed) of this episode
    run_seed: int | None = None  # the schedule repetition (--libero-seeds); part of the id when set

    @property
    def id(self) -> str:
        base = f"{self.suite}-t{self.task_index:02d}-s{self.init_index:02d}"
        return base if self.run_seed is None else f"{base}-seed{self.run_seed}"


# Suite names hold underscores but never hyphens, so the first "-t" ends the suite. Any benchmark's
# suite names may use this grammar; which suites are its own is the benchmark adapter's to say.
_CELL_ID = re.compile(r"(?P<suite>[a-z][a-z0-9_]*?)-t(?P<task>\d{2,})-s(?P<init>\d{2,})(?:-seed(?P<seed>\d+))?")


_BRACKETED = re.compile(r"\[(?P<id>[^\[\]]+)\]$")


def bracketed(text: str) -> str:
    """The id inside a node id ending in `[<id>]`, else `text` itself."""
    if not text.endswith(("]", "]\n")):  # ($ also matches before a final newline) a cell id: the common case
        return text
    match = _BRACKETED.search(text)
    return match.group("id") if match else text


def _match(text: str) -> re.Match[str] | None:
    return _CELL_ID.fullmatch(bracketed(text))


def cell_id(text: str) -> str | None:
    """The default-grammar cell id in an id or node id (with its -seedN part); None when absent."""
    found = _match(text)
    return found.group(0) if found is not None else None


def parse_cell_id(text: str) -> tuple[str, int, int] | None:
    """Invert `Cell.id` from an id or a node id ending in `[<cell id>]`; None when absent."""
    found = _match(text)
    if found is None:
        return None
    return found.group("suite"), int(found.group("task")), int(found.group("init"))


def parse_run_seed(text: str) -> int | None:
    """The `-seedN` part of a cell id (runs with --libero-seeds); None when the id has none."""
    found = _match(text)
    return int(found.group("seed")) if found is not None and found.group("seed") is not None else None
