"""RoboMemArena's service module: the only code that imports the checkout's LIBERO fork and scorer.

It runs inside the bench service process (pytest_libero.runtime.server), with the checkout's
`libero_fork` and `scripts` first on the path (the fork and the installed LIBERO are both the
package `libero`, so they never share a process), a LIBERO config written into the service's
temporary folder (else importing the fork asks for input) and a `gym` alias of gymnasium when the
interpreter has no `gym`. Nothing is written into the checkout.

An episode follows RoboMemArena's runner (run_all_tasks1_26.py and the loops it calls), with its
own code doing the scoring:
- the environment: the checkout's OffScreenRenderEnv with the runner's arguments, cameras forced
  to 480x640 by the checkout's `_patch_env_resolution`; one per task, kept between its episodes
  as the runner keeps it (--libero-env-reuse off builds a fresh one per episode); its cameras
  render only for the controls whose observation is delivered or filmed (camera_gate: the same
  simulator states and images as rendering every control, which the runner does; the
  differential test compares every delivered image with the runner's);
- seeding (pytest_libero.benchmarks.seeding): the cell's seed on Python's `random` and NumPy's global
  generator before the environment is built or taken from the cache, so the build's placement draws
  never depend on earlier episodes (the runner builds its env unseeded: docs/robomemarena.md);
- reset: the same generators seeded again, np.random.seed(seed) and env.seed(seed) (the runner's),
  env.reset(), then the settling controls; a scene the fork's sampler cannot place is an
  environment error naming the sampler;
- the adapter's observation: the checkout's `build_eval26_policy_input` (delivered as the contract's
  two images, mirrored back by the RoboMemArena adapter wrapper, and the 8-d observation/state);
- each control: the action as float32 (the runner's `ensure_action_chunk`), env.step, then the
  stage checks with the runner's sequencing (task 1: eval_task1_only.STAGE_CHECKS, a stage may
  complete once every earlier one has, several on one control; tasks 2-26: the checkout's
  `_task_specs` with its `_build_initial_state`/`_update_state`, only the next stage is tested, at
  most one per control), then the BDDL goal (the task's `_goal_override_check` when it has one,
  else eval_common.check_goal_success);
- the end: at the step cap, or `post_goal_steps` controls after the goal first held.
The episode succeeds (TSR) when every stage completed. Unlike the runner, an exception in the
simulator or the scorer is not scored 0: it reaches the worker as an environment error.

One deliberate difference: b175708's tasks 2-26 loop calls the goal override with one argument
while the scorer's overrides take (env, stage_done), a TypeError that ends tasks 6-10, 15, 16, 18
and 19 on their first control there (shared/research/robomemarena.md, section 3.6). Here the override is
called with the arguments it declares.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from pytest_libero.benchmarks.camera_gate import Gate, Renders, gate_cameras, render_now
from pytest_libero.benchmarks.install_probe import fingerprint_of
from pytest_libero.benchmarks.robomemarena import checkout as rc
from pytest_libero.benchmarks.robomemarena.options import CAMERAS, SERVICE_CHECKOUT_ENV
from pytest_libero.benchmarks.robosuite_log import drop_macro_file_notice
from pytest_libero.benchmarks.seeding import placing, seed_simulator, seeding_evidence
from pytest_libero.core.contract import TRACKS
from pytest_libero.core.hashing import sha256_array, sha256_file
from pytest_libero.errors import EnvironmentFault


def _root() -> Path:
    text = os.environ.get(SERVICE_CHECKOUT_ENV)
    if not text:
        raise EnvironmentFault(f"the RoboMemArena bench service needs {SERVICE_CHECKOUT_ENV} (the checkout's root)")
    return Path(text)


def prepare_process_environment(work_dir: str) -> None:
    """Rendering, the fork's LIBERO config, a gym alias and the checkout's paths, before any import."""
    import yaml

    # Nothing is written into the checkout: no bytecode caches beside its modules.
    sys.dont_write_bytecode = True
    drop_macro_file_notice()
    os.environ.setdefault("MUJOCO_GL", "egl")
    if os.environ["MUJOCO_GL"] in ("egl", "osmesa"):
        os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    root = _root()
    fork = root / rc.FORK
    package = fork / "libero"
    config_dir = Path(work_dir) / "libero-config"
    config_dir.mkdir()
    # The keys the fork's libero/__init__.py reads, pointing into the fork (as its default would).
    config = {"benchmark_root": str(package), "bddl_files": str(package / "bddl_files"),
              "init_states": str(package / "init_files"), "datasets": str(fork / "datasets"),
              "assets": str(package / "assets")}
    (config_dir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    os.environ["LIBERO_CONFIG_PATH"] = str(config_dir)
    paths = [str(fork), str(root / rc.SCRIPTS)]
    if importlib.util.find_spec("gym") is None:
        # The fork's venv.py does `import gym`; gymnasium is its maintained successor.
        alias = Path(work_dir) / "gym-alias" / "gym"
        alias.mkdir(parents=True)
        (alias / "__init__.py").write_text("from gymnasium import *  # noqa: F401,F403\n", encoding="utf-8")
        paths.append(str(alias.parent))
    sys.path[:0] = paths


class _Scorer:
    """The checkout's modules, imported once per process."""

    def __init__(self) -> None:
        self.common = importlib.import_module("eval_common")
        self.task1 = importlib.import_module("eval_task1_only")
        self.stages = importlib.import_module("task2_26_reference_stage")
        self.policy_input = importlib.import_module("policy_adapter").build_eval26_policy_input
        libero = importlib.import_module("libero")
        fork = (_root() / rc.FORK).resolve()
        if not Path(libero.__file__ or "").resolve().is_relative_to(fork):
            raise EnvironmentFault(f"`libero` was imported from {libero.__file__}, not from the checkout's fork "
                                   f"{fork}; run the RoboMemArena service in a process that has not imported LIBERO")
        # The runner's camera size (480x640), as run_all_tasks1_26.py sets it before any env.
        self.stages._patch_env_resolution()
        self.sha256 = {name: sha256_file(_root() / rc.SCRIPTS / name) for name in rc.SCORER_FILES}


