"""RoboMemArena results: record fields, and TSR / CSR / stage completion per task, memory type and overall.

Derived from the episode records alone (their `cell.benchmark` object). Metrics, as this suite
reports them (docs/robomemarena.md has their history across RoboMemArena's commits):
- TSR: all-stage success, an episode counts only when every reference stage completed (the item
  passes on it); the rate is the generic passed / (passed + failed) with its Wilson interval.
- CSR: final BDDL goal success (the goal held at some control of the episode, as the b175708
  runner's goal_success), rate over completed episodes with its Wilson interval.
- average_score_pct: the mean share of stages completed (a diagnostic).
Errored and unattempted episodes are left out of all three and counted.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping

from pytest_libero.benchmarks.robomemarena.checkout import MEMORY_WORDS
from pytest_libero.benchmarks.robomemarena.options import BENCHMARK, parse
from pytest_libero.core.benchmark import Group
from pytest_libero.core.outcomes import Outcome
from pytest_libero.core.statistics import rate_text, wilson

METRICS = {
    "tsr": "all-stage success: every reference stage completed (the item passes on it)",
    "csr": "final BDDL goal success: the goal held at some control (the checkout's goal check or override)",
    "average_score_pct": "mean share of stages completed (diagnostic)",
}
COMPLETED = (Outcome.SUCCESS.value, Outcome.FAILURE.value)


def add_record_fields(record: dict[str, Any], evidence: Mapping[str, Any]) -> None:
    """The service's scoring of a finished episode on its record (cell.benchmark)."""
    scored = evidence.get("robomemarena")
    benchmark = record["cell"].get("benchmark")
    if scored is None or benchmark is None:
        return
    benchmark.update({key: scored[key] for key in (
        "score_pct", "tsr_success", "goal_success", "goal_reached_control", "stages", "episode_ended")})
    benchmark["service_prompt"] = scored["prompt"]
    benchmark["provenance"]["scorer_sha256_in_service"] = scored["scorer_sha256"]


