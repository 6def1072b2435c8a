"""Runs of the fake-service project as separate processes, killable mid-run (resume and shard tests)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from fakes import fake_conftest
from pytest_libero.results.files import is_temporary

FAKES = (Path(__file__).parent / "fakes.py").read_text()
CONFTEST = fake_conftest(success_at=13)
# The fake service reports success at control 13 on every task; the policy holds still and logs
# every episode it plays, so a test can see nothing ran twice.
POLICY = """
import os, time
import numpy as np

class Logged:
    def __init__(self, pause=0.0):
        self.pause = pause
    def reset(self, language):
        with open(os.path.join(os.environ["EPISODE_LOG"]), "a") as f:
            f.write(language + "\\n")
    def act(self, observation):
        time.sleep(self.pause)
        return np.tile([0.0] * 6 + [-1.0], (5, 1))
    def close(self): pass
"""
BASE = ["-p", "no:cacheprovider", "--libero-policy", "policy.py:Logged", "--libero-budget", "decisions",
        "--libero-max-policy-calls", "4", "--libero-scope", "development", "--libero-task-ids", "0,1,2,3,4"]


def setup_project(path: Path) -> None:
    (path / "fakes.py").write_text(FAKES)
    (path / "conftest.py").write_text(CONFTEST)
    (path / "policy.py").write_text(POLICY)


def run(path: Path, *args: str, kill_after_records: int | None = None, root: str = "reports",
        log: str = "episodes.log", bare: bool = False, kill_when: Callable[[Path], bool] | None = None) -> int:
    """Run pytest in `path`; with kill_after_records, SIGKILL the whole run once that many records exist
    (with kill_when, once it says so of the output root). `bare`: only `args` (no BASE options, no
    --libero-output)."""
    env = dict(os.environ, PYTHONPATH=str(path), EPISODE_LOG=str(path / log))
    for name in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "JOB_COMPLETION_INDEX"):
        env.pop(name, None)
    options = ["-p", "no:cacheprovider", *args] if bare else [*BASE, "--libero-output", root, *args]
    process = subprocess.Popen([sys.executable, "-m", "pytest", *options],
                               cwd=path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    if kill_after_records is None and kill_when is None:
        return process.wait(timeout=300)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if kill_when is not None and kill_when(path / root):
            break
        done = [p for p in (path / root).glob("*/*/episodes/*.json") if not is_temporary(p)]
        if kill_after_records is not None and len(done) >= kill_after_records:
            break
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    return -signal.SIGKILL


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """What must agree between two runs of the same cell: outcome, counters, private hashes, chunks."""
    return {"outcome": record["outcome"], "counters": record["counters"], "private": record["private"],
            "chunks": record["chunks"], "observations": record["observations"], "cell": record["cell"]}


def summary_core(run_dir: Path) -> dict[str, Any]:
    summary = json.loads((run_dir / "summary.json").read_text())
    return {k: summary[k] for k in ("overall", "suites", "episodes", "unattempted", "protocol_identities")}
