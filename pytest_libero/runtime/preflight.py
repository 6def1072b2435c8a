"""The preflight's checks, without pytest: can each render target of a run render at all?

A render target is a pinned GPU's EGL device, or the CPU renderer (no GPU). For each one the check
is what a bench service on it would do first, and nothing of a benchmark: the GPU's EGL device from
its CUDA index (runtime.gpus.service_env, one EGL probe for every GPU), then a fresh process with the
bench service's rendering environment that imports MuJoCo, opens an offscreen GL context and renders
one 16x16 frame of a one-box model. This process never imports the simulator.

What it catches: a GPU that EGL cannot map (no libEGL_nvidia in the container, a GPU hidden from
EGL), a MuJoCo that does not import, a GL backend (MUJOCO_GL) that cannot make a context. What it
cannot: anything of a benchmark's own (a missing asset, a task that does not build, a LIBERO
install that differs): those end cells as env_error, and the breaker (plugin/breaker.py) stops a
run whose cells all end so. A passing probe is remembered for the rest of the process, by the
variables that decide rendering (a pytest that runs many sessions in one process pays it once).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from pytest_libero.errors import EnvironmentFault
from pytest_libero.runtime import gpus

PROBE_TIMEOUT_S = 120.0

_RENDER = r"""
import os
os.environ.setdefault("MUJOCO_GL", "egl")
if os.environ["MUJOCO_GL"] in ("egl", "osmesa"):
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
import mujoco
model = mujoco.MjModel.from_xml_string(
    '<mujoco><worldbody><light pos="0 0 1"/><geom type="box" size=".1 .1 .1" rgba="1 0 0 1"/></worldbody></mujoco>')
data = mujoco.MjData(model)
renderer = mujoco.Renderer(model, 16, 16)
mujoco.mj_forward(model, data)
renderer.update_scene(data)
image = renderer.render()
renderer.close()
assert image.shape == (16, 16, 3), image.shape
print(f"PREFLIGHT-RENDERED mujoco {mujoco.__version__}, max pixel {int(image.max())}")
"""

_PASSED: set[frozenset[tuple[str, str]]] = set()  # rendering environments whose probe passed in this process
# The variables that decide how a process renders (the GL backend and device, the libraries it loads,
# the MuJoCo it imports): a probe that passed is not repeated for the same ones (HOME, PATH and the
# like differ between pytester's sessions and change nothing here).
_RENDERING = re.compile(r"MUJOCO_|PYOPENGL_|CUDA_|NVIDIA_|__EGL_|__GLX_|EGL_|LIBGL_|MESA_|GALLIUM_|LP_|"
                        r"LD_LIBRARY_PATH$|LD_PRELOAD$|PYTHONPATH$|PYTHONHOME$|VIRTUAL_ENV$|DISPLAY$")


@dataclass(frozen=True, slots=True)
class Target:
    """One render target: a GPU (`Gpu.as_dict()`) or None (the CPU renderer)."""

    gpu: dict[str, Any] | None

    def describe(self, egl_device: int | None = None) -> str:
        backend = gpus.rendering_backend()
        if self.gpu is None:
            return f"the CPU renderer (no GPU; MUJOCO_GL={backend})"
        g = self.gpu
        known = ", ".join(str(v) for v in (g.get("name"), g.get("uuid")) if v)
        egl = f", EGL device {egl_device}" if egl_device is not None else ""
        return f"GPU {g['id']}{f' ({known})' if known else ''} (MUJOCO_GL={backend}{egl})"


@dataclass(frozen=True, slots=True)
class Checked:
    """What the preflight found: each target's line, the first failure (None: all passed), the cost."""

    lines: tuple[str, ...]
    failure: str | None
    seconds: float


def targets(used: list[dict[str, Any] | None]) -> list[Target]:
    """The distinct render targets of the GPUs the run's processes render on (None: the CPU)."""
    seen: dict[str | None, Target] = {}
    for gpu in used:
        seen.setdefault(gpu["id"] if gpu is not None else None, Target(gpu))
    return list(seen.values())


def render_probe(extra_env: dict[str, str]) -> str:
    """Render one frame in a fresh process with the bench service's `extra_env`; its line, or
    EnvironmentFault with the probe's error."""
    env = dict(os.environ, **extra_env)
    key = frozenset([("python", sys.executable), *((k, v) for k, v in env.items() if _RENDERING.match(k))])
    if key in _PASSED:
        return "rendered a frame (checked earlier in this process)"
    try:
        done = subprocess.run([sys.executable, "-c", _RENDER], env=env, capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise EnvironmentFault(f"rendering one frame took over {PROBE_TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise EnvironmentFault(f"the render probe could not start: {exc}") from exc
    for line in done.stdout.splitlines():
        if line.startswith("PREFLIGHT-RENDERED "):
            _PASSED.add(key)
            return f"rendered a frame ({line.split(' ', 1)[1]})"
    said = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()
    # The exception's own line (the traceback above it is the probe's, not the user's).
    raise EnvironmentFault(f"MuJoCo could not render one frame (probe exit {done.returncode}): {said[-1][-800:]}")


RENDER_FIX = ("check that MuJoCo imports and renders here (MUJOCO_GL=egl needs an EGL library: Mesa's libEGL_mesa "
              "on the CPU, the driver's libEGL_nvidia on an NVIDIA GPU; MUJOCO_GL=osmesa renders on the CPU "
              "without EGL)")


def check(found: list[Target]) -> Checked:
    """Check each target in turn, stopping at the first that fails."""
    tick = time.perf_counter()
    lines: list[str] = []
    devices: list[dict[str, Any]] | None = None
    for target in found:
        egl: int | None = None
        try:
            if target.gpu is not None and gpus.rendering_backend() == "egl" and devices is None:
                devices = gpus.probe_egl_devices(gpus.probe_environment(os.environ))  # once for every GPU
            env, egl = gpus.service_env(target.gpu, devices)
            line = render_probe(env)
        except EnvironmentFault as exc:
            cause = re.sub(r"^cannot render on GPU [^:]*: ", "", str(exc))  # said once, below
            fix = "" if "libEGL_nvidia" in cause else f"; {RENDER_FIX}"
            return Checked(tuple(lines), f"cannot render on {target.describe(egl)}: {cause}{fix}",
                           time.perf_counter() - tick)
        lines.append(f"{target.describe(egl)} {line}")
    return Checked(tuple(lines), None, time.perf_counter() - tick)
