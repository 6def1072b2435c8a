"""HTML for reviewers: the summary block (also used inside pytest-html) and the standalone page.

Rendered with Jinja2 (autoescaping on), which pytest-html already depends on.
"""

from __future__ import annotations

import base64
import functools
from typing import Any

import jinja2
from markupsafe import Markup

from pytest_libero.core.benchmark import BenchmarkAdapter
from pytest_libero.core.statistics import rate_text
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
<th>median first-success control</th></tr>
{% for name, g in groups %}
<tr><td>{{ name }}</td><td>{{ g.selected }}</td><td>{{ g.passed }}</td><td>{{ g.failed }}</td>
<td>{{ g.errored }}</td><td>{{ g.unattempted }}</td>
<td>{{ rate(g.success_rate_errors_excluded) }}</td><td>{{ rate(g.success_rate_errors_as_failures) }}</td>
<td>{{ g.median_first_success_control if g.median_first_success_control is not none else "-" }}</td></tr>
{% endfor %}
</table>
{% if unattempted %}<p>Unattempted: {% for c in unattempted %}<code>{{ c }}</code> {% endfor %}</p>{% endif %}
<img alt="success rates by suite with 95% Wilson intervals" src="data:image/png;base64,{{ chart }}">
</div>
""")

PAGE = _ENV.from_string("""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>LIBERO run {{ run.run_id or "" }}</title>
<style>body{font-family:sans-serif;margin:1.5em} td,th{vertical-align:top} .passed{color:#080}
.failed{color:#b00} .errored{color:#a60} .unattempted{color:#777} video{width:384px}</style></head>
<body>
<h1>LIBERO run {{ run.run_id or "" }}</h1>
{{ block }}
<h2>Episodes</h2>
<table border="1" cellpadding="4" style="border-collapse: collapse">
<tr><th>cell</th><th>status</th><th>outcome</th><th>counters</th><th>message</th><th>video</th></tr>
{% for e in episodes %}
<tr><td><code>{{ e.cell }}</code><br>{{ e.language or "" }}</td><td class="{{ e.status }}">{{ e.status }}</td>
<td>{{ e.outcome }}{% if e.termination %} / {{ e.termination }}{% endif %}
{% if e.kind == "diagnostic" %}<br><em>infrastructure diagnostic</em>{% endif %}</td>
<td>{{ counters(e) }}</td><td>{{ e.message }}</td>
<td>{% if e.video %}<video controls preload="metadata" src="{{ e.video }}"></video><br>
<a href="{{ e.video }}">{{ e.video }}</a>{% endif %}</td></tr>
{% endfor %}
</table>
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


def summary_block(summary: dict[str, Any], chart_png: bytes, adapter: BenchmarkAdapter) -> str:
    groups = list(summary["suites"].items()) + [("overall", summary["overall"])]
    block = SUMMARY_BLOCK.render(
        o=summary["overall"], run=summary.get("run") or {}, kind=summary.get("run_kind"),
        identities=summary.get("protocol_identities"),
        groups=groups, unattempted=summary["unattempted"], rate=rate_text, extra_lines=schedule_lines(summary),
        chart=base64.b64encode(chart_png).decode())
    return block + adapter.html_block(summary)


def render_page(summary: dict[str, Any], chart_png: bytes, adapter: BenchmarkAdapter) -> str:
    block = Markup(summary_block(summary, chart_png, adapter))
    return PAGE.render(run=summary.get("run") or {}, block=block, episodes=summary["episodes"],
                       counters=counters_text)
