"""Built-in diagnostic policies. Their results are infrastructure evidence, never capability attempts."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_libero.core.contract import Observation

HOLD_STILL = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)  # a LIBERO action: the arm still, the gripper open


class ZeroPolicy:
    """Holds still with the gripper open: chunks of [0, 0, 0, 0, 0, 0, -1]."""

    profile = {"kind": "diagnostic", "label": "zero policy (infrastructure diagnostic)"}

    def __init__(self, chunk_size: int = 10) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self._chunk = np.tile(np.asarray(HOLD_STILL, dtype=np.float64), (chunk_size, 1))

    def reset(self, language: str) -> None:
        pass

    def act(self, observation: Observation) -> Any:
        return self._chunk.copy()

    def close(self) -> None:
        pass


class RandomPolicy:
    """Uniform random actions within bounds; reseeded at every reset, so episodes are repeatable."""

    profile = {"kind": "diagnostic", "label": "random policy (infrastructure diagnostic)"}

    def __init__(self, seed: int = 0, chunk_size: int = 10, scale: float = 1.0) -> None:
        if not 0.0 < scale <= 1.0:
            raise ValueError(f"scale must be in (0, 1], got {scale}")
        self.seed, self.chunk_size, self.scale = seed, chunk_size, scale
        self._rng = np.random.default_rng(seed)

    def reset(self, language: str) -> None:
        self._rng = np.random.default_rng(self.seed)

    def act(self, observation: Observation) -> Any:
        actions = self._rng.uniform(-self.scale, self.scale, size=(self.chunk_size, 7))
        actions[:, 6] = np.where(self._rng.random(self.chunk_size) < 0.5, -1.0, 1.0)
        return actions

    def close(self) -> None:
        pass
