"""`--libero-policy lerobot`: a saved LeRobot policy folder (`pretrained_model/`) as the policy.

It runs in a LeRobot interpreter (`--libero-policy-python PATH/bin/python`, a venv with
`lerobot==0.4.4`): torch and lerobot are imported here only when the policy is built, so this
module costs nothing elsewhere. Tested against lerobot 0.4.4 (tests/test_lerobot.py).

What the policy receives is what `lerobot-eval --env.type=libero` gives it, value for value:

- lerobot's LiberoEnv hands over robosuite's raw renders (`agentview_image` as `image`,
  `robot0_eye_in_hand_image` as `image2`); `preprocess_observation` makes them float32 CHW in
  [0, 1] (`x.float() / 255`) and its LiberoProcessorStep flips H and W, which is the rotated-180
  image this harness delivers. So each delivered camera becomes `observation.images.image` /
  `image2` as float32 CHW / 255 with no flip here: the same numbers.
- `observation.state` is the openpi-compat track's 8-D state (eef position 3, eef axis-angle 3,
  gripper qpos 2), the layout and order of LiberoProcessorStep, as float32. LiberoProcessorStep
  computes the axis-angle in float32 from the quaternion, the harness in float64 (robosuite's
  quat2axisangle) before the cast: the three angles may differ in the last float32 bits
  (tests/test_lerobot.py measures it). The policy declares the openpi-compat track, so a run
  on another track is refused before any episode.
- `task` is the task language, one string per batch row (lerobot-eval's `add_envs_task`).

Then the policy's own saved preprocessor (`policy_preprocessor.json`), the policy and its saved
postprocessor (`policy_postprocessor.json`) run, as in lerobot-eval's rollout. lerobot-eval calls
`select_action` every control: a chunking policy (ACT) predicts a chunk when its queue is empty,
keeps its first `n_action_steps` rows and hands them out one per control. This adapter calls
`predict_action_chunk` once per decision and returns those same `n_action_steps` rows, and the
policy declares `replan_interval = n_action_steps`: under that K the harness executes exactly
the actions lerobot-eval would, computed from the same observations (a run with another K is
refused at start). Postprocessing the rows together equals postprocessing them one by one
(its steps, unnormalize and the move to the CPU, act per row). Temporal ensembling and observation
histories (`n_obs_steps > 1`) need a policy call every control, which a replan interval cannot
give: such a policy is refused when it is built.

Actions are not clipped: an unnormalized action outside [-1, 1] is refused by the harness as a
policy_error, naming the element (lerobot's LiberoEnv would pass it to robosuite, which clips).

`act_batch` serves the policy host: one pass of the vision backbone over every pending episode's
observation, then each episode's own forward from its row of features, so each row is bit-equal
to that observation alone (see `_rows_over_one_backbone_pass`; a policy without a `backbone`
gets one plain batched forward, equal up to float32 rounding). The policy keeps no state between
decisions (the chunk is returned whole), so an episode's key only holds its language until
`end_episode`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

from pytest_libero.core.contract import Observation
from pytest_libero.core.policy import BatchRequest
from pytest_libero.errors import PolicyLoadError

TESTED_LEROBOT: Final = "0.4.4"
# The harness's cameras (LIBERO's spec) as lerobot's LiberoEnv names them (its camera_name_mapping).
CAMERA_KEYS: Final = {"agentview": "observation.images.image", "robot0_eye_in_hand": "observation.images.image2"}
STATE_KEY: Final = "observation.state"
# What a saved LeRobot policy folder holds (PreTrainedPolicy.save_pretrained and the pipelines').
REQUIRED_FILES: Final = ("config.json", "model.safetensors", "policy_preprocessor.json",
                         "policy_postprocessor.json")


def check_folder(path: Any) -> Path:
    """The saved policy folder, or PolicyLoadError naming what is missing and the fix."""
    if not path:
        raise PolicyLoadError("no policy folder given: pass --libero-policy-kwargs '{\"path\": "
                              "\"PATH/TO/pretrained_model\"}' (the folder LeRobot's save_pretrained wrote)")
    folder = Path(str(path)).expanduser()
    if not folder.is_dir():
        raise PolicyLoadError(f"policy folder {str(folder)!r} does not exist or is not a folder; pass the "
                              "pretrained_model/ folder of a LeRobot checkpoint as kwarg \"path\"")
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise PolicyLoadError(
            f"{str(folder)!r} is not a saved LeRobot policy: it lacks {', '.join(missing)}. Pass the "
            "pretrained_model/ folder (policy.save_pretrained and its pre/post-processors' save_pretrained "
            "write config.json, model.safetensors, policy_preprocessor.json and policy_postprocessor.json)")
    return folder


def _import_lerobot() -> Any:
    try:
        import torch
        import lerobot
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
    except ImportError as exc:
        raise PolicyLoadError(
            f"this interpreter ({sys.executable}) cannot import lerobot ({type(exc).__name__}: {exc}). Install it "
            f"there: {sys.executable} -m pip install lerobot=={TESTED_LEROBOT}, and run the policy in it with "
            "--libero-policy-python PATH/TO/VENV/bin/python") from None
    return torch, lerobot, PreTrainedConfig, get_policy_class, make_pre_post_processors


def lerobot_frame(observations: Sequence[Observation], torch: Any) -> dict[str, Any]:
    """The batch lerobot-eval hands the policy's preprocessor for these observations (see the module doc)."""
    frame: dict[str, Any] = {}
    for camera, key in CAMERA_KEYS.items():
        stacked = np.stack([np.asarray(o.images[camera]) for o in observations])  # (B, H, W, 3) uint8
        # The same operations as preprocess_observation: to float32, then divide in place.
        images = torch.from_numpy(stacked).permute(0, 3, 1, 2).contiguous().type(torch.float32)
        images /= 255
        frame[key] = images
    states = []
    for o in observations:
        state = getattr(o, "state", None)
        if not (isinstance(state, np.ndarray) and state.shape == (8,)):
            raise ValueError("the lerobot policy needs the openpi-compat track's 8-D state; this observation has "
                             f"{getattr(state, 'shape', None)}: run with --libero-track openpi-compat")
        states.append(state)
    frame[STATE_KEY] = torch.from_numpy(np.stack(states)).float()
    frame["task"] = [o.language for o in observations]
    return frame


