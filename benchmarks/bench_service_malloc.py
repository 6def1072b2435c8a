"""The bench service's malloc (SERVICE_MALLOC, which keeps freed memory) against glibc's default, side by side.

Where a service's system time goes on Mesa llvmpipe: minor page faults, 65% of them in memset, 31% of
all under mjr_uploadTexture (Mesa zeroing texture storage), about 10% in the model's compilation
(perf record -e page-faults, 2026-12-07; docs/performance.md). glibc hands such large blocks back to the
kernel when they are freed, so the next environment build faults them in again. With
GLIBC_TUNABLES raising the mmap threshold (large blocks come from the heap) and the trim threshold
(the heap is not shrunk at once), the next build reuses them: fewer faults, less system time, and
a larger resident size. A bench service starts with such a setting
(pytest_libero.runtime.service.SERVICE_MALLOC). This script measures the trade on real services,
nothing simulated:

  default     glibc's defaults (GLIBC_TUNABLES set empty in the service's environment)
  keep-heap   the service as a run starts it (SERVICE_MALLOC; this process's GLIBC_TUNABLES removed)

Each round starts one service per setting (in alternating order) and runs the same episodes on
it: the zero policy on libero_10 tasks 0 and 1 in turn, so every episode builds an environment,
as a worker does moving through a plan's tasks. For each service it reads its CPU seconds (user,
system), minor faults and resident size from /proc before closing it, and checks that both
settings delivered the same observations (every delivered image's digest and state). It prints
each round and the ratios keep-heap / default.

    python benchmarks/bench_service_malloc.py                  # 3 rounds of 8 episodes
    python benchmarks/bench_service_malloc.py --rounds 1 --episodes 30  # growth toward the 4 GiB restart
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from pytest_libero.adapters.builtin import ZeroPolicy
from pytest_libero.benchmarks import get, service_env
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.cells import Cell
from pytest_libero.core.outcomes import Outcome
from pytest_libero.core.protocol import Protocol
from pytest_libero.core.rollout import run_episode
from pytest_libero.runtime.service import DEFAULT_MAX_RSS_MIB, SERVICE_MALLOC, BenchService, rss_mib

SETTINGS = {"default": {"GLIBC_TUNABLES": ""}, "keep-heap": {}}
CELLS = (Cell("libero_10", 0), Cell("libero_10", 1))
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    user_s: float
    sys_s: float
    minor_faults: int
    wall_s: float
    rss_mib: float  # the largest resident size seen after an episode
    rss_first: float  # after the first episode
    rss_last: float  # after the last
    observations: list


def process_counters(pid: int) -> tuple[float, float, int]:
    """(user s, system s, minor faults) of a live process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stream:
        fields = stream.read().rsplit(")", 1)[1].split()
    # after the command name: state is field 3, minflt 10, utime 14, stime 15 (proc(5))
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS, int(fields[7])


def measure(extra: dict[str, str], episodes: int, protocol: Protocol) -> Sample:
    service = BenchService(env={**service_env(get("libero"), None), **extra}, max_rss_mib=None)
    observations, rss = [], []
    started = time.monotonic()
    try:
        for index in range(episodes):
            result = run_episode(service, ZeroPolicy(), CELLS[index % len(CELLS)], protocol)
            if result.outcome != Outcome.FAILURE:  # the zero policy never succeeds
                raise SystemExit(f"episode {index}: {result.outcome}: {result.message}")
            observations.append(result.observations)
            assert service.pid is not None
            rss.append(rss_mib(service.pid) or 0.0)
        wall = time.monotonic() - started
        assert service.pid is not None
        user, system, faults = process_counters(service.pid)
    finally:
        service.close()
    return Sample(user, system, faults, wall, max(rss), rss[0], rss[-1], observations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=8, help="episodes per service (tasks alternating)")
    args = parser.parse_args()
    if args.rounds < 1 or args.episodes < 2:
        parser.error(f"--rounds {args.rounds} --episodes {args.episodes}: need at least 1 round and 2 episodes")
    if "GLIBC_TUNABLES" in os.environ:
        print(f"(GLIBC_TUNABLES={os.environ.pop('GLIBC_TUNABLES')} removed from this process's environment)")
    protocol = Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=5, max_policy_calls=4)
    print(f"keep-heap: GLIBC_TUNABLES={SERVICE_MALLOC}")
    print(f"{args.rounds} rounds; per service {args.episodes} episodes of the zero policy, libero_10 tasks 0 and 1 "
          f"in turn, 4 calls of 5 controls; load {os.getloadavg()[0]:.2f}")
    samples: dict[str, list[Sample]] = {name: [] for name in SETTINGS}
    for round_index in range(args.rounds):
        order = list(SETTINGS) if round_index % 2 == 0 else list(reversed(SETTINGS))
        for name in order:
            sample = measure(SETTINGS[name], args.episodes, protocol)
            samples[name].append(sample)
            print(f"  round {round_index + 1} {name:9s}: user {sample.user_s:6.1f} s, system {sample.sys_s:5.1f} s, "
                  f"minor faults {sample.minor_faults:9d}, wall {sample.wall_s:6.1f} s, "
                  f"RSS after episode 1 {sample.rss_first:5.0f} MiB, after the last {sample.rss_last:5.0f}, "
                  f"peak {sample.rss_mib:5.0f} (a run restarts its service past {DEFAULT_MAX_RSS_MIB:g})", flush=True)
        same = samples["default"][-1].observations == samples["keep-heap"][-1].observations
        print(f"  round {round_index + 1}: delivered observations identical: {same}")
        if not same:
            sys.exit("the settings delivered different observations")

    pairs = list(zip(samples["default"], samples["keep-heap"], strict=True))

    def ratio(value: Callable[[Sample], float]) -> str:
        values = [value(keep) / value(default) for default, keep in pairs]
        return f"{statistics.median(values):.2f} (rounds: {', '.join(f'{v:.2f}' for v in values)})"

    print("keep-heap / default, median over rounds:")
    print(f"  system time {ratio(lambda s: s.sys_s)}")
    print(f"  user time   {ratio(lambda s: s.user_s)}")
    print(f"  CPU (user + system) {ratio(lambda s: s.user_s + s.sys_s)}")
    print(f"  wall        {ratio(lambda s: s.wall_s)}")
    print(f"  minor faults {ratio(lambda s: s.minor_faults)}")
    print(f"  peak RSS    {ratio(lambda s: s.rss_mib)}")


if __name__ == "__main__":
    main()
