"""`python -m pytest_libero doctor`: this install against the frozen reference, on a sample of cells.

For each cell it starts the real bench service's episode exactly as a run does (reset, init state,
settling; the first delivered images), runs the probe (core.fingerprint.PROBE_SEQUENCE, a short
fixed arm-moving action sequence) and compares the settled state, the state after the probe and
the images with the reference (core.fingerprint.check). tools/make_fingerprints.py makes the
references with the same `fingerprint_cell`.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from pytest_libero.core.cells import FAST_SEED, parse_cell_id
from pytest_libero.core.fingerprint import (Check, Reference, check, images_summary, install_differences,
                                            likely_cause, probe_actions, renderer_family)
from pytest_libero.errors import EnvironmentFault, OptionError

# The issue's two cells (MuJoCo 3.3.3 changes libero_10's physics and libero_spatial's images).
DEFAULT_CELLS = ("libero_spatial-t00-s00", "libero_10-t00-s00")


def fingerprint_cell(service: Any, cell_id: str, settle: dict[str, Any], probe: bool = True) -> dict[str, Any]:
    """One cell through the bench service: {"observed": the first observation's fingerprint with
    the images' summaries, "probe_state_sha256", "probe_controls"} (probe: after the probe actions)."""
    parsed = parse_cell_id(cell_id)
    if parsed is None:
        raise OptionError(f"{cell_id!r} is not a cell id such as libero_10-t00-s00")
    suite, task, init = parsed
    started = service.start({
        "cell": {"suite": suite, "task_index": task, "init_index": init, "seed": FAST_SEED},
        "control_cap": 1000, "settle_controls": settle["settle_controls"],
        "settle_action": settle["settle_action"], "allow_mismatch": False, "track": "rgb", "reuse_env": True,
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
        result = check(references, cell_id, settle, got["observed"], got["probe_state_sha256"], FAST_SEED)
        checks.append((cell_id, result))
        images = result.images
        write(f"{cell_id}: states {result.states}, after the probe {result.probe_states or 'not in the reference'}, "
              f"images {images} ({time.perf_counter() - tick:.1f} s)")
        for line in result.detail:
            write(f"    {line}")
    family = renderer_family(install.get("renderer"))
    same = [r for r in references if r.family == family]
    reference = (same or references)[0]
    write(f"installed: {describe_install(install)}")
    write(f"reference: {reference.name}, made with {describe_install(reference.made_with)}")
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
        for line in likely_cause(differing, reference.made_with, install):
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
