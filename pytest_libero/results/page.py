"""HTML for reviewers: the summary block (also used inside pytest-html) and the standalone page.

Rendered with Jinja2 (autoescaping on), which pytest-html already depends on.
"""

from __future__ import annotations

import base64
import functools
import json
from typing import Any

import jinja2
from markupsafe import Markup

from pytest_libero.core.benchmark import BenchmarkAdapter
from pytest_libero.core.statistics import rate_text
from pytest_libero.results.page_script import PAGE_SIZE, SCRIPT, STYLE
from pytest_libero.results.progress import progress_text
from pytest_libero.results.schedule_summary import lines as schedule_lines

_ENV = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)


@functools.cache
def compiled(text: str) -> jinja2.Template:
    """A page fragment's template (a benchmark's block), with the page's settings, compiled once per process."""
    return _ENV.from_string(text)

SUMMARY_BLOCK = _ENV.from_string("""
<div class="libero-summary">
<h2>LIBERO results</h2>
{% if kind %}<p class="libero-run-kind"><strong>{{ kind.text }}</strong></p>{% endif %}
<p>selected {{ o.selected }} = passed {{ o.passed }} + failed {{ o.failed }} + errored {{ o.errored }}
 + unattempted {{ o.unattempted }}
{% if run.profile %} &middot; profile <code>{{ run.profile }}</code>{% endif %}
{% if run.run_id %} &middot; run <code>{{ run.run_id }}</code>{% endif %}
{% if run.protocol %} &middot; track <code>{{ run.protocol.settings.track }}</code>
 &middot; budget <code>{{ run.protocol.settings.budget }}</code>{% endif %}
{% if identities %} &middot; protocol {% for i in identities %}<code>{{ i }}</code> {% endfor %}{% endif %}</p>
{% if extra_lines %}<p class="libero-schedule">{% for line in extra_lines %}{{ line }}<br>{% endfor %}</p>{% endif %}
<table class="libero-table" border="1" cellpadding="4" style="border-collapse: collapse">
<tr><th>suite</th><th>selected</th><th>passed</th><th>failed</th><th>errored</th><th>unattempted</th>
<th>success rate, errors excluded (95% Wilson CI)</th><th>success rate, errors as failures (95% CI)</th>
<th>median first-success control</th>{% if has_progress %}<th>goal progress at end, mean (95% t CI)</th>{% endif %}</tr>
{% for name, g in groups %}
<tr><td>{{ name }}</td><td>{{ g.selected }}</td><td>{{ g.passed }}</td><td>{{ g.failed }}</td>
<td>{{ g.errored }}</td><td>{{ g.unattempted }}</td>
<td>{{ rate(g.success_rate_errors_excluded) }}</td><td>{{ rate(g.success_rate_errors_as_failures) }}</td>
<td>{{ g.median_first_success_control if g.median_first_success_control is not none else "-" }}</td>
{% if has_progress %}<td>{{ progress(g.progress) }}</td>{% endif %}</tr>
{% endfor %}
</table>
{% if unattempted %}<p>Unattempted ({{ unattempted | length }}):
{% for c in unattempted[:20] %}<code>{{ c }}</code> {% endfor %}
{% if unattempted | length > 20 %}and {{ unattempted | length - 20 }} more (summary.json lists them all){% endif %}
</p>{% endif %}
{% if review_page %}<p class="libero-review-page">Review page (per-task overview, filters, videos on demand):
<a href="{{ review_page }}">{{ review_page }}</a></p>{% endif %}
<img alt="success rates by suite with 95% Wilson intervals" src="data:image/png;base64,{{ chart }}">
</div>
""")

