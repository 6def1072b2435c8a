"""The `replay` policy: open-loop replay of an action log (format pytest-libero-action-log/1).

    pytest --libero-policy replay --libero-policy-kwargs '{"log": "path/to/log.json"}'

A log holds the actions of one cell (suite, task, init state, seed) recorded under the
protocol, plus a fingerprint of the first observation the policy is delivered on that cell.
The adapter sees only the contract's Observation: it picks the log by the task language,
checks on the first act() that the first observation matches the fingerprint (so a log
replayed on another init state, or another task with the same language, is a clear policy
error rather than a silent pass), then returns the logged actions in chunks. It indexes the
log by `observation.counters.executed_controls`, so any replan interval replays the same
action sequence. When the log is exhausted without success it returns STOP.

Replaying a log is a demonstration replay, not a learned policy: results are labelled
`{"kind": "demonstration-replay"}`. Logs come from tools/demo_expert.py (docs/demo-policy.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from pytest_libero.core.contract import STOP, Observation
from pytest_libero.errors import PolicyFault
from pytest_libero.core.hashing import images_digest

LOG_FORMAT = "pytest-libero-action-log/1"
ACTION_SIZE = 7  # the logs are LIBERO episodes: 7-D actions
THUMB = 32  # thumbnail side: 256x256 images averaged over 8x8 blocks
# Calibrated (docs/demo-policy.md): after removing the median offset, init states 1-3 of
# libero_10/spatial/goal task 0 move thumbnail cells by 57-173 grey levels (22-234 cells by
# > 12) in at least one camera, while renderer-like changes of init state 0 (10% darker, +8
# brightness, 3x3 blur, +-6 noise, a 1-pixel shift) move none by more than 24.
CELL_TOL = 32.0
MIN_MOVED_CELLS = 4


class ReplayMismatch(PolicyFault):
    """The episode is not the one the log was recorded on (language or first observation)."""


class ReplayLogError(PolicyFault):
    """An action log is unreadable or malformed."""


def thumbnail(image: np.ndarray) -> np.ndarray:
    """Grayscale block-mean thumbnail (THUMB x THUMB, uint8) of a 256x256x3 uint8 image."""
    grey = np.asarray(image, dtype=np.float64).mean(axis=2)
    block = grey.shape[0] // THUMB
    small = grey[: block * THUMB, : block * THUMB].reshape(THUMB, block, THUMB, block).mean(axis=(1, 3))
    return np.clip(np.floor(small + 0.5), 0, 255).astype(np.uint8)


def fingerprint(images: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """What a log stores of the first delivered observation: exact sha256 and thumbnails (hex)."""
    return {"sha256": images_digest(images), "thumb_side": THUMB,
            "thumbnails": {camera: thumbnail(image).tobytes().hex() for camera, image in images.items()}}


def compare_fingerprint(recorded: Mapping[str, Any], images: Mapping[str, np.ndarray]) -> tuple[bool, str]:
    """(matches, detail). Exact digest first; otherwise a tolerant thumbnail comparison."""
    if recorded.get("sha256") == images_digest(images):
        return True, "identical first observation"
    worst: list[str] = []
    matches = True
    for camera in images:
        want = np.frombuffer(bytes.fromhex(recorded["thumbnails"][camera]), dtype=np.uint8)
        want = want.reshape(recorded["thumb_side"], recorded["thumb_side"]).astype(np.float64)
        got = thumbnail(images[camera]).astype(np.float64)
        diff = got - want
        diff -= np.median(diff)  # tolerate a global brightness shift between renderers
        moved = int((np.abs(diff) > CELL_TOL).sum())
        worst.append(f"{camera}: {moved} of {diff.size} thumbnail cells differ by > {CELL_TOL:g} grey levels "
                     f"(max {np.abs(diff).max():.0f})")
        if moved >= MIN_MOVED_CELLS:
            matches = False
    return matches, "; ".join(worst)


@dataclass(frozen=True)
class ActionLog:
    path: str
    cell: dict[str, Any]
    first_observation: dict[str, Any]
    actions: np.ndarray

    @property
    def language(self) -> str:
        return str(self.cell["language"])

    def describe(self) -> str:
        c = self.cell
        return f"init state {c['init_index']} of {c['suite']} task {c['task_index']} (seed {c['seed']})"


def load_log(path: str | Path) -> ActionLog:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReplayLogError(f"cannot read action log {str(path)!r}: {exc}") from exc
    try:
        if data["format"] != LOG_FORMAT:
            raise ReplayLogError(f"action log {str(path)!r} has format {data['format']!r}, not {LOG_FORMAT!r}")
        actions = np.asarray(data["actions"], dtype=np.float64)
        if actions.ndim != 2 or actions.shape[1] != ACTION_SIZE or actions.shape[0] < 1:
            raise ReplayLogError(f"action log {str(path)!r}: actions have shape {actions.shape}, need (n, 7)")
        if not np.isfinite(actions).all() or np.abs(actions).max() > 1.0:
            raise ReplayLogError(f"action log {str(path)!r}: actions must be finite and within [-1, 1]")
        cell = data["cell"]
        for key in ("suite", "task_index", "init_index", "seed", "language"):
            cell[key]  # noqa: B018 - presence check
        first = data["first_observation"]
        first["sha256"], first["thumbnails"]  # noqa: B018
    except KeyError as exc:
        raise ReplayLogError(f"action log {str(path)!r} lacks the field {exc}") from None
    actions.setflags(write=False)
    return ActionLog(str(path), cell, first, actions)


class LogReplayPolicy:
    """Replays one of several action logs, chosen by task language. Shared by `replay` and `demo`."""

    profile = {"kind": "demonstration-replay",
               "label": "open-loop replay of a recorded action log (not a learned policy)"}

    def __init__(self, logs: Iterable[ActionLog], chunk_size: int = 5, source: str = "") -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.chunk_size = chunk_size
        self.source = source
        self.logs: dict[str, ActionLog] = {}
        for log in logs:
            if log.language in self.logs:
                raise ReplayLogError(f"two action logs for the language {log.language!r}: "
                                     f"{self.logs[log.language].path} and {log.path}")
            self.logs[log.language] = log
        self.current: ActionLog | None = None
        self._checked = False

    def available(self) -> str:
        return ", ".join(f"{log.cell.get('id', log.path)} ({log.language!r})"
                         for log in sorted(self.logs.values(), key=lambda g: str(g.cell.get("id", g.path)))) or "none"

    def _select(self, language: str) -> ActionLog:
        log = self.logs.get(language)
        if log is None:
            raise ReplayMismatch(f"no action log {self.source}for the task {language!r}; "
                                 f"logs exist for: {self.available()}")
        return log

    def reset(self, language: str) -> None:
        self.current = self._select(language)
        self._checked = False

    def act(self, observation: Observation) -> Any:
        if self.current is None or self.current.language != observation.language:
            self.current = self._select(observation.language)
            self._checked = False
        log = self.current
        if not self._checked:
            matches, detail = compare_fingerprint(log.first_observation, observation.images)
            if not matches:
                raise ReplayMismatch(
                    f"log {Path(log.path).name} was recorded for {log.describe()}; the first observation "
                    f"differs from the recorded one ({detail}): this episode starts from another init state "
                    "or scene, and an open-loop replay would be meaningless")
            self._checked = True
        start = observation.counters.executed_controls
        if start >= len(log.actions):
            return STOP
        return log.actions[start:start + self.chunk_size].copy()

    def close(self) -> None:
        pass


def ReplayPolicy(log: str | list[str], chunk_size: int = 5) -> LogReplayPolicy:  # noqa: N802 - factory
    """`--libero-policy replay --libero-policy-kwargs '{"log": "path.json"}'` (or a list of paths)."""
    paths = [log] if isinstance(log, (str, Path)) else list(log)
    if not paths:
        raise ValueError("replay needs a log: --libero-policy-kwargs '{\"log\": \"path/to/log.json\"}'")
    return LogReplayPolicy([load_log(p) for p in paths], chunk_size=chunk_size)
