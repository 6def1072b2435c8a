"""Benchmark 3: this suite against vla-eval 0.8.0, side by side, on the same model server.

In one run, twice the same scripted model server (tests/vla_eval_servers.py: a subclass of PyPI
vla-eval's own `PredictModelServer`, batching on, chunk_size K, actions depending only on the
control index), each in its own process, with a SIMULATED GPU: a batch of B observations sleeps
`a + b*B` (default a = 100 ms, b = 8 ms: the cost-model figures of issue 25, a 7B-class VLA's
single-request latency of about a tenth of a second and a small per-item increment; a simulation,
not a measured model):

  vla-eval   vla-eval's own orchestrator (`vla_eval.orchestrator.Orchestrator`, its LIBEROBenchmark,
             SyncEpisodeRunner) in N shard processes (`shard_id`/`num_shards`, the fixed split),
             without Docker: its LIBERO benchmark imports torch only to patch torch.load, which
             this LIBERO never calls, so a stub `torch` module is put on the shards' path
  suite      `pytest -n N --libero-policy vla-eval` (actions_per_call K) against the other server

Both run LIBERO-10 tasks 0..T-1, init state 0 (vla-eval: max_tasks T, 1 episode per task), env
seed 20260907 (this suite's fast-mode seed; vla-eval's `seed` param), 10 settling controls of
[0]*6+[-1] (vla-eval's num_steps_wait), a cap of D*K controls (vla-eval's max_steps), both cameras
(the server asks for the wrist image). vla-eval renders and sends an observation every control (the
server answers 4 of 5 from its chunk buffer); this suite renders and sends every K controls (its
client re-sends the encoded observation for the buffered actions). Printed: each side's wall time
(process start to exit, imports and environment builds included), episodes/hour, the ratio, the
server's batch sizes, and whether each episode's outcome (success, executed controls) is equal.

    python benchmarks/bench_vla_eval.py                     # N=2 shards/workers, T=4, D=40, K=5
    python benchmarks/bench_vla_eval.py --runs 3 --tasks 4 --calls 40

Setup: vla-eval 0.8.0 comes with the test extra; when this interpreter lacks it, the script makes
a venv (benchmarks/.vla-eval-venv, --system-site-packages, so LIBERO is this environment's) and
installs it there from the package index pip is configured with.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "benchmarks" / ".vla-eval-venv"
VERSION = "0.8.0"
FAST_SEED = 20260907
SUITE = "libero_10"

SHARD = r"""
import json, logging, sys
import anyio
from vla_eval.orchestrator import Orchestrator
logging.basicConfig(level=logging.WARNING)
config, shard, shards, out = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
results = anyio.run(Orchestrator(config, shard_id=shard, num_shards=shards, no_save=True).run)
episodes = [{"task": t["task"], "success": bool(e.get("metrics", {}).get("success")), "steps": e.get("steps"),
             "failure_reason": e.get("failure_reason")} for r in results for t in r["tasks"] for e in t["episodes"]]
open(out, "w").write(json.dumps(episodes))
"""


def python_with_vla_eval() -> str:
    """This interpreter when it has vla-eval 0.8.0, else the benchmark's own venv (made on first use)."""
    probe = "import importlib.metadata as m; print(m.version('vla-eval'))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    if done.returncode == 0 and done.stdout.strip() == VERSION:
        return sys.executable
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(VENV)], check=True)
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    if done.returncode != 0 or done.stdout.strip() != VERSION:
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"vla-eval=={VERSION}"], check=True)
    return str(python)


