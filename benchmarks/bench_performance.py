"""Performance side by side: the native loop, the plugin, and the plugin with each optimization off.

Same cells, same seeded action sequences, same init states for every mode, in one run:

  native          bare native loop: fresh OffScreenRenderEnv per episode, both cameras every control
  same-renders    the bench service's episode code in this process, with the plugin's renders and
                  kept environment, but no IPC, no policy, no evidence: the plugin's floor
  plugin          the plugin as a run uses it (service process, engine, video + record written)
  plugin/no-reuse     ... with --libero-env-reuse off (fresh environment every episode)
  plugin/every-control ... with --libero-video-rate control (cameras rendered every control)

It prints wall time per mode, throughput and setup ratios, the plugin's overhead over the
same-renders loop, bit-identity of every plugin mode with the native loop (executed controls,
outcome, every delivered image, final simulator state), and the RSS of a worker and of its
service over consecutive episodes. Absolute times drift on shared machines: read the ratios.

    python benchmarks/bench_performance.py                 # 2 cells x 3 episodes, D=10, K=5; RSS over 30
    python benchmarks/bench_performance.py --episodes 5 --calls 20 --rss-episodes 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_libero.catalog import Cell
from pytest_libero.evidence import images_digest
from pytest_libero.protocol import Protocol
from pytest_libero.reference import ReplayPolicy, native_rollout
from pytest_libero.rollout import run_episode
from pytest_libero.service import DEFAULT_MAX_RSS_MIB, BenchService, rss_mib


# One throwaway episode per process before the clock starts: a worker pays its process's first
# imports and first GL context once per session, not once per episode.
WARMUP = Cell("libero_goal", 1)


@dataclass
class Mode:
    name: str
    wall_s: float = 0.0
    setups: list[float] = field(default_factory=list)
    results: list[tuple[Any, ...]] = field(default_factory=list)  # (controls, success, delivered, final state)


def sequences(seed: int, count: int, calls: int, replan: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        chunks = []
        for _ in range(calls):
            chunk = rng.uniform(-0.5, 0.5, size=(replan, 7))
            chunk[:, 6] = np.where(rng.random(replan) < 0.5, -1.0, 1.0)
            chunks.append(chunk)
        out.append(chunks)
    return out


def run_native(plan: list[tuple[Cell, list[np.ndarray]]], replan: int, cap: int) -> Mode:
    mode = Mode("native")
    native_rollout(WARMUP.suite, WARMUP.task_index, plan[0][1][:1], replan)
    start = time.perf_counter()
    for cell, chunks in plan:
        run = native_rollout(cell.suite, cell.task_index, chunks, replan, init_index=cell.init_index,
                             control_cap=cap)
        mode.setups.append(run.timing["setup_s"])
        mode.results.append((run.executed_controls, run.success_control, run.delivered[: len(chunks)],
                             run.final_state_sha256))
    mode.wall_s = time.perf_counter() - start
    return mode


def run_same_renders(plan: list[tuple[Cell, list[np.ndarray]]], replan: int, cap: int) -> Mode:
    from pytest_libero.bench_libero import EnvCache, LiberoEpisode, prepare_process_environment
    from pytest_libero.inventory import sha256_array

    prepare_process_environment(tempfile.mkdtemp(prefix="pytest-libero-bench-"))
    mode, cache = Mode("same-renders"), EnvCache()
    start = 0.0
    for cell, chunks in [(WARMUP, plan[0][1]), *plan]:
        if cell is plan[0][0]:
            start = time.perf_counter()
        episode = LiberoEpisode({"suite": cell.suite, "task_index": cell.task_index, "init_index": cell.init_index,
                                 "seed": cell.seed}, control_cap=cap, settle_controls=10, allow_mismatch=False,
                                cache=cache, reuse_env=True)
        delivered = [images_digest(episode.observation(episode.first_raw))]
        step: dict[str, Any] = {}
        for index, chunk in enumerate(chunks):
            step = episode.submit(chunk, deliver=index < len(chunks) - 1)
            if step["success"] or step["truncated"] or step["observation"] is None:
                break
            delivered.append(images_digest(step["observation"]))
        final = sha256_array(episode.env.get_sim_state())
        mode.setups.append(episode.gate.timing.setup_s)
        evidence = episode.finish(final_frame=True)  # the plugin renders the video's last frame too
        if cell is WARMUP:
            mode.setups.pop()
            continue
        mode.results.append((evidence["executed_controls"], evidence["first_success_control"], delivered, final))
    mode.wall_s = time.perf_counter() - start
    cache.close()
    return mode


def run_plugin(name: str, plan: list[tuple[Cell, list[np.ndarray]]], protocol: Protocol, reuse: bool,
               video_rate: str, out: Path) -> Mode:
    from pytest_libero.episode_files import EpisodeFiles
    from pytest_libero.options import LiberoRun
    from pytest_libero.policy import PolicySpec
    from pytest_libero.records import RunDir

    run = LiberoRun(protocol=protocol, cells=tuple(c for c, _ in plan), policy=PolicySpec("replay-benchmark"),
                    allow_source_mismatch=False, service_timeout_s=600, output_root=str(out), video="all",
                    video_rate=video_rate, reuse_env=reuse)
    mode, service = Mode(name), BenchService()
    try:
        run_episode(service, ReplayPolicy(plan[0][1]), WARMUP, protocol, reuse_env=reuse)
        start = time.perf_counter()
        for cell, chunks in plan:
            policy = ReplayPolicy(chunks)
            files = EpisodeFiles(RunDir(out / name), run, cell, policy, worker="bench", started=time.time())
            result = run_episode(service, policy, cell, protocol, on_frame=files.frame, video_rate=video_rate,
                                 reuse_env=reuse)
            files.write(result)
            mode.setups.append(result.timing["setup_s"])
            mode.results.append((result.executed_controls, result.first_success_control, policy.seen,
                                 result.private["final_state_sha256"]))
        mode.wall_s = time.perf_counter() - start
    finally:
        service.close()
    return mode


def measure_rss(cells: list[Cell], episodes: int, protocol: Protocol, replan: int, out: Path) -> list[str]:
    """RSS of this process (the worker side) and of the service over consecutive episodes."""
    from pytest_libero.episode_files import EpisodeFiles
    from pytest_libero.options import LiberoRun
    from pytest_libero.policy import PolicySpec
    from pytest_libero.records import RunDir

    run = LiberoRun(protocol=protocol, cells=tuple(cells), policy=PolicySpec("replay-benchmark"),
                    allow_source_mismatch=False, service_timeout_s=600, output_root=str(out), video="all")
    chunks = sequences(99, 1, protocol.max_policy_calls or 1, replan)[0]
    service, lines, samples = BenchService(max_rss_mib=None), [], []  # no recycling: measure growth
    try:
        for index in range(episodes):
            cell = cells[index % len(cells)]
            policy = ReplayPolicy(chunks)
            files = EpisodeFiles(RunDir(out / "rss"), run, Cell(cell.suite, cell.task_index, index % 3), policy,
                                 worker="bench", started=time.time())
            files.write(run_episode(service, policy, Cell(cell.suite, cell.task_index, index % 3), protocol,
                                    on_frame=files.frame))
            assert service.pid is not None
            samples.append((rss_mib(os.getpid()) or 0.0, rss_mib(service.pid) or 0.0))
    finally:
        service.close()
    (w0, s0), (w1, s1) = samples[0], samples[-1]
    lines.append(f"  worker RSS   after episode 1: {w0:7.0f} MiB, after episode {episodes}: {w1:7.0f} MiB, "
                 f"growth {w1 - w0:+.0f} MiB")
    lines.append(f"  service RSS  after episode 1: {s0:7.0f} MiB, after episode {episodes}: {s1:7.0f} MiB, "
                 f"growth {s1 - s0:+.0f} MiB (without recycling; a run restarts its service past "
                 f"{DEFAULT_MAX_RSS_MIB:g} MiB)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="+", default=["libero_10:0", "libero_spatial:0"], metavar="SUITE:TASK")
    parser.add_argument("--episodes", type=int, default=3, help="episodes per cell (init states 0, 1, 2, ...)")
    parser.add_argument("--calls", type=int, default=10, help="policy calls D per episode (default 10)")
    parser.add_argument("--replan", type=int, default=5, help="controls per chunk K (default 5)")
    parser.add_argument("--rss-episodes", type=int, default=30)
    args = parser.parse_args(argv)
    protocol = Protocol(scope="benchmark", budget="decisions", replan_interval=args.replan,
                        max_policy_calls=args.calls)
    cap = args.calls * args.replan
    cells = [Cell(s, int(t)) for s, _, t in (c.partition(":") for c in args.cells)]
    seqs = sequences(7, args.episodes, args.calls, args.replan)
    # Episodes of one task follow each other (as xdist's load scheduling mostly gives them).
    plan = [(Cell(c.suite, c.task_index, e % 50), seqs[e]) for c in cells for e in range(args.episodes)]
    out = Path(tempfile.mkdtemp(prefix="pytest-libero-perf-"))
    print(f"{len(plan)} episodes per mode ({len(cells)} cells x {args.episodes}), D={args.calls} K={args.replan}")
    modes = [run_native(plan, args.replan, cap), run_same_renders(plan, args.replan, cap),
             run_plugin("plugin", plan, protocol, True, "delivered", out),
             run_plugin("plugin/no-reuse", plan, protocol, False, "delivered", out),
             run_plugin("plugin/every-control", plan, protocol, True, "control", out)]
    native, same, plugin = modes[0], modes[1], modes[2]
    print(f"\n  {'mode':<22}{'wall s':>9}{'episodes/h':>12}{'vs native':>11}{'setup s (mean)':>16}{'identical':>11}")
    for mode in modes:
        identical = mode.results == native.results
        print(f"  {mode.name:<22}{mode.wall_s:9.1f}{3600 * len(plan) / mode.wall_s:12.0f}"
              f"{native.wall_s / mode.wall_s:10.2f}x{statistics.mean(mode.setups):16.2f}"
              f"{'yes' if identical else 'NO':>11}")
    first_setup = plugin.setups[:: args.episodes]
    kept_setups = [s for i, s in enumerate(plugin.setups) if i % args.episodes]
    print(f"\n  throughput, plugin vs native:              {native.wall_s / plugin.wall_s:.2f}x")
    if kept_setups:
        ratio = statistics.mean(kept_setups) / statistics.mean(native.setups)
        print(f"  setup on a kept environment vs native fresh: {ratio:.2f}x "
              f"(first episode of a task builds one: {statistics.mean(first_setup):.2f} s)")
    overhead = 100 * (plugin.wall_s / same.wall_s - 1)
    print(f"  plugin overhead over the same-renders loop:  {overhead:+.1f}%")
    print("\n" + "\n".join(measure_rss(cells, args.rss_episodes, protocol, args.replan, out)))
    identical = all(m.results == native.results for m in modes)
    print("\nall modes bit-identical to the native loop" if identical else "\nDIFFERENCES FOUND")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
