"""pytest-html integration (controller side): LIBERO columns, and the summary and per-task blocks on top,
with a link to the run folder's review page (report.html).

Registered only when pytest-html is active. The video link itself is attached to each report
as a pytest-html extra by the worker (plugin/__init__.py), with a path relative to the HTML file.
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.results.page import counters_text, summary_block, tasks_block


class HtmlReport:
    def __init__(self, accounting: Any) -> None:
        self.accounting = accounting

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells.insert(2, '<th class="sortable" data-column-type="libero-cell">LIBERO cell</th>')
        cells.insert(3, "<th>LIBERO outcome</th>")
        cells.insert(4, "<th>counters</th>")

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        row = getattr(report, "libero", None) or {}
        outcome = row.get("outcome", "")
        if row.get("termination") and row["termination"] != outcome:
            outcome += f" / {row['termination']}"
        cells.insert(2, f'<td class="col-libero-cell">{escape(row.get("cell", ""))}</td>')
        cells.insert(3, f"<td>{escape(outcome)}</td>")
        cells.insert(4, f"<td>{escape(counters_text(row)) if row else ''}</td>")

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list[str], summary: list[str], postfix: list[str],
                                    session: pytest.Session) -> None:
        result = self.accounting.final_summary()
        if result is not None:
            summary_json, chart = result
            page = self.accounting.run_dir.path / "report.html"
            html_path = self.accounting.config.getoption("htmlpath", None)
            link = os.path.relpath(page, Path(html_path).resolve().parent) if html_path else str(page)
            prefix.append(summary_block(summary_json, chart, self.accounting.run.adapter, review_page=link))
            prefix.append(tasks_block(summary_json))
