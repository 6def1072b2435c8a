"""The install check: a cell's first observation against the frozen reference (docs/install-check.md).

A reference (catalog/fingerprints/<benchmark>-<renderer family>.json, made by
tools/make_fingerprints.py through the bench service, the code path a run uses) holds, per cell,
the simulator state's digest after reset, init state and settling, the state's digest after a
short fixed arm-moving action sequence (the doctor's probe), and each first delivered image as a
digest plus a robust summary: per-channel means and an 8x8 thumbnail of block means.

Physics is compared exactly (the state digest): states were measured bit-identical across runs,
llvmpipe thread counts and GL backends (they do not depend on rendering). Images are compared only
with a reference of the same renderer family (the GL_RENDERER string says which); a digest that
differs is still a match when every channel mean and thumbnail block is within the tolerance the
reference states. A renderer without a reference gets "no image reference for this renderer".
Stdlib and NumPy only.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np
from numpy.typing import NDArray

from pytest_libero.core.data import CATALOG_DIR
from pytest_libero.core.hashing import sha256_bytes

FORMAT = 1
FINGERPRINT_DIR = "fingerprints"
THUMBNAIL = 8  # blocks per side of the thumbnail
# The short fixed action sequence the doctor runs after the first observation (arm moves in x, y,
# z and turns, gripper closed), as (controls, action) runs; the state digest after it is compared.
PROBE_SEQUENCE: tuple[tuple[int, tuple[float, ...]], ...] = (
    (8, (0.6, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)),
    (8, (0.0, 0.6, 0.3, 0.0, 0.0, 0.2, -1.0)),
    (8, (-0.3, -0.3, -0.4, 0.1, 0.1, 0.0, 1.0)),
)


def probe_actions() -> NDArray[np.float64]:
    """PROBE_SEQUENCE as one (controls, 7) chunk."""
    rows = [action for count, action in PROBE_SEQUENCE for _ in range(count)]
    return np.asarray(rows, dtype=np.float64)


def machine_description(cpuinfo: str | None = None) -> str:
    """This machine's CPU and C library, as a reference records them ("AuthenticAMD family 25 model
    17 (AMD EPYC); glibc 2.36"): the state digests were measured to differ across CPUs with the same
    versions (docs/install-check.md), so a reference says which machine its physics is of."""
    import platform

    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
                cpuinfo = handle.read(20000)
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            break  # the first processor's block
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    if fields.get("vendor_id"):
        cpu = (f"{fields['vendor_id']} family {fields.get('cpu family', '?')} model {fields.get('model', '?')} "
               f"({fields.get('model name', '?')})")
    else:
        cpu = platform.processor() or platform.machine() or "unknown CPU"
    libc, version = platform.libc_ver()
    return f"{cpu}; {libc} {version}" if libc else cpu


def renderer_family(renderer: str | None) -> str | None:
    """The renderer family a reference is made for: "llvmpipe", "nvidia", or None (unknown)."""
    if not renderer:
        return None
    text = renderer.lower()
    if "llvmpipe" in text:
        return "llvmpipe"
    if "nvidia" in text:
        return "nvidia"
    if "softpipe" in text:
        return "softpipe"
    return None


def image_summary(image: Any) -> dict[str, Any]:
    """A delivered image's digest and robust summary (per-channel means, 8x8 thumbnail)."""
    array = np.ascontiguousarray(np.asarray(image, dtype=np.uint8))
    height, width, channels = array.shape
    means = array.reshape(-1, channels).mean(axis=0)
    blocks = array[: height - height % THUMBNAIL, : width - width % THUMBNAIL].astype(np.float64)
    blocks = blocks.reshape(THUMBNAIL, height // THUMBNAIL, THUMBNAIL, width // THUMBNAIL, channels).mean(axis=(1, 3))
    thumb = np.clip(np.rint(blocks), 0, 255).astype(np.uint8)
    return {"sha256": sha256_bytes(array.tobytes()), "means": [round(float(m), 4) for m in means],
            "thumb": base64.b64encode(thumb.tobytes()).decode("ascii")}


def images_summary(images: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {camera: image_summary(image) for camera, image in images.items()}


def _thumb(text: str) -> NDArray[np.float64]:
    return np.frombuffer(base64.b64decode(text), dtype=np.uint8).astype(np.float64)


@dataclass
class ImageDifference:
    camera: str
    mean_delta: float  # largest |channel mean difference|, levels
    thumb_delta: float  # largest |thumbnail block difference|, levels


def image_differences(reference: Mapping[str, Any], observed: Mapping[str, Any]) -> list[ImageDifference]:
    """Per camera whose digest differs: the largest channel-mean and thumbnail-block differences."""
    found = []
    for camera, ref in reference.items():
        got = observed.get(camera)
        if got is None or got["sha256"] == ref["sha256"]:
            continue
        mean_delta = max(abs(a - b) for a, b in zip(ref["means"], got["means"], strict=True))
        thumb_delta = float(np.max(np.abs(_thumb(ref["thumb"]) - _thumb(got["thumb"]))))
        found.append(ImageDifference(camera, round(mean_delta, 4), round(thumb_delta, 2)))
    return found


@dataclass
class Reference:
    """One reference file: its name, what it was made with, its tolerance and its cells."""

    name: str
    benchmark: str
    family: str
    made_with: dict[str, Any]
    protocol: dict[str, Any]
    tolerance: dict[str, float]
    cells: dict[str, dict[str, Any]]
    machine: str | None = None  # machine_description() where it was made; None: not recorded (older files)

    @property
    def settling(self) -> dict[str, Any]:
        """The protocol the first observation's state depends on (the seed aside)."""
        return {k: v for k, v in self.protocol.items() if k != "seed"}

    @property
    def seed(self) -> int | None:
        """The environment seed the images were made with (they depend on it; the state does not)."""
        seed = self.protocol.get("seed")
        return None if seed is None else int(seed)


def load_references(benchmark: str, folder: Any = None) -> list[Reference]:
    """Every reference file of `benchmark` (catalog/fingerprints/<benchmark>-*.json)."""
    import json
    from pathlib import Path

    base = Path(folder) if folder is not None else CATALOG_DIR / FINGERPRINT_DIR
    found = []
    for path in sorted(base.glob(f"{benchmark}-*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT or data.get("benchmark") != benchmark:
            continue
        found.append(Reference(path.name, benchmark, data["renderer_family"], data["made_with"], data["protocol"],
                               data["tolerance"], data["cells"], data.get("machine")))
    return found


@dataclass
class Check:
    """The install check of one cell: physics, rendering, and the verdict line."""

    states: str  # "match", "differ", "no reference"
    images: str  # "match", "within tolerance", "differ", "no image reference for this renderer" (or seed),
    # "no reference"
    detail: list[str] = field(default_factory=list)
    reference: str | None = None
    install: dict[str, Any] = field(default_factory=dict)
    probe_states: str | None = None  # the doctor's: after the probe sequence

    @property
    def differs(self) -> bool:
        return "differ" in (self.states, self.images, self.probe_states)

    @property
    def checked(self) -> bool:
        return self.states != "no reference"

    @property
    def line(self) -> str:
        """`install: matches the reference`, or what differs and what could not be checked."""
        if not self.checked:
            return f"install: not checked ({'; '.join(self.detail) or 'no reference for this cell'})"
        what = []
        if "differ" in (self.states, self.probe_states):
            what.append("physics (simulator state)")
        if self.images == "differ":
            what.append("rendering (images beyond the tolerance)")
        if what:
            return f"install: differs from the reference: {' and '.join(what)}; {'; '.join(self.detail)}"
        if self.images == "no image reference for this renderer":
            return "install: physics matches the reference; no image reference for this renderer " \
                   f"({self.install.get('renderer')!r})"
        if self.images == "no image reference for this seed":
            return "install: physics matches the reference; no image reference for this environment seed"
        suffix = " (images within the tolerance, not bit-identical)" if self.images == "within tolerance" else ""
        return f"install: matches the reference{suffix}"

    def as_record(self) -> dict[str, Any]:
        verdict = "differs" if self.differs else "matches" if self.checked else "not checked"
        block: dict[str, Any] = {"verdict": verdict, "states": self.states, "images": self.images,
                                 "line": self.line, "reference": self.reference, "detail": list(self.detail),
                                 "install": dict(self.install)}
        if self.probe_states is not None:
            block["probe_states"] = self.probe_states
        return block


# A benchmark's protocol options that change the first observation (its state or its images), part
# of the reference's key: LIBERO-plus's robot_init ("apply" re-applies the perturbed arm pose) and
# RoboMemArena's resize_size (the delivered images' size). LIBERO has none.
OBSERVATION_OPTIONS = ("robot_init", "resize_size")


def protocol_key(settle_controls: int, settle_action: Iterable[float],
                 options: Iterable[tuple[str, Any]] = ()) -> dict[str, Any]:
    """What the first observation's state depends on beyond the cell (the track only changes the
    state vector delivered, not the simulator state or images, so it is not part of the key; the
    environment seed, on which the images depend, is the reference's `seed`), with the benchmark
    options among OBSERVATION_OPTIONS (`options`: the protocol's benchmark_options)."""
    key: dict[str, Any] = {"settle_controls": int(settle_controls),
                           "settle_action": [float(a) for a in settle_action]}
    key.update((name, value) for name, value in options if name in OBSERVATION_OPTIONS)
    return key


def _without_options(key: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in key.items() if k not in OBSERVATION_OPTIONS}


def _options_text(key: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {key[k]}" for k in OBSERVATION_OPTIONS if k in key) or "none"


def check(references: list[Reference], cell_id: str, protocol: Mapping[str, Any], observed: Mapping[str, Any],
          probe_state_sha256: str | None = None, seed: int | None = None) -> Check:
    """Compare one cell's first observation (`observed`: the service's fingerprint plus
    `images`, images_summary of the delivered images) with the references. `seed`: the cell's
    environment seed; the images (not the state) depend on it, so they are compared only with a
    reference made with the same seed."""
    install = dict(observed.get("install") or {})
    family = renderer_family(install.get("renderer"))
    settling = {k: v for k, v in protocol.items() if k != "seed"}
    candidates = [r for r in references if cell_id in r.cells and r.settling == settling]
    if not candidates:
        with_cell = [r for r in references if cell_id in r.cells]
        why = "no reference for this cell" if not with_cell else \
            "the reference was made with another settling (settle_controls/settle_action)"
        if with_cell and _without_options(with_cell[0].settling) == _without_options(settling):
            why = (f"the reference was made with other benchmark options ({_options_text(with_cell[0].settling)}; "
                   f"this run: {_options_text(settling)})")
        return Check("no reference", "no reference", [why], None, install)
    same_family = [r for r in candidates if r.family == family]
    # Physics: the state is compared exactly with each reference's (one per machine whose physics
    # was recorded; the same versions give other bits on another CPU), and matches when it equals one.
    ordered = same_family + [r for r in candidates if r not in same_family]
    matching = [r for r in ordered if r.cells[cell_id]["state_sha256"] == observed.get("state_sha256")]
    physics_ref = (matching or ordered)[0]
    entry = physics_ref.cells[cell_id]
    detail = []
    states = "match" if matching else "differ"
    if states == "differ":
        against = "; ".join(f"{r.cells[cell_id]['state_sha256'][:12]}, {r.name}" for r in ordered)
        detail.append(f"the settled simulator state's digest differs ({observed.get('state_sha256', '?')[:12]} vs "
                      f"reference {against})")
    same_family.sort(key=lambda r: r is not physics_ref)  # images: the physics' own file first
    probe = None
    if probe_state_sha256 is not None and "probe_state_sha256" in entry:
        probe = "match" if entry["probe_state_sha256"] == probe_state_sha256 else "differ"
        if probe == "differ":
            detail.append("the simulator state after the probe actions differs")
    if same_family and seed is not None:
        seeded = [r for r in same_family if r.seed in (None, seed)]
        if not seeded:
            return Check(states, "no image reference for this seed", detail, same_family[0].name, install, probe)
        same_family = seeded
    if not same_family:
        images = "no image reference for this renderer"
        reference = physics_ref.name
    else:
        ref = same_family[0]
        reference = ref.name
        differences = image_differences(ref.cells[cell_id]["images"], observed.get("images", {}))
        beyond = [d for d in differences if d.mean_delta > ref.tolerance["channel_mean"]
                  or d.thumb_delta > ref.tolerance["thumbnail_block"]]
        if beyond:
            images = "differ"
            for d in beyond:
                detail.append(f"{d.camera} image differs: channel means by up to {d.mean_delta:g} levels, "
                              f"8x8 thumbnail blocks by up to {d.thumb_delta:g} (tolerance "
                              f"{ref.tolerance['channel_mean']:g} / {ref.tolerance['thumbnail_block']:g})")
        else:
            images = "within tolerance" if differences else "match"
    return Check(states, images, detail, reference, install, probe)


def install_differences(made_with: Mapping[str, Any], install: Mapping[str, Any]) -> list[str]:
    """One line per version or GL setting in which `install` differs from the reference's."""
    lines = []
    ours = install.get("versions") or {}
    theirs = made_with.get("versions") or {}
    for name in sorted(set(ours) | set(theirs)):
        if ours.get(name) != theirs.get(name):
            lines.append(f"{name}: installed {ours.get(name)}, reference made with {theirs.get(name)}")
    for key in ("gl_backend", "renderer"):
        if install.get(key) != made_with.get(key):
            lines.append(f"{key}: installed {install.get(key)!r}, reference made with {made_with.get(key)!r}")
    return lines


def likely_cause(checks: Iterable[Check], made_with: Mapping[str, Any], install: Mapping[str, Any],
                 references: Iterable[Reference] = (), machine: str | None = None) -> list[str]:
    """What most likely explains the differences: the versions and GL settings that differ from
    the reference's, then what a difference of each kind usually means. With the versions and GL
    settings all the reference's, a physics difference is the machine's (`machine`: this one's
    machine_description(); `references`: whose machines the states were recorded on)."""
    checks = list(checks)
    lines = install_differences(made_with, install)
    physics = any(c.states == "differ" or c.probe_states == "differ" for c in checks)
    rendering = any(c.images == "differ" for c in checks)
    if physics and not lines:
        machines = "; ".join(f"{r.name}: {r.machine or 'not recorded'}" for r in references)
        lines.append("physics differs with the reference's versions and GL settings: the machine is the likely cause "
                     f"(this one: {machine or machine_description()}; the references' physics was recorded on: "
                     f"{machines or 'unknown'}). MuJoCo's states are not bit-identical across CPU models; make a "
                     "reference of this machine's physics with tools/make_fingerprints.py --machine TAG "
                     "(docs/install-check.md)")
    elif physics:
        lines.append("physics differs: the simulator (MuJoCo, robosuite, LIBERO's assets or NumPy) is not the "
                     "reference's; install the pinned versions (pyproject.toml) in this environment")
    if rendering and not physics:
        lines.append("rendering differs with identical physics: MuJoCo's renderer or the GL driver changed "
                     "(MuJoCo version, Mesa/driver version, MUJOCO_GL backend)")
    return lines
