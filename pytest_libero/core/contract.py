"""The policy contract as data: what a policy sees, what it may return, and the checks on both.

Numpy only. The bench service builds observations with `images_from_native` (so nothing
but the contract's fields ever leaves it) and re-validates every chunk with `validate_chunk`;
the rollout engine validates first, so that a bad chunk becomes a policy fault that names the
defect before anything is sent to the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Mapping

import numpy as np

from pytest_libero.errors import ActionError, EnvironmentFault

CAMERAS: Final = ("agentview", "robot0_eye_in_hand")
IMAGE_SHAPE: Final = (256, 256, 3)
ACTION_DIM: Final = 7
ACTION_LOW: Final = -1.0
ACTION_HIGH: Final = 1.0
SETTLE_ACTION: Final = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)
# The most rows a chunk may have (--libero-max-chunk-rows). Published policies return 1-50 rows
# (openpi 10-50, OpenVLA-OFT 8, OpenVLA 1) and the longest per-suite horizon is 520 controls, so
# 1024 admits every published policy and even a whole-episode open-loop plan, while a runaway
# chunk (the 2,000,000 rows of issue 15) is refused from its length before it is converted.
# Only the first K rows of a chunk are ever executed.
MAX_CHUNK_ROWS: Final = 1024
# Observation tracks: what besides language and images the policy receives. Each is part of the
# protocol identity; results of different tracks are never comparable.
#   rgb            nothing else (the default protocol)
#   rgb+proprio    7 arm joint + 2 gripper finger encoders (9,)
#   openpi-compat  eef position (3) + eef axis-angle (3) + gripper qpos (2) = (8,), the state
#                  openpi / OpenVLA-OFT LIBERO checkpoints expect; it exposes end-effector
#                  state, so it is a named compatibility track, reported separately
TRACKS: Final = ("rgb", "rgb+proprio", "openpi-compat")
# What the delivered images are, for adapters that declare `profile["image_convention"]`.
IMAGE_CONVENTION: Final = "rotated-180"
IMAGE_CONVENTIONS: Final = {
    "rotated-180": "robosuite's OpenGL render rotated 180 degrees, image[::-1, ::-1] (the LIBERO "
                   "convention of OpenVLA, openpi and StarVLA training data; looks upright)",
    "raw-opengl": "robosuite's OpenGL render as it comes (upside down and mirrored)",
    "vertical-flip": "robosuite's render flipped vertically only, image[::-1] (mirrored left-right)",
}
STATE_DIMS: Final = {"rgb": None, "rgb+proprio": 9, "openpi-compat": 8}


class Stop:
    """The explicit stop: the policy ends its attempt; consumes a policy call, no action decision."""

    _instance: Stop | None = None

    def __new__(cls) -> Stop:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "STOP"

    def __reduce__(self) -> str:
        return "STOP"


STOP: Final = Stop()


@dataclass(frozen=True, slots=True)
class Counters:
    """Execution counters, given to the policy as accounting feedback only."""

    policy_calls: int = 0
    action_decisions: int = 0
    executed_controls: int = 0


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything a policy may see: task language, two RGB images, counters, and the track's state.

    Images are uint8, C-contiguous, read-only, 256x256x3, already transformed image[::-1, ::-1].
    `state` is None on the default rgb track; a read-only float64 vector on the others.
    """

    language: str
    images: Mapping[str, np.ndarray]
    counters: Counters
    state: np.ndarray | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # The read-only mapping does not pickle; rebuild it (for policies in another process).
        return (_rebuild_observation, (self.language, dict(self.images), self.counters, self.state))


def _rebuild_observation(language: str, images: dict[str, np.ndarray], counters: Counters,
                         state: np.ndarray | None = None) -> Observation:
    for array in [*images.values(), *([state] if state is not None else [])]:
        array.setflags(write=False)
    return Observation(language, MappingProxyType(images), counters, state)




def transform_image(raw: Any, camera: str) -> np.ndarray:
    """Apply the retained camera transform (a 180-degree rotation) and check the result."""
    array = np.asarray(raw)
    if array.dtype != np.uint8 or array.shape != IMAGE_SHAPE:
        raise EnvironmentFault(
            f"camera {camera!r} rendered dtype {array.dtype} shape {array.shape}; "
            f"the contract needs uint8 {IMAGE_SHAPE}"
        )
    return np.ascontiguousarray(array[::-1, ::-1])


def check_image_convention(policy_name: str, profile: Any) -> None:
    """Refuse a policy whose profile declares another image convention than the one delivered."""
    from pytest_libero.errors import PolicyLoadError

    declared = profile.get("image_convention") if isinstance(profile, Mapping) else None
    if declared is None or declared == IMAGE_CONVENTION:
        return
    theirs = IMAGE_CONVENTIONS.get(declared, "a convention this harness does not know")
    raise PolicyLoadError(
        f"policy {policy_name!r} declares image convention {declared!r} ({theirs}), but the harness "
        f"delivers {IMAGE_CONVENTION!r} ({IMAGE_CONVENTIONS[IMAGE_CONVENTION]}). Refusing to start: "
        "convert images inside the adapter and declare what it then receives, or fix the declaration.")


