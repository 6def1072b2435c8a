"""The policy host on real LIBERO (CPU rendering): -n 2 with and without the host and -n 0, equal records.

One test serves two claims on the same two cells: the policy host changes no record, and two xdist
workers give the records of one process (that claim was tests/test_scale_real.py's, with the random
policy; the random policy's seeding in other processes is test_slurm_real.py's shards vs its local run).
"""

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
        "--libero-video", "none", "--libero-task-ids", "0,1", "--libero-policy", "counting.py:Counting")
# Under xdist the preflight is one more environment build, and neither claim is about it: off there. The
# one process keeps it: its first cell is the episode the preflight started, and must equal the worker's.
RUNS = {"none": ("-n", "2", "--libero-preflight", "off", "--libero-policy-isolation", "none"),
        "host": ("-n", "2", "--libero-preflight", "off", "--libero-policy-isolation", "host"),
        "one process": ("-n", "0", "--libero-policy-isolation", "none")}
BLOCKS = ("outcome", "counters", "private", "chunks", "observations", "cell")


@pytest.mark.scale_out
def test_two_workers_with_and_without_the_policy_host_and_one_process_give_equal_records(pytester):
    pytester.makepyfile(counting=POLICY)
    found = {}
    for name, args in RUNS.items():
        output = name.replace(" ", "-")
        result = pytester.runpytest_subprocess(*BASE, *args, "--libero-output", output)
        result.assert_outcomes(failed=2)
        (run_dir,) = run_dirs(pytester.path / output)
        found[name] = records(run_dir)
    assert sorted(found["host"]) == sorted(found["none"]) == sorted(found["one process"])
    assert len(found["none"]) == 2
    assert {r["worker"] for r in found["none"].values()} <= {"gw0", "gw1"}
    assert {r["worker"] for r in found["one process"].values()} == {"main"}
    for cell, alone in found["one process"].items():
        for block in BLOCKS:
            assert found["none"][cell][block] == alone[block], (cell, block)
    for cell, hosted in found["host"].items():
        plain = found["none"][cell]
        for block in BLOCKS:
            assert hosted[block] == plain[block], (cell, block)
        assert hosted["worker"] in ("gw0", "gw1")
        profile = hosted["identities"]["model_profile"]
        assert profile["isolation"] == "host" and profile["batched"] is True
        assert 1 <= hosted["timing"]["policy_batch_size_max"] <= 2 and hosted["timing"]["policy_queue_s"] >= 0