def _scored(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """The benchmark object of a completed (passed or failed) episode's record, else None."""
    if not record or record["outcome"]["outcome"] not in COMPLETED:
        return None
    benchmark = record["cell"].get("benchmark") or {}
    return benchmark if "score_pct" in benchmark else None


def _metrics(cells: list[str], records: Mapping[str, dict[str, Any]], group: Group,
             per_stage: bool = False) -> dict[str, Any]:
    scored = [b for b in (_scored(records.get(c)) for c in cells) if b is not None]
    stages: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for benchmark in scored:
        for stage in benchmark["stages"]:
            stages[stage["name"]][0] += stage["completed_control"] is not None
            stages[stage["name"]][1] += 1
    episodes = group(cells)
    metrics = {
        "tsr": episodes["success_rate_errors_excluded"],
        "csr": wilson(sum(bool(b["goal_success"]) for b in scored), len(scored)),
        "average_score_pct": sum(b["score_pct"] for b in scored) / len(scored) if scored else None,
        "episodes": episodes,
    }
    if per_stage:  # stage names are a task's own
        metrics["stage_completion"] = {name: {"completed": done, "episodes": n, "rate": done / n}
                                       for name, (done, n) in stages.items()}
    return metrics


def results(cells: list[str], records: Mapping[str, dict[str, Any]], group: Group) -> dict[str, Any] | None:
    """The RoboMemArena block of summary.json; None when the run has no RoboMemArena cell."""
    ours = [c for c in cells if parse(c) is not None]
    if not ours:
        return None
    by_task: dict[int, list[str]] = defaultdict(list)
    for cell in ours:
        by_task[parse(cell)[0]].append(cell)  # type: ignore[index]
    memory = {}
    for task, members in by_task.items():
        record = next((records[c] for c in members if c in records), None)
        memory[task] = ((record or {}).get("cell", {}).get("benchmark") or {}).get("memory_type") or "unknown"
    by_memory: dict[str, list[str]] = defaultdict(list)
    for task, members in by_task.items():
        by_memory[memory[task]].extend(members)
    provenance = sorted({_provenance_text(r) for c in ours if (r := records.get(c)) is not None})
    return {
        "benchmark": BENCHMARK, "metrics": METRICS, "checkouts": provenance,
        "overall": _metrics(ours, records, group),
        "by_task": {str(task): {"memory_type": memory[task], **_metrics(members, records, group, per_stage=True)}
                    for task, members in sorted(by_task.items())},
        "by_memory_type": {name: _metrics(members, records, group) for name, members in sorted(by_memory.items())},
        "memory_types": {letter: word for letter, word in MEMORY_WORDS.items()},
    }


def _provenance_text(record: dict[str, Any]) -> str:
    provenance = (record["cell"].get("benchmark") or {}).get("provenance") or {}
    return f"commit {provenance.get('commit', 'unknown')}, scorer {provenance.get('scorer_digest', '?')[:16]}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def terminal_lines(block: dict[str, Any]) -> list[str]:
    """TSR, CSR and average score per task, memory type and overall."""
    def line(label: str, m: dict[str, Any]) -> str:
        e = m["episodes"]
        return (f"RoboMemArena {label}: TSR {rate_text(m['tsr'])}, CSR {rate_text(m['csr'])}, average score "
                f"{_pct(m['average_score_pct'])}; {e['errored']} errored, {e['unattempted']} unattempted")

    lines = [line(f"task {task} ({m['memory_type']})", m) for task, m in block["by_task"].items()]
    lines += [line(f"memory type {name}", m) for name, m in block["by_memory_type"].items()]
    lines.append(line("overall", block["overall"]))
    lines.append(f"RoboMemArena checkout: {'; '.join(block['checkouts']) or 'no record'}")
    return lines


BLOCK = """
<div class="robomemarena">
<h2>RoboMemArena: TSR, CSR and stages</h2>
<p>TSR: {{ b.metrics.tsr }}. CSR: {{ b.metrics.csr }}. Average score: {{ b.metrics.average_score_pct }}.
 Rates over passed + failed episodes (errored and unattempted excluded), 95% Wilson interval.
 Checkout: {{ b.checkouts | join("; ") }}.</p>
<table class="robomemarena-table" border="1" cellpadding="4" style="border-collapse: collapse">
<tr><th>group</th><th>episodes</th><th>passed</th><th>failed</th><th>errored</th><th>unattempted</th>
<th>TSR (95% Wilson CI)</th><th>CSR (95% Wilson CI)</th><th>average score</th><th>stage completion</th></tr>
{% for label, m in rows %}
<tr><td>{{ label }}</td><td>{{ m.episodes.selected }}</td><td>{{ m.episodes.passed }}</td>
<td>{{ m.episodes.failed }}</td><td>{{ m.episodes.errored }}</td><td>{{ m.episodes.unattempted }}</td>
<td>{{ rate(m.tsr) }}</td><td>{{ rate(m.csr) }}</td><td>{{ pct(m.average_score_pct) }}</td>
<td>{% for name, s in (m.stage_completion or {}).items() %}
{{ name }} {{ s.completed }}/{{ s.episodes }}<br>{% endfor %}</td></tr>
{% endfor %}
</table>
</div>
"""



def html(block: dict[str, Any]) -> str:
    rows = [(f"task {task} ({m['memory_type']})", m) for task, m in block["by_task"].items()]
    rows += [(f"memory type {name}", m) for name, m in block["by_memory_type"].items()]
    rows.append(("overall", block["overall"]))
    return str(_page_template().render(b=block, rows=rows, rate=rate_text, pct=_pct))


def _page_template() -> Any:
    # Imported here: the adapter module (loaded on every pytest start) imports this one, and the page
    # module imports Jinja (about 0.1 s).
    from pytest_libero.results.page import compiled

    return compiled(BLOCK)
