"""Maintainer tool: write the frozen evaluation schedules, catalog/schedules/<name>.json.

    python tools/build_schedules.py          # rewrite the files
    python tools/build_schedules.py --check  # exit 1 when a file differs from what this builds

Every number below carries where it was read (the snapshot commits of
/work/shared/research/harness-anchors.md, section b). The JSON files are the frozen data a run
reads; tests/test_schedules.py checks every number of every preset against its own table.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pytest_libero.benchmarks.libero import catalog
from pytest_libero.core.schedules import SCHEDULE_DIR

OUT = SCHEDULE_DIR
GRIPPER_OPEN_NOOP = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]
ZEROS = [0.0] * 7

OPENVLA = {"repository": "openvla/openvla", "revision": "c8f03f4",
           "path": "experiments/robot/libero/run_libero_eval.py"}
OFT = {"repository": "moojink/openvla-oft", "revision": "213c5ff",
       "path": "experiments/robot/libero/run_libero_eval.py"}
OPENPI = {"repository": "Physical-Intelligence/openpi", "revision": "15a9616", "path": "examples/libero/main.py"}
LEROBOT = {"repository": "huggingface/lerobot", "revision": "7427f31", "path": "src/lerobot/envs/libero.py"}
LIBERO = {"repository": "Lifelong-Robot-Learning/LIBERO", "revision": "8f1084e",
          "path": "libero/configs/eval/default.yaml, libero/lifelong/metric.py"}
STARVLA = {"repository": "starVLA/starVLA", "revision": "0ed0aad", "path": "examples/simBenchmarks/LIBERO"}
LEROBOT_DOCS = {"repository": "huggingface/lerobot", "revision": "7427f31", "path": "docs/source/libero.mdx"}


def _where(source: dict[str, str]) -> str:
    return f"{source['repository']}@{source['revision']} {source['path']}"


COMMON_CAPS = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}


def _schedule(name: str, title: str, description: str, sources: list[dict[str, str]], caps: dict[str, int],
              cap_source: str, episodes: int, episodes_source: str, settle: int, settle_action: list[float],
              settle_source: str, seeds: list[int], seeds_source: str, env_seed: dict[str, Any],
              policy_side: dict[str, Any]) -> dict[str, Any]:
    suites: dict[str, Any] = {}
    for suite in catalog.ALL_SUITES:
        base = catalog.base_suite(suite)
        entries = catalog.entries(suite)
        available = min(e["num_init_states"] for e in entries)
        assert episodes <= available, (suite, episodes, available)
        source = cap_source if base == suite else (
            f"the cap of base suite {base}: LIBERO-PRO runs under the host harness's evaluator")
        suites[suite] = {
            "tasks": [e["task_index"] for e in entries],
            "init_states": list(range(episodes)),
            "init_states_source": episodes_source,
            "cap": caps[base], "cap_source": source,
            "settle_controls": settle, "settle_action": settle_action, "settle_source": settle_source,
        }
    return {"schema_version": 2, "name": name, "title": title, "description": description,
            "sources": sources, "default_suites": list(catalog.STANDARD_SUITES),
            "settle_counts_against_cap": False,
            "seeds": {"default": seeds, "source": seeds_source, "env_seed": env_seed}, **policy_side,
            "suites": suites}


def _policy_side(replan: int, replan_source: str, track: str, track_source: str, duties: list[str],
                 duties_source: str) -> dict[str, Any]:
    """What the pipeline fixes on the policy's side: K (controls executed per chunk), the observation
    track, and what its adapter must do that the harness does not (resize, crop, normalization)."""
    return {"replan_interval": {"value": replan, "source": replan_source},
            "observation_track": {"value": track, "source": track_source},
            "adapter_duties": {"items": duties, "source": duties_source}}


def build() -> dict[str, dict[str, Any]]:
    common_caps_source = (f"max_steps per suite in {_where(OPENVLA)} (reused by {_where(OFT)}, {_where(OPENPI)} "
                          f"and {_where(STARVLA)})")
    fifty = "50 episodes per task, episode i on released init state i (num_trials_per_task = 50)"
    ten_noops = "10 no-op controls [0,0,0,0,0,0,-1] (num_steps_wait = 10), not counted against the cap"
    rgb = ("rgb: language and the two 256x256 images, no proprioception (the default observation contract, "
           "PROTOCOL.md)")
    eef8 = ("openpi-compat: both images plus the 8-d state eef position (3) + eef axis-angle (3) + gripper "
            "finger positions (2)")
    delivered = ("the harness delivers uint8 256x256x3 images already rotated 180 degrees (image[::-1, ::-1]) "
                 "and validates, never converts, the returned actions")
    openvla_image = ("agentview only: JPEG encode/decode, resize to 224x224 (TF lanczos3 with antialias), "
                     "then center crop 0.9 of the area (side sqrt(0.9)) and resize back to 224x224")
    openvla_action = ("unnormalize the action with the checkpoint's unnorm_key (<suite>, falling back to "
                      "<suite>_no_noops); gripper: map [0, 1] to [-1, 1], binarize with sign, invert "
                      "(LIBERO: -1 open, +1 close)")
    lerobot_duties = [
        "both images: resize and normalize with the policy's processor statistics (LeRobot renders at 360x360 "
        "by config; the harness delivers 256x256)",
        "no extra flip: LeRobot's LiberoProcessorStep flips H and W, which is what the harness already delivers",
        "normalize observation.state (8-d) and unnormalize actions with the checkpoint's processor statistics",
    ]
    lerobot_replan = ("n_action_steps belongs to the policy config; LeRobot's pi0.5 LIBERO reproduction passes "
                      "--policy.n_action_steps=10 (LeRobot issue #3226: chunk_size/n_action_steps 50/10; "
                      f"openpi uses 5): {_where(LEROBOT)}")
    lerobot_track = f"{eef8}: observation.state and two images in {_where(LEROBOT)}"
    schedules = [
        _schedule(
            "standard", "The common published protocol",
            "Every released init state (0-49) of every task, in order; per-suite caps 220/280/300/520 "
            "(libero_90 400); ten settling controls [0,0,0,0,0,0,-1] outside the cap; run seed 7 seeds the "
            "environment (env.seed); K = 5 controls per chunk on the rgb track. Default suites: the four standard "
            "ones (4 x 10 x 50 = 2,000 episodes).",
            [OPENVLA, OFT, OPENPI, STARVLA], COMMON_CAPS, common_caps_source, 50, f"{fifty}: {_where(OPENVLA)}",
            10, GRIPPER_OPEN_NOOP, f"{ten_noops}: {_where(OPENVLA)}", [7],
            f"seed = 7 in {_where(OPENVLA)}, {_where(OPENPI)} and {_where(STARVLA)}",
            {"rule": "run_seed", "source": f"env.seed(seed) as in {_where(OPENPI)} and {_where(STARVLA)}"},
            _policy_side(5, f"replan_steps = 5 in {_where(OPENPI)} (the harness default)", "rgb", rgb,
                         ["whatever the model was trained with: resize, crop and normalize the images, map the "
                          "model's action space to the contract's 7-d delta action in [-1, 1]"],
                         delivered)),
        _schedule(
            "openvla", "OpenVLA run_libero_eval.py",
            "OpenVLA's LIBERO evaluator: caps 220/280/300/520/400 plus 10 wait steps, 50 episodes per task on init "
            "states 0-49 in order, seed 7 (policy side) with env.seed(0) hard-coded, one action per query (K = 1) "
            "from the third-person image alone. The published OpenVLA tables average 3 seeds: --libero-seeds 7,8,9 "
            "(the environment seed stays 0, as in the original). OpenVLA-OFT is the oft schedule.",
            [OPENVLA], COMMON_CAPS, f"max_steps per suite in {_where(OPENVLA)}",
            50, f"{fifty}: {_where(OPENVLA)}", 10, GRIPPER_OPEN_NOOP, f"{ten_noops}: {_where(OPENVLA)}", [7],
            f"seed = 7 in {_where(OPENVLA)}; the published numbers are the mean of 3 seeds",
            {"rule": "fixed", "value": 0, "source": f"env.seed(0) hard-coded in {_where(OPENVLA)}"},
            _policy_side(1, f"one 7-d action per policy query in {_where(OPENVLA)}", "rgb",
                         f"{rgb}; OpenVLA sends the agentview image and the language only (wrist image and "
                         f"proprioception are computed, not sent) in {_where(OPENVLA)}",
                         [openvla_image, openvla_action], f"{_where(OPENVLA)}; {delivered}")),
        _schedule(
            "oft", "OpenVLA-OFT run_libero_eval.py",
            "OpenVLA-OFT's LIBERO evaluator: OpenVLA's caps (TASK_MAX_STEPS 220/280/300/520/400) plus 10 wait steps, "
            "50 episodes per task on init states 0-49, seed 7 with env.seed(0), two images plus the 8-d "
            "proprioception (use_proprio), 8-step action chunks executed open loop (num_open_loop_steps = 8 = "
            "NUM_ACTIONS_CHUNK). Published numbers are the mean of 3 seeds: --libero-seeds 7,8,9.",
            [OFT], COMMON_CAPS, f"TASK_MAX_STEPS in {_where(OFT)}",
            50, f"{fifty}: {_where(OFT)}", 10, GRIPPER_OPEN_NOOP, f"{ten_noops}: {_where(OFT)}", [7],
            f"seed = 7 in {_where(OFT)}; the paper's numbers are the mean of 3 seeds",
            {"rule": "fixed", "value": 0, "source": f"env.seed(0) in {_where(OFT)}"},
            _policy_side(8,
                         f"num_open_loop_steps = 8 = NUM_ACTIONS_CHUNK (a warning when they differ) in {_where(OFT)}",
                         "openpi-compat", f"{eef8}: use_proprio with the agentview and wrist images in {_where(OFT)}",
                         ["both images: JPEG encode/decode, resize to 224x224 (lanczos3 with antialias), center crop "
                          "0.9 of the area and resize back to 224x224",
                          "normalize the 8-d proprioception with the checkpoint's statistics",
                          openvla_action], f"{_where(OFT)}; {delivered}")),
        _schedule(
            "openpi", "openpi examples/libero/main.py",
            "openpi's LIBERO client: caps 220/280/300/520/400 plus 10 wait steps, 50 episodes per task on init "
            "states 0-49 in order, np.random.seed(7) and env.seed(7), the first 5 actions of each chunk (K = 5), "
            "two images resized with padding to 224x224 and the 8-d state.",
            [OPENPI], COMMON_CAPS, f"max_steps per suite in {_where(OPENPI)}", 50, f"{fifty}: {_where(OPENPI)}",
            10, GRIPPER_OPEN_NOOP, f"{ten_noops}: {_where(OPENPI)}", [7], f"seed = 7 in {_where(OPENPI)}",
            {"rule": "run_seed", "source": f"env.seed(args.seed) in {_where(OPENPI)}"},
            _policy_side(5, f"replan_steps = 5 (asserts len(chunk) >= replan_steps) in {_where(OPENPI)}",
                         "openpi-compat", f"{eef8}: observation/state in {_where(OPENPI)}",
                         ["both images: resize_with_pad to 224x224 (PIL bilinear, centred zero padding), uint8",
                          "send the 8-d state as observation/state and the task language as prompt; the server "
                          "normalizes (the built-in openpi adapter does all of this)"],
                         f"{_where(OPENPI)}; {delivered}")),
        _schedule(
            "lerobot", "LeRobot lerobot-eval with envs/libero.py (code defaults)",
            "LeRobot's LIBERO environment: TASK_SUITE_MAX_STEPS 280/280/300/520/400 (libero_spatial 280, not "
            "220), 10 no-op controls inside reset() outside the cap, 50 episodes per task with init_state_id = "
            "episode index, env.reset(seed = 1000 + episode index), K = 10 (n_action_steps of the pi0.5 "
            "reproduction). LeRobot's documented protocol (10 episodes per task) is lerobot-docs.",
            [LEROBOT], {**COMMON_CAPS, "libero_spatial": 280}, f"TASK_SUITE_MAX_STEPS in {_where(LEROBOT)}",
            50, f"default n_episodes 50, init_state_id = episode index: {_where(LEROBOT)}", 10, GRIPPER_OPEN_NOOP,
            f"num_steps_wait = 10 no-op controls [0,0,0,0,0,0,-1] inside reset(), outside the cap: {_where(LEROBOT)}",
            [1000], f"seed = 1000 (lerobot-eval default): {_where(LEROBOT)}",
            {"rule": "run_seed_plus_init_index",
             "source": "env.reset(seed = start seed + episode index), episode index = init-state index: "
                       f"{_where(LEROBOT)}"},
            _policy_side(10, lerobot_replan, "openpi-compat", lerobot_track, lerobot_duties, _where(LEROBOT))),
        _schedule(
            "lerobot-docs", "LeRobot's documented LIBERO evaluation (10 episodes per task)",
            "The evaluation LeRobot's LIBERO page recommends: lerobot-eval on the four standard suites with "
            "--eval.n_episodes=10 (init states 0-9, init states on), batch size 1, the default seed 1000 fixed "
            "(env.reset(seed = 1000 + episode index)); LeRobot's caps 280/280/300/520/400 and settling; K = 10.",
            [LEROBOT, LEROBOT_DOCS], {**COMMON_CAPS, "libero_spatial": 280},
            f"TASK_SUITE_MAX_STEPS in {_where(LEROBOT)}",
            10, f"--eval.n_episodes=10 in {_where(LEROBOT_DOCS)}; init_state_id = episode index: {_where(LEROBOT)}",
            10, GRIPPER_OPEN_NOOP,
            f"num_steps_wait = 10 no-op controls [0,0,0,0,0,0,-1] inside reset(), outside the cap: {_where(LEROBOT)}",
            [1000], f"the documented command passes no --seed, so lerobot-eval's default seed = 1000 fixes it: "
                    f"{_where(LEROBOT_DOCS)}, {_where(LEROBOT)}",
            {"rule": "run_seed_plus_init_index",
             "source": "env.reset(seed = start seed + episode index), episode index = init-state index: "
                       f"{_where(LEROBOT)}"},
            _policy_side(10, lerobot_replan, "openpi-compat", lerobot_track, lerobot_duties,
                         f"{_where(LEROBOT)}, {_where(LEROBOT_DOCS)}")),
        _schedule(
            "libero-native", "LIBERO's own lifelong evaluator",
            "LIBERO's libero/lifelong evaluator: max_steps 600 for every suite, 5 settling controls of "
            "np.zeros(7) (gripper 0, not -1), n_eval 20 episodes per task on init states 0-19, seed 10000, one "
            "action per control step (K = 1) from both images plus joint and gripper states.",
            [LIBERO], dict.fromkeys(COMMON_CAPS, 600), f"max_steps: 600 in {_where(LIBERO)}", 20,
            f"n_eval: 20, init states indices % 50 = 0-19: {_where(LIBERO)}", 5, ZEROS,
            f"5 settling controls of np.zeros(7): {_where(LIBERO)}", [10000], f"seed: 10000 in {_where(LIBERO)}",
            {"rule": "run_seed", "source": f"env.seed(cfg.seed) in {_where(LIBERO)}"},
            _policy_side(1, f"the policy is queried at every control step in {_where(LIBERO)}", "rgb+proprio",
                         "rgb+proprio: agentview_rgb and eye_in_hand_rgb with joint_states (7) and gripper_states "
                         f"(2), the robomimic modalities of {_where(LIBERO)}",
                         ["images at the policy's training size (cfg.data.img_h/w, 128x128 by default): resize the "
                          "delivered 256x256",
                          "LIBERO's evaluator feeds the renders unrotated (its video writer flips for display "
                          "only): rotate the delivered images back (image[::-1, ::-1]) for a model trained that way",
                          "normalization as the algorithm's own observation encoders do"],
                         f"{_where(LIBERO)}; {delivered}")),
    ]
    return {s["name"]: s for s in schedules}


def _text(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    stale = []
    for name, document in build().items():
        path = OUT / f"{name}.json"
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != _text(document):
                stale.append(str(path))
            continue
        OUT.mkdir(exist_ok=True)
        path.write_text(_text(document), encoding="utf-8")
        print(f"wrote {path}")
    for name in stale:
        print(f"differs from tools/build_schedules.py: {name}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
