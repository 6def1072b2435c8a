"""LIBERO-plus results: variants left unattempted for missing assets, record fields, and the category x
difficulty table.

The table is derived from the episode records alone (their `cell.benchmark` object): suite x
category x difficulty cells, each with counts and Wilson intervals, plus per-category,
per-suite, per-difficulty and overall rows, and the variants skipped for missing assets.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any, Mapping

from pytest_libero.benchmarks.libero_plus import catalog as lp, control
from pytest_libero.core.benchmark import Group, Unattempted
from pytest_libero.core.outcomes import status
from pytest_libero.core.statistics import rate_text

UNKNOWN = "unknown"

# The shape of a LIBERO-plus record's `cell.benchmark` object (JSON Schema). The record schema
# (catalog/schemas/episode_record.schema.json) requires only a benchmark's name; this package owns
# the rest: variant id, category and difficulty from the user's task_classification.json, asset
# status, and the service's robot-init and instruction evidence.
CELL_BLOCK_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["name", "variant_id", "category", "difficulty"],
    "properties": {
        "name": {"const": "libero_plus"},
        "variant_id": {"type": "integer", "minimum": 1},
        "category": {"type": ["string", "null"]},
        "difficulty": {"type": ["integer", "null"]},
        "assets": {"type": "object", "additionalProperties": False, "required": ["status", "folder", "missing"],
                   "properties": {"status": {"enum": ["available", "missing"]}, "folder": {"type": "string"},
                                  "missing": {"type": "array", "items": {"type": "string"}}}},
        "robot_init": {"enum": ["upstream", "apply"]},
        "arm_qpos_after_init": {"type": "array", "items": {"type": "number"}},
        "instruction_sha256": {"type": "string"},
        # the instruction the policy received (cell.language is the benchmark's default)
        "instruction": {"type": "string"},
    },
}


@functools.cache
def _block_validator() -> Any:
    import fastjsonschema

    return fastjsonschema.compile(CELL_BLOCK_SCHEMA)


def block_problem(block: Any) -> str | None:
    """Why `block` is not a LIBERO-plus record's `cell.benchmark` object, or None when it is one."""
    import fastjsonschema

    try:
        _block_validator()(block)
    except fastjsonschema.JsonSchemaException as exc:
        return str(exc)
    return None


def assets_message(missing: list[str], folder: str) -> str:
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    where = "the standard LIBERO assets" if folder == "standard" else f"the {folder} asset folder"
    return (f"unattempted: missing LIBERO-plus asset file {missing[0]}{more} in {where}; this variant needs the "
            "LIBERO-plus asset archive (--libero-plus-assets DIR)")


def unattempted(service: Any, cell: Any) -> Unattempted | None:
    """Ask the bench service for the variant's missing files; if any, the cell is never run
    (recorded unattempted, with the files named); None when every file is there."""
    answer = service.request("check_assets", {"suite": cell.suite, "task_index": cell.task_index})
    missing: list[str] = answer["missing"]
    if not missing:
        return None
    return Unattempted(assets_message(missing, answer["folder"]),
                       {"assets": {"status": "missing", "folder": answer["folder"], "missing": missing}})


def add_record_fields(record: dict[str, Any], private: Mapping[str, Any]) -> None:
    """The service's LIBERO-plus evidence on a finished episode's record (cell.benchmark)."""
    benchmark = record["cell"].get("benchmark")
    if benchmark is None:
        return
    if private.get("assets"):
        benchmark["assets"] = {"status": "available", "folder": private["assets"], "missing": []}
    for key in ("robot_init", "arm_qpos_after_init", "instruction", "instruction_sha256"):
        if key in private:
            benchmark[key] = private[key]


def _key(record: dict[str, Any] | None) -> tuple[str, int | None, str | None]:
    benchmark = (record or {}).get("cell", {}).get("benchmark") or {}
    return (benchmark.get("category") or UNKNOWN, benchmark.get("difficulty"),
            ((benchmark.get("assets") or {}).get("status")))


