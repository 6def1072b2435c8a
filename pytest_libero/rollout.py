"""The rollout engine: one episode of a policy against a bench service. No pytest here.

`run_episode` returns an `EpisodeResult` for every ending the policy can cause (success,
truncation, voluntary stop, policy fault) and raises `EnvironmentFault` for the ones it cannot
(simulator or harness failure), with the partial result attached as `exc.partial`.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal, Protocol

import numpy as np

from pytest_libero.catalog import Cell
from pytest_libero.contract import STOP, Counters, seal_observation, validate_chunk
from pytest_libero.errors import ActionError, EnvironmentFault
from pytest_libero.evidence import image_hashes
from pytest_libero.protocol import Protocol as EvalProtocol

Outcome = Literal["success", "failure", "policy_error", "env_error"]
FrameSink = Callable[[Any, bool], None]  # (images, is_first_success_frame)
Termination = Literal["success", "truncation", "policy_stop", "policy_error", "env_error"]


class Service(Protocol):
    """What the engine needs of a bench service (pytest_libero.service.BenchService)."""

    def start(self, payload: dict[str, Any]) -> dict[str, Any]: ...

    def submit(self, chunk: np.ndarray, deliver: bool) -> dict[str, Any]: ...

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
    outcome: Outcome = "env_error"
    termination: Termination = "env_error"
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
    policy: dict[str, Any] = field(default_factory=dict)

    def counters_text(self) -> str:
        return (f"{self.policy_calls} policy calls, {self.action_decisions} action decisions, "
                f"{self.executed_controls} executed controls, {self.settling_controls} settling controls "
                f"(cap {self.control_cap}: {self.cap_source})")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_episode(service: Service, policy: Any, cell: Cell, protocol: EvalProtocol,
                allow_source_mismatch: bool = False, on_frame: FrameSink | None = None) -> EpisodeResult:
    """Run one episode of `policy` on `cell` under `protocol`.

    Every delivered observation is hashed into `result.observations` and, with `on_frame`, passed
    on (for the video) together with a final frame rendered when the episode ends.
    """
    result = EpisodeResult(
        cell_id=cell.id, suite=cell.suite, task_index=cell.task_index, init_index=cell.init_index,
        seed=cell.seed, control_cap=protocol.control_cap(cell.suite), cap_source=protocol.cap_source(cell.suite),
        max_policy_calls=protocol.max_policy_calls if protocol.budget == "decisions" else None,
        replan_interval=protocol.replan_interval, protocol_identity=protocol.identity,
    )
    policy_s = 0.0
    try:
        started = service.start({
            "cell": {"suite": cell.suite, "task_index": cell.task_index, "init_index": cell.init_index,
                     "seed": cell.seed},
            "control_cap": result.control_cap, "settle_controls": protocol.settle_controls,
            "allow_mismatch": allow_source_mismatch, "track": protocol.track,
        })
        result.language = started["language"]
        result.settling_controls = started["settling_controls"]
        images, state = started["observation"], started.get("state")
        try:
            policy.reset(result.language)
        except EnvironmentFault:
            raise
        except Exception as exc:  # noqa: BLE001 - any other adapter exception is a policy fault
            _policy_fault(result, f"policy.reset raised {type(exc).__name__}: {exc}", exc)
            images = None
        while images is not None:
            counters = Counters(result.policy_calls, result.action_decisions, result.executed_controls)
            observation = seal_observation(result.language, images, counters, state, protocol.track)
            if on_frame is not None:
                on_frame(observation.images, False)
            result.policy_calls += 1
            result.observations.append({"policy_call": result.policy_calls,
                                        "executed_controls": result.executed_controls,
                                        "sha256": image_hashes(observation.images)})
            if observation.state is not None:
                result.observations[-1]["state"] = observation.state.tolist()
            tick = time.perf_counter()
            try:
                raw = policy.act(observation)
            except EnvironmentFault:
                policy_s += time.perf_counter() - tick
                raise
            except Exception as exc:  # noqa: BLE001
                policy_s += time.perf_counter() - tick
                _policy_fault(result, f"policy.act raised {type(exc).__name__}: {exc}", exc)
                break
            policy_s += time.perf_counter() - tick
            if raw is STOP:
                result.chunks.append({"policy_call": result.policy_calls, "stop": True})
                result.outcome, result.termination = "failure", "policy_stop"
                result.message = f"policy returned STOP before native success: {result.counters_text()}"
                break
            try:
                chunk = validate_chunk(raw)
            except ActionError as exc:
                result.chunks.append({"policy_call": result.policy_calls, "invalid": _describe_raw(raw),
                                      "executed": 0})
                _policy_fault(result, f"invalid action at policy call {result.policy_calls}: {exc}", None)
                break
            result.action_decisions += 1
            prefix = chunk[: protocol.replan_interval]
            last_call = result.max_policy_calls is not None and result.policy_calls >= result.max_policy_calls
            step = service.submit(prefix, deliver=not last_call)
            result.executed_controls = step["executed_total"]
            result.chunks.append({"policy_call": result.policy_calls, "returned": chunk.tolist(),
                                  "dtype": str(np.asarray(raw).dtype), "executed": step["executed"]})
            if step["success"]:
                result.first_success_control = result.executed_controls
                result.first_success_policy_call = result.policy_calls
                result.outcome, result.termination = "success", "success"
                result.message = f"native success at control {result.executed_controls}: {result.counters_text()}"
                break
            if step["truncated"] or last_call:
                result.outcome, result.termination = "failure", "truncation"
                result.message = f"no native success within the cap: {result.counters_text()}"
                break
            images, state = step["observation"], step.get("state")
        result.private = service.finish(final_frame=on_frame is not None)
        final_frame = result.private.pop("final_frame", None)
        if on_frame is not None and final_frame is not None:
            on_frame(final_frame, result.outcome == "success")
        if result.private.get("first_success_control") != result.first_success_control:
            raise EnvironmentFault("service and engine disagree on the first-success control")
        result.timing = dict(result.private.pop("timing", {}), policy_s=policy_s)
    except EnvironmentFault as exc:
        result.outcome = result.termination = "env_error"
        result.message = str(exc).split("\n", 1)[0]
        result.error = traceback.format_exc()
        result.timing["policy_s"] = policy_s
        exc.partial = result  # type: ignore[attr-defined]
        raise
    return result


def _policy_fault(result: EpisodeResult, message: str, exc: BaseException | None) -> None:
    result.outcome, result.termination = "policy_error", "policy_error"
    result.message = f"{message} ({result.counters_text()})"
    if exc is not None:
        result.error = "".join(traceback.format_exception(exc))


def _describe_raw(raw: Any) -> dict[str, Any]:
    """What an invalid return value was, without trusting it to serialize."""
    shape = getattr(raw, "shape", None)
    return {"type": type(raw).__name__, "dtype": str(getattr(raw, "dtype", "")) or None,
            "shape": list(shape) if isinstance(shape, tuple) else None, "repr": repr(raw)[:300]}
