"""The policy host process: one policy, built once, serving every simulator worker of one GPU.

Started by the controller (pytest_libero.runtime.host.PolicyHost) as
`python -m pytest_libero.runtime.host_server FD`; FD is its control channel (runtime.channel:
`build`, `stats`, `close`). `build` builds the policy from its spec, as an isolated policy's
process does, and opens a Unix socket with an auth key that the workers connect to (one
connection per worker, one request at a time on it):

    ("hello", worker name)   -> ("ok", profile)
    ("reset", language)      -> ("ok", None)                 a new episode on this connection
    ("act", observation)     -> ("ok", answer, queue_s, compute_s, batch_size)
    ("end", None)            -> no reply                     the episode is over: not waited for
    any failure of the call  -> ("error", exception type name, message, traceback text)

One thread (the device thread) makes every policy call, so the policy is never called
concurrently. A policy with `act_batch` (core.policy.BatchedPolicy) gets up to `max_batch`
pending `act` requests at once, oldest first. The batching rule (`Host._take`): the wait window
opens when the device can serve the oldest pending request, at the later of its arrival and the
moment the device freed, and lasts `max_wait_ms`; inside it the device waits for the requests of
the active episodes (a connection between its `reset` and its `end` or disconnect) that have
none pending, and stops as soon as every one of them has one pending or the batch is full. An
active episode whose next request is not expected before the window closes (its last
turnaround, answer to next request, says when) is not waited for. Why workers then fall into
step from any start offset, once max-wait covers a worker's turnaround: an episode without a
pending request when the device frees was answered by the last batch at the latest, so it asks
again within one turnaround, inside the window, and joins; from then on they are all answered
together. At max-wait 0 no batch waits, as before. A policy without `act_batch` is built
once too and called one request at a time; its per-episode state lives in
an episode copy (`episode_copy`: a shallow copy of the built object, with its list, dict, set,
deque and bytearray attributes copied one level), made at each `reset`, so the model's weights
are shared and what `reset` and `act` change is the episode's own. A policy call that runs
past `call_timeout_s` ends the process (exit code 70): its in-flight episodes end as policy
faults and the controller rebuilds the host.
"""

from __future__ import annotations

import collections
import copy
import os
import socket
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection, Listener
from typing import Any

from pytest_libero.core.policy import BatchRequest, PolicySpec, is_batched
from pytest_libero.errors import PolicyFault
from pytest_libero.runtime import wire
from pytest_libero.runtime.channel import serve

# The exit code of a host whose policy call ran past its timeout (the watchdog ends it).
HUNG_EXIT = 70


class _Client:
    """One worker's connection: its name, its current episode and, for a plain policy, that episode's copy."""

    def __init__(self, number: int, conn: Connection) -> None:
        self.number, self.conn, self.name = number, conn, f"c{number}"
        self.episodes = 0
        self.key: str | None = None
        self.first = False
        self.instance: Any = None  # a plain policy's episode copy
        self.send_lock = threading.Lock()
        # For the batching rule (guarded by Host.cond): an episode between its reset and its end,
        # whether it has a request in the queue, when it was last answered, and how long it took
        # from an answer to its next request the last time (None: not known yet).
        self.active = False
        self.waiting = False
        self.answered_at: float | None = None
        self.turnaround: float | None = None

    def new_key(self) -> str:
        self.episodes += 1
        self.key, self.first = f"{self.name}#{self.number}/{self.episodes}", True
        return self.key

    def expected_by(self, until: float) -> bool:
        """Whether this active episode's next request may come by `until` (so it is worth waiting for):
        unknown (no turnaround measured yet) counts as may."""
        if self.answered_at is None or self.turnaround is None:
            return True
        return self.answered_at + self.turnaround <= until

    def send(self, reply: tuple[Any, ...]) -> None:
        with self.send_lock:
            try:
                wire.send(self.conn, reply)
            except (OSError, ValueError):
                pass  # the worker went away (its deadline, its crash): nobody to answer


