"""Benchmark 2: the policy host past this machine's cores, with a SIMULATED simulator and GPU.

Each "worker" is a process with its own HostPolicy connection (as an xdist worker has), looping:
simulate K controls (sleep K x the per-control cost), then ask the host for a chunk with a real
LIBERO-sized observation (two 256x256x3 uint8 images, pickled over the host's socket). The host
runs the cost-model policy (bench_policy_host_model.py: a simulated GPU, a batch of B costs
a + b*B). Per worker count it prints achieved observations/s, the ideal (the best any scheduler
can do, and the naive min(simulator, policy capacity)), achieved/ideal, the batch sizes the host
formed, the mean queue wait and the host's own overhead per request (round trip minus queue wait
minus the policy's compute: socket, pickling, threads), and the same workers with per-worker
copies of the cost model (batch 1, taking turns on the one device lock) for host/copies.

Simulator cost: 7.3 observations/s per LIBERO shard (the issue's measured figure) with K=5: 27.4 ms
per control. Policy: a = 100 ms, b = 8 ms (see bench_policy_host_model.py for their sources).
Each worker starts after a random offset (seeded, uniform over one cycle s + a + b), so that the
workers are out of step when the host first sees them (issue 32: the host must bring them into
step). `--a-ms 714` makes the policy the costlier side (StarVLA-FAST's published 1.4
observations/s, the issue's slowest model, against the simulator's 137 ms); with it, set
`--max-wait-ms` above one observation's simulation (the worker's turnaround), e.g. 300.

    python benchmarks/bench_policy_host_simulated.py                     # 8, 32, 64 workers, 15 s each
    python benchmarks/bench_policy_host_simulated.py --workers 32 --seconds 30 --repeat 3
    python benchmarks/bench_policy_host_simulated.py --workers 2 4 8 32 --a-ms 714 --max-wait-ms 300 --repeat 3
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_policy_host_model import CostModel, ideal  # noqa: E402

from pytest_libero.core.contract import Counters, Observation  # noqa: E402
from pytest_libero.core.policy import PolicySpec  # noqa: E402
from pytest_libero.runtime.host import HostPolicy, HostSettings, PolicyHost  # noqa: E402

MODEL = str(Path(__file__).parent / "bench_policy_host_model.py")


def observation(language: str) -> Observation:
    images = {"agentview": np.zeros((256, 256, 3), np.uint8), "robot0_eye_in_hand": np.zeros((256, 256, 3), np.uint8)}
    return Observation(language, images, Counters(0, 0, 0))


def _worker(i: int, address: dict[str, str], k: int, control_s: float, calls_per_episode: int, ready: Any,
            measuring: Any, stop: Any, results: Any, offset_s: float) -> None:
    """One simulated xdist worker (a process): simulate, ask the host, count while measuring."""
    policy = HostPolicy(address, timeout_s=600, worker=f"w{i}")
    obs = observation(f"task {i}")
    count, queue, overhead = 0, [], []
    ready.release()
    time.sleep(offset_s)  # its random start offset
    while not stop.is_set():
        policy.reset(f"task {i}")
        for _ in range(calls_per_episode):
            time.sleep(k * control_s)  # the simulated simulator
            before = dict(policy.episode_timing())
            tick = time.monotonic()
            policy.act(obs)
            took = time.monotonic() - tick
            after = policy.episode_timing()
            if measuring.is_set() and not stop.is_set():
                q = after["policy_queue_s"] - before.get("policy_queue_s", 0.0)
                c = after["policy_host_compute_s"] - before.get("policy_host_compute_s", 0.0)
                count += 1
                queue.append(q)
                overhead.append(took - q - c)
            if stop.is_set():
                break
        policy.episode_over()  # as the plugin does after each episode
    policy.close()
    results.put((count, queue, overhead))


def run(workers: int, seconds: float, control_s: float, k: int, a_ms: float, b_ms: float, max_batch: int,
        max_wait_ms: float, calls_per_episode: int, seed: int = 0) -> dict[str, float]:
    folder = tempfile.mkdtemp(prefix="libero-bench-host-")
    spec = PolicySpec(f"{MODEL}:cost_model", {"a_ms": a_ms, "b_ms": b_ms, "lock": os.path.join(folder, "gpu.lock")})
    host = PolicyHost(spec, HostSettings(max_batch=max_batch, max_wait_ms=max_wait_ms), folder, "bench")
    host.start()
    context = multiprocessing.get_context("fork")
    ready, measuring, stop, results = context.Semaphore(0), context.Event(), context.Event(), context.Queue()
    cycle = k * control_s + (a_ms + b_ms) / 1000
    offsets = np.random.default_rng(seed).uniform(0.0, cycle, workers)
    processes = [context.Process(target=_worker, args=(i, host.address, k, control_s, calls_per_episode, ready,
                                                       measuring, stop, results, float(offsets[i])), daemon=True)
                 for i in range(workers)]
    for process in processes:
        process.start()
    for _ in processes:
        ready.acquire()
    time.sleep(max(min(5.0, seconds / 3), 2 * cycle))  # past every start offset
    before = dict(host.stats().get("batches", {}))
    measuring.set()
    tick = time.monotonic()
    time.sleep(seconds)
    stop.set()
    elapsed = time.monotonic() - tick
    batches = host.stats().get("batches", {})
    done, queue, overhead = 0, [], []
    for _ in processes:
        count, q, o = results.get(timeout=120)
        done, queue, overhead = done + count, queue + q, overhead + o
    for process in processes:
        process.join(30)
    host.close()
    sizes: collections.Counter[int] = collections.Counter()
    for size, calls in batches.items():
        sizes[size] = calls - before.get(size, 0)
    q_mean = sum(queue) / max(1, len(queue))
    o_sorted = sorted(overhead)
    rate = done / elapsed
    best, naive = ideal(workers, k * control_s, a_ms / 1000, b_ms / 1000, max_batch)
    formed = sum(s * c for s, c in sizes.items()) / max(1, sum(sizes.values()))
    return {"rate": rate, "ideal": best, "naive": naive, "queue_ms": q_mean * 1000,
            "overhead_ms": (sum(o_sorted) / max(1, len(o_sorted))) * 1000,
            "overhead_p95_ms": o_sorted[int(0.95 * (len(o_sorted) - 1))] * 1000 if o_sorted else 0.0,
            "batch_mean": formed, "batch_max": max(sizes, default=0)}


def run_copies(workers: int, seconds: float, control_s: float, k: int, a_ms: float, b_ms: float) -> float:
    """Observations/s of per-worker copies: each worker thread calls its own CostModel (batch 1), the
    copies sharing the one device lock (a file lock, as separate processes would)."""
    lock = os.path.join(tempfile.mkdtemp(prefix="libero-bench-copies-"), "gpu.lock")
    stop, counted, guard = threading.Event(), collections.Counter(), threading.Lock()
    start_line = threading.Barrier(workers + 1)

    def worker(i: int) -> None:
        model = CostModel(a_ms=a_ms, b_ms=b_ms, rows=k, lock=lock)
        obs = observation(f"task {i}")
        model.reset(obs.language)
        start_line.wait()
        while not stop.is_set():
            time.sleep(k * control_s)
            model.act(obs)
            with guard:
                counted["obs"] += 1

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    start_line.wait()
    time.sleep(min(5.0, seconds / 3))
    with guard:
        counted.clear()
    tick = time.monotonic()
    time.sleep(seconds)
    with guard:
        rate = counted["obs"] / (time.monotonic() - tick)
    stop.set()
    for t in threads:
        t.join(60)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--control-ms", type=float, default=1000 / 7.3 / 5)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--a-ms", type=float, default=100.0)
    parser.add_argument("--b-ms", type=float, default=8.0)
    parser.add_argument("--max-batch", type=int, default=None, help="default: the worker count")
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--calls-per-episode", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0, help="of the start offsets (run r uses seed + r)")
    parser.add_argument("--no-copies", action="store_true", help="skip the per-worker copies baseline")
    args = parser.parse_args()
    print(f"SIMULATION: simulator {args.k} x {args.control_ms:.1f} ms per observation (7.3 obs/s per shard), "
          f"policy a={args.a_ms:g} ms + b={args.b_ms:g} ms x batch under one device lock; max-wait "
          f"{args.max_wait_ms:g} ms; random start offsets (seed {args.seed} + run); load {os.getloadavg()}")
    for workers in args.workers:
        for repeat in range(args.repeat):
            r = run(workers, args.seconds, args.control_ms / 1000, args.k, args.a_ms, args.b_ms,
                    args.max_batch or workers, args.max_wait_ms, args.calls_per_episode, args.seed + repeat)
            print(f"workers {workers:3d} run {repeat + 1}: {r['rate']:.1f} obs/s, ideal {r['ideal']:.1f} "
                  f"(naive {r['naive']:.1f}): achieved/ideal {r['rate'] / r['ideal']:.2f} "
                  f"(/naive {r['rate'] / r['naive']:.2f}); batch mean {r['batch_mean']:.1f} max {r['batch_max']}; "
                  f"queue wait {r['queue_ms']:.0f} ms; host overhead per request {r['overhead_ms']:.1f} ms "
                  f"(p95 {r['overhead_p95_ms']:.1f}); load {open('/proc/loadavg').read().split()[:3]}", flush=True)
            if not args.no_copies:
                copies = run_copies(workers, args.seconds, args.control_ms / 1000, args.k, args.a_ms, args.b_ms)
                print(f"workers {workers:3d} run {repeat + 1}: per-worker copies (batch 1, one device lock) "
                      f"{copies:.1f} obs/s; host/copies {r['rate'] / copies:.2f}; "
                      f"load {open('/proc/loadavg').read().split()[:3]}", flush=True)


if __name__ == "__main__":
    main()
