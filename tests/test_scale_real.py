"""Scale-out on real LIBERO (CPU rendering): a simulator segfault and a hang are contained.

-n 2 equals -n 0: tests/test_policy_host_real.py (the same two cells serve that claim and the host's).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evidence_helpers import records, run_dirs

pytestmark = pytest.mark.real_libero

# Sends `sig` to this worker's bench service at the second policy call of the first episode.
SERVICE_PIDS = (Path(__file__).parent / "service_pids.py").read_text()
SABOTEUR = """
import os, signal
import numpy as np
from service_pids import service_children

class Saboteur:
    def __init__(self, sig="SIGSEGV"):
        self.sig, self.episodes, self.calls = getattr(signal, sig), 0, 0
    def reset(self, language):
        self.episodes += 1
        self.calls = 0
    def act(self, observation):
        self.calls += 1
        if self.episodes == 1 and self.calls == 2:
            for pid in service_children():
                os.kill(pid, self.sig)
        return np.tile([0.0] * 6 + [-1.0], (5, 1))
    def close(self): pass
"""
BASE = ("--libero-scope", "development", "--libero-budget", "decisions", "--libero-max-policy-calls", "3",
        "--libero-video", "none")


@pytest.mark.parametrize("sig, message", [
    ("SIGSEGV", "*env_error: bench service process died during 'submit' (exit code -11)*"),
    ("SIGSTOP", "*env_error: episode deadline (--libero-episode-timeout, with its grace) passed while the bench "
                "service worked on 'submit'; it was killed*"),
])
def test_a_simulator_segfault_or_hang_errors_one_cell_and_the_worker_goes_on(pytester, sig, message):
    pytester.makepyfile(saboteur=SABOTEUR, service_pids=SERVICE_PIDS)
    result = pytester.runpytest_subprocess(
        *BASE, "--libero-task-ids", "0,1", "--libero-policy", "saboteur.py:Saboteur",
        "--libero-policy-kwargs", f'{{"sig": "{sig}"}}', "--libero-episode-timeout", "30")
    result.assert_outcomes(errors=1, failed=1)
    result.stdout.fnmatch_lines([message, "libero_10-t01-s00 * FAILED * failure/truncation: 3 calls*",
                                 "LIBERO: selected 2 = passed 0 + failed 1 + errored 1 + unattempted 0"])
    (run_dir,) = run_dirs(pytester.path / "reports")
    found = records(run_dir)
    assert found["libero_10-t00-s00"]["outcome"]["outcome"] == "env_error"
    assert found["libero_10-t01-s00"]["worker"] == found["libero_10-t00-s00"]["worker"] == "main"
    assert found["libero_10-t01-s00"]["counters"]["executed_controls"] == 15