class _Pending:
    __slots__ = ("client", "op", "payload", "arrived", "key", "first")

    def __init__(self, client: _Client, op: str, payload: Any) -> None:
        self.client, self.op, self.payload, self.arrived = client, op, payload, time.monotonic()
        self.key, self.first = client.key or "", client.first


# The attribute types an episode copy copies one level: a policy's own per-episode containers
# (`self.frames = []` in __init__, appended to in act) must not be shared between episodes.
_EPISODE_CONTAINERS = (list, dict, set, collections.deque, bytearray)


def episode_copy(policy: Any) -> Any:
    """One episode's view of a plain policy built once: a shallow copy of the built object whose
    list, dict, set, deque and bytearray attributes are copied one level. The model and anything
    else it holds are shared (loaded once); attributes that reset/act assign or grow in place are the
    episode's own. Containers nested deeper, or state kept inside other objects, stay shared:
    such a policy gives itself act_batch (docs/writing-adapters.md, "Batched policies")."""
    episode = copy.copy(policy)
    state = getattr(episode, "__dict__", None)
    if isinstance(state, dict):
        for name, value in list(state.items()):
            if isinstance(value, _EPISODE_CONTAINERS):
                state[name] = copy.copy(value)
    return episode


def _error(exc: BaseException) -> tuple[str, str, str, str]:
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return ("error", type(exc).__name__, str(exc), trace)


