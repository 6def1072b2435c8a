"""`python -m pytest_libero compare RUN_A RUN_B`: a paired comparison of two runs.

Two runs compare only when their protocol identities match (same schedule, seeds, caps,
settling, track, budget...): otherwise the comparison is refused, naming the settings that
differ. Episodes pair by cell id (the same task, init state and seed); only cells that both runs
completed (success, failure or policy fault) pair, and errored or unattempted cells are counted
apart. Per task, per suite and overall:

- the 2x2 paired table: both succeeded, only A, only B, neither;
- the difference B - A of the success rates, with a 95% confidence interval by Newcombe's
  method 10 for paired proportions (Wilson score limits of each rate, combined with the
  correlation of the pairs; Newcombe, Statistics in Medicine 17:2635-2650, 1998);
- McNemar's exact test: a two-sided binomial test (scipy.stats.binomtest) of the discordant
  pairs against 1/2;
- a verdict for B against A: better / worse (p < alpha), no detectable difference, or
  underpowered: too few discordant pairs for the exact test to reach p < alpha even if every one
  of them favoured the same run (at alpha 0.05 that takes at least 6).

Many rows, many chances: each per-suite and per-task row also gets its Holm-adjusted p-value
(`holm_p`, the family being that level's rows: every task, or every suite), which keeps the chance of
any false "significant" row of the family at most alpha. The verdicts stay those of the raw p-values;
the overall row is the primary test and is never adjusted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping

from pytest_libero.errors import LiberoError
from pytest_libero.core.protocol import setting_differences
from pytest_libero.core.benchmark import BenchmarkAdapter
from pytest_libero.core.outcomes import COMPLETED, Outcome
from pytest_libero.core.statistics import ALPHA, Paired, analyse, holm_adjust, min_discordant_for_significance


class CompareError(LiberoError):
    """The runs cannot be compared (not run folders, different protocols, nothing in common)."""


def _load(run_dir: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    from pytest_libero.results.summary import load_run

    if not run_dir.is_dir() or not ((run_dir / "run.json").is_file() or (run_dir / "episodes").is_dir()):
        raise CompareError(f"{run_dir} is not a pytest-libero run folder (no run.json or episodes/); pass "
                           "reports/<profile>/<run-id>")
    manifest, _, records, _ = load_run(run_dir)
    return manifest, records


def _protocol(run_dir: Path, manifest: dict[str, Any], records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """{identity, settings} of a run: run.json's, else its records' (which must agree)."""
    if manifest.get("protocol"):
        return manifest["protocol"]  # type: ignore[no-any-return]
    found = {r["identities"]["protocol"]["identity"]: r["identities"]["protocol"] for r in records.values()}
    if len(found) != 1:
        raise CompareError(f"{run_dir} has {'no records' if not found else 'records of several protocols'}; "
                           "nothing to compare")
    return next(iter(found.values()))


def _completed(records: dict[str, dict[str, Any]]) -> dict[str, bool]:
    """Whether each completed cell succeeded; errored and unattempted cells left out."""
    outcomes = {cell: Outcome(record["outcome"]["outcome"]) for cell, record in records.items()}
    return {cell: outcome == Outcome.SUCCESS for cell, outcome in outcomes.items() if outcome in COMPLETED}


def compare(run_a: Path, run_b: Path,
            adapter_for: Callable[[Mapping[str, Any] | None], BenchmarkAdapter]) -> dict[str, Any]:
    """The paired comparison of two run folders (CompareError when they are not comparable).

    `adapter_for` gives the benchmark adapter of a run's protocol settings (its suite order and
    per-task groups)."""
    manifest_a, records_a = _load(run_a)
    manifest_b, records_b = _load(run_b)
    protocol_a, protocol_b = _protocol(run_a, manifest_a, records_a), _protocol(run_b, manifest_b, records_b)
    differences = protocol_differences(protocol_a, protocol_b, "in RUN_A", "in RUN_B")
    if differences is not None:
        raise CompareError(
            f"refusing to compare: the protocol identities differ ({protocol_a.get('identity')} in RUN_A, "
            f"{protocol_b.get('identity')} in RUN_B), so their success rates measure different things. "
            "Settings that differ:\n  " + "\n  ".join(differences) +
            "\nRe-run one of them with the other's settings.")
    comparison = manifest_b.get("comparison") or {}
    if comparison.get("stop") == "decided" and _is_run(run_a, manifest_a, comparison):
        return _sequential(run_a, run_b, manifest_a, manifest_b, records_b, protocol_a, adapter_for)
    done_a = _completed(records_a)
    done_b = _completed(records_b)
    common = [c for c in done_a if c in done_b]
    if not common:
        raise CompareError(f"{run_a} and {run_b} have no completed cell in common; nothing to pair")
    adapter = adapter_for(protocol_a.get("settings"))
    order = {s: i for i, s in enumerate(adapter.suites())}
    cell_of = {c: records_a[c]["cell"] for c in common}
    common.sort(key=lambda c: (order.get(cell_of[c]["suite"], len(order)), cell_of[c]["task_index"],
                               cell_of[c].get("init_index", 0), c))

    def table(cells: list[str]) -> dict[str, Any]:
        pairs = [(done_a[c], done_b[c]) for c in cells]
        return analyse(Paired(both=sum(a and b for a, b in pairs), only_a=sum(a and not b for a, b in pairs),
                              only_b=sum(b and not a for a, b in pairs),
                              neither=sum(not a and not b for a, b in pairs)))

    suites: dict[str, list[str]] = {}
    tasks: dict[str, list[str]] = {}
    for cell in common:
        suites.setdefault(cell_of[cell]["suite"], []).append(cell)
        label = adapter.task_label(cell_of[cell])
        if label is not None:
            tasks.setdefault(label, []).append(cell)
    unpaired = sorted((set(records_a) | set(records_b)) - set(common))
    return {
        "schema_version": 1, "run_a": str(run_a), "run_b": str(run_b),
        "protocol_identity": protocol_a.get("identity"),
        "policy_a": manifest_a.get("policy"), "policy_b": manifest_b.get("policy"),
        "method": {"difference": "rate_B - rate_A over paired cells",
                   "ci95": "Newcombe (1998) method 10, score interval for paired proportions",
                   "test": "McNemar's exact test (two-sided binomial test of discordant pairs, scipy)",
                   "alpha": ALPHA, "min_discordant_for_significance": min_discordant_for_significance(),
                   "multiplicity": MULTIPLICITY},
        "overall": table(common),
        "suites": with_holm({s: table(cells) for s, cells in suites.items()}),
        "tasks": with_holm({t: table(cells) for t, cells in tasks.items()}),
        "unpaired_cells": unpaired,
        "analysis": "fixed-n",
    }


MULTIPLICITY = ("per-task and per-suite verdicts use the raw McNemar p; holm_p is Holm's step-down adjusted p "
                "within each level (all tasks; all suites); the overall row is the primary test, unadjusted")


def with_holm(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`rows` (one level's rows: every task, or every suite) with each row's Holm-adjusted p-value
    `holm_p` over that family; a row without a test (no common cells) gets none."""
    adjusted = holm_adjust({name: row["mcnemar_exact_p"] for name, row in rows.items() if "mcnemar_exact_p" in row})
    return {name: dict(row, holm_p=adjusted[name]) if name in adjusted else row for name, row in rows.items()}