TASKS_BLOCK = _ENV.from_string("""
{% if tasks %}
<h2 id="per-task">Per task</h2>
<table class="libero-table libero-tasks" id="tasks">
<tr><th>task</th><th>suite</th><th>selected</th><th>passed</th><th>failed</th><th>errored</th><th>unattempted</th>
<th>success rate, errors excluded (95% Wilson CI)</th><th>chart</th>{% if seeds %}<th>per run seed</th>{% endif %}
{% if has_progress %}<th>goal progress at end, mean (95% t CI)</th><th>goal predicates reached</th>{% endif %}</tr>
{% for name, g in tasks %}
{% set s = g.success_rate_errors_excluded %}
<tr><td>{% if links %}<a href="#task={{ name | urlencode }}">{{ name }}</a>{% else %}{{ name }}{% endif %}</td>
<td>{{ g.suite or "" }}</td><td>{{ g.selected }}</td><td>{{ g.passed }}</td><td>{{ g.failed }}</td>
<td>{{ g.errored }}</td><td>{{ g.unattempted }}</td><td>{{ rate(s) }}</td>
<td>{% if s.rate is not none %}<div class="bar" title="{{ rate(s) }}">
<span class="rate" style="width:{{ '%.1f' % (100 * s.rate) }}%"></span>
<span class="ci" style="left:{{ '%.1f' % (100 * s.ci95[0]) }}%;width:{{ '%.1f' % (100 * (s.ci95[1] - s.ci95[0])) }}%">
</span></div>{% else %}-{% endif %}</td>
{% if seeds %}<td>{% for seed, block in seeds %}{% if name in block.tasks %}
seed {{ seed }} {{ rate(block.tasks[name].success_rate_errors_excluded) }}<br>{% endif %}{% endfor %}</td>{% endif %}
{% if has_progress %}<td>{{ progress(g.progress) }}</td>
<td class="predicates">{% for p in (g.progress or {}).predicates or [] %}
<code>{{ p.text }}</code> {{ p.reached }}/{{ p.episodes }}<br>{% endfor %}</td>{% endif %}
</tr>
{% endfor %}
</table>
{% endif %}
""")

SEQUENTIAL_BLOCK = _ENV.from_string("""
<div class="libero-sequential">
<h2>Sequential comparison against run A</h2>
{% if b.error %}<p>{{ b.error }}</p>{% else %}
<p><strong>{{ b.verdict }}</strong>{% if b.stop_message %} &middot; {{ b.stop_message }}{% endif %}
 &middot; run A <code>{{ b.against }}</code> (protocol <code>{{ b.against_identity }}</code>)</p>
<p>{{ b.test }}; alpha {{ b.alpha }}, power {{ b.power }} (beta {{ b.beta }}), minimum effect {{ b.min_effect }},
order seed {{ b.order_seed }}; {{ b.errored }} errored pair(s), never discordant{% if b.not_counted %};
{{ b.not_counted | length }} episode(s) past the consumed prefix not counted:
{% for c in b.not_counted %}<code>{{ c }}</code> {% endfor %}{% endif %}.</p>
{# The effect's intervals (issue 35): the anytime-valid one is the one to quote after a stop. #}
{% if effect %}<p class="libero-sequential-effect">{{ effect }}</p>{% endif %}
<svg xmlns="http://www.w3.org/2000/svg" width="{{ w + 60 }}" height="{{ h + 40 }}" role="img"
 aria-label="log e-values against pairs, with the boundary log(2/alpha)">
<g transform="translate(45,10)">
<line x1="0" y1="{{ h }}" x2="{{ w }}" y2="{{ h }}" stroke="#333"/>
<line x1="0" y1="0" x2="0" y2="{{ h }}" stroke="#333"/>
<line x1="0" y1="{{ boundary_y }}" x2="{{ w }}" y2="{{ boundary_y }}" stroke="#c33" stroke-dasharray="4 3"/>
<text x="{{ w }}" y="{{ boundary_y - 4 }}" text-anchor="end" font-size="11" fill="#c33">
log(2/alpha) = {{ '%.2f' % b.boundary_log_e }}</text>
<polyline fill="none" stroke="#2a7d2a" stroke-width="2" points="{{ points_b }}"/>
<polyline fill="none" stroke="#4c72b0" stroke-width="2" points="{{ points_a }}"/>
<text x="-6" y="{{ h }}" text-anchor="end" font-size="11">0</text>
<text x="-6" y="10" text-anchor="end" font-size="11">{{ '%.1f' % top }}</text>
<text x="{{ w / 2 }}" y="{{ h + 28 }}" text-anchor="middle" font-size="11">pairs in order (1 to {{ b.cells }})</text>
<text x="6" y="12" font-size="11" fill="#2a7d2a">log E_B (B better)</text>
<text x="6" y="26" font-size="11" fill="#4c72b0">log E_A (A better)</text>
</g></svg>
{% endif %}
</div>
""")


