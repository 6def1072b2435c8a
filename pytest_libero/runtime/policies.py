"""How a policy spec becomes a policy: registered names, `path/to/file.py:factory` and entry points.

Resolution goes through the `pytest_libero_make_policy` hook (first non-None result wins);
the built-in resolver here is registered last, so conftest files and installed plugins can
supply their own adapters for any name. It knows, in this order: the names in
`BUILTIN_POLICIES`, `path/to/file.py:factory`, and the names installed distributions declare
in the `pytest_libero.policies` entry-point group (loaded only when requested). It runs in the
worker and in an isolated policy's own process (pytest_libero.runtime.isolation).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import sys
from pathlib import Path
from typing import Any, Callable

from pytest_libero.core.policy import Policy, PolicySpec
from pytest_libero.errors import PolicyLoadError

BUILTIN_POLICIES: dict[str, str] = {
    "zero": "pytest_libero.adapters.builtin:ZeroPolicy",
    "random": "pytest_libero.adapters.builtin:RandomPolicy",
    "openpi": "pytest_libero.adapters.openpi:OpenPIPolicy",
    "openvla-rest": "pytest_libero.adapters.openvla_rest:OpenVLARestPolicy",
    "vla-eval": "pytest_libero.adapters.vla_eval:VlaEvalPolicy",
    "demo": "pytest_libero.adapters.demo:DemoPolicy",
    "replay": "pytest_libero.adapters.replay:ReplayPolicy",
    "lerobot": "pytest_libero.adapters.lerobot:LeRobotPolicy",
}


ENTRY_POINT_GROUP = "pytest_libero.policies"


# The keyword argument the RoboMemArena wrapper consumes (the `resize_size` it passes on).
RESIZE_KWARG = "resize_size"


def entry_point_policies() -> dict[str, importlib.metadata.EntryPoint]:
    """Policy names declared by installed distributions (`pytest_libero.policies` group).

    Reading the metadata imports nothing: a declared module is imported only by `build_builtin`
    when its name is requested, so a broken or heavy adapter package costs nothing otherwise.
    """
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)  # the first distribution on sys.path wins, as imports do
    return found


def check_spec(spec: PolicySpec, extra_names: list[str] | None = None, other_makers: bool = False) -> None:
    """Fail early (on the controller) for a name nobody provides or a missing adapter file. With
    `other_makers` (a pytest_libero_make_policy hook besides the built-in one) an unknown name is
    left to the hooks: it is refused when the policy is built, before any item runs."""
    if spec.is_file:
        path, _, factory = spec.name.rpartition(":")
        if not Path(path).is_file():
            raise ValueError(f"--libero-policy {spec.name!r}: file {path!r} does not exist "
                             f"(working directory {Path.cwd()})")
        if not factory.isidentifier():
            raise ValueError(f"--libero-policy {spec.name!r}: {factory!r} is not a Python name")
        return
    if spec.name in BUILTIN_POLICIES or spec.name in (extra_names or ()):
        return  # no need to scan every installed distribution's entry points
    if spec.name not in entry_point_policies() and not other_makers:
        raise ValueError(unknown_policy_message(spec.name, extra_names))


def unknown_policy_message(name: str, extra_names: list[str] | None = None) -> str:
    """Why no adapter serves `name`, with the nearest names, or the file spec it looks like."""
    known = sorted(set(BUILTIN_POLICIES) | set(extra_names or ()) | set(entry_point_policies()))
    path, colon, factory = name.rpartition(":")
    if name.endswith(".py"):
        hint = f" To load a file, name its factory: {name}:FACTORY (the function or class that builds the policy)."
    elif colon and path and not path.endswith(".py") and Path(f"{path}.py").is_file():
        hint = f" To load a file, give its path: {path}.py:{factory}."
    else:
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return (f"Unknown policy {name!r}.{hint} Available: {', '.join(known)}, or path/to/file.py:FACTORY, or a "
            "name a conftest's pytest_libero_make_policy builds")


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
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's file: any import failure is a load error
        raise PolicyLoadError(f"importing {path} raised {type(exc).__name__}: {exc}{where(exc)}; fix the file") from exc
    try:
        return getattr(module, factory)
    except AttributeError:
        defined = sorted(n for n, v in vars(module).items()
                         if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == module_name)
        best = (difflib.get_close_matches(factory, defined, n=1) or defined)[:1]
        offer = f"; it defines {', '.join(defined)}: use {path_text}:{best[0]}" if best else ""
        raise PolicyLoadError(f"{path} has no attribute {factory!r}{offer}") from None


def where(exc: BaseException) -> str:
    """' (at FILE:LINE)' of the innermost frame of `exc`'s traceback (or of a SyntaxError's line)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" (at {exc.filename}:{exc.lineno})"
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f" (at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"


def build_failure_line(spec: PolicySpec, exc: BaseException) -> str:
    """One line for a policy that could not be built: the spec, the real cause and the fix."""
    if isinstance(exc, PolicyLoadError):
        cause = str(exc)
    else:
        cause = (f"building it raised {type(exc).__name__}: {exc}{where(exc)}; fix the adapter or its "
                 "--libero-policy-kwargs")
    kwargs = f" with --libero-policy-kwargs {json.dumps(spec.kwargs)}" if spec.kwargs else ""
    return " ".join(f"--libero-policy {spec.name!r}{kwargs} could not be built: {cause}".split())


