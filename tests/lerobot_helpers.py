"""A LeRobot interpreter and small LeRobot policies for the tests (issue 32).

`lerobot_venv(cache)` builds a virtualenv with `lerobot==0.4.4` (and the torch it pulls) from the
package index, once: the folder is keyed by the hash of the requirement list, built under a file
lock (two xdist workers, or two sessions, never build it at once) and reused by later sessions.
The installer is uv (from PyPI, pinned, into the new venv by its pip): the same requirements from
the same index as `pip install lerobot==0.4.4`, resolved to the same versions (and hf_transfer,
which lerobot's requirements name and pip left out; `pip check` passes), for half of pip's CPU
(docs/lerobot.md has the figures).
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
import signal
import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import IO

REQUIREMENTS = ("lerobot==0.4.4",)
CACHE_ROOT = Path(os.environ.get("PYTEST_LIBERO_VENV_CACHE", Path.home() / ".cache" / "pytest-libero" / "venvs"))
# The ready mark: written last, so a build killed half-way is rebuilt, never half-used.
READY = "requirements.json"
# The byte-code mark: written after WARM ran (a venv built before it existed gets it on first use).
WARMED = "bytecode.json"
# The tests' ACT policy (make_act_policy's defaults), made by the same WARM process and kept beside
# the venv (policies/act-KEY/, KEY the hash of MAKE_POLICIES and the sizes): read-only to the tests.
TEST_POLICY_SIZES = (5, 10, 64, 1, 4, 128)  # n_action_steps, chunk_size, dim_model, layers, heads, feedforward
# pip's options: no byte-compiling (Python compiles what it imports, once, on first use), no progress
# output in the log. pip installs only the installer.
PIP_OPTIONS = ("--disable-pip-version-check", "--no-compile", "--progress-bar", "off")
# The installer of the requirements. pip spends most of a build's CPU in Python: unzipping 4.3 GB of
# wheels (torch and the CUDA libraries PyPI's Linux torch pulls even for a CPU machine) one after
# another, copying each into place. uv unzips them in parallel, in native code, into its cache and
# hard-links them into the venv. It reads PyPI (its default index; not pip's configuration: no extra
# indexes, find-links or constraints) and does not byte-compile either. SSL_CERT_FILE, when set, is its
# certificate bundle, as it is pip's.
INSTALLER = "uv==0.13.9"
UV_OPTIONS = ("--no-config", "--no-progress")
# Set by tests/conftest.py on the controller when it started a background build: the build's log.
BACKGROUND_LOG = "PYTEST_LIBERO_LEROBOT_BUILD_LOG"
FAILED, BUILT = "lerobot venv build FAILED", "lerobot venv build done"


def venv_dir(requirements: tuple[str, ...] = REQUIREMENTS, root: Path = CACHE_ROOT) -> Path:
    """The cache folder of a venv with `requirements` (keyed by their hash and this Python's version)."""
    key = json.dumps({"requirements": sorted(requirements), "python": sys.version_info[:2]}).encode()
    return root / f"lerobot-{hashlib.sha256(key).hexdigest()[:16]}"


def _lock_path(folder: Path) -> Path:
    return folder.parent / f"{folder.name}.lock"


def is_ready(folder: Path) -> bool:
    """Built and its byte-code written (see WARM)."""
    return (folder / READY).is_file() and (folder / WARMED).is_file()


def kept_policy_dir(folder: Path, sizes: tuple[int, ...] = TEST_POLICY_SIZES) -> Path:
    """Where the venv `folder` keeps the ACT policy of `sizes` that MAKE_POLICIES saves."""
    key = hashlib.sha256(json.dumps([MAKE_POLICIES, list(sizes)]).encode()).hexdigest()[:12]
    return folder / "policies" / f"act-{key}" / "pretrained_model"


def _save_policy_atomically(folder: Path, make: Callable[[Path], bool]) -> bool:
    """`make(tmp)` saves a policy into tmp/pretrained_model; renamed into place only when it did."""
    target = kept_policy_dir(folder)
    scratch = target.parent.with_name(f"{target.parent.name}.tmp-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    if not make(scratch / target.name):
        shutil.rmtree(scratch, ignore_errors=True)
        return False
    shutil.rmtree(target.parent, ignore_errors=True)
    os.rename(scratch, target.parent)
    return True


# Run in the venv once, after the install, with byte-code writing on: the modules the policy's child,
# the policy maker and the differential test import get their .pyc files (under the tests' PYTHONPYCACHEPREFIX,
# conftest.PYCACHE_PREFIX, where the later processes look for them). Neither pip's --no-compile
# nor uv writes any, and where PYTHONDONTWRITEBYTECODE is set (this machine's environment sets it)
# no process writes them later either: every LeRobot process then compiles the 3,500 modules that
# `lerobot.policies.factory` pulls in (torch, torch._dynamo through torchvision.ops, datasets, pandas)
# anew, about 15 s of CPU each time. Compiling only these, once, costs one such import; the same
# process then saves the tests' policy (MAKE_POLICIES follows WARM in its script).
WARM = r'''
import importlib, json, sys
import torch
from lerobot.policies.factory import get_policy_class
get_policy_class("act")
for name in ("lerobot.configs.policies", "lerobot.configs.types", "lerobot.policies.act.configuration_act",
             "lerobot.policies.act.modeling_act", "lerobot.policies.act.processor_act", "lerobot.envs.configs",
             "lerobot.envs.factory", "lerobot.envs.utils", "lerobot.processor", "safetensors.torch"):
    importlib.import_module(name)
print(json.dumps({"modules_byte_compiled": len(sys.modules)}))
'''


def build(folder: Path, requirements: tuple[str, ...], log: IO[str]) -> bool:
    """Build the venv in `folder` (its lock held by the caller), pip's output to `log`; True when built."""
    shutil.rmtree(folder, ignore_errors=True)
    start, cpu = time.monotonic(), os.times()
    python = folder / "bin" / "python"
    steps = ([sys.executable, "-m", "venv", str(folder)],
             [str(python), "-m", "pip", "install", *PIP_OPTIONS, INSTALLER],
             [str(folder / "bin" / "uv"), "pip", "install", *UV_OPTIONS, "--python", str(python), *requirements])
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}  # the venv's own Python, never a downloaded one
    for step in steps:
        log.write(f"$ {' '.join(step)}\n")
        log.flush()
        done = subprocess.run(step, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
        if done.returncode != 0:
            log.write(f"{FAILED}: exit {done.returncode} of {' '.join(step[:4])}\n")
            log.flush()
            return False
    measured = {"requirements": list(requirements), "installer": INSTALLER, **_spent(start, cpu)}
    (folder / READY).write_text(json.dumps(measured))
    log.write(f"{BUILT}: {json.dumps(measured)}\n")
    log.flush()
    return warm(folder, log)


def _spent(start: float, cpu: os.times_result) -> dict[str, float]:
    end = os.times()
    return {"build_s": round(time.monotonic() - start, 1),
            "build_cpu_s": round(end.children_user + end.children_system - cpu.children_user - cpu.children_system, 1)}


def warm(folder: Path, log: IO[str]) -> bool:
    """Write the byte-code of what the tests import (WARM) in the built venv `folder`; True when done."""
    start, cpu = time.monotonic(), os.times()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    log.write("$ python -c WARM+MAKE_POLICIES (the byte-code of what the tests import; the tests' policy)\n")
    log.flush()

    def make(out: Path) -> bool:
        step = [str(folder / "bin" / "python"), "-c", WARM + MAKE_POLICIES, str(out), *map(str, TEST_POLICY_SIZES)]
        done = subprocess.run(step, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
        if done.returncode != 0:
            log.write(f"{FAILED}: exit {done.returncode} of the byte-code step\n")
            log.flush()
        return done.returncode == 0

    if not _save_policy_atomically(folder, make):
        return False
    measured = _spent(start, cpu)
    (folder / WARMED).write_text(json.dumps(measured))
    log.write(f"{BUILT} (byte-code): {json.dumps(measured)}\n")
    log.flush()
    return True


def build_or_warm(folder: Path, requirements: tuple[str, ...], log: IO[str]) -> bool:
    """What `folder` lacks (its lock held by the caller): the whole build, or only its byte-code."""
    return warm(folder, log) if (folder / READY).is_file() else build(folder, requirements, log)


def lerobot_venv(requirements: tuple[str, ...] = REQUIREMENTS, root: Path = CACHE_ROOT) -> Path:
    """The python of a cached venv with `requirements`, building it (under a lock) when absent.

    When tests/conftest.py started the build in the background (BACKGROUND_LOG set), this waits
    for it on the lock and raises with the tail of its log if it failed, instead of building again.
    """
    folder = venv_dir(requirements, root)
    python = folder / "bin" / "python"
    if is_ready(folder):
        return python
    folder.parent.mkdir(parents=True, exist_ok=True)
    background = os.environ.get(BACKGROUND_LOG)
    with open(_lock_path(folder), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a background build, another worker or session builds: wait
        if is_ready(folder):
            return python
        if background and Path(background).is_file():
            tail = Path(background).read_text(errors="replace")[-4000:]
            raise RuntimeError(f"the background build of the LeRobot venv {folder} failed or was stopped (log "
                               f"{background}); its log ends:\n{tail}")
        log_path = folder.parent / f"{folder.name}.log"
        with open(log_path, "a" if (folder / READY).is_file() else "w") as log:
            if not build_or_warm(folder, requirements, log):
                raise RuntimeError(f"building the LeRobot venv {folder} failed (log {log_path}); it ends:\n"
                                   f"{log_path.read_text(errors='replace')[-4000:]}")
    return python


def start_background_build(requirements: tuple[str, ...] = REQUIREMENTS, root: Path = CACHE_ROOT
                           ) -> tuple[subprocess.Popen[bytes], Path] | None:
    """Start building the venv in a detached process holding its lock; None when it is built, or
    already being built by another session. The caller stops it if the session ends first."""
    folder = venv_dir(requirements, root)
    if is_ready(folder):
        return None
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(_lock_path(folder), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # someone builds it now; the fixture waits on the lock
        if is_ready(folder):
            return None
        log_path = folder.parent / f"{folder.name}.log"
        with open(log_path, "a" if (folder / READY).is_file() else "w") as log:
            # The child inherits the locked file (same open file, same lock): the lock is held from
            # now until the build ends, whoever asks for it next. Our copy closes below.
            process = subprocess.Popen([sys.executable, __file__, "--build", str(root), *requirements],
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True, pass_fds=(lock.fileno(),),
                                       env={**os.environ, "PYTEST_LIBERO_LOCK_FD": str(lock.fileno())})
    return process, log_path


def stop_background_build(process: subprocess.Popen[bytes], log_path: Path) -> None:
    """End a background build that outlived the session (its process group), and say so in its log."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    with open(log_path, "a") as log:
        log.write("stopped: the test session ended before the build did (the next session builds it anew)\n")


def _main() -> None:
    """`lerobot_helpers.py --build ROOT REQUIREMENT...`: the background build (the lock held by fd)."""
    root, requirements = Path(sys.argv[2]), tuple(sys.argv[3:])
    os.set_inheritable(int(os.environ["PYTEST_LIBERO_LOCK_FD"]), False)  # pip and its children need not hold it
    sys.exit(0 if build_or_warm(venv_dir(requirements, root), requirements, sys.stdout) else 1)


# Run in the LeRobot venv: builds the policies and saves them with LeRobot's save_pretrained.
MAKE_POLICIES = r'''
import json, sys
import torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.factory import make_pre_post_processors

out, n_action_steps, chunk_size, dim_model, layers, heads, feedforward = sys.argv[1], *map(int, sys.argv[2:8])
torch.manual_seed(0)
features_in = {"observation.images.image": PolicyFeature(FeatureType.VISUAL, (3, 256, 256)),
               "observation.images.image2": PolicyFeature(FeatureType.VISUAL, (3, 256, 256)),
               "observation.state": PolicyFeature(FeatureType.STATE, (8,))}
features_out = {"action": PolicyFeature(FeatureType.ACTION, (7,))}
config = ACTConfig(input_features=features_in, output_features=features_out, device="cpu",
                   chunk_size=chunk_size, n_action_steps=n_action_steps, pretrained_backbone_weights=None,
                   dim_model=dim_model, dim_feedforward=feedforward, n_heads=heads, n_encoder_layers=layers,
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


def kept_act_policy(python: Path) -> Path:
    """The tests' ACT policy kept beside the venv of `python` (WARM saved it), made now if absent
    (a venv warmed before MAKE_POLICIES changed), under the venv's lock."""
    folder = python.parent.parent
    target = kept_policy_dir(folder)
    if (target / "config.json").is_file():
        return target
    with open(_lock_path(folder), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "config.json").is_file():
            _save_policy_atomically(folder, lambda out: make_act_policy(python, out, *TEST_POLICY_SIZES) == out)
    return target


def make_act_policy(python: Path, folder: Path, n_action_steps: int = 5, chunk_size: int = 10,
                    dim_model: int = 64, layers: int = 1, heads: int = 4, feedforward: int | None = None) -> Path:
    """Save a random ACT policy (seeded, no pretrained backbone) into `folder`; return it. The defaults
    are small (the tests); ACT's own size is dim_model 512, 4 encoder layers, 8 heads, feedforward 3200."""
    sizes = (n_action_steps, chunk_size, dim_model, layers, heads, feedforward or 2 * dim_model)
    done = subprocess.run([str(python), "-c", MAKE_POLICIES, str(folder), *map(str, sizes)], capture_output=True,
                          text=True,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    if done.returncode != 0:
        raise RuntimeError(f"making the ACT policy failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return folder


# Run in the suite's venv (it has LIBERO): one raw robosuite observation of a cell's first init
# state, and what the harness's service makes of it (the contract's images and openpi-compat state).
CAPTURE = r'''
import sys, tempfile
import numpy as np
from pytest_libero.benchmarks.libero import catalog
from pytest_libero.benchmarks.libero.inventory import InstalledLibero
from pytest_libero.benchmarks.libero.service import make_native_env, prepare_process_environment, state_from_native
from pytest_libero.benchmarks.libero.spec import SPEC
from pytest_libero.core.contract import images_from_native

prepare_process_environment(tempfile.mkdtemp())
entry = catalog.entry("libero_10", 0)
root = InstalledLibero.locate()
with np.load(root.init_root / entry["init_states_file"]) as data:
    init = data["states"][0]
env = make_native_env(str(root.bddl_root / entry["bddl_file"]))
env.reset()
raw = env.set_init_state(init)
images = images_from_native(raw, SPEC)
np.savez(sys.argv[1], language=np.array(env.language_instruction),
         **{f"raw_{k}": np.asarray(raw[k]) for k in ("agentview_image", "robot0_eye_in_hand_image",
                                                    "robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos",
                                                    "robot0_gripper_qvel", "robot0_joint_pos", "robot0_joint_vel")},
         ee_ori_mat=np.asarray(env.robots[0].controller.ee_ori_mat),
         **{f"ours_{k}": v for k, v in images.items()}, ours_state=state_from_native(raw, "openpi-compat"))
env.close()
'''

# Run in the LeRobot venv, on the captured arrays: lerobot's own LIBERO path (LiberoEnv._format_raw_obs,
# a vector env's batch of one, preprocess_observation, the task, make_env_pre_post_processors's
# LiberoProcessorStep, the policy's preprocessor) against the adapter's (lerobot_frame, the same
# preprocessor). lerobot/envs/libero.py imports LIBERO at module import, and LIBERO is not in that
# venv (it pins numpy 1.26 and robosuite 1.4; lerobot wants numpy 2): stub modules stand in for the
# three names it imports, which its conversion never calls.
DIFFERENTIAL = r'''
import importlib.util, json, sys, types
import numpy as np
roots, captured, folder = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
for name, path in roots:
    spec = importlib.util.spec_from_file_location(name, path + "/__init__.py", submodule_search_locations=[path])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    spec.loader.exec_module(module)
stub = {n: types.ModuleType(n) for n in ("libero", "libero.libero", "libero.libero.envs")}
stub["libero.libero"].benchmark, stub["libero.libero"].get_libero_path = types.SimpleNamespace(Benchmark=object), None
stub["libero.libero.envs"].OffScreenRenderEnv = None
sys.modules.update(stub)
import torch
from lerobot.envs import libero as lerobot_libero
from lerobot.envs.configs import LiberoEnv as LiberoEnvConfig
from lerobot.envs.factory import make_env_pre_post_processors
from lerobot.envs.utils import preprocess_observation
from pytest_libero.adapters.lerobot import LeRobotPolicy, lerobot_frame
from pytest_libero.core.contract import Counters, Observation

data = np.load(captured)
raw = {k[4:]: data[k] for k in data.files if k.startswith("raw_")}
language = str(data["language"])
env = lerobot_libero.LiberoEnv.__new__(lerobot_libero.LiberoEnv)
env.camera_name = lerobot_libero._parse_camera_names("agentview_image,robot0_eye_in_hand_image")
env.camera_name_mapping = {"agentview_image": "image", "robot0_eye_in_hand_image": "image2"}
env.obs_type = "pixels_agent_pos"
env._env = types.SimpleNamespace(robots=[types.SimpleNamespace(controller=types.SimpleNamespace(
    ee_ori_mat=data["ee_ori_mat"]))])
single = env._format_raw_obs(raw)
def batch_of_one(tree):  # what gymnasium's SyncVectorEnv makes of one env's observation
    return {k: batch_of_one(v) for k, v in tree.items()} if isinstance(tree, dict) else np.stack([tree])
theirs = preprocess_observation(batch_of_one(single))
theirs["task"] = [language]
policy = LeRobotPolicy(path=folder)
env_pre, _ = make_env_pre_post_processors(LiberoEnvConfig(), policy.config)
theirs = env_pre(theirs)
ours = lerobot_frame([Observation(language, {"agentview": data["ours_agentview"],
                                             "robot0_eye_in_hand": data["ours_robot0_eye_in_hand"]},
                                  Counters(), data["ours_state"])], torch)
def compare(a, b):
    out = {}
    for key in sorted(k for k in set(a) | set(b) if k.startswith("observation.") or k == "task"):
        x, y = a.get(key), b.get(key)
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            out[key] = {"shape": [list(x.shape), list(y.shape)], "dtype": [str(x.dtype), str(y.dtype)],
                        "equal": bool(x.shape == y.shape and torch.equal(x, y)),
                        "max_abs": float((x.double() - y.double()).abs().max()) if x.shape == y.shape else None}
        else:
            out[key] = {"equal": x == y, "repr": [repr(x)[:80], repr(y)[:80]]}
    return out
before = compare(theirs, ours)
theirs_pre, ours_pre = policy.preprocessor(dict(theirs)), policy.preprocessor(dict(ours))
after = compare(theirs_pre, ours_pre)
with torch.inference_mode():
    a_theirs = policy.policy.predict_action_chunk(theirs_pre)[:, :policy.n_action_steps]
    a_ours = policy.policy.predict_action_chunk(ours_pre)[:, :policy.n_action_steps]
# A batch of two (the policy host's act_batch) against each observation alone: the second is the
# first with its cameras swapped, so the rows differ.
from pytest_libero.core.policy import BatchRequest
front, wrist = data["ours_agentview"], data["ours_robot0_eye_in_hand"]
one = Observation(language, {"agentview": front, "robot0_eye_in_hand": wrist}, Counters(), data["ours_state"])
two = Observation(language, {"agentview": wrist, "robot0_eye_in_hand": front}, Counters(), data["ours_state"])
pair = policy.act_batch([BatchRequest("a", one, True), BatchRequest("b", two, True)])
alone = [policy.act(one), policy.act(two)]
print("DIFFERENTIAL " + json.dumps({"before": before, "after": after, "language": language,
                                    "actions_max_abs": float((a_theirs - a_ours).abs().max()),
                                    "batch_vs_alone_max_abs": float(max(np.abs(p - a).max()
                                                                        for p, a in zip(pair, alone))),
                                    "rows_differ": bool(np.abs(alone[0] - alone[1]).max() > 0)}))
'''


if __name__ == "__main__" and sys.argv[1:2] == ["--build"]:
    _main()