def results(cells: list[str], records: Mapping[str, dict[str, Any]], group: Group,
            run: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The LIBERO-plus block of summary.json; None when the run has no LIBERO-plus cell. `run`: the
    run's run.json; when it names a control run (--libero-plus-control), the block's "control" holds
    every row's drop against it (control.py)."""
    info: dict[str, tuple[str, str, int | None, str | None]] = {}
    for cell in cells:
        variant = lp.parse_variant_id(cell)
        if variant is not None:
            info[cell] = (variant[0], *_key(records.get(cell)))
    if not info:
        return None
    plus = list(info)
    # One pass puts every variant in its table cell and its rows (in the run's order); the table and the
    # rows then take their groups in the catalog's order.
    cells_of: dict[tuple[Any, ...], list[str]] = {}
    rows_of: tuple[dict[Any, list[str]], ...] = ({}, {}, {})
    for cell, (suite, category, level, _) in info.items():
        cells_of.setdefault((suite, category, level), []).append(cell)
        for index, value in enumerate((suite, category, level)):
            rows_of[index].setdefault(value, []).append(cell)
    table = []
    for suite in lp.SUITES:
        for category in (*lp.CATEGORIES, UNKNOWN):
            for level in (*lp.DIFFICULTIES, None):
                members = cells_of.get((suite, category, level))
                if members:
                    table.append({"suite": suite, "category": category, "difficulty": level,
                                  **group(members)})

    def rows(index: int, values: tuple[Any, ...]) -> dict[str, Any]:
        return {str(v): group(rows_of[index][v]) for v in values if v in rows_of[index]}

    recorded = (run or {}).get(control.RUN_KEY)
    against = None
    if recorded:
        groups: dict[str, Any] = {
            name: {str(v): rows_of[index][v] for v in values if v in rows_of[index]}
            for name, index, values in (("by_category", 1, (*lp.CATEGORIES, UNKNOWN)), ("by_suite", 0, lp.SUITES),
                                        ("by_difficulty", 2, (*lp.DIFFICULTIES, None)))}
        groups["table"] = [({"suite": r["suite"], "category": r["category"], "difficulty": r["difficulty"]},
                            cells_of[(r["suite"], r["category"], r["difficulty"])]) for r in table]
        groups["overall"] = plus
        outcomes = {c: status(records[c]["outcome"]["outcome"]) if c in records else "unattempted" for c in plus}
        against = control.drops(groups, outcomes, recorded, ((run or {}).get("protocol") or {}).get("settings") or {})
    skipped = [c for c, i in info.items() if i[3] == "missing"]
    reasons = Counter(records[c]["cell"]["benchmark"]["assets"]["missing"][0].rsplit("/", 1)[0] + "/"
                      for c in skipped)
    return {
        "benchmark": lp.BENCHMARK, "source": {"package": lp.PACKAGE, "version": lp.PACKAGE_VERSION},
        "table": table,
        "by_category": rows(1, (*lp.CATEGORIES, UNKNOWN)),
        "by_suite": rows(0, lp.SUITES),
        "by_difficulty": rows(2, (*lp.DIFFICULTIES, None)),
        "overall": group(plus),
        "skipped_for_assets": {
            "count": len(skipped),
            "by_category": dict(Counter(info[c][1] for c in skipped)),
            "first_missing_folder": dict(reasons.most_common()),
            "reason": "their scene, texture or object files are not in the linked asset folder (the standard "
                      "LIBERO assets lack the LIBERO-plus archive's files); never run, never counted as failures",
        },
        **({"control": against} if against is not None else {}),
    }


def terminal_lines(plus: dict[str, Any]) -> list[str]:
    """Per-category results and the variants skipped for assets, for the terminal summary."""
    against = plus.get("control")
    by_category = (against or {}).get("by_category") or {}
    lines = [f"LIBERO-plus {name}: {rate_text(g['success_rate_errors_excluded'])}, {g['unattempted']} unattempted"
             + (f"; {drop_text(by_category[name])}" if name in by_category else "")
             for name, g in plus["by_category"].items()]
    if against is not None:
        lines.extend(control_lines(against))
    skipped = plus["skipped_for_assets"]
    if skipped["count"]:
        where = ", ".join(f"{folder} {n}" for folder, n in skipped["first_missing_folder"].items())
        lines.append(f"LIBERO-plus: {skipped['count']} variant(s) unattempted for missing asset files ({where}); "
                     "they need the LIBERO-plus asset archive (--libero-plus-assets DIR)")
    return lines


def drop_text(row: Mapping[str, Any]) -> str:
    """`41.0% vs control 78.0%, drop 37.0 pp [28.8, 44.6], p 1.1e-19, Holm p 7.7e-19`, or why a group has no drop."""
    variants = row["variants"]
    mine = "-" if variants["rate"] is None else f"{100 * variants['rate']:.1f}%"
    if row["drop_pp"] is None:
        if row["missing_base_tasks"]:
            return (f"{mine} vs control: not covered, no control episode of base task(s) "
                    f"{', '.join(row['missing_base_tasks'])}")
        return f"{mine} vs control: {row.get('note', 'no drop')}"
    low, high = row["drop_ci95_pp"]
    return (f"{mine} vs control {100 * row['control']['rate']:.1f}%, drop {row['drop_pp']:.1f} pp "
            f"[{low:.1f}, {high:.1f}]{p_text(row)}")


def p_text(row: Mapping[str, Any]) -> str:
    """`, p 0.0123, Holm p 0.0861` on a row of a level; `, p 0.0123` on the overall row (the primary
    test, never adjusted); '' on a row written before p-values were."""
    if row.get("p_value") is None:
        return ""
    holm = f", Holm p {p_value_text(row['holm_p'])}" if row.get("holm_p") is not None else ""
    return f", p {p_value_text(row['p_value'])}{holm}"


def p_value_text(value: Any) -> str:
    """A p-value to four decimals, one below 0.0001 in scientific notation (`3.2e-09`); '-' for none."""
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}"


