"""The policy seam: the `Policy` protocol, the frozen `PolicySpec`, and how a spec is resolved.

Resolution goes through the `pytest_libero_make_policy` hook (first non-None result wins);
the built-in resolver below is registered last, so conftest files and installed plugins can
supply their own adapters for any name.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pytest_libero.contract import Observation, _Stop
from pytest_libero.errors import PolicyLoadError

ActionChunk = Any  # array-like of shape (7,) or (n, 7); validated by contract.validate_chunk

BUILTIN_POLICIES: dict[str, str] = {
    "zero": "pytest_libero.adapters.builtin:ZeroPolicy",
    "random": "pytest_libero.adapters.builtin:RandomPolicy",
}


@runtime_checkable
class Policy(Protocol):
    """What the harness calls. Built once per worker; reset once per episode."""

    def reset(self, language: str) -> None:
        """Start a new episode of the task described by `language`."""

    def act(self, observation: Observation) -> ActionChunk | _Stop:
        """Return an action chunk (n, 7) in [-1, 1], a single (7,) action, or STOP."""

    def close(self) -> None:
        """Release resources at the end of the worker's session."""


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


def check_spec(spec: PolicySpec, extra_names: list[str] | None = None) -> None:
    """Fail early (on the controller) for a name nobody provides or a missing adapter file."""
    if spec.is_file:
        path, _, factory = spec.name.rpartition(":")
        if not Path(path).is_file():
            raise ValueError(f"--libero-policy {spec.name!r}: file {path!r} does not exist "
                             f"(working directory {Path.cwd()})")
        if not factory.isidentifier():
            raise ValueError(f"--libero-policy {spec.name!r}: {factory!r} is not a Python name")
        return
    known = sorted(set(BUILTIN_POLICIES) | set(extra_names or ()))
    if spec.name not in known:
        close = difflib.get_close_matches(spec.name, known, n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"Unknown policy {spec.name!r}.{hint} Available: {', '.join(known)}, "
                         "or path/to/file.py:factory")


def _load_attr(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def _load_file_factory(name: str) -> Any:
    path_text, _, factory = name.rpartition(":")
    path = Path(path_text).resolve()
    module_name = f"pytest_libero_user_policy_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PolicyLoadError(f"cannot import {path} (from --libero-policy {name!r})")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    try:
        return getattr(module, factory)
    except AttributeError:
        raise PolicyLoadError(f"{path} has no attribute {factory!r} (from --libero-policy {name!r})") from None


def build_builtin(spec: PolicySpec) -> Policy | None:
    """The built-in resolver: registered names and `file.py:factory` specs."""
    if spec.is_file:
        factory = _load_file_factory(spec.name)
    elif spec.name in BUILTIN_POLICIES:
        factory = _load_attr(BUILTIN_POLICIES[spec.name])
    else:
        return None
    try:
        policy = factory(**spec.kwargs)
    except TypeError as exc:
        raise PolicyLoadError(f"policy {spec.name!r} rejected kwargs {spec.kwargs}: {exc}") from exc
    return policy  # type: ignore[no-any-return]


def check_policy_object(policy: Any, spec: PolicySpec) -> Policy:
    missing = [m for m in ("reset", "act", "close") if not callable(getattr(policy, m, None))]
    if missing:
        raise PolicyLoadError(f"policy {spec.name!r} built a {type(policy).__name__} without "
                              f"{', '.join(missing)}(); see docs/writing-adapters.md")
    return policy  # type: ignore[no-any-return]


def profile_of(policy: Any, spec: PolicySpec) -> dict[str, Any]:
    """The model profile recorded on every result. Adapters may define `profile` (a dict)."""
    declared = getattr(policy, "profile", None)
    profile = dict(declared) if isinstance(declared, dict) else {}
    profile.setdefault("kind", "capability")
    profile["spec"] = spec.as_dict()
    return profile

