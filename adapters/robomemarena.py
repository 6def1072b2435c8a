"""Run a RoboMemArena-style adapter unchanged: `reset()` plus `infer_actions(obs, prompt, resize_size)`.

RoboMemArena's evaluation benchmark loads `path.py:build_adapter` with JSON kwargs, and calls
`adapter.reset()` per episode and `adapter.infer_actions(obs, prompt, resize_size)` for an
[horizon, action_dim] chunk. The built-in resolver detects that shape and wraps the object in
`RoboMemArenaPolicy`, which builds the obs dict such adapters read from our Observation.

The obs dict (keys as RoboMemArena's `build_eval26_policy_input` names them, V1 and later):

- ``observation/image``, ``base_0_rgb``: agentview as RoboMemArena orients it, a vertical flip
  of the native render (np.flipud). Our contract image is the native render rotated by
  180 degrees, so this is ``image[:, ::-1]`` of ours, with no resampling.
- ``observation/wrist_image``, ``right_wrist_0_rgb``: robot0_eye_in_hand, oriented the same way.
- ``left_wrist_0_rgb``: zeros of the wrist image's shape (as RoboMemArena sends).
- ``agentview_image``, ``robot0_eye_in_hand_image``: the native (unflipped) renders, for
  adapters that read the raw robosuite keys and flip them themselves; ``_raw_obs`` holds these two.
- ``prompt``: the native LIBERO task language (RoboMemArena passes its BDDL-stem prompt here).

- ``observation/state``: only on the openpi-compat observation track, whose 8-d state (eef
  position, eef axis-angle, 2 gripper qpos) is the vector RoboMemArena builds.

Not available on the default rgb track, which gives the policy images and language only:
``observation/state``, ``robot0_*`` proprioception and every object key. Reading one raises a
KeyError that says so; the episode then ends as a policy fault.

Images stay 256x256: the harness never resizes. `resize_size` (default 256, RoboMemArena's
usual value; kwarg ``resize_size``) is only passed on; an adapter wanting another size resizes
itself.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from pytest_libero.core.contract import Observation

UNAVAILABLE_HINT: Final = ("is not available: the rgb track gives the policy two camera images and the "
                           "task language only (no proprioception, no eef state, no object state)")


class _AdapterObs(dict):  # type: ignore[type-arg]
    """The obs dict; a missing key says why it is missing instead of a bare KeyError."""

    def __missing__(self, key: Any) -> Any:
        raise KeyError(f"obs[{key!r}] {UNAVAILABLE_HINT}; available keys: {sorted(self)}")


def adapter_obs(observation: Observation) -> dict[str, Any]:
    """The RoboMemArena-style obs dict for one of our Observations (see the module docstring)."""
    agent = observation.images["agentview"]
    wrist = observation.images["robot0_eye_in_hand"]
    # Ours is native[::-1, ::-1]; RoboMemArena's is native[::-1] (flipud), i.e. ours[:, ::-1].
    main = _frozen(agent[:, ::-1])
    hand = _frozen(wrist[:, ::-1])
    raw = {"agentview_image": _frozen(agent[::-1, ::-1]), "robot0_eye_in_hand_image": _frozen(wrist[::-1, ::-1])}
    obs = _AdapterObs(raw)
    obs.update({
        "observation/image": main, "observation/wrist_image": hand,
        "base_0_rgb": main, "left_wrist_0_rgb": _frozen(np.zeros_like(hand)), "right_wrist_0_rgb": hand,
        "prompt": observation.language, "_raw_obs": dict(raw),
    })
    state = getattr(observation, "state", None)  # the field exists only with observation tracks
    if isinstance(state, np.ndarray) and state.shape == (8,):
        obs["observation/state"] = np.array(state, dtype=np.float32)  # RoboMemArena sends float32
    return obs


def _frozen(image: np.ndarray) -> np.ndarray:
    out = np.ascontiguousarray(image)
    out.setflags(write=False)
    return out


class RoboMemArenaPolicy:
    """A `Policy` around a RoboMemArena-style adapter; the adapter's code runs unchanged."""

    DEFAULT_RESIZE_SIZE: Final = 256

    def __init__(self, adapter: Any, resize_size: Any = DEFAULT_RESIZE_SIZE) -> None:
        if isinstance(resize_size, bool) or not isinstance(resize_size, int) or resize_size < 1:
            raise ValueError(f"resize_size must be a positive integer, got {resize_size!r}")
        self.adapter = adapter
        self.resize_size = resize_size
        self._prompt = ""
        declared = getattr(adapter, "profile", None)
        self.profile: dict[str, Any] = dict(declared) if isinstance(declared, dict) else {}
        self.profile.setdefault("label", f"RoboMemArena-style adapter {type(adapter).__name__}")
        self.profile.update({
            "adapter_style": "robomemarena",
            "adapter_class": f"{type(adapter).__module__}.{type(adapter).__qualname__}",
            "resize_size": resize_size,
            "observation_keys": sorted(adapter_obs_keys()),
            "state": "observation/state only on the openpi-compat track; absent on the rgb track",
        })

    def reset(self, language: str) -> None:
        """Remember the task language (the prompt) and reset the adapter (it takes no arguments)."""
        self._prompt = language
        self.adapter.reset()

    def act(self, observation: Observation) -> Any:
        """Return the adapter's [horizon, action_dim] chunk as it is (the harness validates it)."""
        return self.adapter.infer_actions(adapter_obs(observation), self._prompt, self.resize_size)

    def close(self) -> None:
        """Call the adapter's close(), if it has one."""
        close = getattr(self.adapter, "close", None)
        if callable(close):
            close()


def adapter_obs_keys() -> list[str]:
    """The keys of the obs dict given to `infer_actions`."""
    return ["_raw_obs", "agentview_image", "base_0_rgb", "left_wrist_0_rgb", "observation/image",
            "observation/wrist_image", "prompt", "right_wrist_0_rgb", "robot0_eye_in_hand_image"]
