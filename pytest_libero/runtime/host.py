"""`--libero-policy-isolation host`: one policy process per GPU, shared by every worker pinned to it.

    controller   `PolicyHost`: starts `python -m pytest_libero.runtime.host_server FD` (pinned to
                 its GPU), has it build the policy once (a failure is a PolicyLoadError: exit 4)
                 and listen on a Unix socket with an auth key; a watcher thread rebuilds a host
                 that dies (it gives up after `MAX_REBUILDS` failed builds in a row: every later
                 request is then a policy fault, "cannot reach the policy host")
    worker       `HostPolicy`: the policy the engine calls. It keeps the episode deadline
                 (core.policy.KeepsDeadline) and charges to the policy everything that goes wrong
                 on the host's side: an exception, no answer in time, a host that died (its
                 in-flight episodes end as policy_error; the next episode connects to the rebuilt
                 host). Per episode it adds up what the record's timing says of the host: the time
                 its requests waited in the batch queue and the batch sizes they were answered in.
                 After each episode it tells the host the episode is over (`episode_over`), so
                 that the host's batches stop waiting for this worker's next request.

The host's own logic (batching, per-episode state, the device thread) is
pytest_libero.runtime.host_server. docs/policy-host.md says what batching costs and buys.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection
from typing import Any

from pytest_libero.core.policy import PolicySpec
from pytest_libero.errors import PolicyFault, PolicyLoadError
from pytest_libero.runtime import wire
from pytest_libero.runtime.channel import Channel, ChannelError, RemoteError
from pytest_libero.runtime.interpreter import PolicyPython

# Consecutive failed rebuilds after which the watcher stops (every later episode is a policy fault).
MAX_REBUILDS = 3


class HostPolicyError(PolicyFault):
    """The policy host raised for this episode's request, gave no answer in time, or died."""


@dataclass(frozen=True, slots=True)
class HostSettings:
    """How every host of a run batches: at most `max_batch` requests per call, the first waiting at
    most `max_wait_ms` for more; a policy call past `call_timeout_s` ends the host (rebuilt)."""

    max_batch: int = 8
    max_wait_ms: float = 5.0
    call_timeout_s: float = 300.0
    build_timeout_s: float = 600.0

    def check(self) -> None:
        """ValueError naming the value and the fix."""
        if self.max_batch < 1:
            raise ValueError(f"--libero-policy-max-batch {self.max_batch}: must be at least 1")
        if not self.max_wait_ms >= 0:
            raise ValueError(f"--libero-policy-max-wait-ms {self.max_wait_ms}: must be 0 or more milliseconds")


class PolicyHost:
    """One host process (one GPU, or the CPU) seen from the controller: built, watched, rebuilt."""

    def __init__(self, spec: PolicySpec, settings: HostSettings, folder: str, name: str,
                 gpu: dict[str, Any] | None = None, paths: tuple[str, ...] = (),
                 python: PolicyPython | None = None) -> None:
        self.spec, self.settings, self.gpu, self.paths, self.python = spec, settings, gpu, paths, python
        self.path = os.path.join(folder, f"{name}.sock")
        self.authkey = os.urandom(16).hex()
        self.profile: dict[str, Any] = {}
        self.rebuilds = 0  # hosts started after one died
        self.gave_up: str | None = None
        self._channel: Channel | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def address(self) -> dict[str, str]:
        """What a worker needs to connect (handed over through workerinput)."""
        return {"path": self.path, "authkey": self.authkey}

    @property
    def pid(self) -> int | None:
        channel = self._channel
        return channel.pid if channel is not None else None

    def start(self) -> None:
        """Start and build the host; PolicyLoadError (the build's own words) when it cannot be built."""
        self._spawn()
        self._watcher = threading.Thread(target=self._watch, name="libero-policy-host", daemon=True)
        self._watcher.start()

    def _spawn(self) -> None:
        env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": self.gpu["id"]} if self.gpu else {}
        channel = Channel.spawn("pytest_libero.runtime.host_server", env, self.python, portable=True)
        settings = {"name": self.spec.name, "kwargs": self.spec.kwargs, "cwd": os.getcwd(), "path": self.path,
                    "authkey": self.authkey, "max_batch": self.settings.max_batch,
                    "max_wait_ms": self.settings.max_wait_ms, "call_timeout_s": self.settings.call_timeout_s,
                    "paths": list(self.paths)}
        try:
            profile = channel.request("build", settings, self.settings.build_timeout_s)
        except RemoteError as exc:
            channel.stop()
            text = f"{exc.type_name}: {exc.message}"
            text = text if self.python is None else self.python.install_hint(text)
            raise PolicyLoadError(f"the policy host could not build it: {text}") from None
        except ChannelError as exc:
            channel.stop()
            raise PolicyLoadError(f"the policy host did not build it: {exc}") from None
        with self._lock:
            self._channel = channel
            self.profile = dict(profile)

    def _watch(self) -> None:
        failures = 0
        while not self._closing.wait(0.2):
            with self._lock:
                channel = self._channel
            if channel is None or channel.alive or self._closing.is_set():
                continue
            try:
                self.rebuilds += 1
                self._spawn()
                failures = 0
            except PolicyLoadError as exc:
                failures += 1
                if failures >= MAX_REBUILDS:
                    self.gave_up = f"the policy host died and could not be rebuilt {failures} times: {exc}"
                    return

    def stats(self) -> dict[str, Any]:
        """The host's batch sizes so far ({size: calls}) and connected workers."""
        with self._lock:
            channel = self._channel
        if channel is None:
            return {}
        try:
            return dict(channel.request("stats", None, 30.0))
        except ChannelError:
            return {}

    def close(self) -> None:
        self._closing.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        with self._lock:
            channel, self._channel = self._channel, None
        if channel is not None:
            channel.close(timeout_s=30.0)
        if os.path.exists(self.path):
            os.unlink(self.path)


