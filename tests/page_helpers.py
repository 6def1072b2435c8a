"""A synthetic LIBERO-plus run folder of every variant (10,030 episodes) for the review page's tests.

Placeholder-style records (as tests/run_folders.py writes them) with outcomes from a simple rule,
so the page's counts can be checked against the files. Records are written plainly (no fsync per
file): a test fixture, not evidence. No videos: the real run's page is the one whose video plays.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from liberoplus_helpers import write_classification
from pytest_libero.benchmarks.libero_plus import catalog as lp
from pytest_libero.benchmarks.libero_plus.adapter import ADAPTER as PLUS
from pytest_libero.benchmarks.libero_plus.options import PlusSettings
from pytest_libero.benchmarks.libero_plus.adapter import ADAPTER as PLUS_ADAPTER
from pytest_libero.core.protocol import Protocol
from pytest_libero.results.files import write_json_atomic
from pytest_libero.results.records import RunDir, placeholder_record, run_manifest

OUTCOMES = ("failure", "success", "failure", "env_error", "policy_error", "success", "not_run")
TERMINATION = {"success": "success", "failure": "truncation", "policy_error": "policy_error",
               "env_error": "env_error", "not_run": "not_run"}


def outcome_of(index: int) -> str:
    """The made-up outcome of the variant at `index` of its suite (period 11: not aligned with the 7
    categories, so every category x outcome pair occurs)."""
    return OUTCOMES[index % 11 % len(OUTCOMES)]


def write_plus_run(path: Path) -> Path:
    """Every LIBERO-plus variant (2402 + 2518 + 2591 + 2519 = 10,030) with outcome_of's outcome."""
    run = RunDir(path)
    run.episodes.mkdir(parents=True)
    context = PlusSettings(classification=str(write_classification(path.parent / "classification.json")),
                           assets=None)
    protocol = Protocol(spec=PLUS_ADAPTER.spec, scope="default", budget="horizon", replan_interval=5,
                        max_policy_calls=None,
                        benchmark_options=(("clean_instructions", False),))
    settings, identity = protocol.as_dict(), protocol.identity
    spec = {"name": "zero", "kwargs": {}}
    write_json_atomic(path / "run.json", run_manifest(path.name, "zero", settings, identity, spec, ["pytest"],
                                                      source=PLUS.source, gpus=[]))
    # One record per outcome, serialized once around a marker; each variant then only serializes its
    # `cell` block (what differs) into it, and the files are written plainly.
    marker = '"@cell@"'
    templates = {}
    for outcome in TERMINATION:
        record = placeholder_record(lp.variant_id(lp.SUITES[0], 0), outcome, f"synthetic {outcome}", adapter=PLUS,
                                    context=context, protocol=settings, identity=identity, worker="main",
                                    policy_profile={"spec": spec, "kind": "diagnostic"})
        record["outcome"].update(termination=TERMINATION[outcome], terminated=outcome == "success",
                                 truncated=outcome == "failure")
        record["cell"] = marker[1:-1]
        templates[outcome] = json.dumps(record).split(marker)
    folder = str(run.episodes)
    cells = []
    for suite in lp.SUITES:
        for index in range(lp.COUNTS[suite]):
            cell, outcome = lp.variant_id(suite, index), outcome_of(index)
            before, after = templates[outcome]
            text = before + json.dumps(PLUS.cell_fields(cell, settings, context, bulk=True)) + after
            with open(os.path.join(folder, f"{cell}.json"), "w", encoding="utf-8") as stream:
                stream.write(text)
            cells.append(cell)
    write_json_atomic(path / "selection.json", {"schema_version": 1, "cells": cells})
    return path