def protocol_differences(protocol_a: Mapping[str, Any], protocol_b: Mapping[str, Any], label_a: str,
                         label_b: str) -> list[str] | None:
    """The settings in which two runs' protocols ({identity, settings}) differ; None when their
    identities match (so their episodes pair)."""
    if protocol_a.get("identity") == protocol_b.get("identity"):
        return None
    return setting_differences(protocol_a.get("settings"), protocol_b.get("settings"), label_a,
                               label_b) or ["protocol identity only"]


def run_protocol(run_dir: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, Any]]:
    """(run.json, records, protocol {identity, settings}) of a run folder; CompareError when it is none."""
    manifest, records = _load(run_dir)
    return manifest, records, _protocol(run_dir, manifest, records)


def _is_run(run_dir: Path, manifest: Mapping[str, Any], comparison: Mapping[str, Any]) -> bool:
    """Whether `run_dir` is the run A that a comparison ran against (the same folder, or a copy of it)."""
    same_id = comparison.get("against_run_id") is not None and manifest.get("run_id") == comparison["against_run_id"]
    return same_id or run_dir.resolve() == Path(str(comparison.get("against"))).resolve()


def _sequential(run_a: Path, run_b: Path, manifest_a: dict[str, Any], manifest_b: dict[str, Any],
                records_b: dict[str, dict[str, Any]], protocol: dict[str, Any],
                adapter_for: Callable[[Mapping[str, Any] | None], BenchmarkAdapter]) -> dict[str, Any]:
    """The comparison of a run B that stopped when decided against A: the same sequential analysis
    over the pairs in the same order (a fixed-n test of the pairs a stopping rule chose is not valid)."""
    from pytest_libero.results.summary import sequential_block

    comparison = dict(manifest_b["comparison"], against=str(run_a.resolve()))  # A as given here (moved: a copy)
    block = sequential_block(comparison, records_b, adapter_for(protocol.get("settings")))
    return {"schema_version": 1, "run_a": str(run_a), "run_b": str(run_b),
            "protocol_identity": protocol.get("identity"),
            "policy_a": manifest_a.get("policy"), "policy_b": manifest_b.get("policy"),
            "analysis": "sequential", "sequential": block}


