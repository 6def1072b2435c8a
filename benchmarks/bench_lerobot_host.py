"""Batching with a real model: a LeRobot ACT policy on CPU, per-worker copies against one batched host.

Both modes run the same real LIBERO cells under `-n 2` with the same random ACT policy (saved by
LeRobot, seeded; tests/lerobot_helpers.py builds the cached LeRobot venv and the policy), from the
LeRobot venv through `--libero-policy-python`:

  copies  --libero-policy-isolation process: one copy per worker, `threads` torch threads each
  host    --libero-policy-isolation host: one copy for both workers, `host-threads` torch threads

By default each mode uses the machine's two cores (1 + 1 thread, or 2). It prints each mode's wall
time, episodes per hour, the batch sizes the host formed (the records' policy_batch_size_mean),
the ratio host/copies, and whether the outcomes and the executed chunks' digests are equal.
The default model is ACT at its own size (dim_model 512, 4 encoder layers, 8 heads, feedforward
3200, ResNet-18 backbone, random weights): one CPU forward costs more than one simulated
observation (about 0.2 s here with two 256x256 cameras); the forward's cost is printed from the
records (policy_s per call).

    python benchmarks/bench_lerobot_host.py --runs 3                 # ACT's size, 8 calls of K=5
    python benchmarks/bench_lerobot_host.py --dim-model 64 --layers 1 --heads 4 --feedforward 128 --calls 2
                                                                     # a quick check that it runs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))  # the cached LeRobot venv and the policy maker the tests use

from lerobot_helpers import lerobot_venv, make_act_policy  # noqa: E402


def run_mode(folder: Path, python: Path, policy: Path, isolation: str, threads: int, args: argparse.Namespace
             ) -> dict[str, Any]:
    kwargs = {"path": str(policy), "threads": threads}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
               "--libero-scope", "development", "--libero-task-ids", args.tasks, "--libero-budget", "decisions",
               "--libero-max-policy-calls", str(args.calls), "--libero-replan-interval", "5",
               "--libero-track", "openpi-compat", "--libero-video", "none", "--libero-policy", "lerobot",
               "--libero-policy-kwargs", json.dumps(kwargs), "--libero-policy-python", str(python),
               "--libero-policy-isolation", isolation, "--libero-output", str(folder / "out")]
    if isolation == "host":
        command += ["--libero-policy-max-wait-ms", str(args.max_wait_ms)]
    folder.mkdir(parents=True)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{isolation} run failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n"
                         f"{done.stderr[-3000:]}")
    records = {}
    for path in sorted(folder.glob("out/*/*/episodes/*.json")):
        record = json.loads(path.read_text())
        records[record["cell"]["id"]] = record
    return {"wall_s": wall, "records": records}


def summary(mode: dict[str, Any]) -> dict[str, Any]:
    records = mode["records"].values()
    timing = [r.get("timing", {}) for r in records]
    return {"wall_s": round(mode["wall_s"], 1), "episodes": len(mode["records"]),
            "episodes_per_hour": round(3600 * len(mode["records"]) / mode["wall_s"], 1),
            "batch_size_mean": [t.get("policy_batch_size_mean") for t in timing],
            "policy_s_per_call": [round(t.get("policy_s", 0.0) / max(r["counters"]["policy_calls"], 1), 3)
                                  for t, r in zip(timing, records, strict=True)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dim-model", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4, help="ACT's encoder layers")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--feedforward", type=int, default=3200)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--tasks", default="0,1")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each per-worker copy")
    parser.add_argument("--host-threads", type=int, default=2, help="torch threads of the host's copy")
    parser.add_argument("--max-wait-ms", type=float, default=800.0)
    args = parser.parse_args()
    python = lerobot_venv()
    with tempfile.TemporaryDirectory(prefix="bench-lerobot-") as tmp:
        root = Path(tmp)
        policy = make_act_policy(python, root / "pretrained_model", dim_model=args.dim_model, layers=args.layers,
                                 heads=args.heads, feedforward=args.feedforward)
        ratios = []
        for run in range(args.runs):
            copies = run_mode(root / f"copies{run}", python, policy, "process", args.threads, args)
            host = run_mode(root / f"host{run}", python, policy, "host", args.host_threads, args)
            assert copies["records"].keys() == host["records"].keys(), "the two modes ran other cells"
            # Per block: the adapter's batches are bit-equal to one observation alone, but torch's
            # CPU sums could round differently with another thread count (1 per copy, 2 in the host),
            # which would show in the chunks' digests first.
            same = {b: all(copies["records"][c][b] == host["records"][c][b] for c in copies["records"])
                    for b in ("outcome", "counters", "chunks", "observations")}
            ratio = copies["wall_s"] / host["wall_s"]
            ratios.append(ratio)
            print(json.dumps({"run": run, "copies": summary(copies), "host": summary(host),
                              "host_over_copies_throughput": round(ratio, 3), "equal_by_block": same,
                              "load_1min": os.getloadavg()[0]}))
        print(f"host / per-worker copies, episodes per hour: {', '.join(f'{r:.2f}x' for r in ratios)}"
              + (f" (median {statistics.median(ratios):.2f}x)" if len(ratios) > 1 else ""))


if __name__ == "__main__":
    main()
