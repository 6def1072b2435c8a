"""`pytest --libero-resume RUN` alone: which recorded command line's --libero-* options it reuses."""

from __future__ import annotations

import json

from pytest_libero.results.resume import recorded_options

FLAGS = frozenset({"--libero-resume-keep-errors"})


def test_a_resumed_session_that_gave_no_option_points_back_to_the_one_that_did(tmp_path):
    original = ["pytest", "--libero-scope", "development", "--libero-task-ids=0,1", "-x"]
    bare = ["pytest", "--libero-resume", str(tmp_path), "--libero-resume-keep-errors"]
    manifest = {"command_line": bare, "previous_sessions": [{"command_line": original}, {"command_line": bare}]}
    (tmp_path / "run.json").write_text(json.dumps(manifest))
    assert recorded_options(tmp_path, FLAGS) == ["--libero-scope", "development", "--libero-task-ids=0,1"]
    manifest["command_line"] = ["pytest", "--libero-resume", str(tmp_path), "--libero-scope", "full"]
    (tmp_path / "run.json").write_text(json.dumps(manifest))
    assert recorded_options(tmp_path, FLAGS) == ["--libero-scope", "full"]  # the latest with options wins


def test_no_run_json_no_options(tmp_path):
    assert recorded_options(tmp_path, FLAGS) == []
