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


def _where(source: dict[str, str]) -> str:
    return f"{source['repository']}@{source['revision']} {source['path']}"


COMMON_CAPS = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}


def _schedule(name: str, title: str, description: str, sources: list[dict[str, str]], caps: dict[str, int],
              cap_source: str, episodes: int, episodes_source: str, settle: int, settle_action: list[float],
              settle_source: str, seeds: list[int], seeds_source: str, env_seed: dict[str, Any]) -> dict[str, Any]:
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
    return {"schema_version": 1, "name": name, "title": title, "description": description,
            "sources": sources, "default_suites": list(catalog.STANDARD_SUITES),
            "settle_counts_against_cap": False,
            "seeds": {"default": seeds, "source": seeds_source, "env_seed": env_seed}, "suites": suites}


def build() -> dict[str, dict[str, Any]]:
    common_caps_source = (f"max_steps per suite in {_where(OPENVLA)} (reused by {_where(OFT)}, {_where(OPENPI)} "
                          f"and {_where(STARVLA)})")
    fifty = "50 episodes per task, episode i on released init state i (num_trials_per_task = 50)"
    ten_noops = "10 no-op controls [0,0,0,0,0,0,-1] (num_steps_wait = 10), not counted against the cap"
    schedules = [
        _schedule(
            "standard", "The common published protocol",
            "Every released init state (0-49) of every task, in order; per-suite caps 220/280/300/520 "
            "(libero_90 400); ten settling controls [0,0,0,0,0,0,-1] outside the cap; run seed 7 seeds the "
            "environment (env.seed). Default suites: the four standard ones (4 x 10 x 50 = 2,000 episodes).",
            [OPENVLA, OFT, OPENPI, STARVLA], COMMON_CAPS, common_caps_source, 50, f"{fifty}: {_where(OPENVLA)}",
            10, GRIPPER_OPEN_NOOP, f"{ten_noops}: {_where(OPENVLA)}", [7],
            f"seed = 7 in {_where(OPENVLA)}, {_where(OPENPI)} and {_where(STARVLA)}",
            {"rule": "run_seed", "source": f"env.seed(seed) as in {_where(OPENPI)} and {_where(STARVLA)}"}),
        _schedule(
            "openvla", "OpenVLA and OpenVLA-OFT run_libero_eval.py",
            "OpenVLA's LIBERO evaluator, copied by OpenVLA-OFT: caps 220/280/300/520/400 plus 10 wait steps, "
            "50 episodes per task on init states 0-49 in order, seed 7 (policy side) with env.seed(0) "
            "hard-coded. The published OpenVLA/OFT tables average 3 seeds: --libero-seeds 7,8,9 (the "
            "environment seed stays 0, as in the original).",
            [OPENVLA, OFT], COMMON_CAPS,
            f"max_steps per suite in {_where(OPENVLA)} and TASK_MAX_STEPS in {_where(OFT)}",
            50, f"{fifty}: {_where(OPENVLA)}", 10, GRIPPER_OPEN_NOOP, f"{ten_noops}: {_where(OPENVLA)}", [7],
            f"seed = 7 in {_where(OPENVLA)}; OFT's paper numbers are the mean of 3 seeds",
            {"rule": "fixed", "value": 0, "source": f"env.seed(0) hard-coded in {_where(OPENVLA)}"}),
        _schedule(
            "openpi", "openpi examples/libero/main.py",
            "openpi's LIBERO client: caps 220/280/300/520/400 plus 10 wait steps, 50 episodes per task on init "
            "states 0-49 in order, np.random.seed(7) and env.seed(7).",
            [OPENPI], COMMON_CAPS, f"max_steps per suite in {_where(OPENPI)}", 50, f"{fifty}: {_where(OPENPI)}",
            10, GRIPPER_OPEN_NOOP, f"{ten_noops}: {_where(OPENPI)}", [7], f"seed = 7 in {_where(OPENPI)}",
            {"rule": "run_seed", "source": f"env.seed(args.seed) in {_where(OPENPI)}"}),
        _schedule(
            "lerobot", "LeRobot lerobot-eval with envs/libero.py",
            "LeRobot's LIBERO environment: TASK_SUITE_MAX_STEPS 280/280/300/520/400 (libero_spatial 280, not "
            "220), 10 no-op controls inside reset() outside the cap, 50 episodes per task with init_state_id = "
            "episode index, env.reset(seed = 1000 + episode index).",
            [LEROBOT], {**COMMON_CAPS, "libero_spatial": 280}, f"TASK_SUITE_MAX_STEPS in {_where(LEROBOT)}",
            50, f"default n_episodes 50, init_state_id = episode index: {_where(LEROBOT)}", 10, GRIPPER_OPEN_NOOP,
            f"num_steps_wait = 10 no-op controls [0,0,0,0,0,0,-1] inside reset(), outside the cap: {_where(LEROBOT)}",
            [1000], f"seed = 1000 (lerobot-eval default): {_where(LEROBOT)}",
            {"rule": "run_seed_plus_init_index",
             "source": "env.reset(seed = start seed + episode index), episode index = init-state index: "
                       f"{_where(LEROBOT)}"}),
        _schedule(
            "libero-native", "LIBERO's own lifelong evaluator",
            "LIBERO's libero/lifelong evaluator: max_steps 600 for every suite, 5 settling controls of "
            "np.zeros(7) (gripper 0, not -1), n_eval 20 episodes per task on init states 0-19, seed 10000.",
            [LIBERO], dict.fromkeys(COMMON_CAPS, 600), f"max_steps: 600 in {_where(LIBERO)}", 20,
            f"n_eval: 20, init states indices % 50 = 0-19: {_where(LIBERO)}", 5, ZEROS,
            f"5 settling controls of np.zeros(7): {_where(LIBERO)}", [10000], f"seed: 10000 in {_where(LIBERO)}",
            {"rule": "run_seed", "source": f"env.seed(cfg.seed) in {_where(LIBERO)}"}),
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
