"""Scripted demonstration for RoboMemArena task 1 at seed 50: writes a replayable action list.

What: RoboMemArena task 1 asks the robot to put the cookies box and then the tomato sauce
into the basket; its runner scores two sequential stages (each object's body centre within
0.12 m in xy of the basket body centre, z offset in [-0.15, 0.20]). This tool builds that
task's environment from a RoboMemArena checkout given on the command line, reproduces the
runner's episode start (np.random.seed(seed); env.seed(seed); env.reset(); ten settling
controls [0,0,0,0,0,0,-1]), and then drives a closed-loop pick-and-place script that reads
PRIVILEGED simulator state (end-effector pose, object and basket body positions). The actions
it executes are written to tests/robomemarena_demo_task1_seed50.json.

Why: the project needs an action sequence known to reach full stage success (TSR) on a real
RoboMemArena episode, to check open-loop that the harness drives the benchmark faithfully.
The file is a DEMONSTRATION REPLAY, not a policy: it only works for this task, this seed and
this checkout's physics, because it was computed from privileged state of this very episode.

Determinism: every executed action is snapped to a grid of 1/64 (0.015625) per component
before it is executed. Such values have at most six decimals and are exactly representable
in float32 and float64, so the rounded JSON values, a float64 replay and a float32 replay
(RoboMemArena's runner casts chunks to float32) all execute bit-identical actions. The physics
does not depend on rendering, so the environment here has no renderer and no cameras.

Nothing from RoboMemArena is copied here; the checkout is only imported at run time.

    python tools/robomemarena_demo.py /tmp/rma
    python tools/robomemarena_demo.py /tmp/rma --out tests/robomemarena_demo_task1_seed50.json
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "tests" / "robomemarena_demo_task1_seed50.json"

TASK_ID = 1
SETTLE_CONTROLS = 10
SETTLE_ACTION = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]
GRID = 64.0  # actions are multiples of 1/64: exact in float32, float64 and six decimals
OPEN, CLOSE = -1.0, 1.0

# The runner's criterion (body centres): xy distance and z offset window.
IN_XY, IN_Z_LOW, IN_Z_HIGH = 0.12, -0.15, 0.20

OBJECTS = ("cookies_1_main", "tomato_sauce_1_main")
BASKET = "basket_1_main"


def _prepare_imports(checkout: Path) -> None:
    """Make the checkout's LIBERO fork importable (config file, a gym shim when needed)."""
    bench = checkout / "evaluation_benchmark"
    fork = bench / "libero_fork"
    if not (fork / "libero").is_dir():
        raise SystemExit(f"{fork} is not a RoboMemArena libero_fork")
    scratch = Path(tempfile.mkdtemp(prefix="rma-demo-"))
    atexit.register(shutil.rmtree, scratch, True)
    libero_dir = fork / "libero" / "libero"
    config = {
        "benchmark_root": libero_dir,
        "bddl_files": libero_dir / "bddl_files",
        "init_states": libero_dir / "init_files",
        "datasets": libero_dir.parent / "datasets",
        "assets": libero_dir / "assets",
    }
    (scratch / "config.yaml").write_text("".join(f"{k}: {v}\n" for k, v in config.items()))
    os.environ["LIBERO_CONFIG_PATH"] = str(scratch)
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    try:
        importlib.import_module("gym")
    except Exception:  # the fork imports gym; gymnasium stands in for it
        shim = scratch / "shim" / "gym"
        shim.mkdir(parents=True)
        (shim / "__init__.py").write_text("from gymnasium import *\n")
        sys.modules.pop("gym", None)
        sys.path.insert(0, str(shim.parent))
    sys.path.insert(0, str(fork))


def build_env(checkout: Path) -> Any:
    """Task 1's environment as the runner builds it, minus renderer and cameras."""
    _prepare_imports(checkout)
    from libero.libero.envs.env_wrapper import ControlEnv

    bddls = sorted((checkout / "evaluation_benchmark" / "bddl").glob(f"{TASK_ID}_*.bddl"))
    if not bddls:
        raise SystemExit(f"no task {TASK_ID} BDDL under {checkout}")
    return ControlEnv(
        bddl_file_name=str(bddls[0]),
        has_offscreen_renderer=False,
        use_camera_obs=False,
        ignore_done=True,
        reward_shaping=True,
        control_freq=20,
        initialization_noise=None,
    )


def _quat_xyzw_to_mat(q: np.ndarray) -> np.ndarray:
    x, y, z, w = (float(v) for v in q / np.linalg.norm(q))
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def _rotvec(m: np.ndarray) -> np.ndarray:
    """Axis-angle vector of a rotation matrix (small angles are all this needs)."""
    angle = float(np.arccos(np.clip((np.trace(m) - 1.0) / 2.0, -1.0, 1.0)))
    if angle < 1e-9:
        return np.zeros(3)
    axis = np.array([m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]]) / (2.0 * np.sin(angle))
    return axis * angle


def _snap(action: np.ndarray) -> list[float]:
    return [float(v) + 0.0 for v in np.round(np.clip(action, -1.0, 1.0) * GRID) / GRID]  # no -0.0


