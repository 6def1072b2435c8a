"""A real single-node Slurm cluster on this machine, in a folder of its own (tests and trying out).

    python tools/local_slurm.py up DIR      # write DIR/slurm.conf, start munged, slurmctld, slurmd
    export SLURM_CONF=DIR/slurm.conf        # then sbatch, squeue, scontrol talk to it
    python tools/local_slurm.py down DIR    # stop all three

Needs Debian's `slurm-wlm` and `munge` packages and root (slurmd runs jobs as their users).
Nothing under /etc or /run is written: munged gets its own socket, and the daemons free ports
of their own, so two such clusters (two checkouts) can run on one machine. No cgroup plugin is
used (proctrack/linuxproc, task/none), so it also runs in a container.
Errors name the daemon, its log and what to install or fix; nothing is skipped quietly.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

NEEDED = {"munged": "munge", "slurmctld": "slurmctld (slurm-wlm)", "slurmd": "slurmd (slurm-wlm)",
          "sbatch": "slurm-client (slurm-wlm)", "scontrol": "slurm-client (slurm-wlm)"}
MUNGE_KEY = Path("/etc/munge/munge.key")


class LocalSlurmError(RuntimeError):
    """The local cluster could not be started (or stopped); the message names the log to read."""


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _memory_mib() -> int:
    with open("/proc/meminfo", encoding="ascii") as stream:
        kib = int(stream.readline().split()[1])
    # Leave room for the daemons; Slurm refuses a node declaring more than it has.
    return max(512, kib // 1024 - 1024)


def slurm_conf(folder: Path, host: str, cpus: int, memory_mib: int, ports: tuple[int, int],
               munge_socket: Path) -> str:
    """The slurm.conf of a one-node cluster whose every file lives under `folder`."""
    return "\n".join([
        "ClusterName=local",
        f"SlurmctldHost={host}",
        "SlurmUser=root",
        f"SlurmctldPort={ports[0]}",
        f"SlurmdPort={ports[1]}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "ReturnToService=2",
        "JobCompType=jobcomp/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        # Array tasks of the tests start as soon as a CPU frees up.
        "SchedulerParameters=defer_batch=0",
        "KillWait=5",
        f"SlurmctldPidFile={folder}/slurmctld.pid",
        f"SlurmdPidFile={folder}/slurmd.pid",
        f"SlurmdSpoolDir={folder}/spool",
        f"StateSaveLocation={folder}/state",
        f"SlurmctldLogFile={folder}/log/slurmctld.log",
        f"SlurmdLogFile={folder}/log/slurmd.log",
        f"NodeName={host} CPUs={cpus} RealMemory={memory_mib} State=UNKNOWN",
        f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


@dataclass
class LocalSlurm:
    """One cluster in `folder`; `start()` then `stop()` (also usable as a context manager)."""

    folder: Path

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment for sbatch, squeue, scancel and scontrol to reach this cluster."""
        return dict(os.environ, SLURM_CONF=str(self.conf))

    def _log_tail(self, name: str) -> str:
        path = self.folder / "log" / name
        lines = path.read_text(errors="replace").splitlines()[-15:] if path.is_file() else ["(no log written)"]
        return f"{path}:\n    " + "\n    ".join(lines)

    def start(self, timeout_s: float = 60.0) -> None:
        missing = [f"{tool} (install {package})" for tool, package in NEEDED.items() if shutil.which(tool) is None]
        if missing:
            raise LocalSlurmError("the local Slurm cluster needs " + ", ".join(missing)
                                  + ": apt-get install -y slurm-wlm munge")
        if os.geteuid() != 0:
            raise LocalSlurmError("the local Slurm cluster runs slurmd, which must be root: run as root")
        if not MUNGE_KEY.is_file():
            raise LocalSlurmError(f"{MUNGE_KEY} is missing: the munge package creates it (apt-get install munge)")
        for sub in ("spool", "state", "log", "munge"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        # munged refuses a socket folder that others can write to.
        os.chmod(self.folder / "munge", 0o755)
        munge_socket = self.folder / "munge" / "munge.socket"
        host = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
        ports = _free_ports(2)
        self.conf.write_text(slurm_conf(self.folder, host, os.cpu_count() or 1, _memory_mib(),
                                        (ports[0], ports[1]), munge_socket))
        self._run(["munged", "--force", f"--socket={munge_socket}", f"--pid-file={self.folder}/munge/munged.pid",
                   f"--log-file={self.folder}/log/munged.log", f"--seed-file={self.folder}/munge/munged.seed"],
                  "munged", "munged.log")
        self._run(["slurmctld", "-f", str(self.conf)], "slurmctld", "slurmctld.log")
        self._run(["slurmd", "-f", str(self.conf)], "slurmd", "slurmd.log")
        self._wait_idle(host, timeout_s)

    def _run(self, command: list[str], name: str, log: str) -> None:
        done = subprocess.run(command, capture_output=True, text=True, env=self.env)
        if done.returncode != 0:
            self.stop()
            raise LocalSlurmError(f"{name} did not start (exit {done.returncode}): {done.stderr.strip()}\n"
                                  + self._log_tail(log))

    def _wait_idle(self, host: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            done = subprocess.run(["sinfo", "--noheader", "--nodes", host, "--format=%T"], capture_output=True,
                                  text=True, env=self.env)
            state = (done.stdout.strip() or done.stderr.strip())
            if done.returncode == 0 and state == "idle":
                return
            time.sleep(0.5)
        self.stop()
        raise LocalSlurmError(f"node {host} did not become idle within {timeout_s:.0f} s (last state: {state!r})\n"
                              + self._log_tail("slurmctld.log") + "\n" + self._log_tail("slurmd.log"))

    def _pid(self, name: str) -> int | None:
        path = self.folder / name
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            return None

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop slurmd, slurmctld and munged (every one that was started), waiting for them to exit."""
        pids = [p for p in (self._pid("slurmd.pid"), self._pid("slurmctld.pid")) if p is not None]
        if pids:
            subprocess.run(["scontrol", "shutdown"], capture_output=True, env=self.env, timeout=30)
        munged = self._pid("munge/munged.pid")
        deadline = time.monotonic() + timeout_s
        for pid in pids:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if munged is not None and _alive(munged):
            os.kill(munged, signal.SIGTERM)
            while _alive(munged) and time.monotonic() < deadline:
                time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of ours still answers; the daemons are not our children (they fork).
    return True


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("up", "down"):
        print(__doc__, file=sys.stderr)
        return 2
    cluster = LocalSlurm(Path(argv[1]).resolve())
    try:
        cluster.start() if argv[0] == "up" else cluster.stop()
    except LocalSlurmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if argv[0] == "up":
        print(f"export SLURM_CONF={cluster.conf}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
