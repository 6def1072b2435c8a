"""LIBERO's observation and action spec and its reference horizons (core.spec.BenchmarkSpec).

What the protocol identity of every LIBERO, LIBERO-PRO and LIBERO-plus run holds about the
benchmark: two 256x256 robosuite cameras rotated 180 degrees, 7-D delta end-effector actions in
[-1, 1] (the last the gripper), the settling action, and the per-suite control caps with their
sources. Stdlib only: collection imports it.
"""

from __future__ import annotations

from typing import Final

from pytest_libero.benchmarks.libero import catalog
from pytest_libero.core.spec import BenchmarkSpec

CAMERAS: Final = ("agentview", "robot0_eye_in_hand")
IMAGE_SHAPE: Final = (256, 256, 3)
# Gripper open (-1), the arm still: what published evaluators send while the scene settles.
SETTLE_ACTION: Final = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)

# Per-suite reference control caps and where each number comes from (PROTOCOL.md). Part of every
# LIBERO-family protocol identity. A LIBERO-PRO suite has its base suite's horizon.
REFERENCE_HORIZONS: Final[dict[str, tuple[int, str]]] = {
    "libero_spatial": (220, "OpenVLA/openpi/StarVLA LIBERO evaluators (LeRobot uses 280)"),
    "libero_object": (280, "OpenVLA/openpi/StarVLA LIBERO evaluators"),
    "libero_goal": (300, "OpenVLA/openpi/StarVLA LIBERO evaluators"),
    "libero_90": (400, "OpenVLA/openpi/StarVLA LIBERO evaluators"),
    "libero_10": (520, "retained StarVLA evaluator (LIBERO lifelong config uses 600; "
                       "generic simulator horizon 1000)"),
}


def spec(name: str, *, name_in_identity: bool) -> BenchmarkSpec:
    """LIBERO's spec under a benchmark's name (LIBERO-plus's variants are LIBERO's tasks)."""
    return BenchmarkSpec(
        name=name, cameras=CAMERAS, image_shape=IMAGE_SHAPE, camera_transform="image[::-1, ::-1]",
        action_size=7, action_low=-1.0, action_high=1.0, settle_action=SETTLE_ACTION,
        horizons=tuple((suite, cap, source) for suite, (cap, source) in REFERENCE_HORIZONS.items()),
        base_suites=tuple((suite, catalog.base_suite(suite)) for suite in catalog.PRO_SUITES),
        name_in_identity=name_in_identity)


# LIBERO's identities were made before the benchmark registry: they name no benchmark unless the
# run has benchmark options (a LIBERO-PRO instruction source), and so stay as they were.
SPEC: Final = spec("libero", name_in_identity=False)