def sequential_block(summary: dict[str, Any]) -> str:
    """The decision of a run against run A: verdict, settings, and a plot of log E_B and log E_A
    against pairs with the boundary (inline SVG, numbers only; the text escaped)."""
    from pytest_libero.results.sequential import effect_text, plot_top, svg_points

    block = summary.get("sequential")
    if not block:
        return ""
    if block.get("error"):
        return str(SEQUENTIAL_BLOCK.render(b=block))
    width, height, top = 480.0, 160.0, plot_top(block)
    return str(SEQUENTIAL_BLOCK.render(
        b=block, effect=effect_text(block), w=width, h=height, top=top,
        boundary_y=round(height - height * block["boundary_log_e"] / top, 1),
        points_b=svg_points(block, "log_e_b", width, height, top),
        points_a=svg_points(block, "log_e_a", width, height, top)))


PAGE = _ENV.from_string("""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>LIBERO run {{ run.run_id or "" }}</title>
<link rel="icon" href="data:,">
<style>{{ style }}</style></head>
<body>
<h1>LIBERO run {{ run.run_id or "" }}</h1>
<nav><a href="#overview">overview</a><a href="#per-task">per task</a>
{% if grid %}<a href="#grid-section">task x init state</a>{% endif %}<a href="#episodes">episodes</a></nav>
<section id="overview">
{{ block }}
{{ tasks }}
{% if grid %}
<section id="grid-section"><h2>Task x init state</h2>
<p class="legend">Every cell is one episode; click it to open it.
<span style="background:#2a7d2a"></span>passed <span style="background:#c33"></span>failed
<span style="background:#e90"></span>errored <span style="background:#999"></span>unattempted</p>
<div id="grid"></div></section>
{% endif %}
</section>
<section id="episodes">
<h2>Episodes</h2>
<p>Errored first, then failed, unattempted and passed; {{ page_size }} rows a page. Open an episode (click its row) to
load its video.</p>
<div id="episode-detail" hidden></div>
<p id="filters">
<label>suite <select id="f-suite"><option value="">all</option></select></label>
<label>task <select id="f-task"><option value="">all</option></select></label>
<label>outcome <select id="f-outcome"><option value="">all</option></select></label>
<label class="plus-only">category <select id="f-category"><option value="">all</option></select></label>
<label class="plus-only">difficulty <select id="f-difficulty"><option value="">all</option></select></label>
<label>text <input id="f-text" type="search" placeholder="cell, instruction, message"></label>
<label class="progress-only">sort <select id="f-sort"><option value="">errored first</option>
<option value="progress-asc">goal progress, lowest first</option>
<option value="progress-desc">goal progress, highest first</option></select></label>
</p>
<p><button id="prev" type="button">previous</button> <button id="next" type="button">next</button>
 <span id="episode-count"></span></p>
<table id="episode-table">
<thead><tr><th>video</th><th>cell</th><th>task</th><th>status</th><th>outcome</th>
<th class="plus-only">category, difficulty</th><th class="progress-only">goal progress</th><th>counters</th>
<th>message</th></tr></thead>
<tbody id="episode-rows"></tbody>
</table>
<noscript>The episode list needs JavaScript; summary.json and episodes/ hold the same data.</noscript>
</section>
<script type="application/json" id="libero-data">{{ data }}</script>
<script>{{ script }}</script>
</body></html>
""")


def counters_text(entry: dict[str, Any]) -> str:
    c = entry.get("counters")
    if not c:
        return "-"
    text = (f"{c['policy_calls']} calls, {c['action_decisions']} decisions, {c['executed_controls']} controls "
            f"(+{c['settling_controls']} settling), cap {c['control_cap']}")
    if entry.get("first_success_control") is not None:
        text += f"; first success at control {entry['first_success_control']}"
        if entry.get("first_success_policy_call") is not None:
            text += f" (policy call {entry['first_success_policy_call']})"
    return text


