"""Side-by-side: the bare native LIBERO loop vs the plugin's engine, same cells, same actions.

For each cell, one seeded action sequence (D chunks, K controls executed from each) runs
  1. through the bare native loop (pytest_libero.benchmarks.libero.reference: fresh OffScreenRenderEnv, reset,
     set_init_state, ten settling steps, env.step with both cameras rendered every control), and
  2. through the plugin (run_episode: policy in this process, simulator in the bench service,
     cameras rendered only for delivered observations),
then prints wall time per phase with the native/plugin ratio, and checks that executed
controls, every delivered image and the final simulator state are identical.

    python benchmarks/bench_native_vs_plugin.py                      # libero_10 t0, libero_spatial t0
    python benchmarks/bench_native_vs_plugin.py --cells libero_goal:3 --calls 40 --replan 10

Exit status 1 if anything differs. Absolute times drift on shared machines: read the ratios.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from pytest_libero.benchmarks import get, service_env
from pytest_libero.core.cells import Cell
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.protocol import Protocol
from pytest_libero.benchmarks.libero.reference import ChunkReplayPolicy, native_rollout
from pytest_libero.core.rollout import run_episode
from pytest_libero.runtime.service import BenchService


def action_sequence(seed: int, calls: int, replan: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    chunks = []
    for _ in range(calls):
        chunk = rng.uniform(-0.5, 0.5, size=(replan, 7))
        chunk[:, 6] = np.where(rng.random(replan) < 0.5, -1.0, 1.0)
        chunks.append(chunk)
    return chunks


def parse_cell(text: str) -> Cell:
    suite, _, task = text.partition(":")
    return Cell(suite, int(task or 0))


def ratio(a: float, b: float) -> str:
    return f"{a / b:6.2f}x" if b > 0 else "   n/a"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="+", default=["libero_10:0", "libero_spatial:0"], metavar="SUITE:TASK")
    parser.add_argument("--calls", type=int, default=20, help="policy calls D (default 20)")
    parser.add_argument("--replan", type=int, default=5, help="controls per chunk K (default 5)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    protocol = Protocol(spec=LIBERO_SPEC, scope="benchmark", budget="decisions", replan_interval=args.replan,
                        max_policy_calls=args.calls)
    service = BenchService(env=service_env(get("libero"), None))
    identical = True
    try:
        for cell in map(parse_cell, args.cells):
            chunks = action_sequence(args.seed, args.calls, args.replan)
            native = native_rollout(cell.suite, cell.task_index, chunks, args.replan,
                                    control_cap=protocol.control_cap(cell.suite))
            policy = ChunkReplayPolicy(chunks)
            start = time.perf_counter()
            result = run_episode(service, policy, cell, protocol)
            plugin_total = time.perf_counter() - start
            t = result.timing
            native_total = sum(native.timing.values())
            rows = [
                ("setup (env, reset, init state)", native.timing["setup_s"], t["setup_s"]),
                ("settling (10 controls)", native.timing["settle_s"], t["settle_s"]),
                ("control loop: simulation + rendering", native.timing["loop_s"],
                 t["simulation_s"] + t["rendering_s"]),
                ("total (plugin incl. policy, IPC)", native_total, plugin_total),
            ]
            print(f"\n{cell.id}: {result.executed_controls} controls, D={args.calls} K={args.replan}, "
                  f"plugin renders {t['renders']} camera images vs native "
                  f"{2 * (native.executed_controls + 10)}")
            print(f"  {'phase':<40}{'native s':>10}{'plugin s':>10}{'native/plugin':>15}")
            for name, a, b in rows:
                print(f"  {name:<40}{a:10.2f}{b:10.2f}{ratio(a, b):>15}")
            print(f"  plugin split: simulation {t['simulation_s']:.2f} s, rendering {t['rendering_s']:.2f} s, "
                  f"policy {t['policy_s']:.3f} s")
            checks = {
                "executed controls": native.executed_controls == result.executed_controls,
                "first success": native.success_control == result.first_success_control,
                "delivered images": native.delivered[: len(policy.seen)] == policy.seen and bool(policy.seen),
                "final simulator state": native.final_state_sha256 == result.private["final_state_sha256"],
            }
            for name, same in checks.items():
                print(f"  {name:<40}{'bit-identical' if same else 'DIFFERENT'}")
            identical = identical and all(checks.values())
    finally:
        service.close()
    print("\nall checks bit-identical" if identical else "\nDIFFERENCES FOUND")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