@functools.cache
def _scorer() -> _Scorer:
    return _Scorer()


def import_simulator() -> None:
    """Import the fork (robosuite, MuJoCo, EGL) and the scorer: seconds, once per process."""
    _scorer()
    importlib.import_module("libero.libero.envs")


# The runner's two cameras at its size; a gated sensor returns the blank frame (see camera_gate).
CAMERA_OBSERVABLES = ("agentview_image", "robot0_eye_in_hand_image")
_BLANK = np.zeros((480, 640, 3), dtype=np.uint8)


class EnvCache:
    """The environment of one task, kept between its episodes (as the runner keeps it), its camera
    sensors gated: they render only for the controls whose observation is delivered (or filmed)."""

    def __init__(self) -> None:
        self.task_id: int | None = None
        self.env: Any = None
        self.gate = Gate()

    def get(self, task_id: int, bddl_path: str, reuse: bool) -> tuple[Any, bool]:
        """(env, reused)."""
        if reuse and self.env is not None and self.task_id == task_id:
            return self.env, True
        self.close()
        self.env = _scorer().common._get_env_class()(
            bddl_file_name=bddl_path, camera_heights=256, camera_widths=256, ignore_done=True,
            reward_shaping=True, control_freq=20, initialization_noise=None)
        gate_cameras(self.env.env, self.gate, CAMERA_OBSERVABLES, _BLANK)
        self.task_id = task_id
        return self.env, False

    def close(self) -> None:
        env, self.env, self.task_id = self.env, None, None
        if env is not None:
            env.close()


def check_sources(cache: EnvCache) -> str | None:
    return None  # RoboMemArena has no frozen inventory here; records carry the checkout's hashes


SERVICE_OPS: dict[str, Callable[[Any, Any], Any]] = {}


def _sim_state(env: Any) -> np.ndarray:
    return np.asarray(env.sim.get_state().flatten())


