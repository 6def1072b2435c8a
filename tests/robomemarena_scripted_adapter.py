"""A scripted, deterministic RoboMemArena-style adapter for differential tests (not a policy).

`build_adapter(log=PATH)` returns an adapter with RoboMemArena's contract (reset(),
infer_actions(obs, prompt, resize_size) -> [horizon, 7]) that moves the arm: a proportional
controller on the 8-d observation/state towards waypoints around the starting end-effector
position, with a wrist twist and the gripper closing and opening, so that object poses and stages
can change. It depends only on what it is given, and writes one JSON line per call with the
sha256 of both images, the state and the prompt, so two runners' observations can be compared.

For the error paths: `raise_at={prompt: call}` raises at that call of that task; `kill_service_at={prompt:
call}` kills this process's bench service (this suite's simulator process) at that call first.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

import numpy as np

# RoboMemArena's base class, from the checkout (its runner accepts only subclasses; the suite puts the
# checkout's scripts folder on the worker's path as well).
from policy_adapter import BasePolicyAdapter

WAYPOINTS = np.array([[0.00, 0.00, -0.10], [0.08, 0.05, -0.15], [0.08, -0.08, -0.05], [-0.05, 0.00, 0.05]])
HORIZON = 12


def _sha(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _kill_bench_service() -> None:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and b"pytest_libero.runtime.server" in command:
            os.kill(int(stat.parent.name), signal.SIGKILL)


class ScriptedArm(BasePolicyAdapter):
    def __init__(self, log: str | None = None, raise_at: dict | None = None,
                 kill_service_at: dict | None = None) -> None:
        self.log = log
        self.raise_at = raise_at or {}
        self.kill_service_at = kill_service_at or {}
        self.calls = 0
        self.origin: np.ndarray | None = None

    def reset(self) -> None:
        self.calls = 0
        self.origin = None

    def infer_actions(self, obs, prompt, resize_size):  # type: ignore[no-untyped-def]
        state = np.asarray(obs["observation/state"], dtype=np.float64)
        if self.origin is None:
            self.origin = state[:3].copy()
        if self.log:
            with open(self.log, "a", encoding="utf-8") as stream:
                stream.write(json.dumps({"call": self.calls, "prompt": prompt, "resize_size": resize_size,
                                         "image": _sha(obs["observation/image"]),
                                         "wrist": _sha(obs["observation/wrist_image"]),
                                         "state": _sha(np.asarray(obs["observation/state"]))}) + "\n")
        if self.kill_service_at.get(prompt) == self.calls:
            _kill_bench_service()
        if self.raise_at.get(prompt) == self.calls:
            raise RuntimeError(f"scripted adapter failure at call {self.calls}")
        target = self.origin + WAYPOINTS[self.calls % len(WAYPOINTS)]
        move = np.clip((target - state[:3]) * 12.0, -1.0, 1.0)
        twist = 0.3 if self.calls % 2 else -0.3
        gripper = 1.0 if (self.calls // 2) % 2 else -1.0
        self.calls += 1
        chunk = np.zeros((HORIZON, 7), dtype=np.float32)
        chunk[:, :3] = move * np.linspace(1.0, 0.4, HORIZON)[:, None]
        chunk[:, 5] = twist
        chunk[:, 6] = gripper
        return chunk


def build_adapter(log: str | None = None, raise_at: dict | None = None,
                  kill_service_at: dict | None = None) -> ScriptedArm:
    return ScriptedArm(log, raise_at, kill_service_at)