def progress_episode_text(row: dict[str, Any] | None) -> str | None:
    """An episode's goal progress in words: '1 of 2 at the end (at most 2); (on a b) first at control 57,
    (on c d) never' (first at control 0: it held at the first observation)."""
    if not row:
        return None
    predicates = row["predicates"]
    n = len(predicates)
    held = sum(1 for _, at_end, _ in predicates if at_end)
    parts = [f"{text} {'never' if first is None else f'first at control {first}'}"
             + ("" if at_end or first is None else ", not at the end") for text, at_end, first in predicates]
    return f"{held} of {n} at the end (at most {round(row['max_fraction'] * n)}); " + ", ".join(parts)


def tasks_block(summary: dict[str, Any], links: bool = False) -> str:
    """The per-task table (success rate with its Wilson interval and a bar; per run seed in full mode;
    goal progress and how often each predicate was reached, when the records carry it)."""
    seeds = [(seed, block) for seed, block in ((summary.get("seeds") or {}).get("per_seed") or {}).items()
             if block.get("tasks")]
    return str(TASKS_BLOCK.render(tasks=list((summary.get("tasks") or {}).items()), seeds=seeds, links=links,
                                  rate=rate_text, has_progress="progress" in summary["overall"],
                                  progress=progress_text))


def summary_block(summary: dict[str, Any], chart_png: bytes, adapter: BenchmarkAdapter,
                  review_page: str | None = None) -> str:
    """The summary (counts, per-suite table and chart, the benchmark's block); `review_page`: a link to
    the run folder's report.html (pytest-html's page gets one)."""
    groups = list(summary["suites"].items()) + [("overall", summary["overall"])]
    block = SUMMARY_BLOCK.render(
        o=summary["overall"], run=summary.get("run") or {}, kind=summary.get("run_kind"),
        identities=summary.get("protocol_identities"), review_page=review_page,
        groups=groups, unattempted=summary["unattempted"], rate=rate_text, extra_lines=schedule_lines(summary),
        has_progress="progress" in summary["overall"], progress=progress_text,
        chart=base64.b64encode(chart_png).decode())
    from pytest_libero.results.install import html_block as install_html

    return block + install_html(summary) + sequential_block(summary) + adapter.html_block(summary)


PAGE_FIELDS = ("cell", "suite", "task", "status", "outcome", "termination", "message", "language", "counters",
               "video", "recorded", "init_index", "run_seed", "category", "difficulty", "progress", "progress_end")


def page_data(summary: dict[str, Any]) -> str:
    """The episodes as JSON for the page's script, safe inside a <script> element.

    Dictionary-encoded, to keep thousands of episodes small: `fields`, each field's distinct `values`,
    and one `rows` entry per episode holding an index into each field's values (the script decodes it).
    """
    values: list[dict[Any, int]] = [{} for _ in PAGE_FIELDS]
    rows = []
    for e in summary["episodes"]:
        progress = e.get("progress")
        episode = dict(e, counters=counters_text(e) if e.get("counters") else None,
                       recorded=e.get("recorded", True), progress=progress_episode_text(progress),
                       progress_end=progress["fraction_at_end"] if progress else None)
        rows.append([table.setdefault(episode.get(name), len(table))
                     for name, table in zip(PAGE_FIELDS, values, strict=True)])
    text = json.dumps({"fields": PAGE_FIELDS, "values": [list(table) for table in values], "rows": rows},
                      separators=(",", ":"))
    # "<" never reaches the HTML parser inside the script element ("</script>" in a message ends nothing).
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(summary: dict[str, Any], chart_png: bytes, adapter: BenchmarkAdapter) -> str:
    """report.html: the overview (summary, per-task table, in full mode the task x init-state grid), then
    the episodes, rendered a page at a time by the inline script from the embedded JSON."""
    block = Markup(summary_block(summary, chart_png, adapter))
    grid = (summary.get("schedule") or {}).get("mode") == "full"
    return PAGE.render(run=summary.get("run") or {}, block=block, tasks=Markup(tasks_block(summary, links=True)),
                       grid=grid, page_size=PAGE_SIZE, style=Markup(STYLE),
                       script=Markup(SCRIPT.replace("PAGE_SIZE", str(PAGE_SIZE))), data=Markup(page_data(summary)))
