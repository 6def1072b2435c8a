"""Action validation and observation sanitizing: table-driven over good and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_libero.benchmarks.libero.spec import CAMERAS, IMAGE_SHAPE
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.contract import Counters, images_from_native, seal_observation, validate_chunk
from pytest_libero.errors import ActionError, EnvironmentFault

Z = [0.0] * 6 + [-1.0]


@pytest.mark.parametrize("raw, rows", [
    (Z, 1),
    (np.array(Z, dtype=np.float32), 1),
    ([Z, Z, Z], 3),
    (np.zeros((8, 7), dtype=np.int64), 8),
    (np.full((2, 7), 1.0), 2),
    (np.full((2, 7), -1.0), 2),
    (np.zeros((1, 7), dtype=np.float16), 1),
])
def test_valid_chunks_become_float64_n_by_7(raw, rows):
    chunk = validate_chunk(raw, LIBERO_SPEC)
    assert chunk.shape == (rows, 7) and chunk.dtype == np.float64 and chunk.flags.c_contiguous
    np.testing.assert_array_equal(chunk, np.asarray(raw, dtype=np.float64).reshape(rows, 7))


@pytest.mark.parametrize("raw, defect", [
    ([float("nan")] + Z[1:], "not finite: element [0] = nan"),
    (Z[:3] + [float("inf")] + Z[4:], "not finite: element [3] = inf"),
    ([0.0] * 6, "shape (6,)"),
    (np.zeros((2, 3, 7)), "shape (2, 3, 7)"),
    ([Z, Z[:5] + [1.5, 0.0]], "out of bounds [-1, 1]: element [1, 5] = 1.5"),
    (np.array(["a"] * 7), "dtype <U1 is not a real number type"),
    (np.zeros((0, 7)), "shape (0, 7)"),
    (np.zeros(7, dtype=bool), "dtype bool"),
    (np.zeros(7, dtype=complex), "dtype complex128"),
    (np.array([object()] * 7), "dtype object"),
    (None, "returned None"),
    ([[0.0] * 7, [0.0] * 6], "not array-like"),
    (np.full((1, 7), -1.0000001), "out of bounds [-1, 1]: element [0, 0] = -1.0000001"),
    (np.array([[0.0] * 7, [0.0] * 5 + [np.nan, 0.0]]), "not finite: element [1, 5] = nan"),
])
def test_invalid_chunks_name_the_defect(raw, defect):
    with pytest.raises(ActionError) as info:
        validate_chunk(raw, LIBERO_SPEC)
    assert defect in str(info.value)


def native(**extra):
    raw = {f"{c}_image": np.arange(np.prod(IMAGE_SHAPE), dtype=np.uint32).reshape(IMAGE_SHAPE).astype(np.uint8)
           for c in CAMERAS}
    raw.update(extra)
    return raw


def test_images_are_rotated_180_degrees_and_nothing_else_crosses():
    raw = native(robot0_eef_pos=np.zeros(3), object_pos=np.ones(3), robot0_joint_pos=np.zeros(7))
    images = images_from_native(raw, LIBERO_SPEC)
    assert set(images) == set(CAMERAS)
    for camera in CAMERAS:
        np.testing.assert_array_equal(images[camera], raw[f"{camera}_image"][::-1, ::-1])
        assert images[camera].flags.c_contiguous


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.pop("agentview_image"), "lacks 'agentview_image'"),
    (lambda r: r.update(agentview_image=np.zeros((128, 128, 3), np.uint8)), "shape (128, 128, 3)"),
    (lambda r: r.update(robot0_eye_in_hand_image=np.zeros(IMAGE_SHAPE, np.float32)), "dtype float32"),
])
def test_bad_native_images_are_environment_faults(mutate, message):
    raw = native()
    mutate(raw)
    with pytest.raises(EnvironmentFault) as info:
        images_from_native(raw, LIBERO_SPEC)
    assert message in str(info.value)


def test_sealed_observation_is_a_read_only_copy_with_only_contract_fields():
    images = images_from_native(native(), LIBERO_SPEC)
    observation = seal_observation("open the drawer", images, Counters(2, 2, 10), LIBERO_SPEC)
    assert observation.language == "open the drawer" and observation.counters == Counters(2, 2, 10)
    assert not observation.images["agentview"].flags.writeable
    assert observation.images["agentview"] is not images["agentview"]
    with pytest.raises(TypeError):
        observation.images["extra"] = np.zeros(3)  # type: ignore[index]
    assert {f for f in observation.__slots__} == {"language", "images", "counters", "state"}
    assert observation.state is None  # the default rgb track delivers no state


@pytest.mark.parametrize("language, images, message", [
    ("", None, "non-empty str"),
    ("go", {"agentview": np.zeros(IMAGE_SHAPE, np.uint8)}, "cameras ['agentview']"),
    ("go", {**{c: np.zeros(IMAGE_SHAPE, np.uint8) for c in CAMERAS}, "eef": np.zeros(3)}, "cameras"),
    ("go", {c: np.zeros((2, 2, 3), np.uint8) for c in CAMERAS}, "(2, 2, 3)"),
])
def test_seal_rejects_anything_beyond_the_contract(language, images, message):
    with pytest.raises(EnvironmentFault) as info:
        seal_observation(language, images or {}, Counters(), LIBERO_SPEC)
    assert message in str(info.value)


def test_observation_pickles_and_stays_read_only():
    import pickle

    observation = seal_observation("open the drawer", images_from_native(native(), LIBERO_SPEC), Counters(1, 1, 5),
                                   LIBERO_SPEC)
    copy = pickle.loads(pickle.dumps(observation))
    assert copy.language == observation.language and copy.counters == observation.counters
    np.testing.assert_array_equal(copy.images["agentview"], observation.images["agentview"])
    assert not copy.images["agentview"].flags.writeable
    with pytest.raises(TypeError):
        copy.images["x"] = 1  # type: ignore[index]


@pytest.mark.parametrize("track, expected", [
    ("rgb", None),
    ("rgb+proprio", list(range(7)) + [0.04, -0.04]),
    # its quaternion-to-axis-angle is robosuite's, imported in this process (MuJoCo below it)
    pytest.param("openpi-compat", [0.1, 0.2, 0.3, np.pi, 0.0, 0.0, 0.04, -0.04], marks=pytest.mark.real_libero),
])
def test_track_state_from_native(track, expected):
    from pytest_libero.benchmarks.libero.service import state_from_native

    raw = native(robot0_joint_pos=np.arange(7.0), robot0_gripper_qpos=np.array([0.04, -0.04]),
                 robot0_eef_pos=np.array([0.1, 0.2, 0.3]), robot0_eef_quat=np.array([1.0, 0.0, 0.0, 0.0]),
                 object_pos=np.ones(3))
    state = state_from_native(raw, track)
    if expected is None:
        assert state is None
    else:
        np.testing.assert_allclose(state, expected, atol=1e-9)


@pytest.mark.parametrize("track, state, message", [
    ("rgb", np.zeros(9), "delivers no state"),
    ("rgb+proprio", None, "shape (9,)"),
    ("rgb+proprio", np.zeros(8), "shape (9,)"),
    ("openpi-compat", np.full(8, np.nan), "finite state"),
    ("depth", None, "unknown observation track"),
])
def test_seal_checks_the_track_state(track, state, message):
    with pytest.raises(EnvironmentFault) as info:
        seal_observation("go", images_from_native(native(), LIBERO_SPEC), Counters(), LIBERO_SPEC, state, track)
    assert message in str(info.value)


def test_seal_keeps_a_read_only_state_on_state_tracks():
    observation = seal_observation("go", images_from_native(native(), LIBERO_SPEC), Counters(), LIBERO_SPEC,
                                   np.arange(8.0), "openpi-compat")
    assert observation.state.shape == (8,) and not observation.state.flags.writeable


@pytest.mark.parametrize("raw", [
    np.broadcast_to(np.zeros(7), (2_000_000, 7)),  # a view: its length is read, nothing is converted
    [[0.0] * 7] * 1025,  # a list: len() alone
])
def test_a_chunk_over_the_row_bound_is_refused_by_its_length(raw):
    from pytest_libero.core.contract import MAX_CHUNK_ROWS

    with pytest.raises(ActionError) as info:
        validate_chunk(raw, LIBERO_SPEC)
    rows = len(raw)
    assert f"chunk of {rows} rows is longer than the bound of {MAX_CHUNK_ROWS} rows" in str(info.value)
    assert "--libero-max-chunk-rows" in str(info.value)


def test_the_row_bound_is_a_parameter_and_inclusive():
    assert validate_chunk(np.zeros((8, 7)), LIBERO_SPEC, max_rows=8).shape == (8, 7)
    with pytest.raises(ActionError, match="chunk of 9 rows is longer than the bound of 8 rows"):
        validate_chunk(np.zeros((9, 7)), LIBERO_SPEC, max_rows=8)


# -- the benchmark's spec and the protocol identity ---------------------------------------------

def _identity(**fields):
    from pytest_libero.core.protocol import Protocol

    return Protocol(**{"scope": "default", "budget": "horizon", "replan_interval": 5, "max_policy_calls": None,
                       "spec": LIBERO_SPEC, **fields}).identity


def test_identities_made_before_the_spec_moved_into_the_benchmark_are_unchanged():
    """Pinned from main 13e1103, when core held LIBERO's cameras and horizons: the spec's move into
    the LIBERO package leaves every LIBERO, LIBERO-PRO and LIBERO-plus identity as it was."""
    from pytest_libero.benchmarks.libero_plus.adapter import ADAPTER as PLUS

    assert _identity() == "sha256:b9f0228c1c1eacec"
    assert _identity(budget="decisions", max_policy_calls=200) == "sha256:ab1fc1f6ae61f4d8"
    assert _identity(scope="plan", replan_interval=10, mode="full", schedule="openpi",
                     seeds=(7,)) == "sha256:28939c53d9cbaeac"
    assert _identity(scope="task_coverage", benchmark_options=(("instruction_source", "bddl"),)) \
        == "sha256:e1a594ac1ddd1772"  # LIBERO-PRO: the name is in the identity once there are options
    assert _identity(spec=PLUS.spec, benchmark_options=(("clean_instructions", False), ("robot_init", "upstream"),
                                                        ("trials_per_variant", 1))) == "sha256:138a6cde45c0e0bb"


def test_the_identity_holds_the_benchmarks_spec_and_only_its_horizons():
    from pytest_libero.benchmarks.robomemarena.adapter import ADAPTER as ARENA
    from pytest_libero.core.protocol import Protocol

    libero = Protocol("default", "horizon", 5, None, spec=LIBERO_SPEC)
    assert libero.as_dict()["horizons"]["libero_10"][0] == 520 and "benchmark" not in libero.as_dict()
    assert libero.control_cap("libero_10_swap") == 520  # a LIBERO-PRO suite has its base suite's horizon
    arena = Protocol("default", "horizon", 5, None, spec=ARENA.spec, benchmark_options=(("control_cap", 3000),))
    settings = arena.as_dict()
    assert "horizons" not in settings and settings["benchmark"] == "robomemarena"  # capped by its own option
    assert settings["camera_transform"] == ARENA.spec.camera_transform and arena.control_cap("robomemarena") == 3000
    with pytest.raises(KeyError, match="benchmark 'robomemarena' has no reference horizon for suite 'robomemarena'"):
        Protocol("default", "horizon", 5, None, spec=ARENA.spec).control_cap("robomemarena")


@pytest.mark.parametrize("change, message", [
    ({"cameras": ()}, "cameras (); they must be one or more distinct names"),
    ({"cameras": ("a", "a")}, "cameras ('a', 'a')"),
    ({"image_shape": (64, 64)}, "image shape (64, 64); it must be (height, width, 3)"),
    ({"action_size": 0, "settle_action": ()}, "0 action values in [-1.0, 1.0]"),
    ({"action_low": 1.0}, "low < high"),
    ({"settle_action": (0.0,) * 6}, "settle action (0.0, 0.0, 0.0, 0.0, 0.0, 0.0); it must be one action of 7"),
    ({"settle_action": (0.0,) * 6 + (2.0,)}, "within [-1.0, 1.0]"),
    ({"base_suites": (("libero_10_lan", "libero_100"),)}, "every base suite must have a horizon"),
])
def test_a_malformed_spec_is_refused_naming_the_value(change, message):
    import dataclasses

    with pytest.raises(ValueError) as info:
        dataclasses.replace(LIBERO_SPEC, **change)
    assert message in str(info.value) and "benchmark 'libero' declares" in str(info.value)