class Server:
    """tests/vla_eval_servers.py in its own process: the scripted PredictModelServer with the cost model."""

    def __init__(self, python: str, args: argparse.Namespace, log: Path) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [python, str(ROOT / "tests" / "vla_eval_servers.py"), "--chunk", str(args.chunk), "--max-batch-size",
             str(args.max_batch_size), "--max-wait-time", str(args.max_wait_time), "--cost-a", str(args.cost_a),
             "--cost-b", str(args.cost_b), "--stats", str(log.with_suffix(".stats.json"))],
            stdout=subprocess.PIPE, stderr=open(log, "w"), text=True, cwd=ROOT / "tests")
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the scripted server did not start: {line!r}; see {log}")
        self.port = int(line.split()[1])
        self.url = f"ws://127.0.0.1:{self.port}"

    def stop(self) -> str:
        time.sleep(1.0)  # the last stats write
        self.proc.kill()
        self.proc.wait(30)
        stats = self.log.with_suffix(".stats.json")
        sizes = json.loads(stats.read_text())["batch_sizes"] if stats.exists() else []
        return (f"{len(sizes)} predict_batch calls, {sum(sizes)} observations inferred, batch sizes "
                f"max {max(sizes, default=0)} mean {sum(sizes) / max(len(sizes), 1):.2f}")


def run_vla_eval(python: str, url: str, args: argparse.Namespace, work: Path) -> tuple[float, list[dict[str, Any]]]:
    stub = work / "torch-stub" / "torch"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "__init__.py").write_text(
        '"""A stub: vla-eval\'s LIBERO benchmark only patches torch.load, which this LIBERO never calls."""\n'
        "def load(*args, **kwargs):\n    raise RuntimeError('torch stub: torch.load is not available')\n")
    config = {
        "server": {"url": url, "timeout": 120},
        "output_dir": str(work / "vla-eval-results"),
        "benchmarks": [{
            "benchmark": "vla_eval.benchmarks.libero.benchmark:LIBEROBenchmark",
            "params": {"suite": SUITE, "seed": FAST_SEED, "num_steps_wait": 10, "send_wrist_image": True},
            "episodes_per_task": 1, "max_tasks": args.tasks, "max_steps": args.calls * args.chunk,
        }],
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stub.parent), os.environ.get("PYTHONPATH", "")]),
           "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    tick = time.monotonic()
    procs = [subprocess.Popen([python, "-c", SHARD, json.dumps(config), str(i), str(args.workers),
                               str(work / f"shard{i}.json")], env=env, stdout=subprocess.DEVNULL,
                              stderr=open(work / f"shard{i}.log", "w"))
             for i in range(args.workers)]
    for p in procs:
        p.wait()
    wall = time.monotonic() - tick
    episodes: list[dict[str, Any]] = []
    for i, p in enumerate(procs):
        if p.returncode != 0:
            raise RuntimeError(f"vla-eval shard {i} exited {p.returncode}; see {work / f'shard{i}.log'}")
        episodes += json.loads((work / f"shard{i}.json").read_text())
    return wall, episodes


def run_suite(python: str, url: str, args: argparse.Namespace, work: Path) -> tuple[float, list[dict[str, Any]]]:
    out = work / "suite-results"
    kwargs = {"url": url, "actions_per_call": args.chunk, "request_timeout_s": 120}
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(args.workers),
           "--libero-scope", "task_coverage", "--libero-suite", SUITE, "--libero-task-ids", f"0-{args.tasks - 1}",
           "--libero-policy", "vla-eval", "--libero-policy-kwargs", json.dumps(kwargs),
           "--libero-budget", "decisions", "--libero-max-policy-calls", str(args.calls),
           "--libero-replan-interval", str(args.chunk), "--libero-video", "none", f"--libero-output={out}"]
    tick = time.monotonic()
    done = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                          env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    wall = time.monotonic() - tick
    (work / "suite.log").write_text(done.stdout + done.stderr)
    records = sorted(out.rglob("episodes/*.json"))
    if not records:
        raise RuntimeError(f"the suite wrote no records (exit {done.returncode}); see {work / 'suite.log'}")
    episodes = []
    for path in records:
        record = json.loads(path.read_text())
        outcome, counters = record.get("outcome", {}), record.get("counters", {})
        episodes.append({"task": record.get("language") or record.get("cell", {}).get("language"),
                         "success": outcome.get("outcome") == "success",
                         "steps": counters.get("executed_controls"), "outcome": outcome.get("outcome")})
    return wall, episodes


