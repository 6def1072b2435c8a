"""The cost-model policy of the policy-host benchmarks: a SIMULATED GPU, not a model.

Every copy of the policy (one per worker without the host, one in the host) shares one device
lock, a file lock (fcntl.flock) on `lock`, so that copies in separate processes are serialized
as on one GPU. A call on a batch of B observations holds the lock for a + b*B seconds (sleeping).
Defaults a = 100 ms, b = 8 ms: a = 100 ms is the order of a 7B VLA's single-request latency (the
issue's published single-request rates: OpenVLA-OFT 27.1/s, pi0.5 84/s, X-VLA 88.8/s, StarVLA-FAST
1.4/s, vla-eval's reproductions; users report ~10 h for 500 LIBERO episodes with OpenVLA,
openvla/openvla#195), b = 8 ms per extra observation is an assumption (a batch of 8 costing about
1.6x a batch of 1), stated, not measured.

The answer is deterministic and batch-invariant: a chunk that depends only on the episode's call
number. Use as `--libero-policy benchmarks/bench_policy_host_model.py:cost_model`.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from typing import Any

import numpy as np


class CostModel:
    def __init__(self, a_ms: float = 100.0, b_ms: float = 8.0, rows: int = 5, lock: str | None = None) -> None:
        self.a, self.b, self.rows = a_ms / 1000.0, b_ms / 1000.0, rows
        self.lock = lock or os.path.join(tempfile.gettempdir(), "pytest-libero-cost-model.lock")
        self.calls: dict[Any, int] = {}
        self.device_s = 0.0

    def _compute(self, batch: int) -> None:
        with open(self.lock, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                time.sleep(self.a + self.b * batch)
                self.device_s += self.a + self.b * batch
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _chunk(self, n: int) -> Any:
        return np.tile([0.0, 0.0, 0.02 * (n % 4) - 0.03, 0.0, 0.0, 0.0, -1.0], (self.rows, 1))

    def reset(self, language: str) -> None:
        self.calls[None] = 0

    def act(self, observation: Any) -> Any:
        self._compute(1)
        self.calls[None] += 1
        return self._chunk(self.calls[None])

    def act_batch(self, requests: Any) -> list[Any]:
        self._compute(len(requests))
        out = []
        for r in requests:
            self.calls[r.key] = 1 if r.first else self.calls[r.key] + 1
            out.append(self._chunk(self.calls[r.key]))
        return out

    def end_episode(self, key: str) -> None:
        self.calls.pop(key, None)

    def close(self) -> None:
        pass


def cost_model(**kwargs: Any) -> CostModel:
    return CostModel(**kwargs)


def ideal(workers: int, sim_s: float, a: float, b: float, max_batch: int) -> tuple[float, float]:
    """Observations/s: (the best any scheduler can do, the naive min(simulator, policy capacity)).

    A worker runs one episode at a time: it simulates for `sim_s`, then waits for its answer, and a
    request cannot join a batch already on the device. The best schedule serves the workers in g
    groups in turn (g = 1: all together, the device idle while they simulate; g = 2: one group
    simulates while the other's batch runs; ...), batches of at most ceil(N/g) <= max_batch. A
    worker is then served once a cycle, and a cycle lasts the longer of its own loop (sim_s plus its
    group's batch, a + b*ceil(N/g)) and the device's work for all groups (g*a + b*N): throughput
    N / max(sim_s + a + b*ceil(N/g), g*a + b*N), best over g.

    Why no schedule does better: while the device runs batches back to back, a worker answered at
    the end of one batch is simulating when the next starts, so it is in at most every other batch
    and two consecutive batches serve at most N requests, which bounds the rate by N/(2a + b*N)
    (g = 2); only an idle gap of at least sim_s lets a worker into the next batch again, and one
    such gap per cycle is the g = 1 schedule. For g >= 3 the same argument over g batches applies.
    (The looser max over B of min(B/(a + b*B), N/(sim_s + a + b*B)), printed by earlier versions,
    lets a worker join a batch it is still simulating for: no scheduler reaches it.)

    The second figure, min(N/sim_s, B_max/(a + b*B_max)), ignores that a worker waits for its
    answer at all: the issue's definition, printed for reference.
    """
    best = 0.0
    for groups in range(1, workers + 1):
        batch = -(-workers // groups)
        if batch > max_batch:
            continue
        best = max(best, workers / max(sim_s + a + b * batch, groups * a + b * workers))
    top = min(max_batch, workers)
    return best, min(workers / sim_s, top / (a + b * top))
