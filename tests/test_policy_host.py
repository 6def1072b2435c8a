"""The shared policy host (--libero-policy-isolation host): batching, per-episode state, faults,
deadlines, a host that dies or hangs and is rebuilt, and the plugin's wiring (fake service)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pytest_libero.core.policy import PolicySpec
from pytest_libero.errors import PolicyLoadError
from pytest_libero.runtime.host import HostPolicy, HostPolicyError, HostSettings, PolicyHost

from evidence_helpers import records, run_dirs
from fakes import fake_conftest

# Test policies, loaded by the host from a file (payloads are plain strings: the host does not
# look at observations or answers; the engine validates chunks in the worker).
POLICIES = '''
import os, time

class Batched:
    """Answers (key, first, language, call number of this episode, batch size); keeps state per key."""
    def __init__(self, compute_s=0.0):
        self.compute_s, self.calls, self.ended = compute_s, {}, []
    def reset(self, language): pass
    def act(self, observation): return None
    def act_batch(self, requests):
        time.sleep(self.compute_s)
        answers = []
        for r in requests:
            if r.first:
                self.calls[r.key] = 0
            self.calls[r.key] += 1
            language = r.observation
            if language == "bad":
                answers.append(RuntimeError("no grip for " + r.key))
            elif language == "die":
                os._exit(9)
            elif language == "hang":
                time.sleep(60)
            else:
                answers.append((r.key, r.first, language, self.calls[r.key], len(requests)))
        return answers
    def end_episode(self, key):
        self.ended.append(key)

class Raising(Batched):
    def act_batch(self, requests):
        raise ValueError("the whole batch is lost")

BUILT = []

class Plain:
    """No act_batch: built once; each episode's reset/act state is its own (an episode copy)."""
    def __init__(self):
        BUILT.append(1)
        self.number, self.built, self.language, self.calls = id(self), len(BUILT), None, 0
        self.seen = []  # grown in place by act: must still be the episode's own
    def reset(self, language):
        self.language, self.calls = language, 0
    def act(self, observation):
        self.calls += 1
        self.seen.append(observation)
        if observation == "slow":
            time.sleep(2)
        return (self.number, self.language, observation, self.calls, len(self.seen), self.built)

def broken():
    raise ValueError("weights missing")
