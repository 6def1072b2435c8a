"""`python -m pytest_libero doctor`: this install against the frozen reference, on a sample of cells.

For each cell it starts the real bench service's episode exactly as a run does (reset, init state,
settling; the first delivered images), runs the probe (core.fingerprint.PROBE_SEQUENCE, a short
fixed arm-moving action sequence) and compares the settled state, the state after the probe and
the images with the reference (core.fingerprint.check). tools/make_fingerprints.py makes the
references with the same `fingerprint_cell`.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Sequence

from pytest_libero.core.cells import FAST_SEED, parse_cell_id
from pytest_libero.core.fingerprint import (OBSERVATION_OPTIONS, Check, Reference, check, images_summary,
                                            install_differences, likely_cause, machine_description, probe_actions,
                                            renderer_family)
from pytest_libero.errors import EnvironmentFault, OptionError

# The issue's two cells (MuJoCo 3.3.3 changes libero_10's physics and libero_spatial's images).
DEFAULT_CELLS = ("libero_spatial-t00-s00", "libero_10-t00-s00")
# Per benchmark (`doctor --benchmark`): a cell of two suites (LIBERO-plus) or two tasks (RoboMemArena)
# of its reference's sample (tools/make_fingerprints.py).
BENCHMARK_CELLS = {"libero": DEFAULT_CELLS,
                   "libero_plus": ("libero_plus-libero_spatial-v00259", "libero_plus-libero_object-v00023"),
                   "robomemarena": ("robomemarena-t01-seed50", "robomemarena-t25-seed50")}
# The benchmark options among core.fingerprint.OBSERVATION_OPTIONS that the doctor and the tool use:
# a run's defaults (LIBERO-plus's --libero-plus-robot-init; the robomemarena preset's resize_size).
BENCHMARK_OPTIONS: dict[str, tuple[tuple[str, Any], ...]] = {
    "libero_plus": (("robot_init", "upstream"),), "robomemarena": (("resize_size", 256),)}
# The cell grammars of the benchmarks with references (their adapters' own: core.cells for LIBERO,
# benchmarks/libero_plus/catalog.py and benchmarks/robomemarena/options.py; the doctor, below the
# benchmarks layer, reads them here).
_PLUS_ID = re.compile(r"libero_plus-(?P<suite>libero_[a-z0-9]+?)-v(?P<vid>\d{5,})")
_ARENA_ID = re.compile(r"robomemarena-t(?P<task>\d{2})-seed(?P<seed>\d+)")


def start_cell(cell_id: str) -> dict[str, Any]:
    """The service's `start` cell of a LIBERO, LIBERO-plus or RoboMemArena cell id, as a run sends it
    (LIBERO and LIBERO-plus at fast mode's seed; RoboMemArena at the id's episode seed)."""
    parsed = parse_cell_id(cell_id)
    if parsed is not None and not cell_id.startswith(("libero_plus-", "robomemarena-")):
        return {"suite": parsed[0], "task_index": parsed[1], "init_index": parsed[2], "seed": FAST_SEED}
    plus = _PLUS_ID.fullmatch(cell_id)
    if plus is not None:
        return {"suite": plus.group("suite"), "task_index": int(plus.group("vid")) - 1, "init_index": 0,
                "seed": FAST_SEED}
    arena = _ARENA_ID.fullmatch(cell_id)
    if arena is not None:
        return {"suite": "robomemarena", "task_index": int(arena.group("task")) - 1, "init_index": 0,
                "seed": int(arena.group("seed"))}
    raise OptionError(f"{cell_id!r} is not a cell id such as libero_10-t00-s00, libero_plus-libero_spatial-v00259 "
                      "or robomemarena-t01-seed50")


def fingerprint_cell(service: Any, cell_id: str, settle: dict[str, Any], probe: bool = True) -> dict[str, Any]:
    """One cell through the bench service: {"observed": the first observation's fingerprint with
    the images' summaries, "probe_state_sha256", "probe_controls"} (probe: after the probe actions).
    `settle`: core.fingerprint.protocol_key (its benchmark options go to the service as a run's do)."""
    options = {name: value for name, value in settle.items() if name in OBSERVATION_OPTIONS}
    started = service.start({
        "cell": start_cell(cell_id),
        "control_cap": 1000, "settle_controls": settle["settle_controls"],
        "settle_action": settle["settle_action"], "allow_mismatch": False, "track": "rgb", "reuse_env": True,
        **({"options": options} if options else {}),
    })
    if started.get("fingerprint") is None:
        raise EnvironmentFault("this benchmark's service module gives no fingerprint (no `fingerprint()` on its "
                               "episode): its installs cannot be checked")
    observed = dict(started["fingerprint"], images=images_summary(started["observation"]))
    got: dict[str, Any] = {"observed": observed, "probe_state_sha256": None, "probe_controls": None}
    if probe:
        got["probe_controls"] = service.submit(probe_actions(), deliver=False)["executed_total"]
    evidence = service.finish()
    if probe:
        got["probe_state_sha256"] = evidence["final_state_sha256"]
    return got


def reference_entry(got: dict[str, Any]) -> dict[str, Any]:
    """The reference file's entry for a cell fingerprinted by `fingerprint_cell`."""
    observed = got["observed"]
    entry = {"state_sha256": observed["state_sha256"], "state_size": observed["state_size"],
             "images": observed["images"]}
    if got["probe_state_sha256"] is not None:
        entry.update(probe_state_sha256=got["probe_state_sha256"], probe_controls=got["probe_controls"])
    return entry


def describe_install(install: dict[str, Any]) -> str:
    versions = install.get("versions") or {}
    return (", ".join(f"{name} {version}" for name, version in versions.items())
            + f"; MUJOCO_GL={install.get('gl_backend')}; renderer {install.get('renderer')!r}"
            + (f"; LP_NUM_THREADS={install['lp_num_threads']}" if install.get("lp_num_threads") else ""))


def run_doctor(service: Any, references: list[Reference], cells: Sequence[str], settle: dict[str, Any],
               write: Callable[[str], None] = print) -> int:
    """Check `cells`; print the report; 0: matches, 1: differs, 3: nothing could be checked."""
    if not references:
        write("no install reference for this benchmark (catalog/fingerprints/): nothing to check against")
        return 3
    checks: list[tuple[str, Check]] = []
    install: dict[str, Any] = {}
    for cell_id in cells:
        tick = time.perf_counter()
        got = fingerprint_cell(service, cell_id, settle)
        install = got["observed"].get("install") or {}
        result = check(references, cell_id, settle, got["observed"], got["probe_state_sha256"],
                       start_cell(cell_id)["seed"])
        checks.append((cell_id, result))
        images = result.images
        write(f"{cell_id}: states {result.states}, after the probe {result.probe_states or 'not in the reference'}, "
              f"images {images} ({time.perf_counter() - tick:.1f} s)")
        for line in result.detail:
            write(f"    {line}")
    family = renderer_family(install.get("renderer"))
    same = [r for r in references if r.family == family]
    # The file the checks were made against (the one whose physics matched, where one did).
    named = {r.name: r for r in references}
    used = [named[c.reference] for _, c in checks if c.reference in named]
    reference = (used or same or references)[0]
    write(f"installed: {describe_install(install)}; machine {machine_description()}")
    write(f"reference: {reference.name}, made with {describe_install(reference.made_with)}; machine "
          f"{reference.machine or 'not recorded'}")
    if not same:
        write(f"no image reference for this renderer ({install.get('renderer')!r}, family {family}): images were not "
              f"compared; references exist for {', '.join(sorted({r.family for r in references}))}")
    differing = [c for _, c in checks if c.differs]
    checked = [c for _, c in checks if c.checked]
    if differing:
        physics = any("differ" in (c.states, c.probe_states) for c in differing)
        rendering = any(c.images == "differ" for c in differing)
        kind = " and ".join(k for k, on in (("physics (states)", physics), ("rendering (images)", rendering)) if on)
        write(f"install: differs from the reference: {kind}")
        for line in likely_cause(differing, reference.made_with, install, references):
            write(f"likely cause: {line}")
        write("what to do: docs/install-check.md")
        return 1
    if not checked:
        write("install: not checked (no reference for these cells)")
        return 3
    for line in install_differences(reference.made_with, install):
        write(f"note: {line} (no difference on these cells)")
    within = any(c.images == "within tolerance" for _, c in checks)
    unchecked = [cell for cell, c in checks if not c.checked]
    write("install: matches the reference" + (" (images within the tolerance, not bit-identical)" if within else "")
          + ("" if same else "; no image reference for this renderer")
          + (f"; not checked (no reference): {' '.join(unchecked)}" if unchecked else ""))
    return 0
