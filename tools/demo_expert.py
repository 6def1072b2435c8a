"""Scripted expert for LIBERO fast-mode cells: generates the action logs of the `demo` policy.

This is a DATA-GENERATION TOOL, outside the policy contract. It reads privileged simulator
state (end-effector pose, object body poses, joint positions) that no policy may see, so it is
never selectable with `--libero-policy`. It runs the exact protocol episode of a cell (fresh
OffScreenRenderEnv, seed 20260907, reset, released init state, ten settling controls
[0,0,0,0,0,0,-1]) through the plugin's own `LiberoEpisode`, drives it closed loop with simple
waypoint primitives (a proportional controller on the end-effector error, clipped to [-1, 1]),
stops at the first native success, and writes the executed actions as a JSON log. The
`demo` and `replay` adapters (adapters/demo.py, adapters/replay.py) replay such a log open
loop; physics is deterministic, so the replay reproduces the trajectory and its success.

Cameras are gated off (blank frames) except for the first delivered observation, whose
fingerprint goes into the log; rendering never affects physics.

Every action is rounded to 4 decimals *before* it is executed, so the logged values are
exactly the executed float64 values and the log stays small. Output is deterministic: no
timestamps, sorted keys, fixed float formatting (repr), so two runs give byte-identical files.

    python tools/demo_expert.py --cells libero_10-t00-s00,libero_goal-t00-s00 --out adapters/demo_logs
    python tools/demo_expert.py --all --out adapters/demo_logs
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

GENERATOR = "pytest-libero tools/demo_expert.py (scripted privileged-state expert)"
GENERATOR_VERSION = "1"
ROUND = 4


class Success(Exception):
    """Native success reached: stop scripting."""


class Truncated(Exception):
    """The control cap was reached without success."""


def _rotvec(matrix: np.ndarray) -> np.ndarray:
    """Axis-angle vector of a rotation matrix (log map), deterministic numpy."""
    cos = float(np.clip((np.trace(matrix) - 1.0) / 2.0, -1.0, 1.0))
    angle = float(np.arccos(cos))
    if angle < 1e-9:
        return np.zeros(3)
    vec = np.array([matrix[2, 1] - matrix[1, 2], matrix[0, 2] - matrix[2, 0], matrix[1, 0] - matrix[0, 1]])
    if np.pi - angle < 1e-6:  # near pi: use the diagonal
        axis = np.sqrt(np.maximum((np.diag(matrix) + 1.0) / 2.0, 0.0))
        return axis * angle
    return vec / (2.0 * np.sin(angle)) * angle


def _rot_z(yaw: float) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _rot_x(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


class Expert:
    """Closed-loop waypoint primitives over one protocol episode."""

    def __init__(self, episode: Any) -> None:
        self.episode = episode
        self.env = episode.env.env
        self.robot = self.env.robots[0]
        self.actions: list[list[float]] = []
        self.grip = -1.0
        self.home_ori = self.ori().copy()
        self.target_ori = self.home_ori.copy()

    # --- privileged state -------------------------------------------------------------------
    def eef(self) -> np.ndarray:
        return np.array(self.env.sim.data.site_xpos[self.robot.eef_site_id])

    def ori(self) -> np.ndarray:
        return np.array(self.env.sim.data.site_xmat[self.robot.eef_site_id]).reshape(3, 3)

    def body(self, name: str) -> np.ndarray:
        return np.array(self.env.sim.data.body_xpos[self.env.obj_body_id[name]])

    def body_yaw(self, name: str) -> float:
        mat = np.array(self.env.sim.data.body_xmat[self.env.obj_body_id[name]]).reshape(3, 3)
        return float(np.arctan2(mat[1, 0], mat[0, 0]))

    def rim(self, name: str) -> tuple[np.ndarray, float]:
        """(centre, radius) of the top ring of an object's meshes: where a bowl or mug rim is."""
        import mujoco

        model, data = self.env.sim.model._model, self.env.sim.data._data
        body = self.env.obj_body_id[name]
        points = []
        for geom in range(model.ngeom):
            if model.geom_bodyid[geom] != body or model.geom_type[geom] != mujoco.mjtGeom.mjGEOM_MESH:
                continue
            mesh = model.geom_dataid[geom]
            verts = model.mesh_vert[model.mesh_vertadr[mesh]: model.mesh_vertadr[mesh] + model.mesh_vertnum[mesh]]
            points.append(verts @ data.geom_xmat[geom].reshape(3, 3).T + data.geom_xpos[geom])
        cloud = np.concatenate(points)
        top = cloud[cloud[:, 2] > cloud[:, 2].max() - 0.004]
        centre_xy = (top[:, :2].min(axis=0) + top[:, :2].max(axis=0)) / 2.0
        radius = float(np.linalg.norm(top[:, :2] - centre_xy, axis=1).mean())
        return np.array([centre_xy[0], centre_xy[1], cloud[:, 2].max()]), radius

    def geom(self, name: str) -> np.ndarray:
        import mujoco

        index = mujoco.mj_name2id(self.env.sim.model._model, mujoco.mjtObj.mjOBJ_GEOM, name)
        return np.array(self.env.sim.data._data.geom_xpos[index])

    def site(self, name: str) -> np.ndarray:
        return np.array(self.env.sim.data.get_site_xpos(name))

    def qpos(self, joint: str) -> float:
        return float(self.env.sim.data.qpos[self.env.sim.model.get_joint_qpos_addr(joint)])

    # --- primitives ---------------------------------------------------------------------------
    def set_yaw(self, yaw: float) -> None:
        """Target orientation: the home (pointing down) orientation turned by yaw about world z."""
        self.target_ori = _rot_z(yaw) @ self.home_ori

    def step(self, translation: np.ndarray) -> None:
        rot = _rotvec(self.target_ori @ self.ori().T) / 0.5 * 1.5
        raw = np.concatenate([np.clip(translation, -1.0, 1.0), np.clip(rot, -1.0, 1.0), [self.grip]])
        action = [round(float(a), ROUND) + 0.0 for a in raw]  # + 0.0 turns -0.0 into 0.0
        self.actions.append(action)
        result = self.episode.submit(np.asarray([action], dtype=np.float64), deliver=False)
        if result["success"]:
            raise Success
        if result["truncated"]:
            raise Truncated

    def move(self, target: Any, tol: float = 0.008, max_steps: int = 60, gain: float = 12.0,
             speed: float = 1.0) -> None:
        target = np.asarray(target, dtype=np.float64)
        for _ in range(max_steps):
            error = target - self.eef()
            if np.linalg.norm(error) < tol:
                return
            self.step(np.clip(error / 0.05 * gain / 10.0, -speed, speed))

    def hold(self, steps: int, grip: float | None = None) -> None:
        if grip is not None:
            self.grip = grip
        for _ in range(steps):
            self.step(np.zeros(3))

    def close(self, steps: int = 12) -> None:
        self.hold(steps, 1.0)

    def open(self, steps: int = 8) -> None:
        self.hold(steps, -1.0)

    def pick(self, pos: Any, lift_z: float, yaw: float | None = None, pre: float = 0.10) -> None:
        pos = np.asarray(pos, dtype=np.float64)
        if yaw is not None:
            self.set_yaw(yaw)
        self.move([pos[0], pos[1], max(pos[2] + pre, self.eef()[2])], tol=0.02)
        self.move(pos + [0.0, 0.0, pre], tol=0.006)
        self.move(pos, tol=0.006, speed=0.6)
        self.close()
        self.move([pos[0], pos[1], lift_z], tol=0.02)

    def place(self, pos: Any, lift_z: float, open_steps: int = 8) -> None:
        pos = np.asarray(pos, dtype=np.float64)
        self.move([pos[0], pos[1], lift_z], tol=0.015)
        self.move(pos, tol=0.01, speed=0.6)
        self.open(open_steps)
        self.move(self.eef() + [0.0, 0.0, 0.08], tol=0.015)


