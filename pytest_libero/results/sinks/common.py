"""What every built-in sink logs (decided here, once) and the description of a sink (SinkKind)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from pytest_libero.results.reading import read_document


@dataclass(frozen=True, slots=True)
class SinkKind:
    """One built-in sink: its name, how to make it, and the one-line fix when it fails."""

    name: str
    fix: str
    make: Callable[[Path], Any]  # the sink, given the folder its files go in (--libero-sink-dir)


def episode_metrics(record: Mapping[str, Any]) -> dict[str, float]:
    """The numbers logged per episode: `success` (1 or 0), the counters, the first-success control
    (successes only), and with a `progress` block its fractions and predicate counts."""
    outcome = record["outcome"]
    counters = record.get("counters") or {}
    metrics: dict[str, float] = {"success": 1.0 if outcome["outcome"] == "success" else 0.0}
    for name in ("policy_calls", "action_decisions", "executed_controls", "settling_controls", "control_cap"):
        if isinstance(counters.get(name), (int, float)):
            metrics[name] = float(counters[name])
    if outcome.get("first_success_control") is not None:
        metrics["first_success_control"] = float(outcome["first_success_control"])
    progress = record.get("progress")
    if isinstance(progress, Mapping):
        for name in ("fraction_at_end", "max_fraction"):
            if isinstance(progress.get(name), (int, float)):
                metrics[f"progress_{name}"] = float(progress[name])
        predicates = progress.get("predicates") or []
        metrics["predicates_reached"] = float(sum(1 for p in predicates if p.get("first_control") is not None))
        metrics["predicates_held_at_end"] = float(sum(1 for p in predicates if p.get("held_at_end")))
    return metrics


def episode_labels(record: Mapping[str, Any]) -> dict[str, str]:
    """What names an episode beside its numbers: the cell, its suite, outcome and termination."""
    return {"cell": record["cell"]["id"], "suite": record["cell"].get("suite", ""),
            "outcome": record["outcome"]["outcome"], "termination": record["outcome"].get("termination", "")}


RATES = {"rate": "success_rate_errors_excluded", "rate_errors_as_failures": "success_rate_errors_as_failures"}


def group_metrics(prefix: str, group: Mapping[str, Any]) -> dict[str, float]:
    """A summary group's counts and both rates with their 95% Wilson limits, named `prefix/...`."""
    metrics: dict[str, float] = {}
    for name in ("selected", "passed", "failed", "errored", "unattempted"):
        if isinstance(group.get(name), int):
            metrics[f"{prefix}/{name}"] = float(group[name])
    for short, key in RATES.items():
        stat = group.get(key) or {}
        if stat.get("rate") is not None:
            low, high = stat["ci95"]
            metrics.update({f"{prefix}/{short}": float(stat["rate"]), f"{prefix}/{short}_ci95_low": float(low),
                            f"{prefix}/{short}_ci95_high": float(high)})
    return metrics


def summary_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """The end-of-run numbers: `overall/...`, `suite/<suite>/...` and `task/<task>/...`."""
    metrics = group_metrics("overall", summary.get("overall") or {})
    for suite, group in (summary.get("suites") or {}).items():
        metrics.update(group_metrics(f"suite/{suite}", group))
    for task, group in (summary.get("tasks") or {}).items():
        metrics.update(group_metrics(f"task/{task}", group))
    return metrics


def run_params(run_dir: Path) -> dict[str, str]:
    """The run's identity as flat text params: run id, profile, protocol identity and each
    protocol setting (nested values as JSON), the policy spec, the source revision."""
    manifest = read_document(str(run_dir / "run.json")) or {}
    protocol = manifest.get("protocol") or {}
    params = {"run_id": str(manifest.get("run_id", run_dir.name)), "profile": str(manifest.get("profile", "")),
              "run_folder": str(run_dir), "protocol_identity": str(protocol.get("identity", ""))}
    for name, value in sorted((protocol.get("settings") or {}).items()):
        params[f"protocol.{name}"] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    policy = manifest.get("policy") or {}
    params["policy"] = str(policy.get("name", ""))
    params["policy_kwargs"] = json.dumps(policy.get("kwargs", {}), sort_keys=True)
    source = manifest.get("source") or {}
    if source.get("revision"):
        params["source_revision"] = str(source["revision"])
    return params
