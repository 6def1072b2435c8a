"""The rollout engine: one episode of a policy against a bench service. No pytest here.

`run_episode` returns an `EpisodeResult` for every ending the policy can cause (success,
truncation, voluntary stop, policy fault) and raises `EnvironmentFault` for the ones it cannot
(simulator or harness failure), with the partial result attached as `exc.partial`.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
from numpy.typing import NDArray

from pytest_libero.core.cells import Cell
from pytest_libero.core.chunk_evidence import chunk_entry
from pytest_libero.core.contract import STOP, Counters, Observation, seal_observation, validate_chunk
from pytest_libero.errors import ActionError, EnvironmentFault, PolicyFault
from pytest_libero.core.fingerprint import images_summary
from pytest_libero.core.hashing import image_hashes
from pytest_libero.core.outcomes import Outcome, Termination
from pytest_libero.core.policy import KeepsDeadline
from pytest_libero.core.protocol import Protocol as EvalProtocol

FrameSink = Callable[[Any, bool], None]  # (images, is_first_success_frame)


class Service(Protocol):
    """What the engine needs of a bench service (pytest_libero.runtime.service.BenchService)."""

    def start(self, payload: dict[str, Any]) -> dict[str, Any]: ...

    def submit(self, chunk: NDArray[Any], deliver: bool, frames: bool = False) -> dict[str, Any]: ...

    def finish(self, final_frame: bool = False) -> dict[str, Any]: ...


@dataclass
class EpisodeResult:
    """The outcome and accounting of one episode, as plain data."""

    cell_id: str
    suite: str
    task_index: int
    init_index: int
    seed: int
    language: str = ""
    outcome: Outcome = Outcome.ENV_ERROR
    termination: Termination = Termination.ENV_ERROR
    message: str = ""
    policy_calls: int = 0
    action_decisions: int = 0
    executed_controls: int = 0
    settling_controls: int = 0
    control_cap: int = 0
    cap_source: str = ""
    max_policy_calls: int | None = None
    replan_interval: int = 0
    first_success_control: int | None = None
    first_success_policy_call: int | None = None
    observations: list[dict[str, Any]] = field(default_factory=list)
    chunks: list[dict[str, Any]] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)
    private: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    protocol_identity: str = ""
    # The install check (core/fingerprint.py): what the first observation was (the service's
    # fingerprint plus the delivered images' summaries), and the check's record block.
    install_observed: dict[str, Any] | None = None
    install_check: dict[str, Any] | None = None

    def counters_line(self) -> str:
        return (f"{self.policy_calls} policy calls, {self.action_decisions} action decisions, "
                f"{self.executed_controls} executed controls, {self.settling_controls} settling controls "
                f"(cap {self.control_cap}: {self.cap_source})")


class PolicyDeadline(PolicyFault):
    """The episode deadline passed inside an in-process policy call (it was interrupted)."""


def service_grace_s(deadline_s: float) -> float:
    """How far past the episode deadline a bench service request may run: 10% of it, at most 30 s.

    A service reply that comes in the grace is charged to whoever held most of the episode's
    time (the policy's share used the time up, or the service's did); a service that misses even
    the grace is killed (env_error). After a deadline charged to the policy, the service's
    evidence (`finish`) is collected within the grace.
    """
    return min(30.0, 0.1 * deadline_s)


@contextlib.contextmanager
def _policy_deadline(deadline: float | None, enabled: bool) -> Any:
    """Interrupt a policy call still running at `deadline` (SIGALRM; main thread of POSIX only).

    An in-process call cannot be killed, only interrupted: this ends a policy that sleeps, waits
    on a socket or loops in Python; a hang inside C code that holds the GIL needs
    --libero-policy-isolation process, whose per-call deadline kills the policy's process.
    """
    if deadline is None or not enabled or threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "setitimer"):
        yield
        return
    left = deadline - time.monotonic()
    if left <= 0:
        raise PolicyDeadline("the episode deadline (--libero-episode-timeout) passed before the policy call")

    def expire(signum: int, frame: Any) -> None:
        raise PolicyDeadline("the episode deadline (--libero-episode-timeout) passed inside the policy call")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, left)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass(frozen=True, slots=True)
class EpisodeSettings:
    """How the engine runs an episode beyond the protocol: what the run's options decide.

    `allow_source_mismatch`: the service runs even if the installed LIBERO files differ from the
    frozen inventory. `deadline_s` bounds the whole episode, charged to whoever held the time:
    a policy call still running at the deadline is interrupted (with `interrupt_policy`, in
    process) or killed (a policy that keeps its own deadline, core.policy.KeepsDeadline) and one that
    returns after it is a policy fault all the same (policy_error); a service request gets the
    time left plus a grace (service_grace_s): one that misses it is killed (env_error), a reply
    in the grace that leaves the episode going is charged to the policy when its calls held at
    least half of the episode's time, else to the service. `video_rate` "delivered": one video
    frame per delivered observation and a final frame rendered when the episode ends; "control":
    the first observation and then every executed control's render. `reuse_env` lets the
    service keep its environment between episodes of one task (bit-identical; see
    pytest_libero.benchmarks.libero.service.EnvCache).
    """

    allow_source_mismatch: bool = False
    deadline_s: float | None = None
    interrupt_policy: bool = True
    video_rate: str = "delivered"
    reuse_env: bool = True


DEFAULT_SETTINGS = EpisodeSettings()


def run_episode(service: Service, policy: Any, cell: Cell, protocol: EvalProtocol,
                settings: EpisodeSettings = DEFAULT_SETTINGS, on_frame: FrameSink | None = None) -> EpisodeResult:
    """Run one episode of `policy` on `cell` under `protocol` (and `settings`).

    Every delivered observation is hashed into `result.observations`. With `on_frame`, video
    frames are passed on at `settings.video_rate`.
    """
    deadline = None if settings.deadline_s is None else time.monotonic() + settings.deadline_s
    # A service may not keep deadlines (test doubles); BenchService does. Its requests may run into
    # the grace past the episode deadline (service_grace_s): who held the time is decided here.
    service_deadline = service if isinstance(service, KeepsDeadline) and deadline is not None else None
    if service_deadline is not None:
        assert deadline is not None and settings.deadline_s is not None
        service_deadline.set_deadline(deadline + service_grace_s(settings.deadline_s))
    # A policy that keeps its own deadline (ProcessPolicy), when the engine does not interrupt it,
    # is told the episode's: a hung isolated call is killed at it.
    policy_deadline = policy if isinstance(policy, KeepsDeadline) and not settings.interrupt_policy else None
    if policy_deadline is not None:
        policy_deadline.set_deadline(deadline)
    try:
        return _Rollout(service, policy, cell, protocol, settings, on_frame, deadline).run()
    finally:
        if service_deadline is not None:
            service_deadline.set_deadline(None)
        if policy_deadline is not None:
            policy_deadline.set_deadline(None)


def start_payload(cell: Cell, protocol: EvalProtocol, settings: EpisodeSettings) -> dict[str, Any]:
    """The bench service's `start` of `cell`'s episode (the preflight sends the same one)."""
    return {
        "cell": {"suite": cell.suite, "task_index": cell.task_index, "init_index": cell.init_index,
                 "seed": cell.seed},
        "control_cap": protocol.control_cap(cell.suite), "settle_controls": protocol.settle_controls,
        "settle_action": list(protocol.settle_action or protocol.spec.settle_action),
        "allow_mismatch": settings.allow_source_mismatch, "track": protocol.track,
        "reuse_env": settings.reuse_env,
        # Another benchmark adapter's protocol options (none for libero).
        **({"options": dict(protocol.benchmark_options)} if protocol.benchmark_options else {}),
    }


class _Rollout:
    """One episode in progress: the engine's state, and the named steps of its loop."""

    def __init__(self, service: Service, policy: Any, cell: Cell, protocol: EvalProtocol,
                 settings: EpisodeSettings, on_frame: FrameSink | None, deadline: float | None) -> None:
        self.service, self.policy, self.cell, self.protocol = service, policy, cell, protocol
        self.settings, self.on_frame, self.deadline = settings, on_frame, deadline
        self.every_control = on_frame is not None and settings.video_rate == "control"
        self.policy_s = 0.0
        # Who held the episode's time: the policy's calls (reset and act); the rest is the service's.
        self.started = time.monotonic()
        self.policy_held_s = 0.0
        self.deadline_charged = False  # the deadline passed on the policy's time (policy_error)
        self.result = EpisodeResult(
            cell_id=cell.id, suite=cell.suite, task_index=cell.task_index, init_index=cell.init_index,
            seed=cell.seed, control_cap=protocol.control_cap(cell.suite), cap_source=protocol.cap_source(cell.suite),
            max_policy_calls=protocol.max_policy_calls if protocol.budget == "decisions" else None,
            replan_interval=protocol.replan_interval, protocol_identity=protocol.identity,
        )

    def run(self) -> EpisodeResult:
        result = self.result
        try:
            try:
                images, state = self._start()
                if not self._reset_policy():
                    images = None
                while images is not None:
                    decision = self._decide(self._observe(images, state))
                    if decision is None:
                        break
                    images, state = self._execute(*decision)
            except _PolicyHeldTheTime:
                pass  # the policy fault is recorded; the service's evidence is still collected
            self._finish()
        except EnvironmentFault as exc:
            result.outcome, result.termination = Outcome.ENV_ERROR, Termination.ENV_ERROR
            result.message = str(exc).split("\n", 1)[0]
            result.error = traceback.format_exc()
            result.timing["policy_s"] = self.policy_s
            exc.partial = result  # type: ignore[attr-defined]
            raise
        return result

    def _start(self) -> tuple[Any, Any]:
        """Start the episode in the service: reset, settle; the first images and state."""
        result = self.result
        started = self.service.start(start_payload(self.cell, self.protocol, self.settings))
        result.language = started["language"]
        result.settling_controls = started["settling_controls"]
        fingerprint = started.get("fingerprint")
        if fingerprint is not None and "unavailable" in fingerprint:
            result.warnings.append(f"install check unavailable: the service's fingerprint failed: "
                                   f"{fingerprint['unavailable']}")
        elif fingerprint is not None:  # no extra simulation: the first observation's own
            result.install_observed = dict(fingerprint, images=images_summary(started["observation"]))
        self._charge_late_reply("start")
        return started["observation"], started.get("state")

    def _call_policy(self, name: str, call: Callable[[], Any]) -> tuple[bool, Any]:
        """(True, value) of a policy call under the deadline; (False, None) after a policy fault.

        An `EnvironmentFault` (a policy server's) goes on: it is no fault of the policy.
        """
        tick = time.monotonic()
        try:
            with _policy_deadline(self.deadline, self.settings.interrupt_policy):
                value = call()
        except EnvironmentFault:
            raise
        except Exception as exc:  # noqa: BLE001 - any other adapter exception is a policy fault
            self.deadline_charged = isinstance(exc, PolicyDeadline) or self._past_deadline()
            _policy_fault(self.result, f"{name} raised {type(exc).__name__}: {exc}", exc)
            return False, None
        finally:
            self.policy_held_s += time.monotonic() - tick
        if self._past_deadline():
            # Not interrupted (a non-main thread, C code holding the GIL, or the policy caught the
            # interruption): it held the turn when the time ran out all the same.
            assert self.deadline is not None
            self.deadline_charged = True
            _policy_fault(self.result, f"{name} returned {time.monotonic() - self.deadline:.1f} s after the episode "
                          f"deadline (--libero-episode-timeout) passed inside the policy call", None)
            return False, None
        return True, value

    def _past_deadline(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def _charge_late_reply(self, op: str) -> None:
        """Called when a service reply leaves the episode going: was it past the deadline?

        Then the episode deadline passed while the service worked (its reply came in the grace):
        if the policy's calls held at least half of the episode's time, the policy used the time
        up (policy_error, _PolicyHeldTheTime); otherwise the service did (EnvironmentFault). A
        reply that ends the episode (success, the cap) keeps its verdict; a service that misses
        the grace as well raises EnvironmentFault from the request itself.
        """
        if self._past_deadline():
            elapsed = time.monotonic() - self.started
            shares = (f"the policy held {self.policy_held_s:.1f} s of it, the bench service and the harness "
                      f"{elapsed - self.policy_held_s:.1f} s")
            message = (f"the episode deadline (--libero-episode-timeout, {self.settings.deadline_s:g} s) passed "
                       f"while the bench service worked on {op!r}; {shares}")
            if self.policy_held_s < elapsed / 2:
                raise EnvironmentFault(message)
            self.deadline_charged = True
            _policy_fault(self.result, f"{message}: the policy's share used the time up", None)
            raise _PolicyHeldTheTime

    def _reset_policy(self) -> bool:
        language = self.result.language
        return self._call_policy("policy.reset", lambda: self.policy.reset(language))[0]

    def _observe(self, images: Any, state: Any) -> Observation:
        """Seal the observation the policy is about to get, count the call, hash it (and film it)."""
        result = self.result
        counters = Counters(result.policy_calls, result.action_decisions, result.executed_controls)
        observation = seal_observation(result.language, images, counters, self.protocol.spec, state,
                                       self.protocol.track)
        if self.on_frame is not None and not (self.every_control and result.policy_calls > 0):
            self.on_frame(observation.images, False)
        result.policy_calls += 1
        result.observations.append({"policy_call": result.policy_calls,
                                    "executed_controls": result.executed_controls,
                                    "sha256": image_hashes(observation.images)})
        if observation.state is not None:
            result.observations[-1]["state"] = observation.state.tolist()
        return observation

    def _decide(self, observation: Observation) -> tuple[NDArray[Any], Any] | None:
        """The policy's valid chunk (and what it returned); None when the episode ended here.

        It ends on an adapter exception or an invalid action (policy_error) and on STOP (failure).
        """
        result = self.result
        tick = time.perf_counter()
        try:
            answered, raw = self._call_policy("policy.act", lambda: self.policy.act(observation))
        finally:
            self.policy_s += time.perf_counter() - tick
        if not answered:
            return None
        if raw is STOP:
            result.chunks.append({"policy_call": result.policy_calls, "stop": True})
            result.outcome, result.termination = Outcome.FAILURE, Termination.POLICY_STOP
            result.message = f"policy returned STOP before native success: {result.counters_line()}"
            return None
        try:
            chunk = validate_chunk(raw, self.protocol.spec, self.protocol.max_chunk_rows)
        except ActionError as exc:
            result.chunks.append({"policy_call": result.policy_calls, "invalid": _describe_raw(raw), "executed": 0})
            _policy_fault(result, f"invalid action at policy call {result.policy_calls}: {exc}", None)
            return None
        result.action_decisions += 1
        return chunk, raw

    def _execute(self, chunk: NDArray[Any], raw: Any) -> tuple[Any, Any]:
        """Submit the chunk's declared prefix; the next images and state, or (None, None) at the end.

        It ends at native success or at the cap (the control cap, or the last allowed policy call).
        """
        result = self.result
        last_call = result.max_policy_calls is not None and result.policy_calls >= result.max_policy_calls
        step = self.service.submit(chunk[: self.protocol.replan_interval], deliver=not last_call,
                                   frames=self.every_control)
        for index, frame in enumerate(step.get("frames") or ()):
            assert self.on_frame is not None
            self.on_frame(frame, step["success"] and index == len(step["frames"]) - 1)
        result.executed_controls = step["executed_total"]
        returned = np.asarray(raw)  # no copy of an array; a list is at most max_chunk_rows rows
        result.chunks.append(chunk_entry(result.policy_calls, chunk, returned.dtype, returned.shape,
                                         step["executed"]))
        if step["success"]:
            result.first_success_control = result.executed_controls
            result.first_success_policy_call = result.policy_calls
            result.outcome, result.termination = Outcome.SUCCESS, Termination.SUCCESS
            result.message = f"native success at control {result.executed_controls}: {result.counters_line()}"
            return None, None
        if step["truncated"] or last_call:
            result.outcome, result.termination = Outcome.FAILURE, Termination.TRUNCATION
            result.message = f"no native success within the cap: {result.counters_line()}"
            return None, None
        self._charge_late_reply("submit")
        return step["observation"], step.get("state")

    def _finish(self) -> None:
        """The service's evidence (and the video's last frame); the engine's count must agree."""
        result = self.result
        if self._past_deadline():
            # The episode ended on the deadline: its evidence gets the grace from now.
            assert self.settings.deadline_s is not None
            if isinstance(self.service, KeepsDeadline):
                self.service.set_deadline(time.monotonic() + service_grace_s(self.settings.deadline_s))
        try:
            result.private = self.service.finish(final_frame=self.on_frame is not None and not self.every_control)
        except EnvironmentFault as exc:
            if not self.deadline_charged:
                raise
            # The verdict (the policy held the time) stands; what the service could not give is said.
            result.private = {}
            result.warnings.append(f"the bench service's evidence after the deadline is missing: {exc}")
            result.timing["policy_s"] = self.policy_s
            return
        final_frame = result.private.pop("final_frame", None)
        if self.on_frame is not None and final_frame is not None:
            self.on_frame(final_frame, result.outcome == Outcome.SUCCESS)
        if result.private.get("first_success_control") != result.first_success_control:
            raise EnvironmentFault("service and engine disagree on the first-success control")
        result.timing = dict(result.private.pop("timing", {}), policy_s=self.policy_s)


class _PolicyHeldTheTime(Exception):
    """The deadline passed during a service request, on the policy's share of the time (recorded)."""


def _policy_fault(result: EpisodeResult, message: str, exc: BaseException | None) -> None:
    result.outcome, result.termination = Outcome.POLICY_ERROR, Termination.POLICY_ERROR
    result.message = f"{message} ({result.counters_line()})"
    if exc is not None:
        result.error = "".join(traceback.format_exception(exc))


def _describe_raw(raw: Any) -> dict[str, Any]:
    """What an invalid return value was, without trusting it to serialize."""
    shape = getattr(raw, "shape", None)
    if isinstance(raw, (list, tuple)) and len(raw) > 8:  # repr of a long list costs its length
        text = f"{repr(raw[:8])[:-1]}, ... ({len(raw)} items)]"
    else:
        text = repr(raw)  # numpy summarizes a large array's repr
    return {"type": type(raw).__name__, "dtype": str(getattr(raw, "dtype", "")) or None,
            "shape": list(shape) if isinstance(shape, tuple) else None, "repr": text[:300]}
