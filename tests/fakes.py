"""A scripted stand-in for the bench service, for tests of the engine and the plugin's logic."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pytest_libero.benchmarks.libero.spec import CAMERAS, IMAGE_SHAPE
from pytest_libero.core.contract import STATE_DIMS
from pytest_libero.errors import EnvironmentFault


def fake_conftest(**service_kwargs: Any) -> str:
    """A conftest.py for pytester runs: the plugin's bench service replaced by a FakeService."""
    return f"""
import pytest
from fakes import FakeService

@pytest.fixture(scope="session")
def libero_service():
    return FakeService(**{service_kwargs!r})

@pytest.fixture(scope="session")
def libero_source_check():
    return []
"""


def blank_images() -> dict[str, np.ndarray]:
    return {camera: np.zeros(IMAGE_SHAPE, dtype=np.uint8) for camera in CAMERAS}


class FakeService:
    """Succeeds at control `success_at` (never when None); raises at submit number `fault_at`.

    Deadlines as BenchService keeps them (`set_deadline`): a request after the deadline raises,
    and one that would outlast it raises at the deadline ("killed"). `work_s` is how long each
    submit works; `hang` names the request ("start", "submit", "finish") that never answers,
    for submits from number `hang_from` on.
    """

    def __init__(self, success_at: int | None = None, fault_at: int | None = None,
                 language: str = "put the fake bowl on the plate", work_s: float = 0.0,
                 hang: str | None = None, hang_from: int = 1) -> None:
        self.success_at, self.fault_at, self.language = success_at, fault_at, language
        self.work_s, self.hang, self.hang_from = work_s, hang, hang_from
        self.submitted: list[np.ndarray] = []
        self.delivered = 0
        self.episodes = 0
        self.deadline: float | None = None

    mismatch: str | None = None

    def set_deadline(self, deadline: float | None) -> None:
        self.deadline = deadline

    def _work(self, op: str, seconds: float) -> None:
        """Work `seconds` (for ever when `op` hangs), or raise as BenchService does at its deadline."""
        if op == self.hang and (op != "submit" or len(self.submitted) >= self.hang_from):
            seconds = float("inf")
        now = time.monotonic()
        if self.deadline is not None and now >= self.deadline:
            raise EnvironmentFault(f"episode deadline (--libero-episode-timeout, with its grace) passed before {op!r}")
        if self.deadline is not None and now + seconds > self.deadline:
            time.sleep(self.deadline - now)
            raise EnvironmentFault(f"episode deadline (--libero-episode-timeout, with its grace) passed while "
                                   f"the bench service worked on {op!r}; it was killed")
        assert seconds != float("inf"), "a hanging fake service needs a deadline"
        time.sleep(seconds)

    def check_sources(self) -> str | None:
        return self.mismatch

    def start(self, payload: dict[str, Any]) -> dict[str, Any]:
        self._work("start", 0.0)
        self.episodes += 1
        self.cap = payload["control_cap"]
        self.executed = 0
        self.first: int | None = None
        # The track's state, as the real service sends it (zeros: nothing here moves).
        dim = STATE_DIMS.get(payload.get("track", "rgb"))
        self.state = None if dim is None else np.zeros(dim)
        return {"language": self.language, "settling_controls": payload["settle_controls"],
                "observation": blank_images(), "state": self.state}

    def submit(self, chunk: np.ndarray, deliver: bool, frames: bool = False) -> dict[str, Any]:
        self.submitted.append(np.array(chunk))
        self._work("submit", self.work_s)
        if self.fault_at is not None and len(self.submitted) >= self.fault_at:
            raise EnvironmentFault("fake simulator crashed")
        before = self.executed
        for _ in range(min(len(chunk), self.cap - self.executed)):
            self.executed += 1
            if self.executed == self.success_at:
                self.first = self.executed
                return {"executed": self.executed - before, "executed_total": self.executed,
                        "success": True, "truncated": False, "observation": None,
                        "frames": [blank_images() for _ in range(self.executed - before)] if frames else None}
        truncated = self.executed >= self.cap
        observation = None
        if deliver and not truncated:
            observation = blank_images()
            self.delivered += 1
        return {"executed": self.executed - before, "executed_total": self.executed, "success": False,
                "truncated": truncated, "observation": observation,
                "state": getattr(self, "state", None) if observation is not None else None,
                "frames": [blank_images() for _ in range(self.executed - before)] if frames else None}

    def finish(self, final_frame: bool = False) -> dict[str, Any]:
        self._work("finish", 0.0)
        return {"first_success_control": self.first, "executed_controls": self.executed,
                "timing": {"setup_s": 0.0}, "final_frame": blank_images() if final_frame else None,
                "bddl_sha256": "0" * 64, "init_states_file_sha256": "1" * 64,
                "selected_state_sha256": "2" * 64, "final_state_sha256": "3" * 64, "settle_success": False}
