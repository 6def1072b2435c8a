"""An adversarial in-process adapter searches its own process for the simulator and finds nothing.

The control test runs the same search where a LIBERO environment does live in the process, and
shows every kind of finding, so the first test can fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_libero.benchmarks.libero import catalog
from pytest_libero.benchmarks.libero.inventory import InstalledLibero

pytestmark = pytest.mark.real_libero
ADVERSARY = (Path(__file__).parent / "adversary.py").read_text()

CHEATER = """
import json
import numpy as np
from adversary import search

class Cheater:
    def __init__(self, target):
        self.target = np.load(target)
        self.findings = {}
    def _look(self):
        for kind, items in search(self.target, exclude=(self.target,)).items():
            self.findings.setdefault(kind, [])
            self.findings[kind] += [i for i in items if i not in self.findings[kind]]
    def reset(self, language):
        self._look()
    def act(self, observation):
        self._look()
        return np.tile([0.0] * 6 + [-1.0], (5, 1))
    def close(self):
        with open("findings.json", "w") as f:
            json.dump(self.findings, f)
"""


def init_state(suite: str, task: int) -> np.ndarray:
    entry = catalog.entry(suite, task)
    with np.load(InstalledLibero.locate().init_root / entry["init_states_file"]) as data:
        return data["states"][0]


def test_an_in_process_adapter_finds_nothing_of_the_simulator(pytester, monkeypatch):
    # The run's worker must start from a user's environment: this test process may have set
    # LIBERO_CONFIG_PATH itself (an earlier test of the same xdist worker importing LIBERO in process).
    monkeypatch.delenv("LIBERO_CONFIG_PATH", raising=False)
    np.save(pytester.path / "target.npy", init_state("libero_10", 0))
    pytester.makepyfile(adversary=ADVERSARY, cheater=CHEATER)
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess(
        "--libero-scope", "development", "--libero-task-ids", "0", "--libero-policy", "cheater.py:Cheater",
        "--libero-policy-kwargs", json.dumps({"target": "target.npy"}), "--libero-budget", "decisions",
        "--libero-max-policy-calls", "2", "--libero-video", "none")
    result.assert_outcomes(failed=1)
    findings = json.loads((pytester.path / "findings.json").read_text())
    assert set(findings) == {"modules", "objects", "arrays", "strings", "frames", "environment", "files"}
    assert findings == {kind: [] for kind in findings}


CONTROL = """
import json, sys
import numpy as np
sys.path.insert(0, {tests!r})
from adversary import search
from pytest_libero.benchmarks.libero import catalog
from pytest_libero.benchmarks.libero.service import make_native_env, prepare_process_environment
from pytest_libero.benchmarks.libero.inventory import InstalledLibero
import tempfile
prepare_process_environment(tempfile.mkdtemp())
entry = catalog.entry("libero_10", 0)
root = InstalledLibero.locate()
with np.load(root.init_root / entry["init_states_file"]) as data:
    init_states = data["states"]  # what a loop that owns the env keeps, as LIBERO's evaluators do
target = init_states[0].copy()
env = make_native_env(str(root.bddl_root / entry["bddl_file"]))
env.reset()
env.set_init_state(init_states[0])
bddl = open(root.bddl_root / entry["bddl_file"])
findings = search(target, exclude=(target,))
print(json.dumps({{k: len(v) for k, v in findings.items()}}))
"""


def test_the_same_search_finds_a_simulator_that_lives_in_the_process(tmp_path):
    done = subprocess.run([sys.executable, "-c", CONTROL.format(tests=str(Path(__file__).parent))],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    for kind in ("modules", "objects", "arrays", "strings", "frames", "environment", "files"):
        assert counts[kind] > 0, (kind, counts)