def host_folder() -> str:
    """A private folder for the run's host sockets (short enough for a Unix socket path)."""
    return tempfile.mkdtemp(prefix="libero-host-")


class HostPolicy:
    """The worker's policy under `--libero-policy-isolation host`: its calls go to the shared host."""

    def __init__(self, address: dict[str, str], timeout_s: float, worker: str = "main",
                 connect_timeout_s: float = 60.0) -> None:
        self.path, self.authkey = address["path"], bytes.fromhex(address["authkey"])
        self.timeout_s, self.worker, self.connect_timeout_s = timeout_s, worker, connect_timeout_s
        self.deadline: float | None = None
        self.profile: dict[str, Any] = {}
        self._conn: Connection | None = None
        self._episode = self._fresh_timing()
        try:
            self._connect(time.monotonic() + connect_timeout_s)
        except HostPolicyError as exc:
            raise PolicyLoadError(str(exc)) from None

    @staticmethod
    def _fresh_timing() -> dict[str, Any]:
        return {"queue_s": 0.0, "compute_s": 0.0, "sizes": []}

    def set_deadline(self, deadline: float | None) -> None:
        """Bound every call until `deadline` (time.monotonic()) by the time left; None lifts it."""
        self.deadline = deadline

    def _limit(self, op: str) -> tuple[float, bool]:
        """Seconds this request may wait, and whether the episode deadline set them."""
        timeout = self.timeout_s
        if self.deadline is not None and self.deadline - time.monotonic() < timeout:
            timeout = self.deadline - time.monotonic()
            if timeout <= 0:
                raise HostPolicyError(f"the episode deadline (--libero-episode-timeout) passed before policy {op}")
            return timeout, True
        return timeout, False

    def _connect(self, until: float) -> Connection:
        if self._conn is not None:
            return self._conn
        last: BaseException | None = None
        while True:
            try:
                conn = Client(self.path, family="AF_UNIX", authkey=self.authkey)
                break
            except (OSError, EOFError) as exc:  # not there yet, or being rebuilt
                last = exc
            if time.monotonic() >= until:
                raise HostPolicyError(f"cannot reach the policy host at {self.path}: {type(last).__name__}: {last}")
            time.sleep(0.05)
        wire.send(conn, ("hello", self.worker))
        reply = self._receive(conn, "hello", max(0.0, until - time.monotonic()) + 30.0, False)
        self.profile.update(reply[1] if isinstance(reply[1], dict) else {})
        self._conn = conn
        return conn

    def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _receive(self, conn: Connection, op: str, timeout: float, by_deadline: bool) -> tuple[Any, ...]:
        try:
            if not conn.poll(timeout):
                conn.close()
                self._conn = None
                why = ("the episode deadline (--libero-episode-timeout) passed inside" if by_deadline
                       else f"no answer within {timeout:g} s (--libero-policy-timeout) to")
                raise HostPolicyError(f"{why} policy {op} in the policy host")
            reply: tuple[Any, ...] = wire.recv(conn)
        except (EOFError, OSError) as exc:
            conn.close()
            self._conn = None
            raise HostPolicyError(f"the policy host died during {op} ({type(exc).__name__}); it is rebuilt "
                                  "for the next episode") from None
        if reply[0] == "error":
            _, type_name, message, trace = reply
            raise HostPolicyError(f"policy.{op} raised {type_name} in the policy host: {message}\n{trace}")
        return reply

    def _request(self, op: str, payload: Any) -> tuple[Any, ...]:
        timeout, by_deadline = self._limit(op)
        conn = self._connect(time.monotonic() + timeout)
        timeout, by_deadline = self._limit(op)
        try:
            wire.send(conn, (op, payload))
        except (OSError, ValueError):
            self._discard()
            raise HostPolicyError(f"the policy host died before {op}; it is rebuilt for the next episode") from None
        return self._receive(conn, op, timeout, by_deadline)

    def reset(self, language: str) -> None:
        self._episode = self._fresh_timing()
        self._request("reset", language)

    def act(self, observation: Any) -> Any:
        reply = self._request("act", observation)
        _, answer, queue_s, compute_s, size = reply
        self._episode["queue_s"] += queue_s
        self._episode["compute_s"] += compute_s
        self._episode["sizes"].append(size)
        return answer

    def episode_over(self) -> None:
        """Tell the host this episode asks nothing more, so that its batches stop waiting for it
        (called after the episode; no reply; nothing to do when the connection is gone)."""
        conn = self._conn
        if conn is None:
            return
        try:
            wire.send(conn, ("end", None))
        except (OSError, ValueError):
            self._discard()  # the host died: the next episode reconnects

    def episode_timing(self) -> dict[str, float]:
        """The record's timing of the host for this episode: queue wait (s, charged to the policy),
        the host's compute, and the batch sizes its act calls were answered in."""
        sizes = self._episode["sizes"]
        timing = {"policy_queue_s": self._episode["queue_s"], "policy_host_compute_s": self._episode["compute_s"]}
        if sizes:
            timing.update(policy_batch_size_mean=sum(sizes) / len(sizes), policy_batch_size_max=max(sizes))
        return timing

    def close(self) -> None:
        self._discard()


def host_name(gpu: dict[str, Any] | None) -> str:
    """The socket's name of the host serving `gpu` (None: the CPU's)."""
    return "cpu" if gpu is None else f"gpu{gpu['id']}"

