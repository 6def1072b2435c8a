"""The per-run install check (docs/install-check.md): each cell's first observation against the
frozen reference, on the worker that ran it, and the stop `--libero-require-reference` asks for.

The engine keeps what the first observation was (EpisodeResult.install_observed: the service's
fingerprint and the delivered images' summaries; no extra simulation); this compares it with
catalog/fingerprints/<benchmark>-*.json and puts the check on the record (`install`). A
difference is a loud warning on the record and the terminal; with --libero-require-reference it
fails the item and stops the session (as -x does; under xdist through xdist's own flag) after the
record is written, so the evidence is kept and the cells never run are recorded not_run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pytest_libero.core.cells import Cell
from pytest_libero.core.fingerprint import Reference, check, load_references, protocol_key

REFERENCES_KEY = pytest.StashKey[list[Reference]]()
STOP_FIELD = "install_stop"  # on the report row, read by the controller's InstallStop


def references(config: pytest.Config, benchmark: str) -> list[Reference]:
    """The benchmark's references, read once per process."""
    found = config.stash.get(REFERENCES_KEY, None)
    if found is None:
        found = config.stash[REFERENCES_KEY] = load_references(benchmark)
    return found


def check_episode(config: pytest.Config, run: Any, cell: Cell, result: Any) -> str | None:
    """Put the install check on `result` (install_check, a warning when it differs); the stop
    message when --libero-require-reference stops the run here, else None."""
    observed = getattr(result, "install_observed", None)
    if observed is None:
        return None  # the episode never reached its first observation, or the benchmark has no fingerprint
    # The benchmark's own id (LIBERO-plus's variant, RoboMemArena's task and seed), the schedule's
    # repetition seed aside.
    key = dataclasses.replace(cell, run_seed=None).id
    outcome = check(references(config, run.benchmark), key,
                    protocol_key(run.protocol.settle_controls, run.protocol.settle_action,
                                 run.protocol.benchmark_options), observed,
                    seed=cell.seed)
    result.install_check = outcome.as_record()
    if outcome.differs:
        result.warnings.append(f"WARNING {outcome.line}")
    if run.require_reference and (outcome.differs or not outcome.checked):
        return (f"{outcome.line} (--libero-require-reference: the run stops; this cell's record is written, "
                "cells not run are recorded not_run; run `python -m pytest_libero doctor` for the details)")
    return None


class InstallStop:
    """Controller plugin under --libero-require-reference: stop the session on a worker's report."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.session: pytest.Session | None = None
        self.stopped: str | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = getattr(report, "libero", None)
        if not isinstance(row, dict) or not row.get(STOP_FIELD) or self.stopped is not None:
            return
        self.stopped = str(row[STOP_FIELD])
        if self.session is not None:
            self.session.shouldstop = self.stopped
        dsession = self.config.pluginmanager.getplugin("dsession")
        if dsession is not None:  # xdist's controller loop watches its own flag
            dsession.shouldstop = self.stopped