def _load_entry_point(ep: importlib.metadata.EntryPoint) -> Any:
    dist = getattr(ep, "dist", None)
    origin = f"{ep.value!r} (entry point {ep.name!r} of {getattr(dist, 'name', 'an installed package')})"
    try:
        return ep.load()
    except Exception as exc:  # noqa: BLE001 - any import failure is reported as a load error
        raise PolicyLoadError(f"cannot load policy {origin}: {type(exc).__name__}: {exc}") from exc


def _accepts(factory: Callable[..., Any], name: str) -> bool:
    """Whether `factory` takes keyword `name` (explicitly or through **kwargs)."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return True
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def resolve_factory(spec: PolicySpec) -> Callable[..., Any] | None:
    """The factory the built-in resolver would call for `spec` (None: not a name it knows)."""
    if spec.is_file:
        return _load_file_factory(spec.name)  # type: ignore[no-any-return]
    if spec.name in BUILTIN_POLICIES:
        return _load_attr(BUILTIN_POLICIES[spec.name])  # type: ignore[no-any-return]
    ep = entry_point_policies().get(spec.name)
    return None if ep is None else _load_entry_point(ep)  # type: ignore[no-any-return]


def dry_check(spec: PolicySpec) -> None:
    """What can be checked without building the policy: its factory loads and takes its kwargs
    (the xdist controller's check; the workers build it). PolicyLoadError names the cause and fix."""
    factory = resolve_factory(spec)
    if factory is None:
        return  # a name a conftest hook serves: only building it tells
    unknown = [k for k in spec.kwargs if k != RESIZE_KWARG and not _accepts(factory, k)]
    if unknown:
        raise PolicyLoadError(f"its factory takes no keyword {', '.join(map(repr, unknown))}; give "
                              f"--libero-policy-kwargs only parameters of {_signature(factory)}")


def build_builtin(spec: PolicySpec) -> Policy | None:
    """The built-in resolver: registered names, `file.py:factory` specs and entry points.

    A factory that returns a RoboMemArena-style adapter (`reset()` and `infer_actions(obs,
    prompt, resize_size)`) gets it wrapped (see pytest_libero.adapters.robomemarena); the
    `resize_size` kwarg is then the wrapper's, and reaches the factory only if it takes it.
    """
    factory = resolve_factory(spec)
    if factory is None:
        return None
    kwargs = dict(spec.kwargs)
    withheld = RESIZE_KWARG in kwargs and not _accepts(factory, RESIZE_KWARG)
    if withheld:
        kwargs.pop(RESIZE_KWARG)
    try:
        policy = factory(**kwargs)
    except TypeError as exc:
        unknown = [k for k in kwargs if not _accepts(factory, k)]
        if not unknown:
            raise
        raise PolicyLoadError(f"its factory takes no keyword {', '.join(map(repr, unknown))} ({exc}); "
                              f"give --libero-policy-kwargs only parameters of {_signature(factory)}") from exc
    if _is_robomemarena_style(policy):
        return _wrap_robomemarena(policy, spec)
    if withheld:
        raise PolicyLoadError(f"policy {spec.name!r} does not take kwarg {RESIZE_KWARG!r} (only "
                              "RoboMemArena-style adapters use it without their factory taking it)")
    return policy  # type: ignore[no-any-return]


def _signature(factory: Callable[..., Any]) -> str:
    try:
        return f"{getattr(factory, '__name__', 'the factory')}{inspect.signature(factory)}"
    except (TypeError, ValueError):
        return "the factory"


def _is_robomemarena_style(policy: Any) -> bool:
    return (callable(getattr(policy, "infer_actions", None)) and callable(getattr(policy, "reset", None))
            and not callable(getattr(policy, "act", None)))


def _wrap_robomemarena(adapter: Any, spec: PolicySpec) -> Policy:
    from pytest_libero.adapters.robomemarena import RoboMemArenaPolicy

    size = spec.kwargs.get(RESIZE_KWARG, RoboMemArenaPolicy.DEFAULT_RESIZE_SIZE)
    try:
        return RoboMemArenaPolicy(adapter, resize_size=size)
    except ValueError as exc:
        raise PolicyLoadError(f"policy {spec.name!r}: {exc}") from exc


def check_policy_object(policy: Any, spec: PolicySpec) -> Policy:
    """Return `policy` if it has reset/act (wrapping a RoboMemArena-style adapter); close() is optional."""
    if _is_robomemarena_style(policy):  # e.g. returned by a conftest's pytest_libero_make_policy
        policy = _wrap_robomemarena(policy, spec)
    missing = [m for m in ("reset", "act") if not callable(getattr(policy, m, None))]
    if missing:
        raise PolicyLoadError(f"it built a {type(policy).__name__} without "
                              f"{', '.join(m + '()' for m in missing)}; give it reset(language) and act(observation) "
                              "(docs/writing-adapters.md)")
    return policy  # type: ignore[no-any-return]


def close_policy(policy: Any) -> None:
    """Call the policy's close() if it has one (it is optional)."""
    close = getattr(policy, "close", None)
    if callable(close):
        close()
