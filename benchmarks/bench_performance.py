"""Performance side by side: the native loop, the plugin, and the plugin with each optimization off.

Same cells, same seeded action sequences, same init states for every mode, in one run:

  native          bare native loop: fresh OffScreenRenderEnv per episode, both cameras every control
  same-renders    the bench service's episode code in this process, with the plugin's renders and
                  kept environment, but no IPC, no policy, no evidence: the plugin's floor
  plugin          the plugin as a run uses it (service process, engine, video + record written)
  plugin/no-lean-reset ... with PYTEST_LIBERO_LEAN_RESET=0 (LIBERO's own hard reset: XML recompiled,
                       render context recreated)
  plugin/no-reuse     ... with --libero-env-reuse off (fresh environment every episode)
  plugin/every-control ... with --libero-video-rate control (cameras rendered every control)

It prints wall time per mode, throughput and setup ratios, the plugin's overhead over the
same-renders loop, bit-identity of every plugin mode with the native loop (executed controls,
outcome, every delivered image, final simulator state), and the RSS of a worker and of its
service over consecutive episodes, the time to collect the 130-cell plan, and each of the issue's
targets as met or not met. Absolute times drift on shared machines: read the ratios.

    python benchmarks/bench_performance.py                 # 2 cells x 3 episodes, D=10, K=5; RSS over 30
    python benchmarks/bench_performance.py --episodes 5 --calls 20 --rss-episodes 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from bench_native_vs_plugin import parse_cell  # this script's folder is on sys.path

from pytest_libero.benchmarks import get, service_env
from pytest_libero.core.cells import Cell
from pytest_libero.core.hashing import images_digest
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.protocol import Protocol
from pytest_libero.benchmarks.libero.service import LEAN_RESET_ENV
from pytest_libero.benchmarks.libero.reference import ChunkReplayPolicy, native_rollout
from pytest_libero.core.rollout import EpisodeSettings, run_episode
from pytest_libero.runtime.gpus import record_fields  # this script pins no GPU: the records say CPU
from pytest_libero.runtime.service import DEFAULT_MAX_RSS_MIB, BenchService, rss_mib


# One throwaway episode per process before the clock starts: a worker pays its process's first
# imports and first GL context once per session, not once per episode.
WARMUP = Cell("libero_goal", 1)
# The bench service runs LIBERO's service module, named through the registry as the plugin does.
LIBERO_SERVICE = service_env(get("libero"), None)


@dataclass
class Mode:
    name: str
    wall_s: float = 0.0
    setups: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)  # per episode
    phases: list[dict[str, float]] = field(default_factory=list)  # the service's timing, per episode
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


class Native:
    """The bare native loop: a fresh OffScreenRenderEnv per episode, both cameras every control."""

    def __init__(self, replan: int, cap: int) -> None:
        self.mode, self.replan, self.cap = Mode("native"), replan, cap

    def warm_up(self, chunks: list[np.ndarray]) -> None:
        native_rollout(WARMUP.suite, WARMUP.task_index, chunks[:1], self.replan)

    def episode(self, cell: Cell, chunks: list[np.ndarray]) -> None:
        start = time.perf_counter()
        run = native_rollout(cell.suite, cell.task_index, chunks, self.replan, init_index=cell.init_index,
                             control_cap=self.cap)
        self.mode.walls.append(time.perf_counter() - start)
        self.mode.wall_s += self.mode.walls[-1]
        self.mode.setups.append(run.timing["setup_s"])
        self.mode.results.append((run.executed_controls, run.success_control, run.delivered[: len(chunks)],
                                  run.final_state_sha256))

    def close(self) -> None:
        pass


def _same_renders_loop(conn: Any, cap: int) -> None:
    """The same-renders loop's own process: one episode per request, timed in here (no IPC inside)."""
    from pytest_libero.benchmarks.libero.service import EnvCache, LiberoEpisode, prepare_process_environment
    from pytest_libero.core.hashing import sha256_array

    prepare_process_environment(tempfile.mkdtemp(prefix="pytest-libero-bench-"))
    cache = EnvCache(lean_reset=True)
    while True:
        request = conn.recv()
        if request is None:
            break
        cell, chunks = request
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
        evidence = episode.finish(final_frame=True)  # the plugin renders the video's last frame too
        wall = time.perf_counter() - start
        conn.send((wall, evidence["timing"], (evidence["executed_controls"], evidence["first_success_control"],
                                              delivered, final)))
    cache.close()


