"""`--libero-policy lerobot` (adapters/lerobot.py): the usage errors at start.

The checks of the folder run before lerobot is imported, so they hold in any interpreter; the
missing-lerobot error is shown with this suite's own venv as the policy's interpreter (it has
numpy, not lerobot).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

RUN = ("--libero-scope", "development", "--libero-budget", "decisions", "--libero-max-policy-calls", "2",
       "--libero-video", "none", "--libero-task-ids", "0", "--libero-track", "openpi-compat",
       "--libero-replan-interval", "5", "--libero-policy", "lerobot", "--libero-policy-isolation", "process",
       "--libero-policy-python", sys.executable)


def _saved_looking_folder(folder: Path) -> Path:
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "policy_preprocessor.json", "policy_postprocessor.json"):
        (folder / name).write_text("{}")
    return folder


def test_usage_errors_at_start_exit_4_naming_the_path_and_the_fix(pytester: pytest.Pytester, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    looks_saved = _saved_looking_folder(tmp_path / "looks-saved")
    cases = [
        ({}, "no policy folder given: pass --libero-policy-kwargs '{\"path\": \"PATH/TO/pretrained_model\"}'"),
        ({"path": str(tmp_path / "nowhere")}, f"policy folder {str(tmp_path / 'nowhere')!r} does not exist"),
        ({"path": str(partial)}, f"{str(partial)!r} is not a saved LeRobot policy: it lacks model.safetensors, "
                                 "policy_preprocessor.json, policy_postprocessor.json"),
        ({"path": str(looks_saved)}, f"this interpreter ({sys.executable}) cannot import "),
    ]
    for kwargs, said in cases:
        result = pytester.runpytest_subprocess(*RUN, "--libero-policy-kwargs", json.dumps(kwargs))
        err = " ".join(result.stderr.str().split())
        assert result.ret == 4, (kwargs, result.stdout.str(), result.stderr.str())
        assert " ".join(said.split()) in err, (kwargs, result.stderr.str())
        assert not list(pytester.path.glob("libero-runs/*/*/episodes/*.json")), "an episode ran"
    assert f"{sys.executable} -m pip install lerobot==0.4.4" in " ".join(result.stderr.str().split())
