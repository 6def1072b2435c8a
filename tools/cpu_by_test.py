"""Where a test run's CPU goes: each test file's CPU, its subprocesses' included.

    python tools/cpu_by_test.py -- .venv/bin/pytest tests -n 3 --dist loadfile --no-loadscope-reorder
    python tools/cpu_by_test.py --json cpu.json --top 40 -- .venv/bin/pytest tests -m real_libero

The gate is CPU-bound on two cores (docs/testing.md), so a cut is CPU taken out of some test; the
durations pytest prints are wall seconds, in which a test's share of a contended machine and its
waits are mixed in, and a background process one test starts slows the tests beside it. This tool
runs the command and reads /proc once per interval: for every process descended from it, its user
and system CPU (the last values read before it ended) and the test it was started for, read from
its initial environment: pytest sets PYTEST_CURRENT_TEST while a test runs, and a process the test
starts inherits it. Of a process's ancestors the outermost one so tagged names the test, so a bench
service started by a pytest run that a test started counts for that test, not for the nested run's
own test. A process started without the variable (an xdist worker, or a test's subprocess given an
environment of its own) counts under its command line; an xdist worker's own CPU is that of the
tests it ran in-process.

What it cannot see: a process that ends between two reads (under --interval it is missed, its CPU
among the command's total but no test's); that CPU is printed as the part not seen. The table is
approximate to about an interval's CPU per process; it is a map for cuts, not a gate figure.
Linux only (/proc). The command's exit status is this tool's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

TEST_VARIABLE = b"PYTEST_CURRENT_TEST="
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Process:
    pid: int
    ppid: int
    command: list[str]
    test: str  # PYTEST_CURRENT_TEST at its start, without the phase ("" when unset)
    user: float = 0.0
    system: float = 0.0
    first_seen: float = field(default_factory=time.monotonic)
    last_seen: float = 0.0


def read_stat(pid: int) -> tuple[int, float, float, int] | None:
    """ppid, user and system seconds, start time (ticks since boot) of `pid`; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), int(fields[11]) / TICKS, int(fields[12]) / TICKS, int(fields[19])


def read_start(pid: int) -> tuple[list[str], str]:
    """The command line and the test (PYTEST_CURRENT_TEST, phase dropped) of `pid` as it started."""
    try:
        command = [part.decode(errors="replace") for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                   if part]
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return [], ""
    test = next((entry[len(TEST_VARIABLE):].decode(errors="replace") for entry in environment
                 if entry.startswith(TEST_VARIABLE)), "")
    return command, test.rsplit(" (", 1)[0]


class Sampler:
    """The descendants of `root` as read so far, keyed by (pid, start time): a reused pid is a new process."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.processes: dict[tuple[int, int], Process] = {}
        self.current: dict[int, tuple[int, int]] = {}  # pid -> key of the process it is now

    def read(self) -> None:
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            stat = read_stat(pid)
            if stat is None:
                continue
            ppid, user, system, started = stat
            key = (pid, started)
            process = self.processes.get(key)
            if process is None:
                if pid != self.root and self.current.get(ppid) not in self.processes:
                    continue  # not (yet seen to be) a descendant of the command
                command, test = read_start(pid)
                process = self.processes[key] = Process(pid, ppid, command, test)
                self.current[pid] = key
            process.user, process.system, process.last_seen = user, system, time.monotonic()

    def owner(self, process: Process) -> str:
        """The outermost tagged test among the process and its ancestors, else its command."""
        test, node, hops = "", process, 0
        while True:
            test = node.test or test  # the last one set on the way up is the outermost
            key = self.current.get(node.ppid)
            parent = self.processes.get(key) if key is not None and node.pid != self.root else None
            if parent is None or hops >= 64:
                break
            node, hops = parent, hops + 1
        if test:
            return test
        return "(no test) " + " ".join(process.command[:3])[:100]


def table(rows: dict[str, list[float]], total: float, top: int, title: str) -> list[str]:
    lines = [f"{title}:", f"{'CPU s':>9} {'share':>6} {'procs':>5}  name"]
    for name, (cpu, count) in sorted(rows.items(), key=lambda item: -item[1][0])[:top]:
        lines.append(f"{cpu:9.1f} {cpu / total:6.1%} {int(count):5d}  {name}")
    return lines


def report(sampler: Sampler, total_cpu: float, top: int) -> str:
    by_test: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for process in sampler.processes.values():
        cpu, owner = process.user + process.system, sampler.owner(process)
        for rows, name in ((by_test, owner), (by_file, owner.split("::", 1)[0])):
            rows[name][0] += cpu
            rows[name][1] += 1
    seen = sum(cpu for cpu, _ in by_file.values())
    base = max(total_cpu, seen, 1e-9)
    lines = [f"cpu_by_test: the command used {total_cpu:.1f} s of CPU; {seen:.1f} s ({seen / base:.0%}) "
             f"read from {len(sampler.processes)} processes, the rest in processes that ended between two reads", ""]
    lines += table(by_file, base, top, "by test file (or command, for processes started outside a test)")
    lines += ["", *table(by_test, base, top, "by test")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                     usage="%(prog)s [--interval S] [--top N] [--json FILE] -- COMMAND...")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between two reads of /proc (1)")
    parser.add_argument("--top", type=int, default=30, help="rows per table (30)")
    parser.add_argument("--json", type=Path, help="also write every process read (pid, command, test, CPU) here")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command: give it after --, e.g. -- .venv/bin/pytest tests")
    if args.interval <= 0:
        parser.error(f"--interval {args.interval:g}: give a positive number of seconds, e.g. 1")
    if not Path("/proc/self/stat").is_file():
        parser.error("/proc is not readable here: this tool reads Linux's /proc")
    if args.json and not args.json.parent.is_dir():  # checked before the run, not after it
        parser.error(f"--json {args.json}: its folder {args.json.parent} does not exist; make it or name another")
    # Started without the variable, should this tool itself run inside a test: the tags are the command's own.
    try:
        child = subprocess.Popen(command, env={k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"})
    except OSError as exc:
        parser.error(f"cannot start {command[0]!r} ({exc.strerror}): give a program on PATH or its path")
    # Ctrl-C reaches the command (same process group) and ends it as pytest ends; the table still prints.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    sampler = Sampler(child.pid)
    rusage = None
    while rusage is None:
        sampler.read()
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            rusage, child.returncode = usage, os.waitstatus_to_exitcode(status)
            break
        time.sleep(args.interval)
    signal.signal(signal.SIGINT, previous)
    total = rusage.ru_utime + rusage.ru_stime  # the command and every descendant it (or they) waited for
    print(report(sampler, total, args.top), file=sys.stderr)
    if args.json:
        rows = [dict(asdict(p), owner=sampler.owner(p)) for p in sampler.processes.values()]
        args.json.write_text(json.dumps({"command": command, "cpu_s": total, "processes": rows}, indent=1))
    return int(child.returncode)


if __name__ == "__main__":
    sys.exit(main())