class SameRenders:
    """The service's episode code (kept env, the plugin's renders), nothing else: the plugin's floor.

    It runs in a process of its own, as the service does, so that it shares no warm state with
    the native loop that runs in this one; each episode is timed inside that process.
    """

    def __init__(self, cap: int) -> None:
        import multiprocessing

        self.mode = Mode("same-renders")
        context = multiprocessing.get_context("spawn")
        self.conn, theirs = context.Pipe()
        self.process = context.Process(target=_same_renders_loop, args=(theirs, cap), daemon=True)
        self.process.start()

    def warm_up(self, chunks: list[np.ndarray]) -> None:
        self.conn.send((WARMUP, chunks))
        self.conn.recv()

    def episode(self, cell: Cell, chunks: list[np.ndarray]) -> None:
        self.conn.send((cell, chunks))
        wall, timing, result = self.conn.recv()
        self.mode.walls.append(wall)
        self.mode.wall_s += wall
        self.mode.setups.append(timing["setup_s"])
        self.mode.phases.append(timing)
        self.mode.results.append(result)

    def close(self) -> None:
        if self.process.is_alive():
            self.conn.send(None)
        self.process.join(timeout=60)


class Plugin:
    """The plugin as a run uses it: its own service process, the engine, video and record written."""

    def __init__(self, name: str, cells: list[Cell], protocol: Protocol, reuse: bool, video_rate: str, out: Path,
                 lean_reset: bool = True) -> None:
        from pytest_libero.plugin.options import LiberoRun
        from pytest_libero.core.policy import PolicySpec

        self.mode, self.protocol, self.reuse, self.video_rate, self.out = Mode(name), protocol, reuse, video_rate, out
        self.run = LiberoRun(protocol=protocol, cells=tuple(cells), policy=PolicySpec("replay-benchmark"),
                             allow_source_mismatch=False, service_timeout_s=600, output_root=str(out), video="all",
                             video_rate=video_rate, reuse_env=reuse)
        self.service = BenchService(env={**LIBERO_SERVICE, LEAN_RESET_ENV: "1" if lean_reset else "0"})

    def warm_up(self, chunks: list[np.ndarray]) -> None:
        run_episode(self.service, ChunkReplayPolicy(chunks), WARMUP, self.protocol,
                    EpisodeSettings(reuse_env=self.reuse))

    def episode(self, cell: Cell, chunks: list[np.ndarray]) -> None:
        from pytest_libero.plugin.episode_files import EpisodeFiles
        from pytest_libero.results.records import RunDir

        start = time.perf_counter()
        policy = ChunkReplayPolicy(chunks)
        files = EpisodeFiles(RunDir(self.out / self.mode.name), self.run, cell, policy, worker="bench",
                             started=time.time(), compute=record_fields(None))
        settings = EpisodeSettings(video_rate=self.video_rate, reuse_env=self.reuse)
        frames_s = commit_s = 0.0

        def frame(images: Any, first_success: bool) -> None:
            nonlocal frames_s
            begun = time.perf_counter()
            files.frame(images, first_success)
            frames_s += time.perf_counter() - begun

        if files.video is not None:  # the video's commit timed apart from the record's write
            commit = files.video.commit

            def timed_commit() -> dict[str, Any] | None:
                nonlocal commit_s
                begun = time.perf_counter()
                try:
                    return commit()
                finally:
                    commit_s += time.perf_counter() - begun

            files.video.commit = timed_commit  # type: ignore[method-assign]

        result = run_episode(self.service, policy, cell, self.protocol, settings, on_frame=frame)
        ran = time.perf_counter()
        files.write(result)
        end = time.perf_counter()
        self.mode.walls.append(end - start)
        self.mode.wall_s += self.mode.walls[-1]
        # The worker's side of the episode: frames handed to the encoder, the evidence written (the
        # video's commit, then the record and the rest of EpisodeFiles.write), and what is left of
        # the engine's time besides the service's phases.
        service_s = sum(result.timing[k] for k in SERVICE_PHASES)
        self.mode.phases.append(dict(result.timing, frames_s=frames_s, commit_s=commit_s,
                                     record_s=end - ran - commit_s,
                                     engine_s=ran - start - frames_s - service_s - result.timing["policy_s"]))
        self.mode.setups.append(result.timing["setup_s"])
        self.mode.results.append((result.executed_controls, result.first_success_control, policy.seen,
                                  result.private["final_state_sha256"]))

    def close(self) -> None:
        self.service.close()


