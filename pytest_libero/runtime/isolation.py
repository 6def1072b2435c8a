"""`--libero-policy-isolation process`: the policy in its own interpreter, every call with a deadline.

The worker keeps a `ProcessPolicy` proxy; the real adapter is built in a child started as
`python -m pytest_libero.runtime.isolation FD` from the same spec (registered names, entry points and
`file.py:factory`; conftest-registered adapters exist only in the pytest process and cannot be
isolated this way). A policy that raises, crashes (even a segfault) or misses its deadline ends
that episode as a policy fault; the child is then discarded and rebuilt for the next episode.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from pytest_libero.runtime import child
from pytest_libero.errors import PolicyFault, PolicyLoadError
from pytest_libero.core.policy import PolicySpec


class PolicyProcessError(PolicyFault):
    """The isolated policy raised, died or missed its deadline."""


class ProcessPolicy:
    """A Policy whose calls run in a child process built from `spec`."""

    def __init__(self, spec: PolicySpec, timeout_s: float, build_timeout_s: float = 600.0) -> None:
        self.spec, self.timeout_s, self.build_timeout_s = spec, timeout_s, build_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self.profile: dict[str, Any] = {}
        self._start()

    def _start(self) -> None:
        self._process, self._conn = child.spawn("pytest_libero.runtime.isolation")
        try:
            profile = self._call("build", (self.spec.name, self.spec.kwargs, os.getcwd()), self.build_timeout_s)
        except PolicyProcessError as exc:
            raise PolicyLoadError(f"policy {self.spec.name!r} could not be built in its own process: {exc}") from None
        self.profile = dict(profile or {}, isolation="process")

    def _discard(self) -> None:
        process, conn = self._process, self._conn
        self._process = self._conn = None
        child.stop(process, conn)

    def _call(self, op: str, payload: Any, timeout_s: float) -> Any:
        if self._process is None or self._process.poll() is not None:
            self._discard()
            self._start()
        assert self._conn is not None and self._process is not None
        try:
            self._conn.send((op, payload))
            if not self._conn.poll(timeout_s):
                self._discard()
                raise PolicyProcessError(f"policy {op} gave no answer within {timeout_s:g} s; its process was killed")
            reply = self._conn.recv()
        except (EOFError, OSError) as exc:
            code = self._process.wait(timeout=10) if self._process is not None else None
            self._discard()
            raise PolicyProcessError(f"policy process died during {op} (exit code {code})") from exc
        if reply[0] == "error":
            raise PolicyProcessError(f"policy.{op} raised {reply[1]}\n{reply[2]}")
        return reply[1]

    def reset(self, language: str) -> None:
        self._call("reset", language, self.timeout_s)

    def act(self, observation: Any) -> Any:
        return self._call("act", observation, self.timeout_s)

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            try:
                self._call("close", None, 30.0)
            except PolicyProcessError:
                pass
        self._discard()


def _serve(conn: Connection) -> None:
    from pytest_libero.results.files import adapter_file_hash
    from pytest_libero.runtime.policies import build_builtin, check_policy_object
    from pytest_libero.core.policy import profile_of

    policy: Any = None
    while True:
        try:
            op, payload = conn.recv()
        except EOFError:
            return
        try:
            if op == "build":
                name, kwargs, cwd = payload
                os.chdir(cwd)  # file.py:factory specs are relative to the user's directory
                spec = PolicySpec(name, kwargs)
                built = build_builtin(spec)
                if built is None:
                    raise PolicyLoadError(f"{name!r} is not a built-in, entry-point or file.py:factory policy; "
                                          "conftest-registered adapters cannot run isolated")
                policy = check_policy_object(built, spec)
                value: Any = dict(profile_of(policy, spec), **adapter_file_hash(policy))
            elif op == "reset":
                value = policy.reset(payload)
            elif op == "act":
                value = policy.act(payload)
            elif op == "close":
                value = policy.close() if policy is not None else None
                conn.send(("ok", value))
                return
            else:
                raise ValueError(f"unknown request {op!r}")
            conn.send(("ok", value))
        except Exception as exc:  # noqa: BLE001 - every failure goes back as data
            conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1])))
