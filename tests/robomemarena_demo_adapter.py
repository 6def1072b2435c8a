"""The task-1 demonstration (tests/robomemarena_demo_task1_seed50.json) replayed as a RoboMemArena-style adapter.

A demonstration replay, not a policy: the actions were computed by tools/robomemarena_demo.py from
privileged simulator state of task 1 at seed 50, and replay open-loop, `replan_steps` per call (the
runner's K). Past the end it holds still with the gripper open.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

# RoboMemArena's base class, from the checkout (its runner accepts only subclasses; the suite puts the
# checkout's scripts folder on the worker's path as well).
from policy_adapter import BasePolicyAdapter

DEMO = Path(__file__).resolve().parent / "robomemarena_demo_task1_seed50.json"


class DemoReplay(BasePolicyAdapter):
    profile = {"kind": "demonstration-replay",
               "label": "RoboMemArena task 1 scripted demonstration (privileged state, recorded; not a policy)"}

    def __init__(self, replan_steps: int = 10) -> None:
        self.actions = np.asarray(json.loads(DEMO.read_text())["actions"], dtype=np.float64)
        self.replan_steps = replan_steps
        self.position = 0

    def reset(self) -> None:
        self.position = 0

    def infer_actions(self, obs, prompt, resize_size):  # type: ignore[no-untyped-def]
        chunk = self.actions[self.position:self.position + self.replan_steps]
        self.position += self.replan_steps
        if len(chunk) == 0:
            chunk = np.array([[0.0] * 6 + [-1.0]])
        return chunk


def build_adapter(replan_steps: int = 10) -> DemoReplay:
    return DemoReplay(replan_steps)