def control_lines(against: Mapping[str, Any]) -> list[str]:
    """The control arm's terminal lines besides the categories': which run, then each difficulty and overall."""
    head = (f"LIBERO-plus control: {against['run']} (policy {against['policy'].get('name')!r}, "
            f"{against.get('mode', 'fast')} mode)")
    if against.get("error"):
        return [f"{head}: no drops, {against['error']}"]
    lines = [f"{head}: drop = control - variants, 95% Newcombe hybrid score CI, p of no drop (Holm p: adjusted "
             "within each level; the overall row is the primary test, unadjusted) (summary.json libero_plus.control)"]
    lines += [f"LIBERO-plus difficulty {level}: {drop_text(row)}" for level, row in against["by_difficulty"].items()]
    lines.append(f"LIBERO-plus overall: {drop_text(against['overall'])}")
    return lines


# The page's template, compiled on first use: the adapter module (loaded on every pytest start)
# imports this module, and Jinja costs ~0.1 s to import.
BLOCK = """
{% macro drop_cells(r) %}<td>{{ rate(r.variants) }}</td>
{% if r.drop_pp is none %}<td colspan="4">{% if r.missing_base_tasks %}not covered: the control has no episode of
 {{ r.missing_base_tasks | join(", ") }}{% else %}{{ r.note }}{% endif %}</td>
{% else %}<td>{{ "%.1f" % (100 * r.control.rate) }}% [{{ "%.1f" % (100 * r.control.ci95[0]) }},
 {{ "%.1f" % (100 * r.control.ci95[1]) }}] ({{ r.control.episodes }} episodes, effective n
 {{ "%.1f" % r.control.effective_n }})</td><td>{{ "%.1f" % r.drop_pp }} [{{ "%.1f" % r.drop_ci95_pp[0] }},
 {{ "%.1f" % r.drop_ci95_pp[1] }}]</td>
<td>{{ pvalue(r.p_value) }}</td><td>{{ pvalue(r.holm_p) }}</td>{% endif %}{% endmacro %}
<div class="libero-plus">
<h2>LIBERO-plus: suite x category x difficulty</h2>
<p>{{ p.overall.selected }} variants selected; {{ p.skipped_for_assets.count }} skipped for missing assets
 (unattempted, not failures){% for folder, n in p.skipped_for_assets.first_missing_folder.items() %};
 {{ n }} missing files in <code>{{ folder }}</code>{% endfor %}.
 Rates: passed / (passed + failed), errored and unattempted excluded, 95% Wilson interval.</p>
<table class="libero-plus-table" border="1" cellpadding="4" style="border-collapse: collapse">
<tr><th>suite</th><th>category</th><th>difficulty</th><th>selected</th><th>passed</th><th>failed</th>
<th>errored</th><th>unattempted</th><th>success rate (95% Wilson CI)</th></tr>
{% for r in p.table %}
<tr><td>{{ r.suite }}</td><td>{{ r.category }}</td><td>{{ r.difficulty if r.difficulty is not none else "none" }}</td>
<td>{{ r.selected }}</td><td>{{ r.passed }}</td><td>{{ r.failed }}</td><td>{{ r.errored }}</td>
<td>{{ r.unattempted }}</td><td>{{ rate(r.success_rate_errors_excluded) }}</td></tr>
{% endfor %}
{% for name, rows in (("category", p.by_category), ("suite", p.by_suite), ("difficulty", p.by_difficulty)) %}
{% for value, g in rows.items() %}
<tr class="libero-plus-{{ name }}"><td colspan="3"><b>{{ name }} {{ value }}</b></td><td>{{ g.selected }}</td>
<td>{{ g.passed }}</td><td>{{ g.failed }}</td><td>{{ g.errored }}</td><td>{{ g.unattempted }}</td>
<td>{{ rate(g.success_rate_errors_excluded) }}</td></tr>
{% endfor %}
{% endfor %}
<tr class="libero-plus-overall"><td colspan="3"><b>overall</b></td><td>{{ p.overall.selected }}</td>
<td>{{ p.overall.passed }}</td><td>{{ p.overall.failed }}</td><td>{{ p.overall.errored }}</td>
<td>{{ p.overall.unattempted }}</td><td>{{ rate(p.overall.success_rate_errors_excluded) }}</td></tr>
</table>
{% if p.control %}{% set c = p.control %}
<h3>Against the control arm</h3>
<p>Control: <code>{{ c.run }}</code> (policy {{ c.policy.name }}, {{ c.mode }} mode, protocol
 {{ c.protocol_identity }}). {{ c.method }}.</p>
{% if c.error %}<p class="libero-plus-control-error"><b>No drops:</b> {{ c.error }}</p>{% else %}
<p class="libero-plus-holm">Many rows, many chances: Holm p is Holm's step-down adjustment of p within each level
 (all categories, all difficulties, all suites, all table cells), which keeps the chance of any falsely significant
 row of a level at most 0.05; the overall row is the primary test, unadjusted.</p>
<table class="libero-plus-control" border="1" cellpadding="4" style="border-collapse: collapse">
<tr><th>group</th><th>variants (95% Wilson CI)</th><th>control, matched (95% CI)</th><th>drop, pp (95% CI)</th>
<th>p (no drop)</th><th>Holm p</th></tr>
{% for name, rows in (("category", c.by_category), ("difficulty", c.by_difficulty), ("suite", c.by_suite)) %}
{% for value, r in rows.items() %}
<tr class="libero-plus-control-{{ name }}"><td>{{ name }} {{ value }}</td>{{ drop_cells(r) }}</tr>
{% endfor %}
{% endfor %}
<tr class="libero-plus-control-overall"><td><b>overall</b></td>{{ drop_cells(c.overall) }}</tr>
{% for r in c.table %}
<tr class="libero-plus-control-cell"><td>{{ r.suite }} / {{ r.category }} /
 {{ r.difficulty if r.difficulty is not none else "none" }}</td>{{ drop_cells(r) }}</tr>
{% endfor %}
</table>
{% endif %}
{% endif %}
</div>
"""


def html(plus: dict[str, Any]) -> str:
    return str(_page_template().render(p=plus, rate=rate_text, pvalue=p_value_text))


def _page_template() -> Any:
    # Imported here: the adapter module (loaded on every pytest start) imports this one, and the page
    # module imports Jinja (about 0.1 s).
    from pytest_libero.results.page import compiled

    return compiled(BLOCK)