def _pct(value: float) -> str:
    return f"{100 * value:+.1f}" if value else " 0.0"


def _policy(spec: Any) -> str:
    """A run's policy spec as the command line gave it: name, and kwargs when any."""
    if not isinstance(spec, dict):
        return "unknown"
    kwargs = spec.get("kwargs") or {}
    return str(spec.get("name")) + (f" {json.dumps(kwargs, sort_keys=True)}" if kwargs else "")


def render(result: dict[str, Any]) -> str:
    """The comparison as a plain-text table (a stopped comparison: its sequential analysis)."""
    if result.get("analysis") == "sequential":
        return render_sequential(result)
    head = (f"{'group':<26}{'pairs':>6}{'A %':>7}{'B %':>7}{'B-A pp':>7}  {'95% CI pp':<18}{'A only':>7}"
            f"{'B only':>7}{'McNemar p':>11}{'Holm p':>9}  verdict (B vs A)")
    lines = [f"RUN_A {result['run_a']} (policy {_policy(result.get('policy_a'))})",
             f"RUN_B {result['run_b']} (policy {_policy(result.get('policy_b'))})",
             "A %, B %: success rates; B-A pp: their difference in percentage points, with Newcombe's 95% CI",
             f"protocol {result['protocol_identity']} (identical); {result['overall']['pairs']} paired episodes, "
             f"{len(result['unpaired_cells'])} cell(s) unpaired (missing, errored or unattempted in either run)",
             "analysis: fixed-n (McNemar's exact test and Newcombe's interval over every paired cell)", "", head]

    def row(name: str, r: dict[str, Any]) -> str:
        low, high = r["ci95"]
        rates = f"{100 * r['rate_a']:>6.1f}%{100 * r['rate_b']:>6.1f}%"
        return (f"{name:<26}{r['pairs']:>6}{rates}{_pct(r['difference']):>7}"
                f"  [{100 * low:+.1f}, {100 * high:+.1f}]".ljust(20) + f"{r['only_a']:>7}{r['only_b']:>7}"
                f"{r['mcnemar_exact_p']:>11.4f}{_holm(r):>9}  {r['verdict']}")

    for name, r in result["tasks"].items():
        lines.append(row(name, r))
    lines.append("")
    for name, r in result["suites"].items():
        lines.append(row(name, r))
    lines.append(row("overall", result["overall"]))
    lines.append("")
    lines.append(f"verdicts: better/worse when McNemar's exact p < {result['method']['alpha']}; underpowered when "
                 f"fewer than {result['method']['min_discordant_for_significance']} discordant pairs (the exact "
                 "test cannot reach significance); verdicts use the raw p. Holm p: Holm's step-down adjustment within "
                 "each level (all tasks; all suites), for many rows at once; the overall row is the primary "
                 "test, unadjusted ('-')")
    return "\n".join(lines)


def _holm(row: dict[str, Any]) -> str:
    return f"{row['holm_p']:.4f}" if "holm_p" in row else "-"


def render_sequential(result: dict[str, Any]) -> str:
    """A stopped comparison's analysis: the sequential test replayed over the pairs in their order."""
    from pytest_libero.results.sequential import lines

    block = result["sequential"]
    head = [f"RUN_A {result['run_a']} (policy {_policy(result.get('policy_a'))})",
            f"RUN_B {result['run_b']} (policy {_policy(result.get('policy_b'))})",
            f"protocol {result['protocol_identity']} (identical)",
            "analysis: sequential (RUN_B ran against RUN_A and stopped when decided; McNemar's fixed-n test does "
            "not hold for pairs a stopping rule chose)", f"test: {block.get('test')}"]
    if block.get("error"):
        return "\n".join(head + [f"error: {block['error']}"])
    counts = (f"pairs in order (seed {block['order_seed']}): {block['cells']} consumed of {block['order_cells']}: "
              f"only B {block['steps'][-1]['only_b'] if block['steps'] else 0}, only A "
              f"{block['steps'][-1]['only_a'] if block['steps'] else 0}, concordant "
              f"{block['steps'][-1]['concordant'] if block['steps'] else 0}, errored {block['errored']}")
    return "\n".join(head + [counts] + lines({"sequential": block}))


def write(result: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