class Demo:
    """Closed-loop waypoint script on privileged state; records what it executes."""

    def __init__(self, env: Any, obs: dict, max_controls: int) -> None:
        self.env, self.obs, self.max_controls = env, obs, max_controls
        self.actions: list[list[float]] = []
        self.stage_done: list[int | None] = [None] * len(OBJECTS)
        self.home_rot = _quat_xyzw_to_mat(np.asarray(obs["robot0_eef_quat"]))

    def body(self, name: str) -> np.ndarray:
        return np.array(self.env.sim.data.body_xpos[self.env.sim.model.body_name2id(name)])

    def eef(self) -> np.ndarray:
        return np.asarray(self.obs["robot0_eef_pos"], dtype=float)

    def in_basket(self, obj: str) -> bool:
        delta = self.body(obj) - self.body(BASKET)
        return float(np.linalg.norm(delta[:2])) <= IN_XY and IN_Z_LOW <= float(delta[2]) <= IN_Z_HIGH

    def step(self, pos_err: np.ndarray, grip: float) -> None:
        if len(self.actions) >= self.max_controls:
            raise RuntimeError(f"no success within {self.max_controls} controls")
        rot = _rotvec(self.home_rot @ _quat_xyzw_to_mat(np.asarray(self.obs["robot0_eef_quat"])).T)
        action = _snap(np.concatenate([pos_err / 0.05, rot / 0.5, [grip]]))
        self.obs, _, _, _ = self.env.step(action)
        self.actions.append(action)
        for i, obj in enumerate(OBJECTS):  # sequential, like the runner's stage checks
            if self.stage_done[i] is None:
                if self.in_basket(obj):
                    self.stage_done[i] = len(self.actions) - 1
                break

    def move(self, target: np.ndarray, grip: float, tol: float = 0.008, limit: int = 120) -> None:
        for _ in range(limit):
            err = np.asarray(target, dtype=float) - self.eef()
            if np.linalg.norm(err) < tol:
                return
            self.step(err, grip)

    def hold(self, grip: float, n: int) -> None:
        target = self.eef()
        for _ in range(n):
            self.step(target - self.eef(), grip)

    def pick_and_place(self, obj: str, grasp_dz: float, carry_z: float, release_z: float) -> None:
        """Transit above obj, grasp it from the top, carry it above the basket, drop it in."""
        p = self.body(obj)
        self.move([p[0], p[1], max(self.eef()[2], p[2] + 0.1)], OPEN, tol=0.02)
        self.move([p[0], p[1], p[2] + grasp_dz + 0.05], OPEN, tol=0.015)
        p = self.body(obj)
        self.move([p[0], p[1], p[2] + grasp_dz], OPEN, tol=0.006)
        self.hold(CLOSE, 12)
        here = self.eef()
        self.move([here[0], here[1], carry_z], CLOSE, tol=0.02)
        # The open fingers span 0.13 m, about the basket's inner width: release above the rim.
        basket = self.body(BASKET)
        self.move([basket[0], basket[1], carry_z], CLOSE, tol=0.015)
        self.move([basket[0], basket[1], release_z], CLOSE, tol=0.01)
        self.hold(OPEN, 8)
        here = self.eef()
        self.move([here[0], here[1], carry_z], OPEN, tol=0.02)


def run(checkout: Path, seed: int, max_controls: int) -> dict:
    env = build_env(checkout)
    np.random.seed(seed)
    env.seed(seed)
    obs = env.reset()
    for _ in range(SETTLE_CONTROLS):
        obs, _, _, _ = env.step(SETTLE_ACTION)
    demo = Demo(env, obs, max_controls)
    # Cookies (a flat box) first, then the tomato sauce, both dropped at the basket centre.
    demo.pick_and_place("cookies_1_main", grasp_dz=0.004, carry_z=0.64, release_z=0.60)
    demo.pick_and_place("tomato_sauce_1_main", grasp_dz=0.004, carry_z=0.68, release_z=0.62)
    # Hold still until both objects rest in the basket (no body moved 1 mm in the last control).
    last = {o: demo.body(o) for o in OBJECTS}
    for _ in range(60):
        demo.hold(OPEN, 1)
        now = {o: demo.body(o) for o in OBJECTS}
        still = all(np.linalg.norm(now[o] - last[o]) < 1e-3 for o in OBJECTS)
        last = now
        if still and all(demo.in_basket(o) for o in OBJECTS) and None not in demo.stage_done:
            break
    final = {o: [round(float(v), 4) for v in demo.body(o)] for o in (*OBJECTS, BASKET)}
    env.close()
    return {"actions": demo.actions, "stage_done": demo.stage_done, "final": final}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="RoboMemArena checkout (has evaluation_benchmark/)")
    parser.add_argument("--seed", type=int, default=50)
    parser.add_argument("--max-controls", type=int, default=600)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)

    result = run(args.checkout.resolve(), args.seed, args.max_controls)
    stages = result["stage_done"]
    for obj, idx in zip(OBJECTS, stages, strict=True):
        where = "never" if idx is None else f"action {idx} (runner t={idx + SETTLE_CONTROLS})"
        print(f"{obj} in basket: {where}")
    print("final body positions:", result["final"])
    if any(idx is None for idx in stages):
        print("FAILED: not every stage completed; nothing written")
        return 1
    record = {
        "task_id": TASK_ID,
        "seed": args.seed,
        "settle_controls": SETTLE_CONTROLS,
        "note": ("Demonstration replay generated by tools/robomemarena_demo.py from privileged "
                 "simulator state; not a policy. Values are multiples of 1/64, exact in float32."),
        "actions": [[round(v, 6) for v in a] for a in result["actions"]],
    }
    lines = ",\n".join("    " + json.dumps(a) for a in record["actions"])
    head = json.dumps({k: v for k, v in record.items() if k != "actions"}, indent=2)[:-2]
    args.out.write_text(f'{head},\n  "actions": [\n{lines}\n  ]\n}}\n')
    assert json.loads(args.out.read_text()) == record
    print(f"wrote {len(record['actions'])} actions to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
