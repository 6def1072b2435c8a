"""The policy host on real LIBERO (CPU rendering): -n 2 with and without the host, equal records."""

from __future__ import annotations

import pytest

from evidence_helpers import records, run_dirs

pytestmark = pytest.mark.real_libero

# Batch-invariant and deterministic: the chunk depends only on the episode's call number, whether
# it is called through act (no host) or act_batch (one host for both workers).
POLICY = '''
import numpy as np

class Counting:
    def __init__(self):
        self.calls = {}
    def reset(self, language):
        self.calls[None] = 0
    def act(self, observation):
        self.calls[None] += 1
        return self._chunk(self.calls[None])
    def act_batch(self, requests):
        out = []
        for r in requests:
            self.calls[r.key] = 1 if r.first else self.calls[r.key] + 1
            out.append(self._chunk(self.calls[r.key]))
        return out
    def _chunk(self, n):
        return np.tile([0.05 * (n % 3) - 0.05, 0.0, 0.02 * n, 0.0, 0.0, 0.0, -1.0], (5, 1))
'''
BASE = ("--libero-scope", "development", "--libero-budget", "decisions", "--libero-max-policy-calls", "2",
        "--libero-video", "none", "--libero-task-ids", "0,1", "-n", "2", "--libero-policy", "counting.py:Counting",
        "--libero-preflight", "off")  # not about the preflight: under xdist it is one more environment build


def test_two_workers_with_and_without_the_policy_host_give_equal_records(pytester):
    pytester.makepyfile(counting=POLICY)
    found = {}
    for isolation in ("none", "host"):
        result = pytester.runpytest_subprocess(*BASE, "--libero-policy-isolation", isolation,
                                               "--libero-output", isolation)
        result.assert_outcomes(failed=2)
        (run_dir,) = run_dirs(pytester.path / isolation)
        found[isolation] = records(run_dir)
    assert sorted(found["host"]) == sorted(found["none"]) and len(found["none"]) == 2
    for cell, hosted in found["host"].items():
        plain = found["none"][cell]
        for block in ("outcome", "counters", "private", "chunks", "observations", "cell"):
            assert hosted[block] == plain[block], (cell, block)
        assert hosted["worker"] in ("gw0", "gw1")
        profile = hosted["identities"]["model_profile"]
        assert profile["isolation"] == "host" and profile["batched"] is True
        assert 1 <= hosted["timing"]["policy_batch_size_max"] <= 2 and hosted["timing"]["policy_queue_s"] >= 0
