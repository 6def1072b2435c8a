"""The one request/reply framing between a worker and its child processes (bench service, isolated policy).

    request   (op, payload)
    reply     ("ok", value)  or  ("error", exception type name, message, traceback text)

The client side (`Channel`) sends one request and waits for its reply up to a timeout; what went
wrong is one of three exceptions, so each caller words its own message: `NoReply` (nothing came
in time), `PeerDied` (the pipe closed; the child's exit code when it has one) and `RemoteError`
(the handler raised). The server side (`serve`) answers every request with `handle(op, payload)`
until `close` or until the pipe closes. Payloads and values are pickled by the Connection; a
`portable` channel (the policy's, which may run another numpy: runtime.wire) pickles numpy
arrays as raw bytes instead.

A child is a fresh interpreter (not fork): nothing of the parent's heap exists in it, and the
caller needs no `if __name__ == "__main__"` guard. The child module is run as `python -m MODULE FD`
and wraps FD in a multiprocessing Connection. What a failed request costs the child (a deadline,
a kill, a fresh process) is pytest_libero.runtime.child's.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from pytest_libero.core.benchmark import SERVICE_PYTHON_ENV
from pytest_libero.runtime import wire
from pytest_libero.runtime.interpreter import PolicyPython

# How long a peer whose pipe closed gets to exit before its exit code is given up as unknown.
EXIT_WAIT_S = 10.0


class ChannelError(Exception):
    """A request got no usable reply; `op` names the request."""

    def __init__(self, op: str, text: str) -> None:
        super().__init__(text)
        self.op = op


class NoReply(ChannelError):
    """No reply within the timeout (the peer is still running, or hung)."""

    def __init__(self, op: str, timeout_s: float) -> None:
        super().__init__(op, f"no reply to {op!r} within {timeout_s:g} s")
        self.timeout_s = timeout_s


class PeerDied(ChannelError):
    """The pipe broke or closed: the peer died. `exit_code` is None when it is not known."""

    def __init__(self, op: str, exit_code: int | None, cause: str) -> None:
        super().__init__(op, f"peer died during {op!r} (exit code {exit_code}): {cause}")
        self.exit_code, self.cause = exit_code, cause


class RemoteError(ChannelError):
    """The peer's handler raised: its exception type name, message and traceback text."""

    def __init__(self, op: str, type_name: str, message: str, trace: str) -> None:
        super().__init__(op, f"{op!r} raised {type_name}: {message}")
        self.type_name, self.message, self.trace = type_name, message, trace


class Channel:
    """The parent's end of a request/reply pipe, and the child process behind it (None: a thread)."""

    def __init__(self, conn: Connection, process: subprocess.Popen[bytes] | None = None,
                 portable: bool = False) -> None:
        self.conn, self.process, self.portable = conn, process, portable

    @classmethod
    def spawn(cls, module: str, env: dict[str, str] | None = None, python: PolicyPython | None = None,
              portable: bool = False) -> Channel:
        """Start `python -m module FD` and return its channel.

        The interpreter is this one unless `env` names another (SERVICE_PYTHON_ENV), or `python`
        (the policy's own: its bootstrap gives it this suite's packages; always portable)."""
        parent, child = socket.socketpair()
        with child:
            fd = child.fileno()
            full_env: dict[str, str] | None
            if python is not None:
                argv, full_env = python.argv(module, fd), python.environ(env)
            else:
                argv = [(env or {}).get(SERVICE_PYTHON_ENV) or sys.executable, "-m", module, str(fd)]
                full_env = dict(os.environ, **env) if env else None
            process = subprocess.Popen(argv, pass_fds=(fd,), stdin=subprocess.DEVNULL, env=full_env)
        return cls(Connection(parent.detach()), process, portable=portable or python is not None)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def alive(self) -> bool:
        return self.process is None or self.process.poll() is None

    def request(self, op: str, payload: Any = None, timeout_s: float | None = None) -> Any:
        """Send `(op, payload)` and return the reply's value; NoReply, PeerDied or RemoteError otherwise.

        `timeout_s` None waits for ever. The caller decides what a failure costs the peer: after
        NoReply or PeerDied the pipe is out of step and the channel should be stopped.
        """
        try:
            if self.portable:
                wire.send(self.conn, (op, payload))
            else:
                self.conn.send((op, payload))
            if timeout_s is not None and not self.conn.poll(timeout_s):
                raise NoReply(op, timeout_s)
            reply = wire.recv(self.conn) if self.portable else self.conn.recv()
        except (EOFError, OSError) as exc:
            raise PeerDied(op, self._exit_code(), type(exc).__name__) from exc
        if reply[0] == "error":
            _, type_name, message, trace = reply
            raise RemoteError(op, type_name, message, trace)
        return reply[1]

    def _exit_code(self) -> int | None:
        if self.process is None:
            return None
        try:
            return self.process.wait(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return None

    def close(self, timeout_s: float) -> None:
        """Ask a live peer to close (waiting up to `timeout_s` for its answer), then stop it."""
        if self.alive:
            try:
                self.request("close", None, timeout_s)
            except ChannelError:
                pass  # it goes all the same
        self.stop()

    def stop(self) -> None:
        """Close the pipe and kill the child if it is still running."""
        self.conn.close()
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(timeout=30)


def error_reply(exc: BaseException) -> tuple[str, str, str, str]:
    """The reply for a request whose handler raised `exc` (call inside the `except`)."""
    return ("error", type(exc).__name__, str(exc), traceback.format_exc())


def serve(conn: Any, handle: Callable[[str, Any], Any], portable: bool = False) -> None:
    """Answer each request with `handle(op, payload)` (ok, or error as data) until `close` or EOF.

    `close` is answered like any request (its handler releases what it holds) and then ends the
    loop, whether the handler returned or raised. `portable`: the peer speaks runtime.wire.
    """
    while True:
        try:
            op, payload = wire.recv(conn) if portable else conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[Any, ...] = ("ok", handle(op, payload))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller as data
            reply = error_reply(exc)
        if portable:
            wire.send(conn, reply)
        else:
            conn.send(reply)
        if op == "close":
            return