class Host:
    """The pending requests, the device thread that answers them, and the connections."""

    def __init__(self, spec: PolicySpec, policy: Any, max_batch: int, max_wait_s: float,
                 call_timeout_s: float) -> None:
        self.spec, self.policy = spec, policy
        self.batched = is_batched(policy)
        self.max_batch, self.max_wait_s, self.call_timeout_s = max_batch, max_wait_s, call_timeout_s
        self.pending: collections.deque[_Pending] = collections.deque()
        self.cond = threading.Condition()
        self.clients: set[_Client] = set()
        self.ended: list[str] = []  # episodes over, for a batched policy's end_episode
        self.busy_since: float | None = None
        self.batches: collections.Counter[int] = collections.Counter()  # batch size -> calls
        self.recent: collections.deque[int] = collections.deque(maxlen=1000)  # the last batch sizes, in order
        self.waits: collections.Counter[str] = collections.Counter()  # how each batch's wait ended
        self.freed = 0.0  # when the device last finished a call (time.monotonic())
        self.numbered = 0
        self.profile: dict[str, Any] = {}  # what build returned: every worker's records carry it

    # -- connections (one thread each) --------------------------------------------------------------

    def accept_forever(self, listener: Listener) -> None:
        while True:
            try:
                conn = listener.accept()
            except (OSError, EOFError):
                continue  # a failed handshake (wrong key) or a client that left at once
            except Exception:  # noqa: BLE001 - multiprocessing.AuthenticationError and the like
                continue
            self.numbered += 1
            client = _Client(self.numbered, conn)
            threading.Thread(target=self._serve_client, args=(client,), daemon=True).start()

    def _serve_client(self, client: _Client) -> None:
        try:
            while True:
                try:
                    op, payload = wire.recv(client.conn)
                except (EOFError, OSError):
                    return
                if op == "hello":
                    self._hello(client, payload)
                elif op == "reset":
                    self._reset(client, payload)
                elif op == "act":
                    with self.cond:
                        pending = _Pending(client, "act", payload)
                        if not client.first and client.answered_at is not None:
                            # Within an episode: its simulation time and the transfers, the figure the
                            # batching rule predicts its next request by (an episode's first request
                            # follows its reset at once, so it says nothing about that).
                            client.turnaround = pending.arrived - client.answered_at
                        client.first = False
                        client.waiting = True
                        self.pending.append(pending)
                        self.cond.notify_all()
                elif op == "end":
                    with self.cond:
                        client.active = False  # no more requests in this episode: never waited for
                        self.cond.notify_all()
                else:
                    client.send(("error", "ValueError", f"unknown request {op!r}", ""))
        finally:
            self._drop(client)

    def _hello(self, client: _Client, name: Any) -> None:
        client.name = str(name)
        with self.cond:
            self.clients.add(client)
            self.cond.notify_all()
        client.send(("ok", self.profile))

    def _reset(self, client: _Client, language: Any) -> None:
        with self.cond:
            if client.key is not None and self.batched:
                self.ended.append(client.key)
            client.new_key()
            client.active = True
            self.cond.notify_all()
            if self.batched:
                client.send(("ok", None))  # no policy call: the first act starts the episode
                return
            self.pending.append(_Pending(client, "reset", language))
            client.first = False
            self.cond.notify_all()

    def _drop(self, client: _Client) -> None:
        with self.cond:
            self.clients.discard(client)
            client.active = False
            if self.batched and client.key is not None:
                self.ended.append(client.key)
            # A request it left behind is still answered into the closed connection: harmless.
            self.cond.notify_all()
        client.conn.close()

    # -- the device thread ------------------------------------------------------------------------

    def _take(self) -> list[_Pending]:
        """The next call's requests (the batching rule: the module docstring says it and why)."""
        with self.cond:
            while not self.pending:
                self.cond.wait()
            if not self.batched:
                return [self.pending.popleft()]
            # The window opens when the device can serve the oldest request: counted from its
            # arrival alone, a request that arrived while the device was busy has used its wait up
            # by the time the device frees, and two workers stay in anti-phase for good.
            until = max(self.freed, self.pending[0].arrived) + self.max_wait_s
            while True:
                if len(self.pending) >= self.max_batch:
                    self.waits["full"] += 1
                    break
                if not self._awaited(until):
                    self.waits["all"] += 1
                    break
                left = until - time.monotonic()
                if left <= 0:
                    self.waits["window"] += 1
                    break
                self.cond.wait(left)
            batch = [self.pending.popleft() for _ in range(min(self.max_batch, len(self.pending)))]
            for pending in batch:
                pending.client.waiting = False
            return batch

    def _awaited(self, until: float) -> bool:
        """Whether an active episode without a pending request may still ask by `until` (under cond).
        A finished episode (its `end` came, or its worker disconnected) is never waited for; a worker
        that says nothing at an episode's end is waited for at most one window, until its next reset."""
        return any(c.active and not c.waiting and c.expected_by(until) for c in self.clients)

    def run_device(self) -> None:
        while True:
            batch = self._take()
            self.busy_since = started = time.monotonic()
            try:
                answers = self._call(batch)
            finally:
                self.busy_since = None
            self.freed = done = time.monotonic()
            compute = done - started
            self.batches[len(batch)] += 1
            self.recent.append(len(batch))
            with self.cond:
                for pending in batch:
                    pending.client.answered_at = done  # before the answer goes: its next request is measured from it
            for pending, answer in zip(batch, answers, strict=True):
                if isinstance(answer, BaseException):
                    pending.client.send(_error(answer))
                else:
                    pending.client.send(("ok", answer, started - pending.arrived, compute, len(batch)))

    def _call(self, batch: list[_Pending]) -> list[Any]:
        if not self.batched:
            (pending,) = batch
            try:
                instance = pending.client.instance
                if pending.op == "reset" or instance is None:
                    instance = pending.client.instance = episode_copy(self.policy)
                if pending.op == "reset":
                    instance.reset(pending.payload)
                    return [None]
                return [instance.act(pending.payload)]
            except Exception as exc:  # noqa: BLE001 - the adapter's exception: that episode's fault
                return [exc]
        self._end_episodes()
        requests = [BatchRequest(p.key, p.payload, p.first) for p in batch]
        try:
            answers = list(self.policy.act_batch(requests))
        except Exception as exc:  # noqa: BLE001 - whose request it was is unknown: the batch fails
            return [exc] * len(batch)
        if len(answers) != len(batch):
            fault = PolicyFault(f"act_batch returned {len(answers)} answers for {len(batch)} requests; "
                                "return one answer (chunk, STOP or Exception) per request, in order")
            return [fault] * len(batch)
        return answers

    def _end_episodes(self) -> None:
        end = getattr(self.policy, "end_episode", None)
        with self.cond:
            ended, self.ended = self.ended, []
        if callable(end):
            for key in ended:
                try:
                    end(key)
                except Exception:  # noqa: BLE001 - cleaning up an episode that is over fails no one
                    traceback.print_exc()

    def watch(self) -> None:
        """End the process when a policy call runs past its timeout (it cannot be interrupted)."""
        while True:
            time.sleep(min(1.0, self.call_timeout_s / 10))
            since = self.busy_since
            if since is not None and time.monotonic() - since > self.call_timeout_s:
                sys.stderr.write(f"pytest-libero policy host: a policy call ran past {self.call_timeout_s:g} s "
                                 "(--libero-policy-timeout); ending the host so that it is rebuilt\n")
                sys.stderr.flush()
                os._exit(HUNG_EXIT)

    def stats(self) -> dict[str, Any]:
        return {"batches": dict(self.batches), "recent": list(self.recent), "waits": dict(self.waits),
                "clients": len(self.clients), "pid": os.getpid()}

    def close(self) -> None:
        from pytest_libero.runtime.policies import close_policy

        with self.cond:
            policy = self.policy
        close_policy(policy)  # episode copies share what it holds: closing it once closes theirs


