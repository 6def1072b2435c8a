"""GPU-pinned workers: which GPUs a run uses, which worker gets which, and the EGL index to render on.

    controller   GPUs from --libero-gpus, else CUDA_VISIBLE_DEVICES, else nvidia-smi (none: CPU);
                 `GpuAssignment` places xdist workers on GPUs round-robin and gives a crashed
                 worker's replacement the crashed worker's GPU (the xdist hooks that hand it to
                 the workers are pytest_libero.plugin.gpus')
    worker       `pin_worker` sets CUDA_VISIBLE_DEVICES (for the policy) before anything heavy and
                 returns the pinned GPU, which the caller keeps; `service_env(gpu)` maps its CUDA
                 index to its EGL device index (a short probe subprocess through
                 EGL_NV_device_cuda) for the bench service's MUJOCO_EGL_DEVICE_ID

GPU ids are CUDA indices in PCI bus order (what nvidia-smi prints; the worker sets
CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA agrees) or GPU UUIDs. Nothing here imports a GPU library
(nor pytest), and nothing here is set at configure time: the pinned GPU is a value the caller keeps.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_libero.errors import EnvironmentFault


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU as the user named it, with what nvidia-smi knows of it (when it is there)."""

    id: str  # CUDA index ("0") or UUID ("GPU-...")
    index: int | None = None
    name: str | None = None
    uuid: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "index": self.index, "name": self.name, "uuid": self.uuid}


def parse_gpu_list(text: str, origin: str) -> list[str]:
    """Ids from a comma-separated list; ValueError (naming `origin`) on an empty or repeated one."""
    ids = [part.strip() for part in text.split(",")]
    if ids == [""]:
        return []
    for part in ids:
        if not part or not (part.isdigit() or part.startswith(("GPU-", "MIG-"))):
            raise ValueError(f"{origin} {text!r}: {part!r} is not a GPU index or UUID; give e.g. 0,1")
        if ids.count(part) > 1:
            raise ValueError(f"{origin} {text!r}: GPU {part} is listed twice")
    return ids


def nvidia_smi_gpus() -> list[Gpu]:
    """GPUs nvidia-smi lists (index, name, UUID); empty when there is no nvidia-smi or it fails."""
    return list(_nvidia_smi_gpus())


def nvidia_smi_descriptions() -> list[str]:
    """'index, name, UUID' of each GPU nvidia-smi lists (the run manifest's machine.gpus)."""
    return [f"{g.index}, {g.name}, {g.uuid}" for g in nvidia_smi_gpus()]


@functools.cache
def _nvidia_smi_gpus() -> tuple[Gpu, ...]:
    # Asked once per process: GPU discovery and the run manifest both want the list.
    if shutil.which("nvidia-smi") is None:
        return ()
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=index,name,uuid", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return ()
    found = []
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            found.append(Gpu(parts[0], int(parts[0]), parts[1], parts[2]))
    return tuple(found)


def discover_gpus(option: str | None, environ: dict[str, str] | None = None,
                  detected: list[Gpu] | None = None) -> tuple[list[Gpu], str]:
    """The run's GPUs and where the list came from: the option, CUDA_VISIBLE_DEVICES, nvidia-smi or none."""
    env = os.environ if environ is None else environ
    known = nvidia_smi_gpus() if detected is None else detected
    by_id = {g.id: g for g in known} | {g.uuid: g for g in known if g.uuid}

    def described(ids: list[str]) -> list[Gpu]:
        return [Gpu(i, by_id[i].index, by_id[i].name, by_id[i].uuid) if i in by_id
                else Gpu(i, int(i) if i.isdigit() else None) for i in ids]

    if option is not None:
        return described(parse_gpu_list(option, "--libero-gpus")), "--libero-gpus"
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        # CUDA_VISIBLE_DEVICES="" (or -1) deliberately hides every GPU: a CPU run.
        if visible.strip() in ("", "-1"):
            return [], "CUDA_VISIBLE_DEVICES (empty: CPU)"
        return described(parse_gpu_list(visible, "CUDA_VISIBLE_DEVICES")), "CUDA_VISIBLE_DEVICES"
    return list(known), "nvidia-smi" if known else "none found (CPU)"


class GpuAssignment:
    """Which GPU each xdist worker gets: round-robin; a replacement keeps its predecessor's.

    Workers are placed in slots 0, 1, 2, ... and slot s runs on GPU s mod n, so N workers on n
    GPUs differ by at most one worker per GPU. A worker that goes down frees its slot; the next
    worker configured (xdist configures a crashed worker's replacement right after reporting
    the crash) takes the lowest free slot, hence the same GPU. Gateway ids are not used for this:
    a replacement gets a new one (gw0 crashes, gw2 replaces it).
    """

    def __init__(self, gpus: list[Gpu]) -> None:
        self.gpus = gpus
        self.slots: dict[str, int] = {}  # worker id -> slot
        self.free: list[int] = []
        self.next_slot = 0

    def assign(self, worker: str) -> Gpu | None:
        """The GPU for a newly configured worker (None on a CPU-only run)."""
        if worker in self.slots:
            return self.gpu_of(worker)
        if self.free:
            self.free.sort()
            slot = self.free.pop(0)
        else:
            slot, self.next_slot = self.next_slot, self.next_slot + 1
        self.slots[worker] = slot
        return self.gpu_of(worker)

    def release(self, worker: str) -> None:
        """The worker went down (finished or crashed): its slot goes to the next worker configured."""
        slot = self.slots.pop(worker, None)
        if slot is not None:
            self.free.append(slot)

    def gpu_of(self, worker: str) -> Gpu | None:
        if not self.gpus or worker not in self.slots:
            return None
        return self.gpus[self.slots[worker] % len(self.gpus)]


