"""The episode deadline is charged to whoever held the time: a hung policy fails (policy_error)
within the deadline, a hung service errors (env_error). The service here keeps deadlines as
BenchService does (tests/fakes.py), so a service request after the deadline fails as it would."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from evidence_helpers import records, run_dirs
from fakes import FakeService, fake_conftest
from pytest_libero.core.cells import Cell
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.protocol import Protocol
from pytest_libero.core.rollout import EpisodeSettings, run_episode, service_grace_s
from pytest_libero.errors import EnvironmentFault

CELL = Cell("libero_10", 0)
PROTOCOL = Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=5, max_policy_calls=3)
HOLD = np.tile([0.0] * 6 + [-1.0], (5, 1))
DEADLINE_S = 3.0
# How far past the deadline an item may end on this busy 2-core machine (the grace is 0.3 s).
MARGIN_S = 6.0


class Hangs:
    """Holds still, except that act number `at` hangs: a busy Python loop, or a sleep."""

    def __init__(self, how: str, at: int = 2) -> None:
        self.how, self.at, self.calls = how, at, 0

    def reset(self, language: str) -> None:
        self.calls = 0

    def act(self, observation: object) -> np.ndarray:
        self.calls += 1
        if self.calls == self.at:
            if self.how == "sleep":
                time.sleep(600)
            while True:  # a busy loop in Python
                pass
        return HOLD

    def close(self) -> None:
        pass


class Quick:
    def __init__(self, pause_s: float = 0.0) -> None:
        self.pause_s = pause_s

    def reset(self, language: str) -> None:
        pass

    def act(self, observation: object) -> np.ndarray:
        time.sleep(self.pause_s)
        return HOLD

    def close(self) -> None:
        pass


def settings(**kwargs: object) -> EpisodeSettings:
    return EpisodeSettings(deadline_s=DEADLINE_S, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("how", ["busy", "sleep"])
def test_an_in_process_policy_that_hangs_fails_within_the_deadline(how):
    service = FakeService()
    tick = time.monotonic()
    result = run_episode(service, Hangs(how), CELL, PROTOCOL, settings())
    took = time.monotonic() - tick
    assert result.outcome == "policy_error" and result.termination == "policy_error"
    assert "PolicyDeadline" in result.message and "passed inside the policy call" in result.message
    assert DEADLINE_S - 0.1 < took < DEADLINE_S + MARGIN_S
    # the service's evidence came after the deadline (in the grace), not "passed before 'finish'"
    assert result.private["bddl_sha256"] == "0" * 64 and not result.warnings
    assert result.policy_calls == 2 and result.executed_controls == 5


def test_a_service_that_hangs_errors_within_the_deadline_and_its_grace():
    service = FakeService(hang="submit", hang_from=2)
    tick = time.monotonic()
    with pytest.raises(EnvironmentFault, match="passed while the bench service worked on 'submit'; it was killed") \
            as info:
        run_episode(service, Quick(), CELL, PROTOCOL, settings())
    took = time.monotonic() - tick
    assert info.value.partial.outcome == "env_error"  # type: ignore[attr-defined]
    assert DEADLINE_S + service_grace_s(DEADLINE_S) - 0.1 < took < DEADLINE_S + MARGIN_S


class RepliesInTheGrace(FakeService):
    """Submit number 1 works until the middle of the grace past the episode deadline."""

    def submit(self, chunk: np.ndarray, deliver: bool, frames: bool = False) -> dict:
        assert self.deadline is not None  # the episode deadline plus the grace
        time.sleep(max(0.0, self.deadline - service_grace_s(DEADLINE_S) / 2 - time.monotonic()))
        return super().submit(chunk, deliver, frames)


def test_a_reply_in_the_grace_is_charged_to_the_policy_when_its_share_used_the_time_up():
    # The policy takes 2.4 s of the 3 s before the service's slow reply: its share used the time up.
    result = run_episode(RepliesInTheGrace(), Quick(pause_s=0.8 * DEADLINE_S), CELL, PROTOCOL, settings())
    assert result.outcome == "policy_error"
    assert "passed while the bench service worked on 'submit'" in result.message
    assert "the policy's share used the time up" in result.message
    assert result.executed_controls == 5 and result.private["bddl_sha256"] == "0" * 64


def test_a_reply_in_the_grace_is_charged_to_the_service_when_its_share_used_the_time_up():
    with pytest.raises(EnvironmentFault, match="passed while the bench service worked on 'submit'; the policy held"):
        run_episode(RepliesInTheGrace(), Quick(), CELL, PROTOCOL, settings())


def test_a_policy_call_not_interrupted_that_returns_late_is_still_the_policys_fault():
    # As in a non-main thread or in C code that holds the GIL: the call returns after the deadline.
    tick = time.monotonic()
    result = run_episode(FakeService(), Quick(pause_s=DEADLINE_S + 0.5), CELL, PROTOCOL,
                         settings(interrupt_policy=False))
    assert time.monotonic() - tick < DEADLINE_S + MARGIN_S
    assert result.outcome == "policy_error"
    assert "policy.act returned" in result.message and "after the episode deadline" in result.message
    assert result.executed_controls == 0 and result.private["bddl_sha256"] == "0" * 64


HUNG_POLICY = """
import time
import numpy as np

