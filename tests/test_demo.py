"""The `demo` and `replay` policies: a real success path through the harness.

Unit tests (no simulator) check log loading, language refusal and the first-observation check;
the real tests (marked real_libero) check that the zero policy fails a cell the demo passes
(the demo's own success path through the plugin is tests/test_packaging.py's main job, run from
the installed wheel), that a log replayed on another init state is a clear policy error, that the
demo's log cut after its first object reaches one of the goal's two predicates (goal progress; the
two share one bench service and environment), and that the generator is byte-reproducible.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.adapters.demo import LOG_DIR, DemoPolicy
from pytest_libero.adapters.replay import (LogReplayPolicy, ReplayLogError, ReplayMismatch, ReplayPolicy,
                                           fingerprint, load_log)
from pytest_libero.core.cells import Cell
from pytest_libero.benchmarks.libero.catalog import entry
from pytest_libero.benchmarks.libero.spec import CAMERAS
from pytest_libero.core.contract import STOP, Counters, seal_observation
from pytest_libero.runtime.policies import BUILTIN_POLICIES

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CELLS = ("libero_10-t00-s00", "libero_10-t01-s00")


def shipped(cell_id: str) -> dict:
    return json.loads((LOG_DIR / f"{cell_id}.json").read_text(encoding="utf-8"))


def images(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {camera: rng.integers(0, 256, (256, 256, 3), dtype=np.uint8) for camera in CAMERAS}


def blocky(seed: int) -> dict[str, np.ndarray]:
    """Images with structure at the thumbnail's scale (8x8-pixel blocks), unlike pixel noise."""
    return {k: np.repeat(np.repeat(v[::8, ::8], 8, axis=0), 8, axis=1) for k, v in images(seed).items()}


def write_log(path: Path, language: str, first: dict[str, np.ndarray], n: int) -> Path:
    actions = [[0.0] * 6 + [-1.0 + i / 100] for i in range(n)]
    path.write_text(json.dumps({
        "format": "pytest-libero-action-log/1", "first_success_control": n,
        "cell": {"id": "libero_10-t00-s00", "suite": "libero_10", "task_index": 0, "init_index": 0,
                 "seed": 20260907, "language": language},
        "first_observation": fingerprint(first), "actions": actions}), encoding="utf-8")
    return path


# --- unit: no simulator ---------------------------------------------------------------------

def test_both_names_are_registered_and_labelled_as_demonstration_replay():
    assert BUILTIN_POLICIES["demo"] == "pytest_libero.adapters.demo:DemoPolicy"
    assert BUILTIN_POLICIES["replay"] == "pytest_libero.adapters.replay:ReplayPolicy"
    assert DemoPolicy().profile["kind"] == "demonstration-replay"
    assert "not a learned policy" in DemoPolicy().profile["label"]


def test_bundled_logs_cover_the_default_cells_and_record_their_provenance():
    names = sorted(p.stem for p in LOG_DIR.glob("*.json"))
    assert set(DEFAULT_CELLS) <= set(names)
    for name in names:
        log = shipped(name)
        cell = log["cell"]
        assert cell["id"] == name == Cell(cell["suite"], cell["task_index"], cell["init_index"]).id
        assert cell["language"] == entry(cell["suite"], cell["task_index"])["language"]
        assert log["generator"]["name"] and log["generator"]["version"]
        assert log["protocol"]["settle_controls"] == 10 and log["protocol"]["replan_interval"] == 5
        assert log["first_success_control"] == len(log["actions"]) <= log["protocol"]["control_cap"]
        assert load_log(LOG_DIR / f"{name}.json").actions.shape == (len(log["actions"]), 7)


def test_demo_refuses_a_task_it_has_no_log_for():
    policy = DemoPolicy()
    with pytest.raises(ReplayMismatch, match="no action log .*for the task 'fly to the moon'.*libero_10-t00-s00"):
        policy.reset("fly to the moon")
    observation = seal_observation("fly to the moon", images(0), Counters(), LIBERO_SPEC)
    with pytest.raises(ReplayMismatch, match="fly to the moon"):
        policy.act(observation)


def test_replay_returns_the_log_by_executed_controls_then_stops(tmp_path):
    first = images(1)
    path = write_log(tmp_path / "log.json", "do the thing", first, 12)
    policy = ReplayPolicy(str(path))
    assert isinstance(policy, LogReplayPolicy)
    policy.reset("do the thing")
    chunk = policy.act(seal_observation("do the thing", first, Counters(), LIBERO_SPEC))
    assert chunk.shape == (5, 7) and chunk[0, 6] == -1.0
    # indexed by executed controls, so any replan interval replays the same sequence
    chunk = policy.act(seal_observation("do the thing", images(2), Counters(1, 1, 3), LIBERO_SPEC))
    assert chunk[0, 6] == -1.0 + 3 / 100
    assert policy.act(seal_observation("do the thing", images(2), Counters(3, 3, 12), LIBERO_SPEC)) is STOP