# --- per-cell scripts ---------------------------------------------------------------------------

def _basket_two(first: str, second: str, grasp_dz: float = 0.0, yaw: float | None = None) -> Callable[[Expert], None]:
    def script(x: Expert) -> None:
        for name in (first, second):
            obj = x.body(name)
            x.pick(obj + [0.0, 0.0, grasp_dz], lift_z=0.68, yaw=yaw)
            basket = x.body("basket_1")
            x.place(basket + [0.0, 0.0, 0.16], lift_z=0.68)
            x.set_yaw(0.0)
    return script


def _carry_to(x: Expert, name: str, target_xy: Any, target_z: float, lift_z: float) -> None:
    """Place the held object's body (not the gripper) at target_xy, its body at target_z."""
    rel = x.body(name) - x.eef()
    x.place([target_xy[0] - rel[0], target_xy[1] - rel[1], target_z - rel[2]], lift_z=lift_z)


def _basket_one(x: Expert) -> None:
    """libero_object task 0: the alphabet soup into the basket (floor scene)."""
    basket = x.body("basket_1")
    x.pick(x.body("alphabet_soup_1"), lift_z=basket[2] + 0.25)
    x.place(x.body("basket_1") + [0.0, 0.0, 0.16], lift_z=basket[2] + 0.25)


