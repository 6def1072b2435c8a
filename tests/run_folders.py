"""Run folders written from given outcomes (for the summary and compare logic, which read files only)."""

from __future__ import annotations

from pathlib import Path

from pytest_libero.results.files import write_json_atomic
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.protocol import Protocol
from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
from pytest_libero.results.records import RunDir, placeholder_record, run_manifest, write_record

TERMINATION = {"success": "success", "failure": "truncation", "policy_error": "policy_error",
               "env_error": "env_error", "not_run": "not_run"}


def full_protocol(schedule: str = "standard", seeds: tuple[int, ...] = (7,), scope: str = "task_coverage",
                  **changes: object) -> Protocol:
    from pytest_libero.core.schedules import load

    controls, action = load(schedule).settling()
    return Protocol(spec=LIBERO_SPEC, scope=scope, budget="horizon", replan_interval=5, max_policy_calls=None,
                    mode="full",
                    schedule=schedule, seeds=seeds, settle_controls=controls, settle_action=action,
                    **changes)  # type: ignore[arg-type]


def progress_block(held: list[bool], first: list[int | None] | None = None) -> dict[str, object]:
    """A record's goal progress block: predicate i held at the end when held[i] (first at control 10 i + 10)."""
    first = first if first is not None else [10 * i + 10 if h else None for i, h in enumerate(held)]
    return {"predicates": [{"text": f"(on object_{i} plate_1)", "held_at_end": h, "first_control": f}
                           for i, (h, f) in enumerate(zip(held, first, strict=True))],
            "fraction_at_end": sum(held) / len(held), "max_fraction": sum(f is not None for f in first) / len(held)}


def write_run(path: Path, protocol: Protocol, outcomes: dict[str, str], policy: str = "zero",
              progress: dict[str, list[bool]] | None = None) -> Path:
    """A run folder whose episodes ended as `outcomes` says (cell id -> native outcome); `progress`: the
    goal predicates holding at the end of the cells it names (progress_block)."""
    spec = {"name": policy, "kwargs": {}}
    settings, identity = protocol.as_dict(), protocol.identity
    write_json_atomic(path / "run.json", run_manifest(path.name, policy, settings, identity, spec, ["pytest"],
                                                             source=LIBERO.source, gpus=[]))
    write_json_atomic(path / "selection.json", {"schema_version": 1, "cells": list(outcomes)})
    for cell, outcome in outcomes.items():
        record = placeholder_record(cell, "not_run", outcome, adapter=LIBERO, context=None, protocol=settings,
                                    identity=identity,
                                    policy_profile={"spec": spec}, worker="main")
        record["outcome"].update(outcome=outcome, termination=TERMINATION[outcome],
                                 terminated=outcome == "success", truncated=outcome == "failure")
        if progress and cell in progress:
            record["progress"] = progress_block(progress[cell])
        write_record(RunDir(path), record)
    return path