def images_from_native(raw: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Keep only the contract's camera images of a native robosuite observation dict.

    Everything else in `raw` (object and end-effector poses, proprioception, robot state) is
    dropped here, inside the service, and never crosses the boundary.
    """
    images = {}
    for camera in CAMERAS:
        key = f"{camera}_image"
        if key not in raw:
            raise EnvironmentFault(f"native observation lacks {key!r}; got keys {sorted(raw)}")
        images[camera] = transform_image(raw[key], camera)
    return images


def seal_observation(language: Any, images: Any, counters: Counters, state: Any = None,
                     track: str = "rgb") -> Observation:
    """Build the policy's Observation from what the service sent, checking every field."""
    dim = STATE_DIMS.get(track, -1)
    if dim == -1:
        raise EnvironmentFault(f"unknown observation track {track!r}; one of {', '.join(TRACKS)}")
    if dim is None and state is not None:
        raise EnvironmentFault("the rgb track delivers no state, but the service sent one")
    if dim is not None:
        if not (isinstance(state, np.ndarray) and state.shape == (dim,) and np.isfinite(state).all()):
            raise EnvironmentFault(f"track {track!r} needs a finite state of shape ({dim},), got "
                                   f"{getattr(state, 'shape', type(state).__name__)}")
        state = np.array(state, dtype=np.float64, copy=True)
        state.setflags(write=False)
    if not isinstance(language, str) or not language:
        raise EnvironmentFault(f"task language must be a non-empty str, got {language!r:.80}")
    if not isinstance(images, Mapping) or set(images) != set(CAMERAS):
        keys = sorted(images) if isinstance(images, Mapping) else type(images).__name__
        raise EnvironmentFault(f"observation cameras {keys} != {list(CAMERAS)}")
    sealed = {}
    for camera in CAMERAS:
        image = images[camera]
        if not (isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.shape == IMAGE_SHAPE):
            raise EnvironmentFault(
                f"observation image {camera!r} is {getattr(image, 'dtype', type(image).__name__)} "
                f"{getattr(image, 'shape', '')}; the contract needs uint8 {IMAGE_SHAPE}"
            )
        image = np.array(image, dtype=np.uint8, order="C", copy=True)
        image.setflags(write=False)
        sealed[camera] = image
    return Observation(language=language, images=MappingProxyType(sealed), counters=counters, state=state)


def _describe(value: Any) -> str:
    text = " ".join(np.array2string(np.asarray(value), threshold=20, precision=4, separator=", ").split())
    return text if len(text) <= 300 else text[:297] + "..."


def _where(row: int, col: int, single: bool) -> str:
    return f"[{col}]" if single else f"[{row}, {col}]"


def _too_long(rows: int, max_rows: int) -> str:
    return (f"chunk of {rows} rows is longer than the bound of {max_rows} rows per chunk (only the first K "
            f"rows of a chunk are executed). Return at most {max_rows} rows, or raise the bound with "
            "--libero-max-chunk-rows N")


def chunk_rows(raw: Any) -> int | None:
    """The row count of a returned chunk read from its shape or length alone (no conversion), or
    None when that cannot be told without converting it (then it is small enough to convert)."""
    shape = getattr(raw, "shape", None)
    if isinstance(shape, tuple):
        return int(shape[0]) if len(shape) == 2 else None
    if isinstance(raw, (list, tuple)) and raw and not isinstance(raw[0], (int, float, np.number)):
        return len(raw)
    return None


def validate_chunk(raw: Any, max_rows: int = MAX_CHUNK_ROWS) -> np.ndarray:
    """Turn a policy's return value into a float64 (n, 7) chunk, or raise ActionError.

    Accepted: an array-like of shape (7,) (a chunk of one) or (n, 7) with 1 <= n <= `max_rows`,
    integer or float dtype (bool is refused as a likely bug), every value finite and within
    [-1, 1]. Nothing is clipped. The length is checked from the shape first, so an oversized
    chunk costs nothing to refuse.
    """
    if raw is None:
        raise ActionError("policy returned None; return an action chunk of shape (n, 7) or STOP")
    rows = chunk_rows(raw)
    if rows is not None and rows > max_rows:
        raise ActionError(_too_long(rows, max_rows))
    try:
        array = np.asarray(raw)
    except (TypeError, ValueError) as exc:
        raise ActionError(f"action is not array-like ({type(raw).__name__}): {exc}") from exc
    if array.dtype.kind not in "iuf":
        raise ActionError(
            f"action dtype {array.dtype} is not a real number type; value {_describe(raw)!s:.200}, "
            f"shape {array.shape}. Return floats in [-1, 1]."
        )
    single = array.ndim == 1 and array.shape[0] == ACTION_DIM
    if single:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] != ACTION_DIM or array.shape[0] < 1:
        raise ActionError(
            f"action shape {np.shape(raw)} is not (7,) or (n, 7) with n >= 1; value {_describe(raw)}"
        )
    if array.shape[0] > max_rows:
        raise ActionError(_too_long(array.shape[0], max_rows))
    array = array.astype(np.float64)
    finite = np.isfinite(array)
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        raise ActionError(
            f"action is not finite: element {_where(row, col, single)} = {array[row, col]} in chunk of shape "
            f"{np.shape(raw)}; value {_describe(raw)}"
        )
    outside = (array < ACTION_LOW) | (array > ACTION_HIGH)
    if outside.any():
        row, col = np.argwhere(outside)[0]
        raise ActionError(
            f"action out of bounds [-1, 1]: element {_where(row, col, single)} = {array[row, col]} in chunk of "
            f"shape {np.shape(raw)}; value {_describe(raw)}. Nothing is clipped: scale the output."
        )
    return np.ascontiguousarray(array)