def measure_rss(cells: list[Cell], episodes: int, protocol: Protocol, replan: int,
                out: Path) -> tuple[list[str], float]:
    """RSS of this process (the worker side) and of the service over consecutive episodes."""
    from pytest_libero.plugin.episode_files import EpisodeFiles
    from pytest_libero.plugin.options import LiberoRun
    from pytest_libero.core.policy import PolicySpec
    from pytest_libero.results.records import RunDir

    run = LiberoRun(protocol=protocol, cells=tuple(cells), policy=PolicySpec("replay-benchmark"),
                    allow_source_mismatch=False, service_timeout_s=600, output_root=str(out), video="all")
    chunks = sequences(99, 1, protocol.max_policy_calls or 1, replan)[0]
    service, lines, samples = BenchService(env=LIBERO_SERVICE, max_rss_mib=None), [], []  # no recycling: measure growth
    try:
        for index in range(episodes):
            cell = cells[index % len(cells)]
            policy = ChunkReplayPolicy(chunks)
            files = EpisodeFiles(RunDir(out / "rss"), run, Cell(cell.suite, cell.task_index, index % 3), policy,
                                 worker="bench", started=time.time(), compute=record_fields(None))
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
    return lines, w1 - w0


def collection_seconds() -> tuple[float, str]:
    """Wall time of `pytest --collect-only -q --libero-scope plan` (a fresh interpreter), and its summary."""
    root = Path(__file__).resolve().parent.parent
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--libero-scope", "plan", "-p",
                           "no:cacheprovider"], cwd=root, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return seconds, lines[-1] if lines else done.stderr.strip()[-200:]


SERVICE_PHASES = ("setup_s", "settle_s", "simulation_s", "rendering_s")
BREAKDOWN = [("setup_s", "environment setup (service)"), ("settle_s", "settling (service)"),
             ("simulation_s", "physics (service)"), ("rendering_s", "camera renders (service)"),
             ("policy_s", "policy calls (worker)"),
             ("engine_s", "engine, IPC, checks, hashes (worker)"),
             ("frames_s", "video frames to the encoder (worker)"),
             ("commit_s", "video commit, encoder's tail (worker)"),
             ("record_s", "episode record written (worker)")]


