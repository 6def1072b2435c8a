"""The policy contract as data: what a policy sees, what it may return, and the checks on both.

Numpy only. The cameras, image size and action space are the benchmark's (its `BenchmarkSpec`,
core/spec.py), passed to every check. The bench service builds observations with
`images_from_native` (so nothing but the contract's fields ever leaves it) and re-validates every
chunk with `validate_chunk`; the rollout engine validates first, so that a bad chunk becomes a
policy fault that names the defect before anything is sent to the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Mapping

import numpy as np
from numpy.typing import NDArray

from pytest_libero.core.spec import BenchmarkSpec
from pytest_libero.errors import ActionError, EnvironmentFault

# The most rows a chunk may have (--libero-max-chunk-rows). Published policies return 1-50 rows
# (openpi 10-50, OpenVLA-OFT 8, OpenVLA 1) and LIBERO's longest per-suite horizon is 520 controls, so
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
    """Everything a policy may see: task language, the benchmark's RGB images, counters, and the track's state.

    Images are uint8, C-contiguous, read-only, one per camera of the benchmark's spec, of its image
    shape and already transformed as it declares (LIBERO: two 256x256x3, image[::-1, ::-1]).
    `state` is None on the default rgb track; a read-only float64 vector on the others.
    """

    language: str
    images: Mapping[str, NDArray[Any]]
    counters: Counters
    state: NDArray[Any] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # The read-only mapping does not pickle; rebuild it (for policies in another process).
        return (_rebuild_observation, (self.language, dict(self.images), self.counters, self.state))


def _rebuild_observation(language: str, images: dict[str, NDArray[Any]], counters: Counters,
                         state: NDArray[Any] | None = None) -> Observation:
    for array in [*images.values(), *([state] if state is not None else [])]:
        array.setflags(write=False)
    return Observation(language, MappingProxyType(images), counters, state)




# The camera transforms images_from_native knows, by the name a spec's camera_transform gives.
IMAGE_TRANSFORMS: Final = {
    "image[::-1, ::-1]": lambda array: array[::-1, ::-1],
    "image": lambda array: array,
}


def transform_image(raw: Any, camera: str, spec: BenchmarkSpec) -> NDArray[Any]:
    """Apply the spec's camera transform and check the result against its image shape."""
    array = np.asarray(raw)
    if array.dtype != np.uint8 or array.shape != spec.image_shape:
        raise EnvironmentFault(
            f"camera {camera!r} rendered dtype {array.dtype} shape {array.shape}; "
            f"the {spec.name} contract needs uint8 {spec.image_shape}"
        )
    transform = IMAGE_TRANSFORMS.get(spec.camera_transform)
    if transform is None:
        raise EnvironmentFault(f"benchmark {spec.name!r} declares camera transform {spec.camera_transform!r}, "
                               f"which images_from_native cannot apply (it knows {', '.join(IMAGE_TRANSFORMS)}); "
                               "transform the images in the benchmark's service instead")
    return np.ascontiguousarray(transform(array))


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


def images_from_native(raw: Mapping[str, Any], spec: BenchmarkSpec) -> dict[str, NDArray[Any]]:
    """Keep only the spec's camera images of a native robosuite observation dict (`<camera>_image`).

    Everything else in `raw` (object and end-effector poses, proprioception, robot state) is
    dropped here, inside the service, and never crosses the boundary.
    """
    images = {}
    for camera in spec.cameras:
        key = f"{camera}_image"
        if key not in raw:
            raise EnvironmentFault(f"native observation lacks {key!r}; got keys {sorted(raw)}")
        images[camera] = transform_image(raw[key], camera, spec)
    return images


def seal_observation(language: Any, images: Any, counters: Counters, spec: BenchmarkSpec, state: Any = None,
                     track: str = "rgb") -> Observation:
    """Build the policy's Observation from what the service sent, checking every field against `spec`."""
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
    if not isinstance(images, Mapping) or set(images) != set(spec.cameras):
        keys = sorted(images) if isinstance(images, Mapping) else type(images).__name__
        raise EnvironmentFault(f"observation cameras {keys} != {list(spec.cameras)} ({spec.name}'s)")
    sealed = {}
    for camera in spec.cameras:
        image = images[camera]
        if not (isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.shape == spec.image_shape):
            raise EnvironmentFault(
                f"observation image {camera!r} is {getattr(image, 'dtype', type(image).__name__)} "
                f"{getattr(image, 'shape', '')}; the {spec.name} contract needs uint8 {spec.image_shape}"
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


def validate_chunk(raw: Any, spec: BenchmarkSpec, max_rows: int = MAX_CHUNK_ROWS) -> NDArray[Any]:
    """Turn a policy's return value into a float64 (n, A) chunk of the spec's action size A, or raise ActionError.

    Accepted: an array-like of shape (A,) (a chunk of one) or (n, A) with 1 <= n <= `max_rows`,
    integer or float dtype (bool is refused as a likely bug), every value finite and within the
    spec's bounds. Nothing is clipped. The length is checked from the shape first, so an
    oversized chunk costs nothing to refuse.
    """
    size, low, high = spec.action_size, spec.action_low, spec.action_high
    if raw is None:
        raise ActionError(f"policy returned None; return an action chunk of shape {spec.action_shape} or STOP")
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
            f"shape {array.shape}. Return floats in [{low:g}, {high:g}]."
        )
    single = array.ndim == 1 and array.shape[0] == size
    if single:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] != size or array.shape[0] < 1:
        raise ActionError(
            f"action shape {np.shape(raw)} is not ({size},) or {spec.action_shape} with n >= 1 "
            f"({spec.name}'s action size is {size}); value {_describe(raw)}"
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
    outside = (array < low) | (array > high)
    if outside.any():
        row, col = np.argwhere(outside)[0]
        raise ActionError(
            f"action out of bounds [{low:g}, {high:g}]: element {_where(row, col, single)} = "
            f"{array[row, col]} in chunk of shape {np.shape(raw)}; value {_describe(raw)}. "
            "Nothing is clipped: scale the output."
        )
    return np.ascontiguousarray(array)