class LeRobotPolicy:
    """A saved LeRobot policy run as lerobot-eval runs it on LIBERO; batched for the policy host."""

    def __init__(self, path: str | None = None, device: str = "cpu", threads: int | None = None) -> None:
        folder = check_folder(path)
        torch, lerobot, config_cls, get_policy_class, make_processors = _import_lerobot()
        self._torch = torch
        if threads is not None:
            torch.set_num_threads(int(threads))  # several copies on one CPU: set each one's share
        try:
            config = config_cls.from_pretrained(str(folder))
            config.device = device
            policy = get_policy_class(config.type).from_pretrained(str(folder), config=config)
            self.preprocessor, self.postprocessor = make_processors(
                config, pretrained_path=str(folder),
                preprocessor_overrides={"device_processor": {"device": device}})
        except Exception as exc:  # noqa: BLE001 - lerobot's loaders raise many types; all are load errors
            raise PolicyLoadError(f"LeRobot could not load the policy in {str(folder)!r}: {type(exc).__name__}: "
                                  f"{str(exc)[:500]}; check it was saved by lerobot {TESTED_LEROBOT}") from None
        self._check_supported(folder, config)
        policy.eval()
        self.policy, self.config = policy, config
        self.n_action_steps = int(getattr(config, "n_action_steps", 1))
        self._languages: dict[str, str] = {}
        self._language = ""
        self.profile: dict[str, Any] = {
            "label": f"LeRobot {config.type} policy at {folder}", "adapter": "lerobot", "path": str(folder),
            "policy_type": config.type, "device": device, "lerobot_version": str(lerobot.__version__),
            # str(): torch's version is a str subclass of torch's, which the harness's side cannot unpickle.
            "torch_version": str(torch.__version__), "n_action_steps": self.n_action_steps,
            "chunk_size": getattr(config, "chunk_size", None),
            "observation_track": "openpi-compat", "image_convention": "rotated-180",
            "replan_interval": self.n_action_steps,
            "parameters": sum(p.numel() for p in policy.parameters()),
        }

    @staticmethod
    def _check_supported(folder: Path, config: Any) -> None:
        wanted = set(getattr(config, "input_features", {}) or {})
        unknown = sorted(wanted - {*CAMERA_KEYS.values(), STATE_KEY})
        if unknown:
            raise PolicyLoadError(f"the policy in {str(folder)!r} wants inputs {unknown}, which lerobot's LIBERO "
                                  f"env does not give; it can take {sorted({*CAMERA_KEYS.values(), STATE_KEY})}")
        if getattr(config, "temporal_ensemble_coeff", None) is not None or int(getattr(config, "n_obs_steps", 1)) > 1:
            raise PolicyLoadError(f"the policy in {str(folder)!r} uses temporal ensembling or n_obs_steps > 1, which "
                                  "need a policy call every control; save it with n_action_steps > 1 and no "
                                  "temporal ensembling (n_obs_steps 1)")

    def chunks(self, observations: Sequence[Observation]) -> np.ndarray:
        """(B, n_action_steps, 7) float64 actions for a batch of observations."""
        torch = self._torch
        batch = self.preprocessor(lerobot_frame(observations, torch))
        backbone = getattr(getattr(self.policy, "model", None), "backbone", None)
        with torch.inference_mode():
            if len(observations) > 1 and backbone is not None and self.config.image_features:
                actions = self._rows_over_one_backbone_pass(batch, backbone, len(observations))
            else:
                actions = self.policy.predict_action_chunk(batch)
        actions = actions[:, :self.n_action_steps]
        rows, steps, size = actions.shape
        actions = self.postprocessor(actions.reshape(rows * steps, size)).reshape(rows, steps, size)
        return np.asarray(actions.to("cpu").numpy(), dtype=np.float64)

    def _rows_over_one_backbone_pass(self, batch: dict[str, Any], backbone: Any, rows: int) -> Any:
        """A batch as bit-equal rows: the vision backbone over the whole batch, the rest per row.

        CPU torch rounds the small matrix products of the transformer's projections (one row per
        episode: MKL's small-M kernels) differently at batch sizes 1 and 2, so a plain batched
        forward differs from each observation alone in the last float32 bits. The backbone's
        convolutions, most of the forward's cost, give the same numbers at any batch size
        (tests/test_lerobot.py, the differential test, checks the result bit-equal): they run once
        for the batch, and each row's forward is the policy's own, handed its row of features.
        """
        torch = self._torch
        features = [backbone(batch[key]) for key in self.config.image_features]  # ACT calls it per camera
        out = []
        for i in range(rows):
            row = {k: (v[i:i + 1] if isinstance(v, torch.Tensor) else [v[i]] if isinstance(v, list) else v)
                   for k, v in batch.items()}
            given = iter([{name: t[i:i + 1] for name, t in f.items()} for f in features])
            backbone.forward = lambda image, given=given: next(given)  # an instance attribute shadows forward
            try:
                out.append(self.policy.predict_action_chunk(row))
            finally:
                del backbone.forward
        return torch.cat(out)

    # -- Policy -------------------------------------------------------------------------------

    def reset(self, language: str) -> None:
        """A new episode; the chunk is returned whole, so the policy keeps no queue to clear."""
        self._language = language
        self.policy.reset()

    def act(self, observation: Observation) -> np.ndarray:
        """The policy's next `n_action_steps` actions."""
        return self.chunks([observation])[0]

    def act_batch(self, requests: Sequence[BatchRequest]) -> list[np.ndarray | Exception]:
        """Every pending episode's chunk, the backbone run once for them all (the policy host's batch)."""
        for request in requests:
            self._languages[request.key] = request.observation.language
        try:
            chunks = self.chunks([r.observation for r in requests])
        except ValueError as exc:  # an observation without the state: that request's episode only
            return [exc for _ in requests]
        return list(chunks)

    def end_episode(self, key: str) -> None:
        """Forget an episode the host says is over."""
        self._languages.pop(key, None)

    def close(self) -> None:
        """Nothing to release beyond what the process's exit frees."""