def overhead_breakdown(plugin: Mode, same: Mode) -> list[str]:
    """Where the plugin's time over the same-renders loop goes, phase by phase (mean per episode).

    The same-renders loop has the service phases and its own bookkeeping (digests of delivered
    images, the final state), which is set against the plugin's engine row."""
    def mean(mode: Mode, key: str) -> float:
        return statistics.mean(p.get(key, 0.0) for p in mode.phases)

    floor = statistics.mean(same.walls)
    same_other = floor - sum(mean(same, k) for k in SERVICE_PHASES)
    lines = [f"\n  where the plugin's overhead goes (mean s per episode; plugin minus same-renders, % of its "
             f"{floor:.2f} s):"]
    for key, label in BREAKDOWN:
        theirs = mean(same, key) if key in SERVICE_PHASES else (same_other if key == "engine_s" else 0.0)
        delta = mean(plugin, key) - theirs
        lines.append(f"    {label:<40}{mean(plugin, key):7.3f} s {delta:+7.3f} s {100 * delta / floor:+6.1f}%")
    wall = statistics.mean(plugin.walls)
    lines.append(f"    {'total':<40}{wall:7.3f} s {wall - floor:+7.3f} s {100 * (wall - floor) / floor:+6.1f}%")
    return lines


def verdict(met: bool) -> str:
    return "met" if met else "NOT MET"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="+", default=["libero_10:0", "libero_spatial:0"], metavar="SUITE:TASK")
    parser.add_argument("--episodes", type=int, default=3, help="episodes per cell (init states 0, 1, 2, ...)")
    parser.add_argument("--calls", type=int, default=10, help="policy calls D per episode (default 10)")
    parser.add_argument("--replan", type=int, default=5, help="controls per chunk K (default 5)")
    parser.add_argument("--rss-episodes", type=int, default=30)
    parser.add_argument("--modes", nargs="+", default=None, metavar="MODE",
                        help="run only these modes besides native and same-renders (e.g. plugin)")
    parser.add_argument("--verbose", action="store_true", help="print every episode's wall time and phases")
    args = parser.parse_args(argv)
    protocol = Protocol(spec=LIBERO_SPEC, scope="benchmark", budget="decisions", replan_interval=args.replan,
                        max_policy_calls=args.calls)
    cap = args.calls * args.replan
    cells = [parse_cell(c) for c in args.cells]
    seqs = sequences(7, args.episodes, args.calls, args.replan)
    # Episodes of one task follow each other (as xdist's load scheduling mostly gives them).
    plan = [(Cell(c.suite, c.task_index, e % 50), seqs[e]) for c in cells for e in range(args.episodes)]
    out = Path(tempfile.mkdtemp(prefix="pytest-libero-perf-"))
    print(f"{len(plan)} episodes per mode ({len(cells)} cells x {args.episodes}), D={args.calls} K={args.replan}")
    print(f"load average at start: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
          f"({os.cpu_count()} cores)")
    cells_run = [c for c, _ in plan]
    runners: list[Any] = [
        Native(args.replan, cap), SameRenders(cap),
        Plugin("plugin", cells_run, protocol, True, "delivered", out),
        Plugin("plugin/no-lean-reset", cells_run, protocol, True, "delivered", out, lean_reset=False),
        Plugin("plugin/no-reuse", cells_run, protocol, False, "delivered", out),
        Plugin("plugin/every-control", cells_run, protocol, True, "control", out)]
    if args.modes:
        unknown = set(args.modes) - {r.mode.name for r in runners[2:]}
        if unknown or "plugin" not in args.modes:
            parser.error(f"--modes {' '.join(args.modes)}: choose among "
                         f"{', '.join(r.mode.name for r in runners[2:])}, plugin included")
        for runner in runners[2:]:
            if runner.mode.name not in args.modes:
                runner.close()
        runners = runners[:2] + [r for r in runners[2:] if r.mode.name in args.modes]
    try:
        for runner in runners:
            runner.warm_up(plan[0][1])
        # Interleaved: episode i of every mode, then episode i + 1, so that a change of load on a
        # shared machine falls on every mode alike. Each mode keeps its own environment or service.
        # After the native episode the other modes take turns going first (reversed every other
        # episode), so that no mode always runs right after the native loop's teardown.
        for index, (cell, chunks) in enumerate(plan):
            others = runners[1:] if index % 2 == 0 else runners[:0:-1]
            for runner in [runners[0], *others]:
                runner.episode(cell, chunks)
    finally:
        for runner in runners:
            runner.close()
    modes = [runner.mode for runner in runners]
    native, same, plugin = modes[0], modes[1], modes[2]
    print(f"\n  {'mode':<22}{'wall s':>9}{'episodes/h':>12}{'vs native':>11}{'setup s (mean)':>16}{'identical':>11}")
    for mode in modes:
        identical = mode.results == native.results
        print(f"  {mode.name:<22}{mode.wall_s:9.1f}{3600 * len(plan) / mode.wall_s:12.0f}"
              f"{native.wall_s / mode.wall_s:10.2f}x{statistics.mean(mode.setups):16.2f}"
              f"{'yes' if identical else 'NO':>11}")
    if args.verbose:
        print("\n  per episode: wall s (setup / settle / simulation / rendering s in the service)")
        for mode in modes:
            cells_text = "  ".join(
                f"{w:5.1f}" + (f" ({p['setup_s']:.2f}/{p['settle_s']:.2f}/{p['simulation_s']:.2f}/"
                               f"{p['rendering_s']:.2f})" if p else "")
                for w, p in zip(mode.walls, mode.phases or [{}] * len(mode.walls), strict=True))
            print(f"  {mode.name:<22}{cells_text}")
    native_setup = statistics.mean(native.setups)
    print(f"\n  native fresh-environment setup (mean): {native_setup:.2f} s")
    for mode in modes[1:]:
        first_setup = mode.setups[:: args.episodes]
        kept_setups = [s for i, s in enumerate(mode.setups) if i % args.episodes]
        line = f"  {mode.name:<22} setup vs native: all episodes {statistics.mean(mode.setups) / native_setup:.2f}x"
        if kept_setups:
            line += (f", kept environment {statistics.mean(kept_setups) / native_setup:.2f}x "
                     f"({statistics.mean(kept_setups):.2f} s), first of a task {statistics.mean(first_setup):.2f} s")
        print(line)
    print("\n".join(overhead_breakdown(plugin, same)))
    throughput = native.wall_s / plugin.wall_s
    setup_ratio = statistics.mean(plugin.setups) / native_setup
    overhead = 100 * (plugin.wall_s / same.wall_s - 1)
    rss_lines, worker_growth = measure_rss(cells, args.rss_episodes, protocol, args.replan, out)
    collect_s, collect_summary = collection_seconds()
    identical = all(m.results == native.results for m in modes)
    print("\n" + "\n".join(rss_lines))
    print(f"  collection of the plan: {collect_s:.2f} s wall for a fresh interpreter ({collect_summary})")
    print(f"\n  targets (K={args.replan}, D={args.calls}, rgb track, video at the delivered rate):")
    print(f"    episode throughput >= 3.5x native:          {throughput:5.2f}x   {verdict(throughput >= 3.5)}")
    print(f"    per-episode setup <= 0.6x a fresh env's:    {setup_ratio:5.2f}x   {verdict(setup_ratio <= 0.6)}"
          " (mean over all plugin episodes, first builds included)")
    print(f"    plugin overhead <= 5% over same renders:    {overhead:+5.1f}%   {verdict(overhead <= 5)}")
    print(f"    worker RSS growth <= 100 MB over {args.rss_episodes}:     {worker_growth:+5.0f} MiB "
          f"{verdict(worker_growth * 1.048576 <= 100)}")
    print(f"    collection of the 130-cell plan < 2 s:      {collect_s:5.2f} s  {verdict(collect_s < 2)}")
    print(f"    nothing changes a bit (every mode vs native): {'yes' if identical else 'NO'}       "
          f"{verdict(identical)}")
    print(f"load average at end: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print("\nall modes bit-identical to the native loop" if identical else "\nDIFFERENCES FOUND")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
