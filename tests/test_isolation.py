"""Policy isolation: a policy in its own process, deadlines, crashes, and the image-convention guard."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from pytest_libero.core.cells import Cell
from pytest_libero.errors import PolicyLoadError
from pytest_libero.runtime.isolation import ProcessPolicy
from pytest_libero.core.policy import PolicySpec
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.protocol import Protocol
from pytest_libero.core.rollout import run_episode

from evidence_helpers import records, run_dirs
from fakes import FakeService, fake_conftest

FAKES = (Path(__file__).parent / "fakes.py").read_text()
POLICIES = '''
import os, signal, time
import numpy as np

class Moody:
    """Behaves per episode: 0 fine, 1 hangs, 2 segfaults, 3 raises, then fine again.

    The episode count lives in a file: a killed policy process is rebuilt from scratch.
    """
    def reset(self, language):
        count = int(open("episodes.txt").read()) if os.path.exists("episodes.txt") else -1
        self.episode = count + 1
        with open("episodes.txt", "w") as f:
            f.write(str(self.episode))
    def act(self, observation):
        mood = self.episode % 5
        if mood == 1:
            time.sleep(60)
        if mood == 2:
            os.kill(os.getpid(), signal.SIGSEGV)
        if mood == 3:
            raise RuntimeError("bad weights")
        return np.tile([0.0] * 6 + [-1.0], (5, 1))
    def close(self):
        pass

class Upright:
    profile = {"kind": "capability", "image_convention": "raw-opengl"}
    def reset(self, language): pass
    def act(self, observation): return np.zeros(7)
    def close(self): pass
'''
CONFTEST = fake_conftest()

PROTOCOL = Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=5, max_policy_calls=2)


@pytest.fixture
def policies(tmp_path, monkeypatch):
    (tmp_path / "moody.py").write_text(POLICIES)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_hang_crash_and_exception_each_end_one_episode_and_the_next_runs(policies):
    policy = ProcessPolicy(PolicySpec("moody.py:Moody"), timeout_s=1.0)
    try:
        outcomes = []
        for task in range(5):
            start = time.monotonic()
            result = run_episode(FakeService(), policy, Cell("libero_10", task), PROTOCOL)
            outcomes.append((result.outcome, result.message, time.monotonic() - start))
    finally:
        policy.close()
    assert outcomes[0][0] == outcomes[4][0] == "failure"
    assert outcomes[1][0] == "policy_error" and "no answer within 1 s" in outcomes[1][1] and outcomes[1][2] < 10
    assert outcomes[2][0] == "policy_error" and f"exit code {-signal.SIGSEGV}" in outcomes[2][1]
    assert outcomes[3][0] == "policy_error" and "RuntimeError: bad weights" in outcomes[3][1]
    assert policy.profile["isolation"] == "process" and len(policy.profile["adapter_sha256"]) == 64


def test_the_isolated_policy_runs_in_another_process(policies):
    (policies / "pid.py").write_text("import os\nimport numpy as np\nclass P:\n"
                                     "    def reset(self, language): self.pid = os.getpid()\n"
                                     "    def act(self, observation): return np.full(7, 0.0) if self.pid != "
                                     f"{os.getpid()} else np.full(7, 5.0)\n"
                                     "    def close(self): pass\n")
    policy = ProcessPolicy(PolicySpec("pid.py:P"), timeout_s=5.0)
    try:
        assert run_episode(FakeService(), policy, Cell("libero_10", 0), PROTOCOL).outcome == "failure"
    finally:
        policy.close()


def test_a_policy_that_cannot_be_built_is_a_load_error(policies):
    with pytest.raises(PolicyLoadError) as info:
        ProcessPolicy(PolicySpec("moody.py:Missing"), timeout_s=5.0)
    assert "has no attribute 'Missing'" in str(info.value)


def test_isolation_through_the_plugin_records_the_level(pytester):
    pytester.makepyfile(fakes=FAKES, moody=POLICIES)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest("--libero-scope", "development", "--libero-policy", "moody.py:Moody",
                                "--libero-policy-isolation", "process", "--libero-policy-timeout", "1",
                                "--libero-budget", "decisions", "--libero-max-policy-calls", "2")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*policy_error: policy.act raised PolicyProcessError: policy act gave no answer "
                                 "within 1 s*"])
    (run_dir,) = run_dirs(pytester.path / "reports")
    profiles = [r["identities"]["model_profile"] for r in records(run_dir).values()]
    assert [p["isolation"] for p in profiles] == ["process", "process"]


def test_in_process_is_recorded_too(pytester):
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(CONFTEST)
    pytester.runpytest("--libero-scope", "development", "--libero-task-ids", "0", "--libero-budget", "decisions",
                       "--libero-max-policy-calls", "1")
    (run_dir,) = run_dirs(pytester.path / "reports")
    (record,) = records(run_dir).values()
    assert record["identities"]["model_profile"]["isolation"] == "in-process"


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_declared_image_convention_mismatch_refuses_to_start(pytester, isolation):
    pytester.makepyfile(fakes=FAKES, moody=POLICIES)
    pytester.makeconftest(CONFTEST.replace("return FakeService(**{})", "raise AssertionError('service started')"))
    result = pytester.runpytest("--libero-scope", "development", "--libero-policy", "moody.py:Upright",
                                "--libero-policy-isolation", isolation)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*PolicyLoadError: policy 'moody.py:Upright' declares image convention "
                                 "'raw-opengl' (robosuite's OpenGL render as it comes*the harness delivers "
                                 "'rotated-180'*Refusing to start*"])
    assert "service started" not in result.stdout.str()
    (run_dir,) = run_dirs(pytester.path / "reports")
    found = records(run_dir)  # accounted for as errored, with no rollout behind them
    assert len(found) == 2
    assert all(r["outcome"]["outcome"] == "env_error" and r["counters"] is None for r in found.values())
    assert all("declares image convention 'raw-opengl'" in r["outcome"]["message"] for r in found.values())
