"""`--libero-policy-isolation process`: the policy in its own interpreter, every call with a deadline.

The worker keeps a `ProcessPolicy` proxy; the real adapter is built in a child started as
`python -m pytest_libero.runtime.isolation FD` from the same spec (registered names, entry points and
`file.py:factory`; conftest-registered adapters exist only in the pytest process and cannot be
isolated this way). A policy that raises, crashes (even a segfault) or misses its deadline ends
that episode as a policy fault; the child is then discarded and rebuilt for the next episode.

With `--libero-policy-python PATH` the child runs in that interpreter (runtime.interpreter: this
suite's packages by path, nothing else of its venv). Either way its calls cross runtime.wire, and
its profile notes the interpreter it ran in (`interpreter`: executable, Python and numpy versions).
"""

from __future__ import annotations

import os
import sys
from multiprocessing.connection import Connection
from typing import Any

from pytest_libero.core.policy import PolicySpec
from pytest_libero.errors import PolicyFault, PolicyLoadError
from pytest_libero.runtime.channel import serve
from pytest_libero.runtime.child import Child, Faults
from pytest_libero.runtime.interpreter import PolicyPython


class PolicyProcessError(PolicyFault):
    """The isolated policy raised, died or missed its deadline."""


# The policy's side of pytest_libero.runtime.child: every failure is a policy fault; a policy
# whose call raised keeps its process (the adapter's exception leaves it sound).
POLICY_FAULTS = Faults(
    fault=PolicyProcessError,
    before_deadline="the episode deadline (--libero-episode-timeout) passed before policy {op}",
    past_deadline="the episode deadline (--libero-episode-timeout) passed inside policy {op}; its process was killed",
    no_reply="policy {op} gave no answer within {timeout:g} s; its process was killed",
    died="policy process died during {op} (exit code {exit_code})",
    raised="policy.{op} raised {type_name}: {message}\n{trace}",
    discard_on_error=False,
)


class ProcessPolicy:
    """A Policy whose calls run in a child process built from `spec`."""

    def __init__(self, spec: PolicySpec, timeout_s: float, build_timeout_s: float = 600.0,
                 python: PolicyPython | None = None) -> None:
        self.spec, self.timeout_s, self.build_timeout_s, self.python = spec, timeout_s, build_timeout_s, python
        self.profile: dict[str, Any] = {}
        self._child = Child("pytest_libero.runtime.isolation", POLICY_FAULTS, on_start=self._build, python=python,
                            portable=True)
        self._child.start()

    @property
    def deadline(self) -> float | None:
        return self._child.deadline

    def set_deadline(self, deadline: float | None) -> None:
        """Bound every call until `deadline` (time.monotonic()) by the time left; None lifts it."""
        self._child.set_deadline(deadline)

    def _build(self, child: Child) -> None:
        # Asked without the episode deadline, within the build's own limit: a child that dies at
        # once is a load error, not a reason to start another.
        try:
            profile = child.ask("build", (self.spec.name, self.spec.kwargs, os.getcwd()), self.build_timeout_s)
        except PolicyProcessError as exc:
            text = str(exc) if self.python is None else self.python.install_hint(str(exc))
            raise PolicyLoadError(f"policy {self.spec.name!r} could not be built in its own process: {text}") from None
        self.profile = dict(profile or {}, isolation="process")

    def reset(self, language: str) -> None:
        self._child.request("reset", language, self.timeout_s)

    def act(self, observation: Any) -> Any:
        return self._child.request("act", observation, self.timeout_s)

    def close(self) -> None:
        self._child.close(timeout_s=30.0)


class _Requests:
    """The child's side: builds the policy from its spec, then forwards reset/act/close to it."""

    def __init__(self) -> None:
        self.policy: Any = None

    def __call__(self, op: str, payload: Any) -> Any:
        if op == "build":
            return self.build(*payload)
        if op == "check":
            return check(*payload)
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
        return dict(profile_of(self.policy, spec), **adapter_file_hash(self.policy), interpreter=where_it_runs())


def where_it_runs() -> dict[str, Any]:
    from pytest_libero.runtime.interpreter import where_it_runs as found

    return found()


def check(name: str, kwargs: dict[str, Any], cwd: str, paths: list[str]) -> dict[str, Any]:
    """The xdist controller's dry check (runtime.policies.dry_check), run in the policy's interpreter:
    the factory loads there and takes the kwargs. Returns where it ran."""
    from pytest_libero.runtime.policies import dry_check, resolve_factory, unknown_policy_message

    os.chdir(cwd)
    sys.path[:0] = [p for p in paths if p not in sys.path]
    spec = PolicySpec(name, kwargs)
    if resolve_factory(spec) is None:
        raise PolicyLoadError(unknown_policy_message(name))
    dry_check(spec)
    return where_it_runs()


def check_in(python: PolicyPython, spec: PolicySpec, paths: tuple[str, ...] = (), timeout_s: float = 600.0) -> None:
    """Run `check` in `python` (started for it, then closed); PolicyLoadError with the install hint."""
    from pytest_libero.runtime.channel import Channel, ChannelError, RemoteError

    channel = Channel.spawn("pytest_libero.runtime.isolation", python=python)
    try:
        channel.request("check", (spec.name, spec.kwargs, os.getcwd(), list(paths)), timeout_s)
    except RemoteError as exc:
        text = exc.message if exc.type_name == "PolicyLoadError" else f"{exc.type_name}: {exc.message}"
        raise PolicyLoadError(python.install_hint(text)) from None
    except ChannelError as exc:
        raise PolicyLoadError(f"{python.path} could not check it: {exc}") from None
    finally:
        channel.close(timeout_s=30.0)


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])), _Requests(), portable=True)
