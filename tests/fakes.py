"""A scripted stand-in for the bench service, for tests of the engine and the plugin's logic."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_libero.core.contract import CAMERAS, IMAGE_SHAPE, STATE_DIMS
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
    """Succeeds at control `success_at` (never when None); raises at submit number `fault_at`."""

    def __init__(self, success_at: int | None = None, fault_at: int | None = None,
                 language: str = "put the fake bowl on the plate") -> None:
        self.success_at, self.fault_at, self.language = success_at, fault_at, language
        self.submitted: list[np.ndarray] = []
        self.delivered = 0
        self.episodes = 0

    mismatch: str | None = None

    def check_sources(self) -> str | None:
        return self.mismatch

    def start(self, payload: dict[str, Any]) -> dict[str, Any]:
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
        return {"first_success_control": self.first, "executed_controls": self.executed,
                "timing": {"setup_s": 0.0}, "final_frame": blank_images() if final_frame else None,
                "bddl_sha256": "0" * 64, "init_states_file_sha256": "1" * 64,
                "selected_state_sha256": "2" * 64, "final_state_sha256": "3" * 64, "settle_success": False}