class _Stages:
    """Stage completion with the runner's sequencing for the task (see the module docstring)."""

    def __init__(self, scorer: _Scorer, task_id: int, env: Any) -> None:
        self.task_id = task_id
        self.state: dict[str, Any] | None = None
        if task_id == 1:
            self.checks = [(name, lambda e, s, start, fn=fn: fn(e)) for name, fn in scorer.task1.STAGE_CHECKS]
            self.override: Callable[..., bool] | None = None
        else:
            self.checks = [(spec.name, spec.check_fn) for spec in scorer.stages._task_specs(task_id)]
            self.state = scorer.stages._build_initial_state(env)
            self.override = scorer.stages._goal_override_check(task_id)
        # The scorer's overrides take (env, stage_done); b175708's runner passes env only (see above).
        self.override_takes_stages = self.override is not None and len(
            inspect.signature(self.override).parameters) >= 2
        self.update_state = scorer.stages._update_state
        self.completed: dict[str, int | None] = {name: None for name, _ in self.checks}
        self.next_index = 0
        self.stage_start = self.state["step_idx"] if self.state is not None else 0

    def done(self) -> dict[str, bool]:
        return {name: control is not None for name, control in self.completed.items()}

    def after_control(self, env: Any, obs: Any, control: int) -> None:
        if self.state is not None:
            self.update_state(obs, self.state)
        if self.task_id == 1:
            for index, (name, check) in enumerate(self.checks):
                if self.completed[name] is None and all(self.completed[n] is not None for n, _ in self.checks[:index]) \
                        and check(env, None, 0):
                    self.completed[name] = control
        elif self.next_index < len(self.checks):
            name, check = self.checks[self.next_index]
            if check(env, self.state, self.stage_start):
                self.completed[name] = control
                self.next_index += 1
                self.stage_start = self.state["step_idx"]  # type: ignore[index]

    def goal(self, env: Any, monitor: dict[str, Any], check_goal: Callable[..., bool]) -> bool:
        if self.override is not None:
            if self.override_takes_stages:
                return bool(self.override(env, self.done()))
            return bool(self.override(env))
        return bool(check_goal(env, monitor)) if monitor else False

    def score_pct(self) -> float:
        return 100.0 * sum(c is not None for c in self.completed.values()) / max(1, len(self.checks))

    def tsr(self) -> bool:
        return bool(self.completed) and all(c is not None for c in self.completed.values())


