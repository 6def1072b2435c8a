"""Goal progress in summary.json: per task, suite and run, beside the success rate.

Read from the records' optional `progress` block (docs/results-format.md), which LIBERO,
LIBERO-PRO and LIBERO-plus episodes carry. Counted over the episodes the success rate counts
(passed and failed: success, failure, policy error) that have the block; errored and
unattempted episodes, and records without the block (older records, RoboMemArena), are left out.
Each group gets the mean of `fraction_at_end` and of `max_fraction` with a Student t 95%
interval (core/score_statistics.py), and each task, whose predicates are its own, how often each
predicate was reached (first_control not null, 0 included: it held at the first observation) and
held at the end.
"""

from __future__ import annotations

from typing import Any, Mapping

from pytest_libero.core.outcomes import COMPLETED
from pytest_libero.core.score_statistics import mean_t_interval

LABEL = ("mean share of the goal's predicates holding, over passed and failed episodes that record progress; "
         "95% Student t interval of the mean")
_COMPLETED = frozenset(outcome.value for outcome in COMPLETED)


def progress_of(record: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A completed episode's progress block, else None."""
    if not record or record["outcome"]["outcome"] not in _COMPLETED:
        return None
    return record.get("progress")


def group_progress(cells: list[str], records: Mapping[str, dict[str, Any]],
                   per_predicate: bool = False) -> dict[str, Any] | None:
    """The progress of `cells`; None when none of them records progress."""
    found = [p for p in (progress_of(records.get(c)) for c in cells) if p is not None]
    if not found:
        return None
    block: dict[str, Any] = {
        "episodes": len(found),
        "fraction_at_end": mean_t_interval([p["fraction_at_end"] for p in found]),
        "max_fraction": mean_t_interval([p["max_fraction"] for p in found]),
    }
    if per_predicate:
        counts: dict[str, list[int]] = {}
        for p in found:
            for predicate in p["predicates"]:
                row = counts.setdefault(predicate["text"], [0, 0, 0])
                row[0] += predicate["first_control"] is not None
                row[1] += bool(predicate["held_at_end"])
                row[2] += 1
        block["predicates"] = [{"text": text, "reached": reached, "held_at_end": held, "episodes": n,
                                "reached_rate": reached / n} for text, (reached, held, n) in counts.items()]
    return block


def add_progress(summary: dict[str, Any], cells: list[str], records: Mapping[str, dict[str, Any]],
                 by_suite: Mapping[str, list[str]], by_task: Mapping[str, list[str]]) -> None:
    """summary.json's `progress` beside each success rate (overall, per suite, per task with its
    predicates); nothing is added when no record of the run has progress."""
    overall = group_progress(cells, records)
    if overall is None:
        return
    summary["overall"]["progress"] = dict(overall, label=LABEL)
    for suite, members in by_suite.items():
        block = group_progress(members, records)
        if block is not None:
            summary["suites"][suite]["progress"] = block
    for label, members in by_task.items():
        block = group_progress(members, records, per_predicate=True)
        if block is not None:
            summary["tasks"][label]["progress"] = block


def progress_text(block: Mapping[str, Any] | None) -> str:
    """'47.5% [31.0, 64.0] (n=20)': the mean share at the end with its interval, '-' without one."""
    if not block:
        return "-"
    stat = block["fraction_at_end"]
    ci = stat["ci95"]
    interval = f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else ""
    return f"{100 * stat['mean']:.1f}%{interval} (n={stat['n']})"
