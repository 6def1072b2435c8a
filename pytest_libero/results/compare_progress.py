"""`compare`'s goal progress: the paired difference of two runs' progress, beside McNemar's test.

Each paired cell whose records both carry `progress` (docs/results-format.md) contributes the
difference B - A of its share of goal predicates holding at the end, an exact fraction (held /
predicates). The rows report the mean shares and their difference, and the exact two-sided
p-value of the paired sign-flip test (core/score_statistics.sign_flip_p).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

from pytest_libero.core.score_statistics import sign_flip_p

PROGRESS_METHOD = ("goal progress at the end (share of goal predicates holding), paired over cells whose records "
                   "both carry it: difference B - A of the means; two-sided exact paired sign-flip (permutation) "
                   "test of the mean difference (scores in [0, 1], ties and zeros kept; not a verdict)")


def _share(record: Mapping[str, Any]) -> Fraction | None:
    progress = record.get("progress")
    if not progress or not progress.get("predicates"):
        return None
    predicates = progress["predicates"]
    return Fraction(sum(bool(p["held_at_end"]) for p in predicates), len(predicates))


def paired_progress(cells: list[str], records_a: Mapping[str, dict[str, Any]],
                    records_b: Mapping[str, dict[str, Any]]) -> dict[str, Any] | None:
    """{pairs, mean_a, mean_b, difference, sign_flip_p} over `cells` with progress in both runs, else None."""
    shares = [(_share(records_a[c]), _share(records_b[c])) for c in cells]
    pairs = [(a, b) for a, b in shares if a is not None and b is not None]
    if not pairs:
        return None
    n = len(pairs)
    mean_a, mean_b = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
    return {"pairs": n, "mean_a": float(mean_a), "mean_b": float(mean_b), "difference": float(mean_b - mean_a),
            "sign_flip_p": sign_flip_p([b - a for a, b in pairs])}


def progress_lines(result: Mapping[str, Any]) -> list[str]:
    """The terminal table of the progress rows (none when no row has progress)."""
    rows = [(name, r["progress"]) for level in ("tasks", "suites") for name, r in result[level].items()
            if "progress" in r]
    if "progress" in result["overall"]:
        rows.append(("overall", result["overall"]["progress"]))
    if not rows:
        return []
    out = ["", "goal progress at the end (mean share of goal predicates holding; exact paired sign-flip test of "
               "B - A; evidence beside McNemar's verdict)",
           f"{'group':<26}{'pairs':>6}{'A %':>7}{'B %':>7}{'B-A pp':>8}{'sign-flip p':>13}"]
    for name, p in rows:
        out.append(f"{name:<26}{p['pairs']:>6}{100 * p['mean_a']:>6.1f}%{100 * p['mean_b']:>6.1f}%"
                   f"{100 * p['difference']:>+8.1f}{p['sign_flip_p']:>13.4f}")
    return out
