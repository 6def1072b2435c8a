"""A LeRobot interpreter and small LeRobot policies for the tests (issue 32).

`lerobot_venv(cache)` builds a virtualenv with `lerobot==0.4.4` (and the torch it pulls) from the
package index, once: the folder is keyed by the hash of the requirement list, built under a file
lock (two xdist workers, or two sessions, never build it at once) and reused by later sessions.
Nothing is downloaded from a model or dataset hub: the policies are made here, with random
weights, no pretrained backbone and made-up normalization statistics, and saved with LeRobot's
own `save_pretrained` (policy and processors).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REQUIREMENTS = ("lerobot==0.4.4",)
CACHE_ROOT = Path(os.environ.get("PYTEST_LIBERO_VENV_CACHE", Path.home() / ".cache" / "pytest-libero" / "venvs"))
# The ready mark: written last, so a build killed half-way is rebuilt, never half-used.
READY = "requirements.json"


def venv_dir(requirements: tuple[str, ...] = REQUIREMENTS, root: Path = CACHE_ROOT) -> Path:
    """The cache folder of a venv with `requirements` (keyed by their hash and this Python's version)."""
    key = json.dumps({"requirements": sorted(requirements), "python": sys.version_info[:2]}).encode()
    return root / f"lerobot-{hashlib.sha256(key).hexdigest()[:16]}"


def lerobot_venv(requirements: tuple[str, ...] = REQUIREMENTS, root: Path = CACHE_ROOT) -> Path:
    """The python of a cached venv with `requirements`, building it (under a lock) when absent."""
    folder = venv_dir(requirements, root)
    python = folder / "bin" / "python"
    if (folder / READY).is_file():
        return python
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits here while this one builds
        if (folder / READY).is_file():
            return python
        shutil.rmtree(folder, ignore_errors=True)
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                               *requirements], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"building the LeRobot venv {folder} failed (pip exit {done.returncode}):\n"
                               f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        (folder / READY).write_text(json.dumps({"requirements": list(requirements),
                                                "build_s": round(time.monotonic() - start, 1)}))
    return python


# Run in the LeRobot venv: builds the policies and saves them with LeRobot's save_pretrained.
MAKE_POLICIES = r'''
import json, sys
import torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.factory import make_pre_post_processors

out, n_action_steps, chunk_size, dim_model = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(0)
features_in = {"observation.images.image": PolicyFeature(FeatureType.VISUAL, (3, 256, 256)),
               "observation.images.image2": PolicyFeature(FeatureType.VISUAL, (3, 256, 256)),
               "observation.state": PolicyFeature(FeatureType.STATE, (8,))}
features_out = {"action": PolicyFeature(FeatureType.ACTION, (7,))}
config = ACTConfig(input_features=features_in, output_features=features_out, device="cpu",
                   chunk_size=chunk_size, n_action_steps=n_action_steps, pretrained_backbone_weights=None,
                   dim_model=dim_model, dim_feedforward=2 * dim_model, n_heads=4, n_encoder_layers=1,
                   n_decoder_layers=1, use_vae=False)
policy = ACTPolicy(config)
# Made-up statistics: the images as ImageNet's, a state around LIBERO's start pose, and actions with
# a small std, so a random network's outputs (of order 1) stay well inside [-1, 1] after unnormalizing.
stats = {"observation.images.image": {"mean": torch.full((3, 1, 1), 0.45), "std": torch.full((3, 1, 1), 0.25)},
         "observation.images.image2": {"mean": torch.full((3, 1, 1), 0.45), "std": torch.full((3, 1, 1), 0.25)},
         "observation.state": {"mean": torch.tensor([-0.05, 0.0, 1.1, 3.1, 0.0, 0.0, 0.03, -0.03]),
                               "std": torch.tensor([0.1, 0.1, 0.1, 0.5, 0.5, 0.5, 0.01, 0.01])},
         "action": {"mean": torch.zeros(7), "std": torch.full((7,), 0.05),
                    "min": torch.full((7,), -1.0), "max": torch.full((7,), 1.0)}}
pre, post = make_pre_post_processors(config, dataset_stats=stats)
policy.save_pretrained(out)
pre.save_pretrained(out)
post.save_pretrained(out)
print(json.dumps({"path": out, "parameters": sum(p.numel() for p in policy.parameters())}))
'''


def make_act_policy(python: Path, folder: Path, n_action_steps: int = 5, chunk_size: int = 10,
                    dim_model: int = 64) -> Path:
    """Save a small random ACT policy (seeded, no pretrained backbone) into `folder`; return it."""
    done = subprocess.run([str(python), "-c", MAKE_POLICIES, str(folder), str(n_action_steps), str(chunk_size),
                           str(dim_model)], capture_output=True, text=True,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    if done.returncode != 0:
        raise RuntimeError(f"making the ACT policy failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return folder
