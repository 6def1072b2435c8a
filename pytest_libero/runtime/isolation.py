"""`--libero-policy-isolation process`: the policy in its own interpreter, every call with a deadline.

The worker keeps a `ProcessPolicy` proxy; the real adapter is built in a child started as
`python -m pytest_libero.runtime.isolation FD` from the same spec (registered names, entry points and
`file.py:factory`; conftest-registered adapters exist only in the pytest process and cannot be
isolated this way). A policy that raises, crashes (even a segfault) or misses its deadline ends
that episode as a policy fault; the child is then discarded and rebuilt for the next episode.
"""

from __future__ import annotations

import os
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

from pytest_libero.core.policy import PolicySpec
from pytest_libero.errors import PolicyFault, PolicyLoadError
from pytest_libero.runtime.channel import Channel, NoReply, PeerDied, RemoteError, serve


class PolicyProcessError(PolicyFault):
    """The isolated policy raised, died or missed its deadline."""


class ProcessPolicy:
    """A Policy whose calls run in a child process built from `spec`."""

    def __init__(self, spec: PolicySpec, timeout_s: float, build_timeout_s: float = 600.0) -> None:
        self.spec, self.timeout_s, self.build_timeout_s = spec, timeout_s, build_timeout_s
        self._channel: Channel | None = None
        self.profile: dict[str, Any] = {}
        # time.monotonic() by which the current episode must end (set by the engine); None: no limit.
        self.deadline: float | None = None
        self._start()

    def set_episode_deadline(self, deadline: float | None) -> None:
        """Bound every call until `deadline` (time.monotonic()) by the time left; None lifts it."""
        self.deadline = deadline

    def _start(self) -> None:
        # Requests the build directly (not through `_call`): a child that dies at once is a load
        # error, not a reason to start another.
        self._channel = Channel.spawn("pytest_libero.runtime.isolation")
        try:
            profile = self._request("build", (self.spec.name, self.spec.kwargs, os.getcwd()), self.build_timeout_s)
        except PolicyProcessError as exc:
            self._discard()
            raise PolicyLoadError(f"policy {self.spec.name!r} could not be built in its own process: {exc}") from None
        self.profile = dict(profile or {}, isolation="process")

    def _discard(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.stop()

    def _call(self, op: str, payload: Any, timeout_s: float) -> Any:
        by_deadline = self.deadline is not None and self.deadline - time.monotonic() < timeout_s
        if by_deadline:
            assert self.deadline is not None
            timeout_s = self.deadline - time.monotonic()
            if timeout_s <= 0:
                raise PolicyProcessError(f"the episode deadline (--libero-episode-timeout) passed before policy {op}")
        if self._channel is None or not self._channel.alive:
            self._discard()
            self._start()
        return self._request(op, payload, timeout_s, by_deadline)

    def _request(self, op: str, payload: Any, timeout_s: float, by_deadline: bool = False) -> Any:
        """One request to the current child; a child that hangs or dies is discarded."""
        assert self._channel is not None
        try:
            return self._channel.request(op, payload, timeout_s)
        except NoReply:
            self._discard()
            if by_deadline:
                raise PolicyProcessError(f"the episode deadline (--libero-episode-timeout) passed inside policy "
                                         f"{op}; its process was killed") from None
            raise PolicyProcessError(f"policy {op} gave no answer within {timeout_s:g} s; "
                                     "its process was killed") from None
        except PeerDied as exc:
            self._discard()
            raise PolicyProcessError(f"policy process died during {op} (exit code {exc.exit_code})") from exc
        except RemoteError as exc:
            raise PolicyProcessError(f"policy.{op} raised {exc.type_name}: {exc.message}\n{exc.trace}") from None

    def reset(self, language: str) -> None:
        self._call("reset", language, self.timeout_s)

    def act(self, observation: Any) -> Any:
        return self._call("act", observation, self.timeout_s)

    def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close(timeout_s=30.0)


class _Requests:
    """The child's side: builds the policy from its spec, then forwards reset/act/close to it."""

    def __init__(self) -> None:
        self.policy: Any = None

    def __call__(self, op: str, payload: Any) -> Any:
        if op == "build":
            return self.build(*payload)
        if op == "reset":
            return self.policy.reset(payload)
        if op == "act":
            return self.policy.act(payload)
        if op == "close":
            from pytest_libero.runtime.policies import close_policy

            return close_policy(self.policy) if self.policy is not None else None
        raise ValueError(f"unknown request {op!r}")

    def build(self, name: str, kwargs: dict[str, Any], cwd: str) -> dict[str, Any]:
        from pytest_libero.core.policy import profile_of
        from pytest_libero.core.policy import adapter_file_hash
        from pytest_libero.runtime.policies import build_builtin, check_policy_object

        os.chdir(cwd)  # file.py:factory specs are relative to the user's directory
        spec = PolicySpec(name, kwargs)
        built = build_builtin(spec)
        if built is None:
            raise PolicyLoadError(f"{name!r} is not a built-in, entry-point or file.py:factory policy; "
                                  "conftest-registered adapters cannot run isolated")
        self.policy = check_policy_object(built, spec)
        return dict(profile_of(self.policy, spec), **adapter_file_hash(self.policy))


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])), _Requests())
