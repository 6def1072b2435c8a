"""Checks shared by the evidence tests: schema validity, decodable videos, consistent summaries."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import imageio.v2 as imageio
import jsonschema

from pytest_libero.core.data import SCHEMA_DIR

RECORD_SCHEMA = json.loads((SCHEMA_DIR / "episode_record.schema.json").read_text())


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/*/run.json"))


def records(run_dir: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted((run_dir / "episodes").glob("*.json")):
        assert not path.name.startswith("."), f"temporary left in place of a record: {path}"
        record = json.loads(path.read_text())
        jsonschema.Draft202012Validator(RECORD_SCHEMA).validate(record)
        found[record["cell"]["id"]] = record
    return found


def html_rows(page: str) -> dict[str, list[dict[str, Any]]]:
    """The test rows pytest-html stores as JSON in its page."""
    blob = re.search(r'data-jsonblob="([^"]*)"', page)
    assert blob is not None, "not a pytest-html page"
    return json.loads(html.unescape(blob.group(1)))["tests"]  # type: ignore[no-any-return]


def decoded_frames(path: Path) -> int:
    reader = imageio.get_reader(path, format="FFMPEG")
    try:
        count = 0
        for _ in reader.iter_data():
            count += 1
        return count
    finally:
        reader.close()


def check_videos(run_dir: Path, found: dict[str, dict[str, Any]]) -> None:
    for cell, record in found.items():
        if record["video"] is not None:
            video = run_dir / record["video"]["path"]
            assert video.is_file(), f"{cell}: record names a missing video {video}"
            assert decoded_frames(video) == record["video"]["frames"], cell
