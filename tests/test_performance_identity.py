"""Lean setup and lean rendering change no bit: a kept environment vs a fresh native one.

For several cells and action sequences (and init states in a changing order), the bench
service's episode on a kept environment (hard-reset between episodes, cameras rendered only
for delivered observations) matches the bare native loop (fresh env, both cameras rendered
every control) in qpos and qvel after every control, every delivered image and the outcome.
The lean hard reset (compiled model and render context kept when the XML is unchanged) is on
in these episodes, and each test asserts it was actually taken, on kept environments and on
the first reset of a freshly built one.
"""

from __future__ import annotations

import tempfile

import numpy as np
import pytest

from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.hashing import images_digest
from pytest_libero.benchmarks.libero.reference import NativeRun, native_rollout, state_digest

pytestmark = pytest.mark.real_libero
K = 5


def sequences(seed: int, count: int, chunks: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[np.concatenate([rng.uniform(-0.7, 0.7, (K, 6)), np.sign(rng.uniform(-1, 1, (K, 1)))], axis=1)
             for _ in range(chunks)] for _ in range(count)]


def kept_env_episode(cache, suite, task, init, chunks, reuse=True):
    """The service's episode code, in this process, tracing the state after every control."""
    from pytest_libero.benchmarks.libero.service import LiberoEpisode

    episode = LiberoEpisode({"suite": suite, "task_index": task, "init_index": init, "seed": 20260907},
                            control_cap=10**6, settle_controls=10, allow_mismatch=False, cache=cache, reuse_env=reuse)
    lean = (cache.lean.reused_models, cache.lean.reused_contexts)
    delivered = [images_digest(episode.observation(episode.first_raw))]
    states, success = [], None
    for chunk in chunks:
        for i, action in enumerate(chunk):
            step = episode.submit(action[None, :], deliver=i == K - 1)
            states.append(state_digest(episode.env))
            if step["success"]:
                success = step["executed_total"]
                break
        if success is not None:
            break
        delivered.append(images_digest(step["observation"]))
    reused = episode.private["env_reused"]
    episode.finish()
    return states, delivered, success, reused, lean


@pytest.mark.parametrize("suite, task, episodes", [("libero_10", 0, 4), ("libero_goal", 0, 2)])
def test_kept_environment_is_bit_identical_to_a_fresh_one(suite, task, episodes):
    """libero_10: four episodes (init states 0, 1, 0, 0; a repeat last); libero_goal, a second
    suite's scene, the first two (a build, then the kept environment at another init state)."""
    from pytest_libero.benchmarks.libero.service import EnvCache, prepare_process_environment

    prepare_process_environment(tempfile.mkdtemp(prefix="pytest-libero-test-"))
    seq_a, seq_b = sequences(seed=task + 11, count=2, chunks=3)
    plan = [(0, seq_a), (1, seq_b), (0, seq_b), (0, seq_a)][:episodes]
    cache = EnvCache(lean_reset=True)
    try:
        kept = [kept_env_episode(cache, suite, task, init, chunks) for init, chunks in plan]
    finally:
        cache.close()
    assert [k[3] for k in kept] == [False, True, True, True][:episodes]  # built once, then kept
    # Every hard reset (the first one too) reused the compiled model and the render context.
    assert [k[4] for k in kept] == [(1, 1), (2, 2), (3, 3), (4, 4)][:episodes]
    # The reference of each distinct (init state, sequence) is built once: the native loop is a fresh
    # environment every time, so the last episode (a repeat of the first) has the first one's reference.
    natives: dict[tuple[int, int], NativeRun] = {}
    for (init, chunks), (states, delivered, success, _, _) in zip(plan, kept, strict=True):
        key = (init, id(chunks))
        if key not in natives:
            natives[key] = native_rollout(suite, task, chunks, K, init_index=init)
        native = natives[key]
        assert states == native.states, f"{suite} t{task} init {init}: qpos/qvel differ"
        assert delivered == native.delivered, f"{suite} t{task} init {init}: delivered images differ"
        assert success == native.success_control
    assert len(natives) == min(episodes, 3)
    if episodes == 4:
        assert kept[0][0] == kept[3][0] and kept[1][0] != kept[2][0]  # the comparison can tell episodes apart
    assert kept[0][0] != kept[1][0]


def test_lean_first_reset_of_a_fresh_environment_is_bit_identical():
    """Without reuse every episode builds anew; its first reset reuses the constructor's model."""
    from pytest_libero.benchmarks.libero.service import EnvCache, prepare_process_environment

    prepare_process_environment(tempfile.mkdtemp(prefix="pytest-libero-test-"))
    (seq,) = sequences(seed=5, count=1, chunks=3)
    plan = [("libero_spatial", 1, 2), ("libero_object", 0, 0)]
    cache = EnvCache(lean_reset=True)
    try:
        fresh = [kept_env_episode(cache, suite, task, init, seq, reuse=False) for suite, task, init in plan]
    finally:
        cache.close()
    assert [f[3] for f in fresh] == [False, False]
    assert [f[4] for f in fresh] == [(1, 1), (1, 1)]
    for (suite, task, init), (states, delivered, success, _, _) in zip(plan, fresh, strict=True):
        native = native_rollout(suite, task, seq, K, init_index=init)
        assert states == native.states, f"{suite} t{task} init {init}: qpos/qvel differ"
        assert delivered == native.delivered, f"{suite} t{task} init {init}: delivered images differ"
        assert success == native.success_control


def test_the_lean_reset_switch_is_read_from_the_environment(monkeypatch):
    from pytest_libero.benchmarks.libero.service import LEAN_RESET_ENV, EnvCache

    monkeypatch.setenv(LEAN_RESET_ENV, "0")
    assert EnvCache().lean_reset is False and EnvCache(lean_reset=True).lean_reset is True
    monkeypatch.setenv(LEAN_RESET_ENV, "1")
    assert EnvCache().lean_reset is True
    monkeypatch.setenv(LEAN_RESET_ENV, "yes")
    with pytest.raises(ValueError, match="PYTEST_LIBERO_LEAN_RESET='yes'"):
        EnvCache()


def test_the_service_is_recycled_between_episodes_once_its_memory_grows():
    from pytest_libero.adapters.builtin import ZeroPolicy
    from pytest_libero.core.cells import Cell
    from pytest_libero.core.protocol import Protocol
    from pytest_libero.core.rollout import run_episode
    from pytest_libero.runtime.service import BenchService
    from pytest_libero.benchmarks import get, service_env

    protocol = Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=5, max_policy_calls=1)
    # any size at all: recycle after every episode
    service = BenchService(env=service_env(get("libero"), None), max_rss_mib=1.0)
    try:
        results, pids = [], []
        for init in (0, 1):
            results.append(run_episode(service, ZeroPolicy(), Cell("libero_10", 0, init), protocol))
            pids.append(service.pid)
        assert [r.outcome for r in results] == ["failure"] * 2
        assert pids == [None, None] and service.recycled == 2  # closed after every episode
        assert [r.private["env_reused"] for r in results] == [False] * 2  # each fresh service builds anew
    finally:
        service.close()
