"""Side-by-side: LIBERO episodes with goal progress recorded vs without, same cell, same actions.

Goal progress (pytest_libero/benchmarks/libero/progress.py) reads each BDDL goal predicate's value
from LIBERO's own success check, through a wrapper on the environment instance, after every control.
This runs the bench service's episode class in this process on one environment, alternating
episodes with the tap on it (the default) and taken off (as EnvCache(progress=False) or
PYTEST_LIBERO_GOAL_PROGRESS=0 gives): each one the demo's logged actions for
libero_10 task 0, init state 0 (231 controls to native success, 5 a chunk, the observation
rendered after each chunk as a policy's would be). It prints each episode's CPU time (reset,
settling, controls, finish; the environment's build is left out) and the median ratio, times the
added work directly (micro), and
checks that both give the same success control and final simulator state (success is unchanged).

    python benchmarks/bench_goal_progress.py                 # 3 pairs
    python benchmarks/bench_goal_progress.py --pairs 5 --cell libero_10-t01-s00
    python benchmarks/bench_goal_progress.py --pairs 2 --controls 120   # shorter episodes (no success)

Exit status 1 if the two differ in anything but the progress block. Absolute times drift on shared
machines: read the ratio (and the load, printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cell", default="libero_10-t00-s00", help="a cell with a demo log (adapters/demo_logs/)")
    parser.add_argument("--pairs", type=int, default=3, help="episodes of each kind, alternating (default 3)")
    parser.add_argument("--chunk", type=int, default=5, help="controls per chunk (default 5)")
    parser.add_argument("--controls", type=int, default=None, help="replay only the log's first N controls")
    args = parser.parse_args(argv)

    from pytest_libero.benchmarks.libero import service
    from pytest_libero.core.cells import FAST_SEED, parse_cell_id

    work = tempfile.mkdtemp(prefix="bench-goal-progress-")
    service.prepare_process_environment(work)
    service.import_simulator()
    log = json.loads((ROOT / "adapters" / "demo_logs" / f"{args.cell}.json").read_text(encoding="utf-8"))
    actions = np.asarray(log["actions"], dtype=np.float64)[:args.controls]
    parsed = parse_cell_id(args.cell)
    assert parsed is not None, args.cell
    suite, task, init = parsed
    cell = {"suite": suite, "task_index": task, "init_index": init, "seed": FAST_SEED}
    # One environment for both kinds (two environments of one task differ in speed by more than the
    # tap costs): "without" takes the tap off it (the cache's and the instance's wrapper), as
    # EnvCache(progress=False) never puts it on, and puts it back after.
    cache = service.EnvCache(progress=True)
    caches = {"with progress": cache, "without": cache}

    def episode(kind: str) -> tuple[float, dict]:
        tap = wrapper = None
        if kind == "without" and cache.tap is not None:
            tap, cache.tap = cache.tap, None
            wrapper = tap.inner.__dict__.pop("_eval_predicate")
        started = time.process_time()  # this process's CPU time: what a shared machine's load distorts least
        run = service.LiberoEpisode(cell, control_cap=520, settle_controls=10, allow_mismatch=False,
                                    cache=cache)
        for start in range(0, len(actions), args.chunk):
            step = run.submit(actions[start:start + args.chunk], deliver=True)
            if step["success"]:
                break
        evidence = run.finish()
        seconds = time.process_time() - started
        if tap is not None:
            cache.tap, tap.inner._eval_predicate = tap, wrapper
        return seconds, evidence

    episode("with progress")  # build the environment once, outside the timing
    times: dict[str, list[float]] = {kind: [] for kind in caches}
    evidence: dict[str, dict] = {}
    for _ in range(args.pairs):
        for kind in caches:
            seconds, evidence[kind] = episode(kind)
            times[kind].append(seconds)
            print(f"  {kind}: {seconds:.2f} s CPU", flush=True)
    on, off = evidence["with progress"], evidence["without"]
    same = all(on[key] == off[key] for key in ("first_success_control", "executed_controls", "final_state_sha256"))
    print(f"cell {args.cell}: {on['executed_controls']} controls (+10 settling), first success at control "
          f"{on['first_success_control']}; load {open('/proc/loadavg').read().split()[:3]}, cpus {os.cpu_count()}")
    for kind, found in times.items():
        shown = "  ".join(f"{t:6.2f} s" for t in found)
        print(f"  {kind:<14} {shown}   median {statistics.median(found):6.2f} s CPU")
    ratio = statistics.median(times["with progress"]) / statistics.median(times["without"])
    per_control = (statistics.median(times["with progress"]) - statistics.median(times["without"])) / (
        on["executed_controls"] + 10)
    print(f"  ratio with/without (medians): {ratio:.4f}x ({100 * (ratio - 1):+.2f}%), "
          f"{1e6 * per_control:+.0f} us a control")
    print(f"  progress: {json.dumps(on['progress'])}")
    print("  " + micro(cache))
    print(f"  without: progress {off['progress']}; success, executed controls and final state "
          f"{'identical' if same else 'DIFFER'}")
    cache.close()
    return 0 if same and off["progress"] is None else 1


def micro(on: object, repeat: int = 2000) -> str:
    """The added work itself, timed in CPU seconds on the built environment: LIBERO's success check (run
    twice a control) with and without the tap, and the track's clear and read, against a control's
    env.step (physics and the check, no camera render)."""
    from pytest_libero.benchmarks.libero.progress import ProgressTrack

    def cpu(fn: object, n: int) -> float:
        started = time.process_time()
        for _ in range(n):
            fn()  # type: ignore[operator]
        return (time.process_time() - started) / n

    tapped = on.env.env  # type: ignore[attr-defined]
    track = ProgressTrack(on.tap)  # type: ignore[attr-defined]
    # The same environment with and without its wrapper (the instance attribute taken off and put
    # back), alternating, the fastest of five rounds each: two environments differ by more than the tap.
    wrapper = tapped.__dict__["_eval_predicate"]
    rounds_on, rounds_off = [], []
    for _ in range(5):
        del tapped._eval_predicate
        rounds_off.append(cpu(tapped._check_success, repeat))
        tapped._eval_predicate = wrapper
        rounds_on.append(cpu(tapped._check_success, repeat))
    check_on, check_off = min(rounds_on), min(rounds_off)
    tapped._check_success()
    read = cpu(lambda: track.observe(1), repeat)  # the values the check just kept, read back
    bookkeeping = read + cpu(track.tap.clear, repeat)
    action = np.zeros(7)
    action[6] = -1.0
    step = cpu(lambda: on.env.step(action), 100)  # type: ignore[attr-defined]
    added = 2 * (check_on - check_off) + bookkeeping
    return (f"micro: success check {1e6 * check_off:.1f} us, tapped {1e6 * check_on:.1f} us; clear + read "
            f"{1e6 * bookkeeping:.1f} us; a control's env.step {1e3 * step:.2f} ms; added a control "
            f"{1e6 * added:.1f} us = {100 * added / step:.3f}% of env.step")


if __name__ == "__main__":
    sys.exit(main())