def pin_worker(gpu: dict[str, Any] | None) -> dict[str, Any] | None:
    """Make this process's CUDA see only `gpu` (call before the policy imports anything).

    Returns the pinned GPU (`Gpu.as_dict()`; None: CPU), for the caller to keep.
    """
    if gpu is None:
        return None
    # CUDA's default order (fastest first) can differ from nvidia-smi's: use the bus order.
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu["id"]
    return dict(gpu)


def rendering_backend() -> str:
    """What the bench service renders with (it defaults MUJOCO_GL to egl)."""
    return os.environ.get("MUJOCO_GL", "egl")


_PROBE = r"""
import ctypes, json, os
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
from mujoco.egl import egl_ext as EGL
EGL_CUDA_DEVICE_NV, EGL_EXTENSIONS = 0x323A, 0x3055
query_attrib = ctypes.CFUNCTYPE(EGL.EGLBoolean, EGL.EGLDeviceEXT, EGL.EGLint, ctypes.POINTER(ctypes.c_ssize_t))(
    EGL.eglGetProcAddress("eglQueryDeviceAttribEXT"))
query_string = ctypes.CFUNCTYPE(ctypes.c_char_p, EGL.EGLDeviceEXT, EGL.EGLint)(
    EGL.eglGetProcAddress("eglQueryDeviceStringEXT"))
found = []
for egl_index, device in enumerate(EGL.eglQueryDevicesEXT(64)):
    extensions = (query_string(device, EGL_EXTENSIONS) or b"").decode()
    cuda = ctypes.c_ssize_t(-1)
    ok = "EGL_NV_device_cuda" in extensions and query_attrib(device, EGL_CUDA_DEVICE_NV, ctypes.byref(cuda))
    found.append({"egl": egl_index, "cuda": int(cuda.value) if ok else None})
print("EGL-DEVICES " + json.dumps(found))
"""


def probe_egl_devices(env: dict[str, str]) -> list[dict[str, Any]]:
    """[{egl: index, cuda: CUDA index or None}] as a fresh process with `env` enumerates them."""
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentFault(f"EGL device probe could not run: {exc}") from exc
    for line in done.stdout.splitlines():
        if line.startswith("EGL-DEVICES "):
            return json.loads(line.split(" ", 1)[1])  # type: ignore[no-any-return]
    raise EnvironmentFault(f"EGL device probe failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")


def probe_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The EGL probe's environment: every GPU visible to CUDA, numbered in PCI bus order.

    EGL enumerates every GPU whatever CUDA_VISIBLE_DEVICES says, but EGL_CUDA_DEVICE_NV may give
    a device's CUDA ordinal as this process's CUDA numbers it (which CUDA_VISIBLE_DEVICES
    filters and renumbers). With nothing hidden and the bus order, that ordinal is the
    nvidia-smi index the worker's GPU is named by, on either reading of the extension.
    """
    env = {k: v for k, v in environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return env


def egl_index_for(cuda_index: int, devices: list[dict[str, Any]]) -> int:
    """The EGL device index of CUDA device `cuda_index`; EnvironmentFault when none maps to it."""
    for device in devices:
        if device["cuda"] == cuda_index:
            return int(device["egl"])
    table = ", ".join(f"EGL {d['egl']} -> CUDA {d['cuda']}" for d in devices) or "no EGL devices"
    raise EnvironmentFault(
        f"cannot render on GPU {cuda_index}: no EGL device reports CUDA index {cuda_index} through "
        f"EGL_NV_device_cuda ({table}). Check the NVIDIA EGL driver (libEGL_nvidia) is installed and "
        "visible in this container, or render on the CPU with MUJOCO_GL=osmesa")


def service_env(gpu: dict[str, Any] | None,
                devices: list[dict[str, Any]] | None = None) -> tuple[dict[str, str], int | None]:
    """Extra environment of the bench service rendering on `gpu`, and the EGL device index it renders on.

    Nothing (and None) on a CPU worker or with a backend other than EGL. `devices` is the EGL
    probe's answer (probed here when None).
    """
    if gpu is None or rendering_backend() != "egl":
        return {}, None
    index = gpu.get("index")
    if index is None:
        raise EnvironmentFault(f"cannot render on GPU {gpu['id']}: its CUDA index is unknown (nvidia-smi "
                               "did not list that UUID); name GPUs by index with --libero-gpus")
    # The simulator uses no CUDA; an empty CUDA_VISIBLE_DEVICES also keeps robosuite's check
    # "MUJOCO_EGL_DEVICE_ID must be one of CUDA_VISIBLE_DEVICES" (an EGL vs CUDA index mix-up)
    # from refusing a correct mapping.
    env = {"CUDA_VISIBLE_DEVICES": "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    if devices is None:
        devices = probe_egl_devices(probe_environment(os.environ))
    egl = egl_index_for(int(index), devices)
    return dict(env, MUJOCO_EGL_DEVICE_ID=str(egl)), egl


def record_fields(gpu: dict[str, Any] | None) -> dict[str, Any]:
    """What an episode record says of where it ran: the GPU (or None) and the rendering backend."""
    return {"gpu": dict(gpu) if gpu is not None else None, "rendering_backend": rendering_backend()}
