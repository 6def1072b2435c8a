"""A child process the worker sends requests to (the bench service, an isolated policy).

One mechanism for both sides: the child is started when first needed and again after it was
discarded; every request waits at most its timeout, bounded by the episode deadline the engine
sets (`set_deadline`); a child that does not answer in time or dies is killed and discarded, and
the failure is raised as the side's own fault (EnvironmentFault for the service, a policy fault
for the policy) in the side's own words. The charging rules are docs/how-it-works.md "Deadlines".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_libero.runtime.channel import Channel, NoReply, PeerDied, RemoteError
from pytest_libero.runtime.interpreter import PolicyPython


@dataclass(frozen=True, slots=True)
class Faults:
    """How one side names what went wrong: its exception type and a message per failure.

    Each message is a `str.format` template over `op` (the request), and: `timeout` (seconds,
    `no_reply`), `exit_code` and `cause` (`died`), `type_name`, `message` and `trace` (`raised`).
    `discard_on_error`: a child whose handler raised is discarded too (the service: its simulator
    may be left in any state), or kept (the policy: an adapter's exception leaves its process sound,
    and rebuilding it would load the model again).
    """

    fault: type[Exception]
    before_deadline: str  # the deadline passed before the request was sent
    past_deadline: str  # no reply before the deadline: killed
    no_reply: str  # no reply within the request's own timeout: killed
    died: str
    raised: str
    discard_on_error: bool


class Child:
    """A lazily started child process (`python -m module FD`) whose requests have deadlines.

    `on_start(child)` runs after each start, before the request that needed it (the isolated
    policy builds its adapter there); what it raises goes to that request's caller, and the child
    is discarded. `python`: another interpreter to run it in; `portable`: the child speaks
    runtime.wire (the policy's children do, whichever interpreter runs them).
    """

    def __init__(self, module: str, faults: Faults, env: dict[str, str] | None = None,
                 on_start: Callable[[Child], None] | None = None, python: PolicyPython | None = None,
                 portable: bool = False) -> None:
        self.module, self.faults, self.on_start = module, faults, on_start
        self.python, self.portable = python, portable
        self.env = dict(env or {})
        # time.monotonic() by which the current episode must end (set by the engine); None: no limit.
        self.deadline: float | None = None
        self.restarts = 0  # starts after a child died between requests
        self._channel: Channel | None = None

    @property
    def pid(self) -> int | None:
        return self._channel.pid if self._channel is not None else None

    def set_deadline(self, deadline: float | None) -> None:
        """Bound every request until `deadline` (time.monotonic()) by the time left; None lifts it."""
        self.deadline = deadline

    def start(self) -> None:
        """Start the child unless a live one is running."""
        if self._channel is not None and self._channel.alive:
            return
        if self._channel is not None:
            self.restarts += 1
        self.discard()
        self._channel = Channel.spawn(self.module, self.env, self.python, self.portable)
        if self.on_start is not None:
            try:
                self.on_start(self)
            except BaseException:
                self.discard()  # a child whose start-up failed is not kept
                raise

    def discard(self) -> None:
        """Kill the child without asking (it may be hung); the next request starts another."""
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.stop()

    def close(self, timeout_s: float) -> None:
        """Ask the child to release what it holds (up to `timeout_s`), then stop it."""
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close(timeout_s=timeout_s)

    def request(self, op: str, payload: Any, timeout_s: float) -> Any:
        """The child's answer to `(op, payload)` within `timeout_s` and the deadline, or the side's fault."""
        by_deadline = self.deadline is not None and self.deadline - time.monotonic() < timeout_s
        if by_deadline:
            assert self.deadline is not None
            timeout_s = self.deadline - time.monotonic()
            if timeout_s <= 0:
                raise self.faults.fault(self.faults.before_deadline.format(op=op))
        self.start()
        return self.ask(op, payload, timeout_s, by_deadline)

    def ask(self, op: str, payload: Any, timeout_s: float, by_deadline: bool = False) -> Any:
        """One request to the running child, without the deadline (`on_start` asks this way)."""
        assert self._channel is not None, "ask before start"
        faults = self.faults
        try:
            return self._channel.request(op, payload, timeout_s)
        except NoReply:
            self.discard()
            template = faults.past_deadline if by_deadline else faults.no_reply
            raise faults.fault(template.format(op=op, timeout=timeout_s)) from None
        except PeerDied as exc:
            self.discard()
            raise faults.fault(faults.died.format(op=op, exit_code=exc.exit_code, cause=exc.cause)) from exc
        except RemoteError as exc:
            if faults.discard_on_error:
                self.discard()
            raise faults.fault(faults.raised.format(op=op, type_name=exc.type_name, message=exc.message,
                                                    trace=exc.trace)) from None