'''


@pytest.fixture
def policies(tmp_path, monkeypatch):
    (tmp_path / "hosted.py").write_text(POLICIES)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def start_host(policies, tmp_path):
    hosts = []

    def start(factory: str, max_batch: int = 8, max_wait_ms: float = 5.0, call_timeout_s: float = 30.0,
              **kwargs):
        host = PolicyHost(PolicySpec(f"hosted.py:{factory}", kwargs),
                          HostSettings(max_batch=max_batch, max_wait_ms=max_wait_ms, call_timeout_s=call_timeout_s),
                          str(tmp_path), f"h{len(hosts)}")
        hosts.append(host)
        host.start()
        return host

    yield start
    for host in hosts:
        host.close()


def in_threads(count: int, work):
    results, errors = [None] * count, []

    def run(i):
        try:
            results[i] = work(i)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return results


def test_pending_requests_of_several_workers_are_batched_and_keep_per_episode_state(start_host):
    host = start_host("Batched", max_batch=4, max_wait_ms=500.0, compute_s=0.05)

    def worker(i):
        policy = HostPolicy(host.address, timeout_s=30, worker=f"gw{i}")
        episodes = []
        for _ in range(2):
            policy.reset(f"task {i}")
            answers = [policy.act(f"task {i}") for _ in range(3)]
            episodes.append((answers, policy.episode_timing()))
        policy.close()
        return episodes

    results = in_threads(4, worker)
    keys = set()
    for i, episodes in enumerate(results):
        for answers, timing in episodes:
            (key,) = {a[0] for a in answers}
            keys.add(key)
            assert key.startswith(f"gw{i}#")
            assert [a[1] for a in answers] == [True, False, False]  # `first` starts the episode
            assert [a[2] for a in answers] == [f"task {i}"] * 3  # each answer is its own request's
            assert [a[3] for a in answers] == [1, 2, 3]  # per-episode state, not shared between episodes
            assert timing["policy_batch_size_max"] == max(a[4] for a in answers)
            assert timing["policy_queue_s"] >= 0 and timing["policy_host_compute_s"] >= 0.15
    assert len(keys) == 8  # a fresh key per episode
    batches = host.stats()["batches"]
    assert sum(size * calls for size, calls in batches.items()) == 24
    assert max(batches) > 1, batches  # four workers waiting together were answered together


def test_two_workers_started_out_of_step_fall_into_step(start_host):
    # The policy is the costlier side (0.5 s a call against 0.03 s of "simulation" per request) and
    # worker 1 starts while worker 0's first request is on the device. Counted from a request's
    # arrival, the wait window of worker 1's request is over when the device frees, so each
    # request went alone and the two stayed in anti-phase (batch sizes 1, 1, 1, ...). Counted from
    # the moment the device frees, worker 0's next request (0.03 s later) joins it, and from then on
    # both are answered together.
    host = start_host("Batched", max_batch=2, max_wait_ms=300.0, compute_s=0.5)
    sent = threading.Event()

    def worker(i):
        if i == 1:
            assert sent.wait(30)
            time.sleep(0.1)  # into worker 0's first call: about a fifth of a cycle
        policy = HostPolicy(host.address, timeout_s=30, worker=f"gw{i}")
        policy.reset(f"task {i}")
        for _ in range(5):
            sent.set()
            policy.act(f"task {i}")
            time.sleep(0.03)  # the simulator
        policy.episode_over()
        policy.close()

    in_threads(2, worker)
    sizes = host.stats()["recent"]
    assert sizes[0] == 1, sizes  # the offset start: worker 0's first request was alone on the device
    assert sizes[1:-1] == [2] * 4, sizes  # then every request went in a batch of two
    assert sizes[-1] == 1 and sum(sizes) == 10, sizes  # worker 1's last, worker 0 being done


def test_a_finished_or_disconnected_worker_is_not_waited_for(start_host):
    # A window of 60 s: a batch that waited for a worker with nothing more to ask would hold this
    # test for a minute, and the host would count the wait as having run out ("window").
    host = start_host("Batched", max_batch=8, max_wait_ms=60_000.0)
    done, gone, going = (HostPolicy(host.address, timeout_s=120, worker=f"gw{i}") for i in range(3))
    for policy in (done, gone, going):
        policy.reset("x")
    barrier = threading.Barrier(3)

    def worker(i):
        policy = (done, gone, going)[i]
        barrier.wait()
        policy.act("x")  # one batch of three: every active episode had a request pending
        if i == 0:
            policy.episode_over()  # its episode is over; its worker stays connected
        elif i == 1:
            policy.close()  # its worker went away mid-episode

    in_threads(3, worker)
    time.sleep(0.2)  # the host has read the end and the disconnect
    tick = time.monotonic()
    for _ in range(3):
        going.act("x")  # the only active episode: never waits
    assert time.monotonic() - tick < 30  # not the 60 s window (a generous bound: no timing claim)
    stats = host.stats()
    assert stats["recent"] == [3, 1, 1, 1], stats
    assert "window" not in stats["waits"], stats  # no batch waited until its window ran out
    done.reset("y")  # a new episode of the finished worker: active again, so waited for
    late = threading.Thread(target=lambda: (time.sleep(0.3), done.act("y")))
    late.start()
    going.act("y")
    late.join(30)
    assert host.stats()["recent"][-1] == 2
    done.close()
    going.close()


def test_a_plain_policy_is_built_once_and_keeps_state_per_episode(start_host):
    host = start_host("Plain")
    barrier = threading.Barrier(3)

    def worker(i):
        policy = HostPolicy(host.address, timeout_s=30, worker=f"gw{i}")
        episodes = []
        for episode in range(2):
            policy.reset(f"task {i}.{episode}")
            barrier.wait()  # the three workers' episodes interleave in the host
            answers = [policy.act(f"obs {n}") for n in range(3)]
            episodes.append((answers, policy.episode_timing()))
        policy.close()
        return episodes

    results = in_threads(3, worker)
    for i, episodes in enumerate(results):
        for episode, (answers, timing) in enumerate(episodes):
            # its own language, call count and in-place list: nothing leaks between interleaved episodes
            assert [a[1:5] for a in answers] == [(f"task {i}.{episode}", f"obs {n}", n + 1, n + 1) for n in range(3)]
            assert timing["policy_batch_size_max"] == 1
    answers = [a for episodes in results for answers, _ in episodes for a in answers]
    assert {a[0] for a in answers} == {answers[0][0]}  # one object's identity: copies of the one built
    assert {a[5] for a in answers} == {1}  # the constructor ran once for three workers and six episodes


def test_an_exception_for_one_request_fails_that_episode_only(start_host):
    host = start_host("Batched", max_batch=4, max_wait_ms=500.0)
    barrier = threading.Barrier(3)

    def worker(i):
        policy = HostPolicy(host.address, timeout_s=30, worker=f"gw{i}")
        language = "bad" if i == 1 else f"task {i}"
        policy.reset(language)
        barrier.wait()
        try:
            return policy.act(language)
        except HostPolicyError as exc:
            return exc

    results = in_threads(3, worker)
    assert isinstance(results[1], HostPolicyError)
    assert "policy.act raised RuntimeError in the policy host: no grip for gw1#" in str(results[1])
    assert results[0][2] == "task 0" and results[2][2] == "task 2"
    assert max(host.stats()["batches"]) == 3  # they were in one batch


def test_act_batch_raising_fails_every_episode_of_that_batch(start_host):
    host = start_host("Raising")
    policy = HostPolicy(host.address, timeout_s=30)
    policy.reset("x")
    with pytest.raises(HostPolicyError, match="raised ValueError in the policy host: the whole batch is lost"):
        policy.act("x")
    policy.reset("y")  # the host and the connection go on
    with pytest.raises(HostPolicyError, match="the whole batch is lost"):
        policy.act("y")


def test_the_episode_deadline_bounds_a_call_and_the_next_episode_goes_on(start_host):
    host = start_host("Plain")
    policy = HostPolicy(host.address, timeout_s=30)
    policy.reset("a")
    policy.set_deadline(time.monotonic() + 0.3)
    tick = time.monotonic()
    with pytest.raises(HostPolicyError, match=r"deadline \(--libero-episode-timeout\) passed inside policy act"):
        policy.act("slow")
    assert time.monotonic() - tick < 1.5
    policy.set_deadline(None)
    policy.reset("b")  # reconnects: a fresh connection, the same host
    assert policy.act("fast")[1:5] == ("b", "fast", 1, 1)
    with pytest.raises(HostPolicyError, match="passed before policy act"):
        policy.set_deadline(time.monotonic() - 1)
        policy.act("late")


def test_a_host_that_dies_fails_its_in_flight_episodes_and_is_rebuilt(start_host):
    host = start_host("Batched", max_batch=4, max_wait_ms=300.0)
    first_pid = host.pid
    other = HostPolicy(host.address, timeout_s=30, worker="gw1")
    other.reset("fine")
    doomed = HostPolicy(host.address, timeout_s=30, worker="gw0")
    doomed.reset("die")
    caught = []
    thread = threading.Thread(target=lambda: caught.append(pytest.raises(HostPolicyError, other.act, "fine")))
    thread.start()
    with pytest.raises(HostPolicyError, match="the policy host died during act"):
        doomed.act("die")
    thread.join(30)
    assert caught and "died during act" in str(caught[0].value)  # its batch-mate's episode ends too
    doomed.reset("again")  # waits for the rebuilt host
    assert doomed.act("again")[2:4] == ("again", 1)
    # The rebuilt host listens before its build reply reaches the controller, so a worker can be
    # served a moment before the controller records the new process: wait for that, boundedly.
    until = time.monotonic() + 30
    while host.pid == first_pid and time.monotonic() < until:
        time.sleep(0.05)
    assert host.rebuilds == 1 and host.pid not in (None, first_pid)


def test_a_hung_policy_call_ends_the_host_which_is_rebuilt(start_host):
    host = start_host("Batched", call_timeout_s=1.0)
    policy = HostPolicy(host.address, timeout_s=30)
    policy.reset("hang")
    tick = time.monotonic()
    with pytest.raises(HostPolicyError, match="died during act"):
        policy.act("hang")
    assert time.monotonic() - tick < 10
    policy.reset("ok")
    assert policy.act("ok")[2] == "ok"


def test_a_policy_the_host_cannot_build_is_a_load_error_naming_the_cause(start_host):
    with pytest.raises(PolicyLoadError, match="could not build it: ValueError: weights missing"):
        start_host("broken")


def test_settings_are_checked():
    with pytest.raises(ValueError, match="--libero-policy-max-batch 0: must be at least 1"):
        HostSettings(max_batch=0).check()
    with pytest.raises(ValueError, match="--libero-policy-max-wait-ms -1"):
        HostSettings(max_wait_ms=-1).check()


# -- the plugin, with the fake bench service --------------------------------------------------------

RUN_POLICY = '''
import numpy as np

