"""Crash containment: the whole-episode deadline, a hung or crashed service, a hung policy; telemetry."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from fakes import fake_conftest

from evidence_helpers import records, run_dirs
from pytest_libero.benchmarks import get, service_env
from pytest_libero.errors import EnvironmentFault
from pytest_libero.plugin.options import default_episode_timeout_s
from pytest_libero.runtime.service import BenchService

FAKES = (Path(__file__).parent / "fakes.py").read_text()
CONFTEST = fake_conftest()
POLICY = """
import time
import numpy as np

class HangsOnce:
    episodes = 0
    def reset(self, language):
        HangsOnce.episodes += 1
    def act(self, observation):
        if HangsOnce.episodes == 1:
            time.sleep(600)
        return np.tile([0.0] * 6 + [-1.0], (5, 1))
    def close(self): pass
"""


def test_default_episode_timeout_is_sized_to_the_cap():
    assert default_episode_timeout_s(520) == 600 + 5 * 520


@pytest.mark.real_libero  # a real LIBERO bench service
def test_a_stopped_service_is_killed_at_the_episode_deadline_and_restarted():
    service = BenchService(timeout_s=600, env=service_env(get("libero"), None))
    try:
        service.check_sources()  # starts the process
        pid = service.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # a hang: no reply ever comes
        service.set_deadline(time.monotonic() + 1.0)
        tick = time.monotonic()
        with pytest.raises(EnvironmentFault, match="episode deadline .* passed while the bench service worked"):
            service.check_sources()
        assert time.monotonic() - tick < 5
        service.set_deadline(None)
        service.check_sources()  # a fresh process answers
        assert service.pid != pid  # the stopped one was killed and discarded
        os.kill(service.pid, signal.SIGSEGV)
        with pytest.raises(EnvironmentFault, match="died during 'check_sources' .exit code -11"):
            service.check_sources()
    finally:
        service.close()


def test_a_hung_in_process_policy_ends_at_the_deadline_and_the_worker_goes_on(pytester):
    pytester.makepyfile(fakes=FAKES, policy=POLICY)
    pytester.makeconftest(CONFTEST)
    tick = time.monotonic()
    result = pytester.runpytest_subprocess(
        "--libero-scope", "development", "--libero-task-ids", "0,1,2", "--libero-policy", "policy.py:HangsOnce",
        "--libero-budget", "decisions", "--libero-max-policy-calls", "2", "--libero-episode-timeout", "2")
    assert time.monotonic() - tick < 60
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines([
        "*policy_error: policy.act raised PolicyDeadline: the episode deadline (--libero-episode-timeout) "
        "passed inside the policy call*",
        "LIBERO: selected 3 = passed 0 + failed 3 + errored 0 + unattempted 0",
        "LIBERO throughput: 3 episodes*wall time: setup *policy *",
        "LIBERO controls/s per worker: main *",
    ])
    (run_dir,) = run_dirs(pytester.path / "reports")
    found = records(run_dir)
    assert found["libero_10-t00-s00"]["outcome"]["outcome"] == "policy_error"
    assert [found[f"libero_10-t0{i}-s00"]["counters"]["executed_controls"] for i in (1, 2)] == [10, 10]
    throughput = json.loads((run_dir / "summary.json").read_text())["throughput"]
    assert throughput["episodes"] == 3 and throughput["workers"]["main"]["controls"] == 3 * 10 + 20
    assert throughput["share_of_wall_time"]["policy"] > 0.3  # two seconds of the hang


class _FailingAdapter:
    """A service module whose start-up fails as LIBERO-plus's does without ImageMagick."""

    Episode = object
    SERVICE_OPS: dict[str, object] = {}

    @staticmethod
    def import_simulator() -> None:
        raise EnvironmentFault("LIBERO-plus needs the ImageMagick library: apt-get install libmagickwand-6.q16-6")

    @staticmethod
    def check_sources() -> None:
        raise AssertionError("never reached after a failed start-up")

    @staticmethod
    def EnvCache() -> object:  # noqa: N802 - the service module's class name
        return type("Cache", (), {"close": lambda self: None})()


def test_a_failed_service_start_up_is_the_answer_to_every_request_not_a_dead_service():
    import threading
    from multiprocessing import Pipe

    from pytest_libero.runtime.channel import Channel, RemoteError
    from pytest_libero.runtime.server import answer

    worker, service = Pipe()
    thread = threading.Thread(target=answer, args=(service, _FailingAdapter), daemon=True)
    thread.start()
    channel = Channel(worker)
    for op in ("check_sources", "start"):
        # NoReply here would mean the service died on its failed start-up.
        with pytest.raises(RemoteError) as info:
            channel.request(op, {}, timeout_s=10)
        assert info.value.type_name == "EnvironmentFault" and "apt-get install libmagickwand" in info.value.message
    assert channel.request("close", None, timeout_s=10) is None
    thread.join(timeout=10)
    assert not thread.is_alive()
