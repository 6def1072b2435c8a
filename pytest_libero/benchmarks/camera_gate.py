"""Camera sensors that render only when asked: shared by the service modules of robosuite benchmarks.

robosuite samples each camera observable after the last substep of every control. A gated sensor
returns a blank frame while its gate is closed, so a control whose observation nobody reads costs no
render; the sampling phase is kept, so delivered images and every simulator state are bit-identical
to rendering every control (LIBERO: benchmarks/bench_native_vs_plugin.py; RoboMemArena: the
differential test against its own runner). No simulator import here: it works on the env object.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np


@dataclass
class Renders:
    rendering_s: float = 0.0
    renders: int = 0


@dataclass
class Gate:
    """Whether the camera sensors render on the current control; `timing` (any object with
    rendering_s and renders) counts the renders."""

    timing: Any = field(default_factory=Renders)
    open: bool = False


def gated(real: Callable[..., Any], gate: Gate, blank: np.ndarray) -> Callable[..., Any]:
    """`real` (a robosuite sensor) rendering only while `gate` is open, else returning `blank`."""
    def sensor(obs_cache: dict[str, Any]) -> Any:
        if not gate.open:
            return blank
        start = time.perf_counter()
        image = real(obs_cache)
        gate.timing.rendering_s += time.perf_counter() - start
        gate.timing.renders += 1
        return image

    sensor.__modality__ = real.__modality__  # type: ignore[attr-defined]
    return sensor


def gate_cameras(inner_env: Any, gate: Gate, names: Sequence[str], blank: np.ndarray) -> None:
    """Gate the observables `names` of a robosuite env, now and after every hard reset (which
    re-creates the camera sensors)."""
    for name in names:
        sensor = gated(inner_env._observables[name]._sensor, gate, blank)
        inner_env.modify_observable(observable_name=name, attribute="sensor", modifier=sensor)
    create = inner_env._create_camera_sensors

    def create_gated(*args: Any, **kwargs: Any) -> tuple[list[Any], list[str]]:
        sensors, created = create(*args, **kwargs)
        return [gated(s, gate, blank) if n in names else s for s, n in zip(sensors, created, strict=True)], created

    inner_env._create_camera_sensors = create_gated


def render_now(inner_env: Any, gate: Gate, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The gated observables rendered at the current state (no physics), by name."""
    gate.open = True
    try:
        return {name: inner_env._observables[name]._sensor({}) for name in names}
    finally:
        gate.open = False
