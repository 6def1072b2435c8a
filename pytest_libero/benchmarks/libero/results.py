"""LIBERO's own summary block: LIBERO-PRO suites per perturbation beside their base suite."""

from __future__ import annotations

from typing import Any, Mapping

from pytest_libero.benchmarks.libero import catalog


def perturbations_block(suites: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """LIBERO-PRO suites per perturbation beside their base suite, with the rate difference."""
    found: dict[str, Any] = {}
    for name, g in suites.items():
        kind = catalog.perturbation(name)
        if kind is None:
            continue
        base = catalog.base_suite(name)
        row = found.setdefault(base, {"base": _brief(suites.get(base)), "perturbations": {}})
        entry = _brief(g)
        assert entry is not None
        base_rate = row["base"]["rate"] if row["base"] else None
        entry["difference_vs_base"] = (None if entry["rate"] is None or base_rate is None
                                       else entry["rate"] - base_rate)
        row["perturbations"][kind] = entry
    return found or None


def _brief(group: dict[str, Any] | None) -> dict[str, Any] | None:
    if group is None:
        return None
    stat = group["success_rate_errors_excluded"]
    return {"rate": stat["rate"], "ci95": stat["ci95"], "successes": stat["successes"], "trials": stat["trials"],
            "selected": group["selected"]}


def perturbation_lines(summary: Mapping[str, Any]) -> list[str]:
    """Terminal lines of the LIBERO-PRO perturbations (none when the run has no LIBERO-PRO suite)."""
    out = []
    for base, row in (summary.get("perturbations") or {}).items():
        def pct(entry: dict[str, Any] | None) -> str:
            return "-" if not entry or entry["rate"] is None else f"{100 * entry['rate']:.1f}% (n={entry['trials']})"
        kinds = ", ".join(f"{k} {pct(e)}" for k, e in row["perturbations"].items())
        out.append(f"LIBERO-PRO {base}: base {pct(row['base'])}; {kinds}")
    return out
