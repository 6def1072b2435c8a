"""Earlier attempts of a resumed run's cells, and the temporaries a killed session left.

Before `--libero-resume` runs a cell again, the cell's record (an env_error or crashed one, or
one that cannot be read) and its video move, unchanged, to

    attempts/<cell-id>/<n>.json     the record of attempt n (1 the first), as it was written
    attempts/<cell-id>/<n>.mp4      its video, when it had one (the record still names
                                    videos/<cell-id>.mp4: the file beside it is that video)

so the evidence of every failure is kept. Only episodes/ counts: summaries, report, merge,
resume and compare read the final attempt there, and summary.json lists the earlier ones under
"earlier_attempts". The video moves first and the record last, so a kill in between leaves the
record in episodes/ and the next resume moves it to the same number.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pytest_libero.core.outcomes import Outcome
from pytest_libero.results.files import fsync_dir, is_temporary

ATTEMPTS = "attempts"


def _outcome(record_path: Path) -> dict[str, Any] | None:
    """The record's `outcome` block, None when the file cannot be read as a record."""
    try:
        outcome = json.loads(record_path.read_text(encoding="utf-8"))["outcome"]
        return outcome if isinstance(outcome, dict) and isinstance(outcome.get("outcome"), str) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def keep_attempt(run_dir: Path, cell_id: str) -> Path | None:
    """Move the record (and video) of `cell_id`, about to run again, to attempts/<cell-id>/<n>.*.

    A record that says the cell never ran (not_run) holds no attempt and stays (the new record
    replaces it); a missing record moves nothing. Returns the moved record's new path, or None.
    """
    record = run_dir / "episodes" / f"{cell_id}.json"
    if not record.is_file():
        return None
    outcome = _outcome(record)
    if outcome is not None and outcome["outcome"] == Outcome.NOT_RUN:
        return None
    folder = run_dir / ATTEMPTS / cell_id
    folder.mkdir(parents=True, exist_ok=True)
    number = 1
    while (folder / f"{number}.json").exists():
        number += 1
    video = run_dir / "videos" / f"{cell_id}.mp4"
    if video.is_file():
        os.replace(video, folder / f"{number}.mp4")
    os.replace(record, folder / f"{number}.json")
    fsync_dir(folder)
    fsync_dir(record.parent)
    return folder / f"{number}.json"


def earlier_attempts(run_dir: Path) -> list[dict[str, Any]]:
    """summary.json's "earlier_attempts": every attempt kept under attempts/, by cell, then number."""
    root = run_dir / ATTEMPTS
    found: list[dict[str, Any]] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        numbered = [p for p in folder.glob("*.json") if p.stem.isdigit() and not is_temporary(p)]
        for path in sorted(numbered, key=lambda p: int(p.stem)):
            outcome = _outcome(path) or {}
            video = path.with_suffix(".mp4")
            found.append({
                "cell": folder.name, "attempt": int(path.stem),
                "outcome": outcome.get("outcome"), "termination": outcome.get("termination"),
                "message": outcome.get("message") if outcome else "the record cannot be read",
                "record": path.relative_to(run_dir).as_posix(),
                "video": video.relative_to(run_dir).as_posix() if video.is_file() else None,
            })
    return found


def remove_temporaries(run_dir: Path) -> list[str]:
    """Delete the hidden temporaries (results.files.is_temporary) of the run folder, its episodes/
    and videos/: what a killed session left half-written. Their paths, relative to the folder.

    Call it only when no other session is writing into the folder (a resume, before it runs).
    """
    removed: list[str] = []
    for folder in (run_dir, run_dir / "episodes", run_dir / "videos"):
        if not folder.is_dir():
            continue
        for path in sorted(p for p in folder.iterdir() if is_temporary(p)):  # by name, then a stat each
            if path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path.relative_to(run_dir).as_posix())
    return removed


def describe_removed(removed: list[str], shown: int = 4) -> str:
    """One line saying what remove_temporaries removed ("" when nothing)."""
    if not removed:
        return ""
    listed = ", ".join(removed[:shown]) + (f" and {len(removed) - shown} more" if len(removed) > shown else "")
    return f"removed {len(removed)} temporary file(s) a killed session left: {listed}"