def _bowl_on_plate(x: Expert) -> None:
    """libero_spatial task 0: pinch the bowl's rim on the far side, carry it onto the plate."""
    bowl = x.body("akita_black_bowl_1")
    x.pick(bowl + [0.045, 0.0, 0.035], lift_z=bowl[2] + 0.2)
    plate = x.body("plate_1")
    _carry_to(x, "akita_black_bowl_1", plate, plate[2] + 0.04, lift_z=bowl[2] + 0.2)


def _mugs_on_plates(x: Expert) -> None:
    """libero_10 task 4: pinch each mug's rim wall (far side), carry its body over the plate."""
    for mug, plate, inset in (("porcelain_mug_1", "plate_1", 0.002), ("white_yellow_mug_1", "plate_2", 0.0045)):
        centre, radius = x.rim(mug)
        start = x.body(mug)
        x.pick(centre + [radius - inset, 0.0, -0.02], lift_z=start[2] + 0.25)
        target = x.body(plate)
        _carry_to(x, mug, target, target[2] + 0.02, lift_z=start[2] + 0.25)


def _open_middle_drawer(x: Expert) -> None:
    """libero_goal task 0: the top drawer's handle is right above the middle one, so a top-down
    grasp is blocked. Pitch the gripper to point at the cabinet (-y), fingers opening vertically,
    slide them around the middle handle bar from the front, close, pull along +y."""
    handle = x.geom("wooden_cabinet_1_g29")  # the middle drawer's handle bar
    x.move(handle + [0.0, 0.15, 0.0], tol=0.02)
    x.target_ori = _rot_x(-np.pi / 2) @ x.home_ori
    x.hold(15)
    x.move(handle + [0.0, 0.12, 0.0], tol=0.008)
    x.move(handle, tol=0.005, speed=0.4)
    x.close(10)
    for i in range(4):
        x.move(handle + [0.0, 0.05 * (i + 1), 0.0], tol=0.01, speed=0.5)


def _stove_and_moka_pot(x: Expert) -> None:
    """libero_10 task 2: grip the stove knob from above and turn the gripper 1 rad about z
    (the knob's hinge; on above 0.5 rad), then take the moka pot by the top bar of its handle
    (gripper turned 90 degrees so the fingers close across the bar) onto the cook region."""
    knob = np.array([-0.217, 0.207, 0.945])
    x.move(knob + [0.0, 0.0, 0.08], tol=0.01)
    x.move(knob, tol=0.006, speed=0.5)
    x.close(10)
    x.set_yaw(1.0)
    x.hold(20)
    x.open(8)
    x.move(x.eef() + [0.0, 0.0, 0.1], tol=0.02)
    pot = x.body("moka_pot_1")
    x.set_yaw(np.pi / 2)
    x.pick(pot + [0.0, -0.062, 1.022 - pot[2]], lift_z=1.15)
    _carry_to(x, "moka_pot_1", x.site("flat_stove_1_cook_region"), 1.005, lift_z=1.15)


def _bowl_into_drawer_and_close(x: Expert) -> None:
    """libero_10 task 3: pinch the bowl's rim (gripper turned 90 degrees so the hand stays clear
    of the middle drawer), lower it into the open bottom drawer, then tilt the gripper 45 degrees
    towards the cabinet and push the bottom handle home (closed means joint > 0)."""
    x.set_yaw(np.pi / 2)
    x.pick(x.body("akita_black_bowl_1") + [-0.045, 0.0, 0.035], lift_z=1.12)
    region = x.site("white_cabinet_1_bottom_region")
    _carry_to(x, "akita_black_bowl_1", [region[0], 0.14], 0.935, lift_z=1.12)
    x.move(x.eef() + [0.0, 0.0, 0.1], tol=0.02)
    x.set_yaw(0.0)
    handle = x.geom("white_cabinet_1_g40")  # the bottom drawer's handle bar
    x.move([handle[0], handle[1] - 0.12, 1.1], tol=0.02)
    x.target_ori = _rot_x(np.pi / 4) @ _rot_z(np.pi / 2) @ x.home_ori
    x.hold(15)
    x.move([handle[0], handle[1] - 0.06, 0.966], tol=0.01)
    x.move([handle[0], handle[1] - 0.025, 0.946], tol=0.008, speed=0.5)
    for i in range(6):
        x.move([handle[0], handle[1] + 0.03 * (i + 1), 0.946], tol=0.01, speed=0.6, max_steps=25)


