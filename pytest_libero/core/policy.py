"""The policy seam: the `Policy` protocol, the frozen `PolicySpec` and the recorded profile.

How a spec becomes a policy object is pytest_libero.runtime.policies.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from pytest_libero.core.contract import Observation, Stop, check_image_convention
from pytest_libero.core.hashing import sha256_bytes
from pytest_libero.errors import PolicyLoadError

ActionChunk = Any  # array-like of shape (7,) or (n, 7); validated by contract.validate_chunk


@runtime_checkable
class Policy(Protocol):
    """What the harness calls. Built once per worker; reset once per episode."""

    def reset(self, language: str) -> None:
        """Start a new episode of the task described by `language`."""

    def act(self, observation: Observation) -> ActionChunk | Stop:
        """Return an action chunk (n, 7) in [-1, 1], a single (7,) action, or STOP."""

    def close(self) -> None:
        """Optional (the harness calls it when present): release resources at the end of the worker's session."""


@runtime_checkable
class KeepsDeadline(Protocol):
    """A policy or bench service that bounds its own calls by the episode deadline.

    The engine (pytest_libero.core.rollout) tells it the deadline instead of interrupting it: it
    runs its calls in a child process it can kill (ProcessPolicy, BenchService). Optional: the
    engine checks for it with isinstance.
    """

    def set_deadline(self, deadline: float | None) -> None:
        """Bound every call until `deadline` (time.monotonic()) by the time left; None lifts it."""


@dataclass(frozen=True, slots=True)
class BatchRequest:
    """One pending decision in a batch (`--libero-policy-isolation host`).

    `key` names the episode (unique within the run: the host never reuses one); `first` is True
    on the episode's first call, where a policy's `reset(language)` would have started it (the
    language is `observation.language`). A batched policy keeps any per-episode state under `key`.
    """

    key: str
    observation: Observation
    first: bool


@runtime_checkable
class BatchedPolicy(Protocol):
    """Optional: a policy the policy host may call with several episodes' observations at once.

    `act_batch(requests)` returns one entry per request, in order: a chunk, STOP, or an Exception
    instance, which fails that request's episode only (policy_error). An exception raised by
    `act_batch` itself fails every episode of the batch (the host cannot tell whose it was). The
    host never calls `reset` of a batched policy (episodes interleave; `first` starts one) and
    calls `end_episode(key)`, when the policy has it, once an episode is over. The same object
    still needs `reset` and `act` for runs without the host (docs/writing-adapters.md).
    """

    def act_batch(self, requests: Sequence[BatchRequest]) -> Sequence[ActionChunk | Stop | Exception]:
        """One answer per request, in the requests' order."""


def is_batched(policy: Any) -> bool:
    """Whether `policy` has a callable `act_batch` (BatchedPolicy)."""
    return callable(getattr(policy, "act_batch", None))


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """Enough to rebuild the policy: a registered name or `path/to/file.py:factory`, and kwargs."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def is_file(self) -> bool:
        return ".py:" in self.name

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kwargs": self.kwargs}


def parse_policy_kwargs(text: str | None) -> dict[str, Any]:
    """Parse --libero-policy-kwargs; raise ValueError with the fix on bad input."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"--libero-policy-kwargs {text!r} is not valid JSON ({exc}); "
                         "pass an object such as '{\"seed\": 3}'") from None
    if not isinstance(value, dict):
        raise ValueError(f"--libero-policy-kwargs {text!r} must be a JSON object, not {type(value).__name__}")
    return value


def profile_of(policy: Any, spec: PolicySpec) -> dict[str, Any]:
    """The model profile recorded on every result. Adapters may define `profile` (a dict)."""
    declared = getattr(policy, "profile", None)
    profile = dict(declared) if isinstance(declared, dict) else {}
    profile.setdefault("kind", "capability")
    profile["spec"] = spec.as_dict()
    return profile


def adapter_file_hash(policy: Any) -> dict[str, str | None]:
    """sha256 of the file that defines the policy's class (the adapter code actually run).

    A wrapper that keeps the user's object as `adapter` (RoboMemArena-style) is looked through.
    """
    policy = getattr(policy, "adapter", policy)
    module = sys.modules.get(type(policy).__module__)
    path = getattr(module, "__file__", None)
    if not path or not os.path.isfile(path):
        return {"adapter_file": None, "adapter_sha256": None}
    return {"adapter_file": os.path.abspath(path), "adapter_sha256": sha256_bytes(Path(path).read_bytes())}


# What a policy may declare it was built for, in its `profile`, and where the runner's value is
# set. A declaration that disagrees with the run stops it before any episode (check_declarations).
DECLARABLE: dict[str, str] = {
    "replan_interval": "--libero-replan-interval (full mode: the schedule's K)",
    "max_policy_calls": "--libero-budget decisions --libero-max-policy-calls",
    "observation_track": "--libero-track (full mode: the schedule's track)",
    "image_convention": "the harness's fixed image convention",
}


def check_declarations(policy_name: str, profile: Any, protocol: Any) -> None:
    """Refuse (PolicyLoadError) a policy whose profile declares a replan interval, policy-call budget,
    observation track or image convention other than the run's; both values are named."""
    check_image_convention(policy_name, profile)
    if not isinstance(profile, dict):
        return
    runner = {"replan_interval": protocol.replan_interval,
              "max_policy_calls": protocol.max_policy_calls if protocol.budget == "decisions" else None,
              "observation_track": protocol.track}
    where = f" (schedule {protocol.schedule})" if getattr(protocol, "schedule", None) else ""
    for key, run_value in runner.items():
        declared = profile.get(key)
        if declared is None or declared == run_value:
            continue
        shown = ("none (the horizon budget caps controls, not policy calls)"
                 if key == "max_policy_calls" and run_value is None else repr(run_value))
        raise PolicyLoadError(
            f"policy {policy_name!r} declares {key} {declared!r} (what it was built for), but this run uses "
            f"{key} {shown}{where}. Refusing to start before any episode: set {DECLARABLE[key]} to "
            f"{declared!r}, choose the schedule made for this policy, or fix the declaration.")
