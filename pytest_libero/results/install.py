"""The run's install check in summary.json, the terminal and the page (docs/install-check.md).

Each record's `install` block is the check of its cell's first observation against the frozen
reference; this gathers them: how many cells match, differ or could not be checked, the distinct
lines that say what differs, and the install the run's service reported.
"""

from __future__ import annotations

import html
from typing import Any, Mapping


def install_block(records: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """summary.json's "install": None when no record was checked (older records, other benchmarks)."""
    checks = {cell: r["install"] for cell, r in records.items() if r.get("install")}
    if not checks:
        return None
    counts = {"matches": 0, "differs": 0, "not checked": 0}
    for block in checks.values():
        counts[block["verdict"]] += 1
    differing = sorted(cell for cell, block in checks.items() if block["verdict"] == "differs")
    lines = sorted({checks[cell]["line"] for cell in differing})
    first = next(iter(checks.values()))
    if counts["differs"]:
        line = f"install: differs from the reference in {counts['differs']} of {len(checks)} checked cell(s)"
    elif counts["matches"]:
        line = "install: matches the reference" + (f" ({counts['not checked']} cell(s) without a reference)"
                                                   if counts["not checked"] else "")
    else:
        line = "install: not checked (no reference for these cells)"
    images = sorted({block["images"] for block in checks.values()})
    for missing in ("no image reference for this renderer", "no image reference for this seed"):
        if missing in images and not counts["differs"]:
            line += f"; {missing}"
    return {"line": line, "counts": counts, "differing_cells": differing, "differences": lines,
            "install": first.get("install") or {}, "references": sorted({b["reference"] for b in checks.values()
                                                                         if b.get("reference")})}


def lines(summary: Mapping[str, Any]) -> list[str]:
    """The terminal's lines: the verdict, and what differs (loud) with the installed versions."""
    block = summary.get("install")
    if not block:
        return []
    out = [("WARNING " if block["counts"]["differs"] else "") + f"LIBERO {block['line']}"]
    if block["counts"]["differs"]:
        out += [f"  {text}" for text in block["differences"][:5]]
        out.append(f"  cells: {' '.join(block['differing_cells'][:10])}"
                   + (" ..." if len(block["differing_cells"]) > 10 else ""))
        out.append(f"  installed: {describe(block['install'])}; run `python -m pytest_libero doctor` for the "
                   "likely cause (docs/install-check.md)")
    return out


def describe(install: Mapping[str, Any]) -> str:
    versions = install.get("versions") or {}
    parts = [f"{name} {version}" for name, version in versions.items()]
    return (f"{', '.join(parts)}; MUJOCO_GL={install.get('gl_backend')}; renderer {install.get('renderer')!r}")


def html_block(summary: Mapping[str, Any]) -> str:
    block = summary.get("install")
    if not block:
        return ""
    style = ' style="color:#c33;font-weight:bold"' if block["counts"]["differs"] else ""
    items = "".join(f"<li>{html.escape(text)}</li>" for text in block["differences"][:5])
    return (f'<p id="install-check"{style}>{html.escape(block["line"])} '
            f'<span class="legend">({html.escape(describe(block["install"]))})</span></p>'
            + (f"<ul>{items}</ul>" if items else ""))