def one_run(python: str, args: argparse.Namespace, order: list[str]) -> dict[str, Any]:
    figures: dict[str, Any] = {"load_before": Path("/proc/loadavg").read_text().strip()}
    with tempfile.TemporaryDirectory(prefix="bench-vla-eval-") as tmp:
        for side in order:
            work = Path(tmp) / side
            work.mkdir()
            server = Server(python, args, work / "server.log")
            try:
                runner = run_vla_eval if side == "vla-eval" else run_suite
                wall, episodes = runner(python, server.url, args, work)
            finally:
                batches = server.stop()
            figures[side] = {"wall_s": wall, "episodes": episodes, "batches": batches,
                             "episodes_per_hour": len(episodes) / wall * 3600}
            if args.keep:
                Path(args.keep).mkdir(parents=True, exist_ok=True)
                target = Path(args.keep) / f"{side}-{int(time.time())}"
                subprocess.run(["cp", "-r", str(work), str(target)], check=False)
    figures["load_after"] = Path("/proc/loadavg").read_text().strip()
    return figures


def outcomes_equal(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[bool, list[str]]:
    key = {e["task"]: (e["success"], e["steps"]) for e in a}
    other = {e["task"]: (e["success"], e["steps"]) for e in b}
    lines = [f"    {task[:60]:60s} vla-eval {key.get(task)}  suite {other.get(task)}" for task in sorted(key | other)]
    return key == other, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="vla-eval shards = this suite's -n workers")
    parser.add_argument("--tasks", type=int, default=4, help="LIBERO-10 tasks 0..T-1, init state 0")
    parser.add_argument("--calls", type=int, default=40, help="D: the cap is D*K controls")
    parser.add_argument("--chunk", type=int, default=5, help="K: the server's chunk_size and this suite's K")
    parser.add_argument("--max-batch-size", type=int, default=4)
    parser.add_argument("--max-wait-time", type=float, default=0.01)
    parser.add_argument("--cost-a", type=float, default=0.100, help="simulated GPU: seconds per batch")
    parser.add_argument("--cost-b", type=float, default=0.008, help="simulated GPU: seconds per observation")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--keep", default=None, help="copy each side's logs into this folder")
    args = parser.parse_args()
    python = python_with_vla_eval()
    print(f"vla-eval {VERSION} via {python}; N={args.workers}, LIBERO-10 tasks 0-{args.tasks - 1} init 0, "
          f"cap {args.calls}x{args.chunk} controls, SIMULATED GPU a={args.cost_a * 1000:g} ms "
          f"b={args.cost_b * 1000:g} ms max_batch_size={args.max_batch_size}")
    ratios = []
    for run in range(args.runs):
        order = ["vla-eval", "suite"] if run % 2 == 0 else ["suite", "vla-eval"]
        figures = one_run(python, args, order)
        vla, suite = figures["vla-eval"], figures["suite"]
        equal, lines = outcomes_equal(vla["episodes"], suite["episodes"])
        ratio = suite["episodes_per_hour"] / vla["episodes_per_hour"]
        ratios.append(ratio)
        print(f"run {run + 1} (order {' then '.join(order)}; load before {figures['load_before']}, "
              f"after {figures['load_after']})")
        for side in order:
            f = figures[side]
            print(f"  {side:8s} {len(f['episodes'])} episodes in {f['wall_s']:.1f} s: "
                  f"{f['episodes_per_hour']:.0f} episodes/hour; server {f['batches']}")
        print(f"  ratio suite/vla-eval: {ratio:.2f}x episodes/hour; per-episode outcomes equal: {equal}")
        for line in lines:
            print(line)
    print(f"target >= 2x: {'met' if min(ratios) >= 2 else 'NOT met'} (ratios {', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
