"""The full-mode parts of summary.json: which schedule produced it, and per-seed rates with their
mean and spread (LIBERO-PRO's rows are the libero adapter's, benchmarks/libero/results.py).

Derived from the run folder's files only (run.json's protocol settings and the cell ids).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Mapping, Sequence

from pytest_libero.core.cells import parse_run_seed
from pytest_libero.core.protocol import describe_overrides

Group = Callable[[list[str]], dict[str, Any]]


def schedule_block(settings: dict[str, Any] | None) -> dict[str, Any]:
    """What produced the results: fast mode, or a named schedule (whole, or partial, or re-capped)."""
    settings = settings or {}
    schedule = settings.get("schedule")
    preset = (settings.get("benchmark_options") or {}).get("preset")
    if not isinstance(schedule, dict) and preset:  # a benchmark's own preset (RoboMemArena's)
        mode = settings.get("mode", "fast")
        text = f"{mode} mode, {settings.get('benchmark')} preset {preset}{describe_overrides(settings)}"
        if mode == "fast":
            text += (f", seed {settings.get('seed', '?')}, each selected task once: a smoke test, not the published "
                     "protocol")
        return {"mode": mode, "name": preset, "all_init_states_at_schedule_caps": False,
                "overrides": settings.get("overrides") or {}, "text": text}
    if not isinstance(schedule, dict):
        return {"mode": "fast", "name": None, "all_init_states_at_schedule_caps": False,
                "text": f"fast mode (init state {settings.get('init_index', 0)}, seed {settings.get('seed', '?')}, "
                        "each selected task once): a smoke test, not the published protocol"}
    subset = settings.get("init_states")
    decisions = settings.get("budget") == "decisions"
    overrides = settings.get("overrides") or {}
    complete = subset is None and not decisions and not overrides
    text = f"full mode, schedule {schedule['name']} (sha256 {schedule['sha256'][:16]}), seeds " \
           f"{','.join(map(str, settings.get('seeds') or []))}"
    text += describe_overrides(settings)
    if subset is not None:
        text += f"; partial: init states {','.join(map(str, subset))} only, not the full schedule"
    if decisions:
        text += (f"; decisions budget D={settings.get('max_policy_calls')} x K={settings.get('replan_interval')} "
                 "instead of the schedule's caps")
    return {"mode": "full", "name": schedule["name"], "sha256": schedule["sha256"],
            "seeds": settings.get("seeds"), "init_states": subset, "all_init_states_at_schedule_caps": complete,
            "overrides": overrides, "text": text}


def _rate(group: dict[str, Any]) -> float | None:
    rate = group["success_rate_errors_excluded"]["rate"]
    return None if rate is None else float(rate)


def spread(rates: list[float]) -> dict[str, Any]:
    """Mean of per-seed rates, their sample standard deviation and its standard error."""
    if not rates:
        return {"mean": None, "sd": None, "sem": None, "n_seeds": 0}
    mean = statistics.fmean(rates)
    sd = statistics.stdev(rates) if len(rates) > 1 else None
    sem = sd / math.sqrt(len(rates)) if sd is not None else None
    return {"mean": mean, "sd": sd, "sem": sem, "n_seeds": len(rates)}


def seeds_block(cells: list[str], group: Group, by_suite: Mapping[str, Sequence[str]]) -> dict[str, Any] | None:
    """Per run seed: overall and per-suite groups (`by_suite`: each suite's cells, in order); across seeds:
    mean and spread. None without seed ids."""
    by_seed: dict[int, list[str]] = {}
    for cell in cells:
        seed = parse_run_seed(cell)
        if seed is not None:
            by_seed.setdefault(seed, []).append(cell)
    if not by_seed:
        return None
    per_seed: dict[str, Any] = {}
    for seed, seed_cells in by_seed.items():
        chosen = set(seed_cells)
        suites = {s: group([c for c in members if c in chosen]) for s, members in by_suite.items()}
        per_seed[str(seed)] = {"overall": group(seed_cells),
                               "suites": {s: g for s, g in suites.items() if g["selected"]}}
    names = [s for s in by_suite if any(s in block["suites"] for block in per_seed.values())]

    def across(suite: str | None) -> dict[str, Any]:
        """Spread of the per-seed rates, overall (suite None) or of one suite."""
        groups = [block["overall"] if suite is None else block["suites"].get(suite) for block in per_seed.values()]
        rates = [r for g in groups if g is not None and (r := _rate(g)) is not None]
        return spread(rates)

    return {"label": "success rate (errors excluded) per run seed; mean, sample sd and standard error across seeds",
            "per_seed": per_seed, "mean": {"overall": across(None), "suites": {s: across(s) for s in names}}}


def extend(summary: dict[str, Any], cells: list[str], group: Group, by_suite: Mapping[str, Sequence[str]]) -> None:
    """Add `schedule`, and `seeds` where it applies, to a summary in place."""
    settings = ((summary.get("run") or {}).get("protocol") or {}).get("settings")
    summary["schedule"] = schedule_block(settings)
    seeds = seeds_block(cells, group, by_suite)
    if seeds is not None:
        summary["seeds"] = seeds


def lines(summary: dict[str, Any]) -> list[str]:
    """Terminal lines: the schedule, and the seeds' mean and spread."""
    out = [f"LIBERO schedule: {summary['schedule']['text']}"] if summary.get("schedule") else []
    seeds = summary.get("seeds")
    if seeds:
        parts = []
        for seed, block in seeds["per_seed"].items():
            rate = _rate(block["overall"])
            parts.append(f"seed {seed} {'-' if rate is None else f'{100 * rate:.1f}%'}")
        mean = seeds["mean"]["overall"]
        if mean["mean"] is not None:
            sd = "" if mean["sd"] is None else f" +- {100 * mean['sd']:.1f} (sd), sem {100 * mean['sem']:.1f}"
            parts.append(f"mean {100 * mean['mean']:.1f}%{sd} over {mean['n_seeds']} seeds")
        out.append("LIBERO seeds: " + "; ".join(parts))
    return out
