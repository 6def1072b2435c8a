"""Real LIBERO rollouts (CPU rendering through EGL/Mesa): small decision budgets keep them short."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from evidence_helpers import check_videos, records, run_dirs

from pytest_libero.core.cells import Cell
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.protocol import Protocol
from pytest_libero.benchmarks.libero.reference import ChunkReplayPolicy, native_rollout
from pytest_libero.core.rollout import run_episode

pytestmark = pytest.mark.real_libero

DEFECTS = """
import numpy as np

BAD = [
    ("nan", np.array([np.nan] + [0.0] * 6)),
    ("inf", np.array([0.0] * 3 + [np.inf] + [0.0] * 3)),
    ("shape6", np.zeros(6)),
    ("shape237", np.zeros((2, 3, 7))),
    ("big", np.array([[0.0] * 6 + [-1.0], [0.0] * 4 + [1.5, 0.0, -1.0]])),
    ("string", np.array(["0"] * 7)),
    ("empty", np.zeros((0, 7))),
]

class Defective:
    episode = -1
    def reset(self, language):
        self.episode += 1
    def act(self, observation):
        return BAD[self.episode][1]
    def close(self):
        pass
"""

def literal(text: str) -> str:
    """Escape fnmatch's special characters."""
    return "".join(f"[{c}]" if c in "[]*?" else c for c in text)


def test_rendering_only_delivered_observations_is_bit_identical_to_the_native_loop(libero_10_service):
    rng = np.random.default_rng(3)
    chunks = [np.concatenate([rng.uniform(-0.5, 0.5, (5, 6)), np.ones((5, 1))], axis=1) for _ in range(3)]
    protocol = Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=5, max_policy_calls=3)
    native = native_rollout("libero_10", 0, chunks, 5, control_cap=15)
    policy = ChunkReplayPolicy(chunks)
    result = run_episode(libero_10_service, policy, Cell("libero_10", 0), protocol)
    assert result.executed_controls == native.executed_controls == 15
    assert len(policy.seen) == 3 and policy.seen == native.delivered[:3]
    assert result.private["final_state_sha256"] == native.final_state_sha256
    assert result.timing["renders"] == 6  # 3 deliveries x 2 cameras


def test_zero_policy_decisions_budget_counts_and_evidence(zero_development_run):
    result, path = zero_development_run  # conftest.ZERO_DEVELOPMENT_RUN: zero policy, 3 calls of 5 controls, --html
    result.assert_outcomes(failed=2)
    line = ("failure: no native success within the cap: 3 policy calls, 3 action decisions, "
            "15 executed controls, 10 settling controls*")
    result.stdout.fnmatch_lines([line, line, "LIBERO: selected 2 = passed 0 + failed 2 + errored 0 + unattempted 0"])
    (run_dir,) = run_dirs(path / "reports")
    found = records(run_dir)
    assert sorted(found) == ["libero_10-t00-s00", "libero_10-t01-s00"]
    check_videos(run_dir, found)
    for record in found.values():
        assert record["video"]["frames"] == 4  # 3 delivered observations + the final state
        assert record["counters"]["settling_controls"] == 10 and record["counters"]["executed_controls"] == 15
        assert record["identities"]["model_profile"]["kind"] == "diagnostic"
        assert record["identities"]["versions"]["mujoco"] == "3.2.3"
        assert set(record["timing"]) >= {"setup_s", "settle_s", "simulation_s", "rendering_s", "policy_s"}
        # Goal progress: the zero policy reaches none of the goal's predicates.
        assert record["progress"]["fraction_at_end"] == record["progress"]["max_fraction"] == 0.0
        assert all(p["first_control"] is None and not p["held_at_end"] for p in record["progress"]["predicates"])
    assert [p["text"] for p in found["libero_10-t00-s00"]["progress"]["predicates"]] == [
        "(in alphabet_soup_1 basket_1_contain_region)", "(in tomato_sauce_1 basket_1_contain_region)"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["overall"]["progress"]["fraction_at_end"] == {"mean": 0.0, "ci95": [0.0, 0.0], "n": 2}
    assert all(p["reached"] == 0 for p in summary["tasks"]["libero_10-t00"]["progress"]["predicates"])
    assert summary["suites"]["libero_10"]["success_rate_errors_excluded"]["ci95"][1] > 0
    assert "LIBERO results" in (path / "report.html").read_text()


def test_invalid_actions_fail_the_item_and_never_reach_the_simulator(pytester):
    pytester.makepyfile(defects=DEFECTS)
    # Seven episodes of one task (its init states 0-6, in order; the standard schedule settles ten
    # controls like fast mode): the service builds one environment and keeps it between episodes.
    result = pytester.runpytest_subprocess(
        "--libero-mode", "full", "--libero-schedule", "standard", "--libero-scope", "task_coverage",
        "--libero-suite", "libero_spatial", "--libero-task-ids", "0", "--libero-init-states", "0,1,2,3,4,5,6",
        "--libero-policy", "defects.py:Defective", "--libero-budget", "decisions", "--libero-max-policy-calls", "2")
    result.assert_outcomes(failed=7)
    no_control = "1 policy calls, 0 action decisions, 0 executed controls, 10 settling controls"
    result.stdout.fnmatch_lines([literal(f"policy_error: invalid action at policy call 1: {defect}") + "*"
                                 + literal(no_control) + "*" for defect in (
        "action is not finite: element [0] = nan",
        "action is not finite: element [3] = inf",
        "action shape (6,) is not (7,) or (n, 7)",
        "action shape (2, 3, 7) is not (7,) or (n, 7)",
        "action out of bounds [-1, 1]: element [1, 4] = 1.5",
        "action dtype <U1 is not a real number type",
        "action shape (0, 7) is not (7,) or (n, 7) with n >= 1",
    )])


SPY = """
import dataclasses
import pickle
import numpy as np

class Spy:
    def __init__(self):
        self.seen = []
    def reset(self, language):
        self.seen.append(("reset", language))
    def act(self, observation):
        self.seen.append(("act", {
            "type": type(observation).__name__, "fields": sorted(type(observation).__slots__),
            "language": observation.language, "images": {k: np.array(v) for k, v in observation.images.items()},
            "counters": dataclasses.asdict(observation.counters), "repr": repr(observation),
            "state": observation.state}))
        return np.tile([0.0] * 6 + [-1.0], (5, 1))
    def close(self):
        with open("policy_inputs.pkl", "wb") as f:
            pickle.dump(self.seen, f)
"""


# A stale user config (~/.libero/config.yaml's keys, through LIBERO_CONFIG_PATH) pointing nowhere.
STALE_CONFIG = "bddl_files: /nonexistent/bddl\ninit_states: /nonexistent/init\nassets: /nonexistent/assets\n"


@pytest.fixture(scope="module")
def spy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pytest.RunResult, Path]:
    """The spy policy on development task 3 (2 calls) with a stale user LIBERO config (LIBERO_CONFIG_PATH,
    HOME the run's folder), run as Pytester.runpytest_subprocess runs it: its result and its folder.
    One real run for both claims (the policy's inputs; the stale config cannot redirect the files)."""
    path = tmp_path_factory.mktemp("spy_run")
    (path / "spy.py").write_text(SPY)
    (path / "stale-config").mkdir()
    (path / "stale-config" / "config.yaml").write_text(STALE_CONFIG)
    env = {k: v for k, v in os.environ.items() if k != "TOX_ENV_DIR"}  # PYTEST_ADDOPTS: conftest's CHILD_ADDOPTS
    env.update(HOME=str(path), USERPROFILE=str(path), PY_COLORS="0", LIBERO_CONFIG_PATH=str(path / "stale-config"))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-mpytest", f"--basetemp={path / 'basetemp'}", "--libero-scope",
                           "development", "--libero-task-ids", "3", "--libero-policy", "spy.py:Spy",
                           "--libero-budget", "decisions", "--libero-max-policy-calls", "2"],
                          cwd=path, env=env, capture_output=True, text=True, timeout=900)
    return pytest.RunResult(done.returncode, done.stdout.splitlines(), done.stderr.splitlines(),
                            time.monotonic() - started), path