class Hangs:
    def reset(self, language): pass
    def act(self, observation):
        time.sleep(600)
    def close(self): pass
"""


def test_an_isolated_policy_that_hangs_is_killed_at_the_episode_deadline(tmp_path: Path, monkeypatch):
    from pytest_libero.core.policy import PolicySpec
    from pytest_libero.runtime.isolation import ProcessPolicy

    (tmp_path / "hung.py").write_text(HUNG_POLICY)
    monkeypatch.chdir(tmp_path)
    policy = ProcessPolicy(PolicySpec("hung.py:Hangs"), timeout_s=300.0)  # its own per-call limit is longer
    try:
        tick = time.monotonic()
        result = run_episode(FakeService(), policy, CELL, PROTOCOL, settings(interrupt_policy=False))
        took = time.monotonic() - tick
    finally:
        policy.close()
    assert result.outcome == "policy_error"
    assert "the episode deadline (--libero-episode-timeout) passed inside policy act" in result.message
    assert took < DEADLINE_S + MARGIN_S
    assert policy.deadline is None  # lifted after the episode


FAKES = (Path(__file__).parent / "fakes.py").read_text()
STILL = """
import numpy as np

class Still:
    def reset(self, language): pass
    def act(self, observation): return np.tile([0.0] * 6 + [-1.0], (5, 1))
    def close(self): pass
"""


def test_through_the_plugin_a_hung_service_errors_the_item_and_a_hung_policy_fails_it(pytester):
    pytester.makepyfile(fakes=FAKES, policy=STILL, hung=HUNG_POLICY)
    base = ["-p", "no:cacheprovider", "--libero-scope", "development", "--libero-task-ids", "0",
            "--libero-budget", "decisions", "--libero-max-policy-calls", "3", "--libero-episode-timeout", "3"]
    pytester.makeconftest(fake_conftest(hang="submit", hang_from=2))
    tick = time.monotonic()
    service_hangs = pytester.runpytest_subprocess(*base, "--libero-policy", "policy.py:Still",
                                                  "--libero-output", "service")
    took = time.monotonic() - tick
    service_hangs.assert_outcomes(errors=1)
    service_hangs.stdout.fnmatch_lines(["*env_error: episode deadline (--libero-episode-timeout, with its grace) "
                                        "passed while the bench service worked on 'submit'; it was killed*"])
    pytester.makeconftest(fake_conftest())
    policy_hangs = pytester.runpytest_subprocess(*base, "--libero-policy", "hung.py:Hangs", "--libero-output", "policy")
    policy_hangs.assert_outcomes(failed=1)
    policy_hangs.stdout.fnmatch_lines(["*policy_error: policy.act raised PolicyDeadline*"])
    assert took < 60  # pytest's start-up and the 3 s deadline on a busy machine
    (service_run,), (policy_run,) = run_dirs(pytester.path / "service"), run_dirs(pytester.path / "policy")
    assert records(service_run)["libero_10-t00-s00"]["outcome"]["outcome"] == "env_error"
    policy_record = records(policy_run)["libero_10-t00-s00"]
    assert policy_record["outcome"]["outcome"] == "policy_error"
    assert policy_record["private"]["bddl_sha256"] == "0" * 64  # the service's evidence was collected