class _Control:
    """The control channel's handler: build (and listen), stats, close."""

    def __init__(self) -> None:
        self.host: Host | None = None

    def __call__(self, op: str, payload: Any) -> Any:
        if op == "build":
            return self.build(payload)
        if op == "stats":
            return self.host.stats() if self.host is not None else {}
        if op == "close":
            return self.host.close() if self.host is not None else None
        raise ValueError(f"unknown request {op!r}")

    def build(self, settings: dict[str, Any]) -> dict[str, Any]:
        from pytest_libero.core.policy import adapter_file_hash, profile_of
        from pytest_libero.errors import PolicyLoadError
        from pytest_libero.runtime.policies import build_builtin, check_policy_object

        os.chdir(settings["cwd"])  # file.py:factory specs are relative to the user's directory
        sys.path[:0] = [p for p in settings.get("paths", ()) if p not in sys.path]
        spec = PolicySpec(settings["name"], settings["kwargs"])
        built = build_builtin(spec)
        if built is None:
            raise PolicyLoadError(f"{spec.name!r} is not a built-in, entry-point or file.py:factory policy; "
                                  "conftest-registered adapters cannot run in the policy host")
        policy = check_policy_object(built, spec)
        host = self.host = Host(spec, policy, int(settings["max_batch"]), settings["max_wait_ms"] / 1000.0,
                                float(settings["call_timeout_s"]))
        from pytest_libero.runtime.interpreter import where_it_runs

        host.profile = dict(profile_of(policy, spec), **adapter_file_hash(policy), batched=host.batched,
                            max_batch=host.max_batch, interpreter=where_it_runs())
        path = settings["path"]
        if os.path.exists(path):
            os.unlink(path)  # a dead predecessor's socket
        listener = Listener(path, family="AF_UNIX", authkey=bytes.fromhex(settings["authkey"]))
        for target, args in ((host.accept_forever, (listener,)), (host.run_device, ()), (host.watch, ())):
            threading.Thread(target=target, args=args, daemon=True).start()
        return dict(host.profile, pid=os.getpid(), hostname=socket.gethostname())


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])), _Control(), portable=True)
