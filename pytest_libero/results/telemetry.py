"""Throughput telemetry, derived from episode records alone (summary.json `throughput`).

    episodes_per_hour     recorded episodes / the span from the first episode's start
                          (finished - wall_s) to the last one's end, x 3600
    workers.<w>           per worker: episodes, controls (executed + settling), busy seconds
                          (sum of wall_s) and controls per busy second
    share_of_wall_time    of the summed episode wall time: setup (setup_s + settle_s),
                          simulation, rendering, policy, and other (what is left: video, IPC, records)

Placeholder records (crashed, not_run) hold no timing and are left out.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

PHASES = {"setup": ("setup_s", "settle_s"), "simulation": ("simulation_s",), "rendering": ("rendering_s",),
          "policy": ("policy_s",)}


_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


def _epoch(stamp: str) -> float | None:
    """Seconds since the epoch of a record's `finished` (`2026-12-01T10:00:00Z`), None for anything
    else. datetime.fromisoformat, not time.strptime: a tenth of the cost, 10,000 records a summary."""
    if not isinstance(stamp, str) or not _STAMP.fullmatch(stamp):
        return None
    try:
        return datetime.fromisoformat(stamp[:-1]).replace(tzinfo=timezone.utc).timestamp()
    except ValueError:  # a month 13
        return None


def throughput(records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Episodes per hour, controls per second per worker and the share of wall time per phase."""
    timed = [r for r in records.values() if (r.get("timing") or {}).get("wall_s") is not None and r.get("counters")]
    workers: dict[str, dict[str, Any]] = {}
    phases = dict.fromkeys((*PHASES, "other"), 0.0)
    starts, ends = [], []
    wall = 0.0
    timed_phases = [(phase, key) for phase, keys in PHASES.items() for key in keys]
    for record in timed:
        timing, counters = record["timing"], record["counters"]
        seconds = float(timing["wall_s"])
        wall += seconds
        for phase, key in timed_phases:
            value = timing.get(key)
            if value:
                phases[phase] += float(value)
        entry = workers.setdefault(str(record.get("worker")), {"episodes": 0, "controls": 0, "busy_s": 0.0})
        entry["episodes"] += 1
        entry["controls"] += int(counters["executed_controls"]) + int(counters["settling_controls"])
        entry["busy_s"] += seconds
        end = _epoch(record.get("finished", ""))
        if end is not None:
            ends.append(end)
            starts.append(end - seconds)
    phases["other"] = max(0.0, wall - sum(phases[p] for p in PHASES))
    span = (max(ends) - min(starts)) if ends else 0.0
    for entry in workers.values():
        entry["controls_per_second"] = entry["controls"] / entry["busy_s"] if entry["busy_s"] > 0 else None
    return {
        "episodes": len(timed),
        "span_s": span,
        "episodes_per_hour": len(timed) / span * 3600 if span > 0 else None,
        "workers": dict(sorted(workers.items())),
        "wall_time_s": wall,
        "share_of_wall_time": {p: (v / wall if wall > 0 else None) for p, v in phases.items()},
    }


def throughput_lines(stats: dict[str, Any]) -> list[str]:
    """The terminal summary's telemetry lines (none when no episode was timed)."""
    if not stats.get("episodes"):
        return []
    rate = stats["episodes_per_hour"]
    shares = ", ".join(f"{p} {100 * v:.0f}%" for p, v in stats["share_of_wall_time"].items() if v is not None)
    workers = ", ".join(f"{w} {e['controls_per_second']:.1f}" for w, e in stats["workers"].items()
                        if e["controls_per_second"] is not None)
    return [f"LIBERO throughput: {stats['episodes']} episodes, "
            + (f"{rate:.1f} episodes/hour" if rate is not None else "episodes/hour n/a (under 1 s)")
            + f"; wall time: {shares}",
            f"LIBERO controls/s per worker: {workers}"]