SCRIPTS: dict[str, Callable[[Expert], None]] = {
    "libero_10-t00-s00": _basket_two("alphabet_soup_1", "tomato_sauce_1"),
    "libero_10-t01-s00": _basket_two("cream_cheese_1", "butter_1", grasp_dz=-0.005),
    "libero_10-t02-s00": _stove_and_moka_pot,
    "libero_10-t03-s00": _bowl_into_drawer_and_close,
    "libero_10-t04-s00": _mugs_on_plates,
    "libero_spatial-t00-s00": _bowl_on_plate,
    "libero_object-t00-s00": _basket_one,
    "libero_goal-t00-s00": _open_middle_drawer,
}


# --- episode, log ------------------------------------------------------------------------------

def parse_cell(cell_id: str) -> tuple[str, int, int]:
    from pytest_libero.core.cells import parse_cell_id

    parsed = parse_cell_id(cell_id)
    if parsed is None:
        raise SystemExit(f"not a cell id: {cell_id!r} (expected e.g. libero_10-t00-s00)")
    return parsed


def generate(cell_id: str, verbose: bool = False, script: Callable[[Expert], None] | None = None,
             report: Callable[[Expert], None] | None = None) -> dict[str, Any]:
    """Run the scripted expert on one cell; return the log (success or not)."""
    from pytest_libero.benchmarks.libero import catalog
    from pytest_libero.benchmarks.libero.service import LiberoEpisode, prepare_process_environment
    from pytest_libero.benchmarks.libero.spec import REFERENCE_HORIZONS, SETTLE_ACTION, SPEC
    from pytest_libero.core.protocol import DEFAULT_REPLAN_INTERVAL, SETTLE_CONTROLS
    from pytest_libero.core.cells import FAST_SEED
    from pytest_libero.core.contract import images_from_native

    from pytest_libero.adapters.replay import LOG_FORMAT, fingerprint  # the same code the adapter reads with

    prepare_process_environment(tempfile.mkdtemp(prefix="pytest-libero-demo-expert-"))
    suite, task_index, init_index = parse_cell(cell_id)
    cap = REFERENCE_HORIZONS[suite][0]
    entry = catalog.entry(suite, task_index)
    episode = LiberoEpisode({"suite": suite, "task_index": task_index, "init_index": init_index,
                             "seed": FAST_SEED}, cap, SETTLE_CONTROLS, False)
    expert = Expert(episode)
    success: int | None = None
    try:
        first = images_from_native(episode.first_raw, SPEC)
        (script or SCRIPTS[cell_id])(expert)
        # the script ended without success: hold still until the cap to confirm
        expert.hold(cap)
    except Success:
        success = episode.executed
    except Truncated:
        pass
    finally:
        if report is not None:
            report(expert)
        episode.close()
    if verbose:
        print(f"{cell_id}: {'success at control ' + str(success) if success else 'NO SUCCESS'} "
              f"({len(expert.actions)} actions)", file=sys.stderr)
    return {
        "format": LOG_FORMAT,
        "generator": {"name": GENERATOR, "version": GENERATOR_VERSION},
        "cell": {"id": cell_id, "suite": suite, "task_index": task_index, "init_index": init_index,
                 "seed": FAST_SEED, "language": entry["language"]},
        "protocol": {"settle_controls": SETTLE_CONTROLS, "settle_action": list(SETTLE_ACTION),
                     "replan_interval": DEFAULT_REPLAN_INTERVAL, "control_cap": cap,
                     "cap_source": f"reference horizon {cap}"},
        "first_success_control": success,
        "first_observation": fingerprint(first),
        "actions": expert.actions,
    }


def dumps_log(log: dict[str, Any]) -> str:
    """Stable JSON: sorted keys, one action per line, floats as repr (exact float64)."""
    actions = log["actions"]
    head = {k: v for k, v in log.items() if k != "actions"}
    text = json.dumps(head, sort_keys=True, indent=1)
    rows = ",\n  ".join(json.dumps(a) for a in actions)
    return text[:-2] + ',\n "actions": [\n  ' + rows + "\n ]\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", default="", help="comma-separated cell ids (e.g. libero_10-t00-s00)")
    parser.add_argument("--all", action="store_true", help="every cell the expert has a script for")
    parser.add_argument("--out", default=str(ROOT / "adapters" / "demo_logs"), help="output folder")
    parser.add_argument("--keep-failures", action="store_true", help="write logs that did not reach success")
    args = parser.parse_args(argv)
    cells = list(SCRIPTS) if args.all else [c for c in args.cells.split(",") if c]
    unknown = [c for c in cells if c not in SCRIPTS]
    if not cells or unknown:
        parser.error(f"unknown or no cells {unknown}; scripted cells: {', '.join(SCRIPTS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for cell_id in cells:
        log = generate(cell_id, verbose=True)
        if log["first_success_control"] is None:
            failed += 1
            if not args.keep_failures:
                continue
        (out / f"{cell_id}.json").write_text(dumps_log(log), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