class ArenaEpisode:
    """One RoboMemArena episode in this process (the service module's Episode)."""

    def __init__(self, cell: dict[str, Any], control_cap: int, settle_controls: int, cache: EnvCache,
                 settle_action: list[float] | None = None, options: dict[str, Any] | None = None,
                 track: str = "openpi-compat", reuse_env: bool = True, **_: Any) -> None:
        setup_start = time.perf_counter()
        if track not in TRACKS:
            raise EnvironmentFault(f"unknown observation track {track!r}; one of {', '.join(TRACKS)}")
        options = options or {}
        self.scorer = scorer = _scorer()
        self.cache, self.track, self.reuse_env = cache, track, reuse_env
        self.task_id = int(cell["task_index"]) + 1
        self.seed = int(cell["seed"])
        self.control_cap = control_cap
        self.post_goal_steps = int(options.get("post_goal_steps", 200))
        self.resize_size = int(options.get("resize_size", 256))
        common = scorer.common
        _, task_key = common._resolve_task_id(self.task_id)
        bddl_path = common._resolve_bddl_path(self.task_id)
        self.language = common.get_prompt(task_key, bddl_path.stem)
        self.monitor = common._build_goal_monitor_dict(bddl_path)
        seed_simulator(self.seed)
        with placing("RoboMemArena", self.seed, "building the environment"):
            self.env, reused = cache.get(self.task_id, str(bddl_path), reuse_env)
        seed_simulator(self.seed)
        np.random.seed(self.seed)
        try:
            self.env.seed(self.seed)
        except AttributeError:
            pass
        self.gate = cache.gate
        self.gate.timing = Renders()
        with placing("RoboMemArena", self.seed, "resetting the environment"):
            raw = self.env.reset()
        reset_state = _sim_state(self.env)
        self.timing = {"setup_s": 0.0, "settle_s": 0.0, "simulation_s": 0.0}
        settle_start = time.perf_counter()
        action = list(settle_action) if settle_action is not None else [0.0] * 6 + [-1.0]
        for index in range(settle_controls):
            self.gate.open = index == settle_controls - 1  # the first observation is the last settle's
            raw, _, _, _ = self.env.step(action)
        self.gate.open = False
        if settle_controls == 0:
            raw = dict(raw, **render_now(self.env.env, self.gate, CAMERA_OBSERVABLES))
        self.timing["settle_s"] = time.perf_counter() - settle_start
        self.settling_controls = settle_controls
        self.stages = _Stages(scorer, self.task_id, self.env)
        self.executed = 0
        self.goal_reached: int | None = None
        self.ended = False
        self.first_success_control: int | None = None
        self.first_raw = self.raw = raw
        self._last_input: tuple[Any, Any] = (None, None)
        self.private = {"bddl_sha256": sha256_file(Path(bddl_path)), "init_states_file_sha256": None,
                        "selected_state_sha256": sha256_array(reset_state), "env_reused": reused,
                        "seeding": seeding_evidence(self.seed)}
        self.timing["setup_s"] = time.perf_counter() - setup_start - self.timing["settle_s"]

    def _policy_input(self, raw: Any) -> dict[str, Any]:
        """The runner's adapter observation of `raw`, built once (observation and state both read it)."""
        if self._last_input[0] is not raw:
            given = self.scorer.policy_input(raw_obs=raw, prompt=self.language, resize_size=self.resize_size)[0]
            self._last_input = (raw, given)
        return self._last_input[1]  # type: ignore[no-any-return]

    def observation(self, raw: Any) -> dict[str, np.ndarray]:
        """RoboMemArena's observation/image and observation/wrist_image, mirrored left-right (the
        contract's convention; RoboMemArenaPolicy mirrors them back)."""
        given = self._policy_input(raw)
        return {camera: np.ascontiguousarray(np.asarray(given[key], dtype=np.uint8)[:, ::-1])
                for camera, key in zip(CAMERAS, ("observation/image", "observation/wrist_image"), strict=True)}

    def state(self, raw: Any) -> np.ndarray | None:
        if self.track == "rgb":
            return None
        if self.track == "openpi-compat":
            return np.asarray(self._policy_input(raw)["observation/state"], dtype=np.float64)
        return np.concatenate([np.asarray(raw[k], dtype=np.float64).ravel()
                               for k in ("robot0_joint_pos", "robot0_gripper_qpos")])

    def submit(self, chunk: np.ndarray, deliver: bool, frames: bool = False) -> dict[str, Any]:
        """Run the chunk's controls until the episode ends (cap, or goal plus post-goal steps)."""
        executed_now = 0
        rendered: list[dict[str, np.ndarray]] = []
        # The runner executes float32 actions (policy_adapter.ensure_action_chunk).
        actions = np.asarray(chunk, dtype=np.float32)
        for index, action in enumerate(actions):
            if self.ended:
                break
            # Rendered: every control when filmed, else the chunk's last (the next delivered observation).
            self.gate.open = frames or (deliver and index == len(actions) - 1)
            start, rendered_before = time.perf_counter(), self.gate.timing.rendering_s
            self.raw, _, done, _ = self.env.step(action.tolist())
            self.gate.open = False
            self.executed += 1
            executed_now += 1
            self.stages.after_control(self.env, self.raw, self.executed)
            if self.goal_reached is None and self.stages.goal(self.env, self.monitor,
                                                              self.scorer.common.check_goal_success):
                self.goal_reached = self.executed
            self.timing["simulation_s"] += time.perf_counter() - start - (
                self.gate.timing.rendering_s - rendered_before)
            if frames:
                rendered.append(self.observation(self.raw))
            self.ended = bool(done) or self.executed >= self.control_cap or (
                self.goal_reached is not None and self.executed - self.goal_reached >= self.post_goal_steps)
        success = self.ended and self.stages.tsr()
        if success:
            self.first_success_control = self.executed
        delivered = state = None
        if deliver and not self.ended:
            delivered, state = self.observation(self.raw), self.state(self.raw)
        return {"executed": executed_now, "executed_total": self.executed, "success": success,
                "truncated": self.ended and not success, "observation": delivered, "state": state,
                "frames": rendered if frames else None}

    def fingerprint(self) -> dict[str, Any]:
        """The install check's service half at the first observation (pytest_libero.benchmarks.install_probe)."""
        return fingerprint_of(_sim_state(self.env), self.env.sim)

    def finish(self, final_frame: bool = False) -> dict[str, Any]:
        stages = self.stages
        evidence: dict[str, Any] = dict(self.private)
        frame = None
        if final_frame:  # the last control was not rendered unless its observation was delivered
            frame = self.observation(dict(self.raw, **render_now(self.env.env, self.gate, CAMERA_OBSERVABLES)))
        evidence.update(
            final_frame=frame, first_success_control=self.first_success_control,
            executed_controls=self.executed, settling_controls=self.settling_controls,
            timing=dict(self.timing, rendering_s=self.gate.timing.rendering_s, renders=self.gate.timing.renders),
            final_state_sha256=sha256_array(_sim_state(self.env)),
            robomemarena={
                "task_id": self.task_id, "prompt": self.language, "episode_ended": self.ended,
                "score_pct": stages.score_pct(), "tsr_success": stages.tsr(),
                "goal_success": self.goal_reached is not None, "goal_reached_control": self.goal_reached,
                "stages": [{"name": name, "completed_control": control} for name, control in stages.completed.items()],
                "scorer_sha256": dict(self.scorer.sha256),
            })
        if self.reuse_env:
            self.env = None  # stays in the cache for the task's next episode
        else:
            self.close()
        return evidence

    def close(self) -> None:
        self.env = None
        self.cache.close()


Episode = ArenaEpisode