class Counting:
    """Batch-invariant and deterministic: the chunk depends only on the episode's call number."""
    def __init__(self):
        self.calls = {}
    def reset(self, language):
        self.calls[None] = 0
    def act(self, observation):
        self.calls[None] += 1
        return self._chunk(self.calls[None])
    def act_batch(self, requests):
        out = []
        for r in requests:
            self.calls[r.key] = 1 if r.first else self.calls[r.key] + 1
            out.append(self._chunk(self.calls[r.key]))
        return out
    def _chunk(self, n):
        return np.tile([0.01 * n] * 6 + [-1.0], (5, 1))

def broken():
    raise RuntimeError("no checkpoint")
'''
BASE = ("-p", "no:cacheprovider", "--libero-scope", "development", "--libero-budget", "decisions",
        "--libero-max-policy-calls", "3", "--libero-video", "none", "--libero-task-ids", "0,1,2")


def test_a_single_process_starts_its_own_host_and_records_its_timing(pytester):
    # Without xdist the process starts the host itself (-n 2 against no host: test_policy_host_real.py).
    pytester.makepyfile(fakes=(Path(__file__).parent / "fakes.py").read_text(), conftest=fake_conftest(),
                        policy=RUN_POLICY)
    found = {}
    for isolation in ("none", "host"):
        result = pytester.runpytest_subprocess(*BASE, "--libero-policy", "policy.py:Counting",
                                               "--libero-policy-isolation", isolation, "--libero-output", isolation)
        result.assert_outcomes(failed=3)
        (run_dir,) = run_dirs(pytester.path / isolation)
        found[isolation] = records(run_dir)
    for cell, record in found["host"].items():
        plain = found["none"][cell]
        assert (record["outcome"], record["counters"], record["chunks"]) == \
               (plain["outcome"], plain["counters"], plain["chunks"])
        profile = record["identities"]["model_profile"]
        assert profile["isolation"] == "host" and profile["batched"] is True
        assert profile["adapter_sha256"] == plain["identities"]["model_profile"]["adapter_sha256"]
        assert record["timing"]["policy_queue_s"] >= 0 and record["timing"]["policy_batch_size_max"] == 1
        assert "policy_queue_s" not in plain["timing"]


def test_a_policy_the_host_cannot_build_stops_the_run_with_exit_4(pytester):
    pytester.makepyfile(fakes=(Path(__file__).parent / "fakes.py").read_text(), conftest=fake_conftest(),
                        policy=RUN_POLICY)
    for workers in ("0", "2"):
        result = pytester.runpytest_subprocess(*BASE, "-n", workers, "--libero-policy", "policy.py:broken",
                                               "--libero-policy-isolation", "host")
        assert result.ret == 4
        result.stderr.fnmatch_lines(["*--libero-policy 'policy.py:broken' could not be built: the policy host "
                                     "could not build it: RuntimeError: no checkpoint*"])
    result = pytester.runpytest_subprocess(*BASE, "--libero-policy-isolation", "host", "--libero-policy-max-batch", "0")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--libero-policy-max-batch 0: must be at least 1*"])