def test_replay_on_a_different_first_observation_is_a_clear_error(tmp_path):
    path = write_log(tmp_path / "log.json", "do the thing", blocky(1), 5)
    policy = ReplayPolicy(str(path))
    policy.reset("do the thing")
    expected = "recorded for init state 0 of libero_10 task 0.*first observation differs"
    with pytest.raises(ReplayMismatch, match=expected):
        policy.act(seal_observation("do the thing", blocky(2), Counters(), LIBERO_SPEC))


def test_fingerprint_tolerates_small_renderer_differences(tmp_path):
    first = blocky(3)
    path = write_log(tmp_path / "log.json", "do the thing", first, 5)
    policy = ReplayPolicy(str(path))
    policy.reset("do the thing")
    darker = {k: np.clip(v.astype(int) - 6, 0, 255).astype(np.uint8) for k, v in first.items()}
    assert policy.act(seal_observation("do the thing", darker, Counters(), LIBERO_SPEC)).shape == (5, 7)


def test_a_malformed_log_is_reported(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "pytest-libero-action-log/1", "actions": [[2, 0, 0, 0, 0, 0, 0]]}')
    with pytest.raises(ReplayLogError, match="within"):
        ReplayPolicy(str(bad))
    with pytest.raises(ReplayLogError, match="cannot read"):
        ReplayPolicy(str(tmp_path / "missing.json"))


# --- real LIBERO ------------------------------------------------------------------------------

# The demo policy's success path through the plugin (both default cells to native success, nothing
# run after it) is the main job, run from the installed wheel by tests/test_packaging.py.

@pytest.mark.real_libero
def test_the_zero_policy_fails_the_cell_the_demo_passes(zero_development_run):
    # The development scope's shared zero run (its tasks 0 and 1, 3 calls of 5 controls;
    # conftest.ZERO_DEVELOPMENT_RUN): costs nothing beyond the tests that share it.
    zero, _ = zero_development_run
    zero.assert_outcomes(failed=2)
    zero.stdout.fnmatch_lines(["libero_10-t00-s00 * FAILED * failure/truncation: 3 calls*"])


# libero_10_service: tests/conftest.py's (one service per worker, shared with test_real_libero.py).


@pytest.mark.real_libero
def test_replaying_the_log_on_init_state_1_is_a_policy_error(libero_10_service):
    from pytest_libero.core.protocol import Protocol
    from pytest_libero.core.rollout import run_episode

    result = run_episode(libero_10_service, DemoPolicy(), Cell("libero_10", 0, init_index=1),
                         Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=5,
                                  max_policy_calls=3))
    assert result.outcome == "policy_error"
    assert "recorded for init state 0 of libero_10 task 0" in result.message
    assert "first observation differs" in result.message
    assert result.executed_controls == 0


@pytest.mark.real_libero
def test_the_demo_cut_after_the_first_object_reaches_one_of_two_goal_predicates(libero_10_service, tmp_path):
    """Goal progress on a scripted partial episode: the demo's libero_10 task 0 log cut after its first 120
    controls (the alphabet soup is in the basket from control 118, as in the whole demo, whose two
    predicates hold from controls 118 and 231: tests/test_packaging.py's main job), then STOP."""
    from pytest_libero.core.protocol import Protocol
    from pytest_libero.core.rollout import run_episode

    log = shipped("libero_10-t00-s00")
    del log["first_success_control"]
    log["actions"] = log["actions"][:120]
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    result = run_episode(libero_10_service, ReplayPolicy(str(path)), Cell("libero_10", 0, init_index=0),
                         Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=5,
                                  max_policy_calls=30))
    assert (result.outcome, result.termination, result.executed_controls) == ("failure", "policy_stop", 120)
    assert result.private["progress"] == {"predicates": [
        {"text": "(in alphabet_soup_1 basket_1_contain_region)", "held_at_end": True, "first_control": 118},
        {"text": "(in tomato_sauce_1 basket_1_contain_region)", "held_at_end": False, "first_control": None}],
        "fraction_at_end": 0.5, "max_fraction": 0.5}


@pytest.mark.real_libero
def test_the_generator_reproduces_a_shipped_log_byte_for_byte(tmp_path):
    cell = "libero_object-t00-s00"  # the shortest shipped cell (physics only, ~10 s)
    subprocess.run([sys.executable, str(ROOT / "tools" / "demo_expert.py"), "--cells", cell, "--out", str(tmp_path)],
                   check=True, cwd=ROOT, capture_output=True)
    assert (tmp_path / f"{cell}.json").read_bytes() == (LOG_DIR / f"{cell}.json").read_bytes()