def test_a_stale_user_libero_config_cannot_redirect_the_bundled_files(spy_run):
    result, _ = spy_run  # its LIBERO_CONFIG_PATH names a config whose every folder is missing
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*2 policy calls, 2 action decisions, 10 executed controls*"])


def test_the_policy_receives_only_the_contract_and_the_record_keeps_the_rest(spy_run):
    import pickle

    result, path = spy_run
    result.assert_outcomes(failed=1)
    seen = pickle.loads((path / "policy_inputs.pkl").read_bytes())
    assert [kind for kind, _ in seen] == ["reset", "act", "act"]
    language = seen[0][1]
    (run_dir,) = run_dirs(path / "reports")
    record = records(run_dir)["libero_10-t03-s00"]
    forbidden = {str(v) for v in record["private"].values()} | {
        record["cell"]["task_name"], record["cell"]["suite"], str(record["cell"]["seed"])}
    for _, observation in seen[1:]:
        assert observation["type"] == "Observation"
        assert observation["fields"] == ["counters", "images", "language", "state"]
        assert observation["state"] is None
        assert observation["language"] == language == record["cell"]["language"]
        assert sorted(observation["images"]) == ["agentview", "robot0_eye_in_hand"]
        assert all(i.dtype == np.uint8 and i.shape == (256, 256, 3) for i in observation["images"].values())
        assert sorted(observation["counters"]) == ["action_decisions", "executed_controls", "policy_calls"]
        text = observation["repr"] + pickle.dumps(observation).hex()
        for secret in forbidden:
            assert secret not in text and secret.encode().hex() not in text
    assert all(len(v) == 64 for v in record["private"].values())
    assert record["cell"]["seed"] == 20260907 and record["cell"]["init_index"] == 0


class StateProbe:
    def __init__(self):
        self.states = []

    def reset(self, language):
        pass

    def act(self, observation):
        self.states.append(observation.state)
        return np.tile([0.0] * 6 + [-1.0], (5, 1))

    def close(self):
        pass


@pytest.mark.parametrize("track, dim", [("rgb+proprio", 9), ("openpi-compat", 8)])
def test_state_tracks_deliver_their_vectors_and_change_the_protocol_identity(track, dim, libero_10_service):
    protocol = Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=5, max_policy_calls=2,
                        track=track)
    assert protocol.identity != Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=5,
                                         max_policy_calls=2).identity
    probe = StateProbe()
    result = run_episode(libero_10_service, probe, Cell("libero_10", 0), protocol)
    assert len(probe.states) == 2 and all(s.shape == (dim,) for s in probe.states)
    gripper = probe.states[-1][-2:]
    assert 0.0 < gripper[0] < 0.05 and -0.05 < gripper[1] < 0.0  # open Panda fingers, in metres
    assert result.observations[0]["state"] == probe.states[0].tolist()
