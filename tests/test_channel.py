"""The request/reply channel of the child processes: ok, remote error, timeout, peer death; and the
child-process mechanism on it (runtime/child.Child): deadlines, faults, discarding."""

from __future__ import annotations

import signal
import threading
import time
from multiprocessing import Pipe
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_libero.runtime.channel import Channel, NoReply, PeerDied, RemoteError, serve
from pytest_libero.runtime.child import Child, Faults

TESTS = str(Path(__file__).parent)


@pytest.fixture
def peer():
    channel = Channel.spawn("channel_peer", {"PYTHONPATH": TESTS})
    yield channel
    channel.stop()


@pytest.mark.parametrize("payload", [None, {"chunk": [[0.5] * 7], "deliver": True}, "text"])
def test_an_ok_reply_returns_the_value(peer, payload):
    assert peer.request("echo", payload, timeout_s=30) == payload


def test_arrays_cross_as_arrays(peer):
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    back = peer.request("echo", array, timeout_s=30)
    assert back.dtype == np.float32 and np.array_equal(back, array)


@pytest.mark.parametrize("op, payload, type_name, message, trace_has", [
    ("raise", "bad weights", "RuntimeError", "bad weights", "raise RuntimeError(payload)"),
    ("launch", None, "ValueError", "unknown request 'launch'", "channel_peer.py"),
])
def test_a_remote_error_carries_type_message_and_traceback_and_the_peer_goes_on(peer, op, payload, type_name,
                                                                                message, trace_has):
    with pytest.raises(RemoteError) as info:
        peer.request(op, payload, timeout_s=30)
    error = info.value
    assert (error.op, error.type_name, error.message) == (op, type_name, message)
    assert error.trace.startswith("Traceback") and trace_has in error.trace
    assert peer.request("echo", 1, timeout_s=30) == 1


@pytest.mark.parametrize("op, payload, exit_code", [
    ("exit", 3, 3),
    ("signal", signal.SIGSEGV, -signal.SIGSEGV),
    ("signal", signal.SIGKILL, -signal.SIGKILL),
])
def test_a_peer_that_dies_is_peer_died_with_its_exit_code(peer, op, payload, exit_code):
    with pytest.raises(PeerDied) as info:
        peer.request(op, payload, timeout_s=30)
    assert (info.value.op, info.value.exit_code) == (op, exit_code)
    assert f"(exit code {exit_code})" in str(info.value) and not peer.alive


def test_no_reply_in_time_is_no_reply_and_the_peer_is_left_to_the_caller(peer):
    with pytest.raises(NoReply) as info:
        peer.request("hang", None, timeout_s=0.2)
    assert (info.value.op, info.value.timeout_s) == ("hang", 0.2)
    assert str(info.value) == "no reply to 'hang' within 0.2 s"
    assert peer.alive  # hung, not dead: the caller decides to stop it
    peer.stop()
    assert not peer.alive


def test_close_is_answered_and_ends_the_peer(peer):
    assert peer.request("close", None, timeout_s=30) == "closing"
    assert peer.process is not None and peer.process.wait(timeout=30) == 7


def test_eof_ends_the_peer(peer):
    peer.conn.close()
    assert peer.process is not None and peer.process.wait(timeout=30) == 7


def test_a_request_to_a_peer_already_gone_is_peer_died(peer):
    peer.request("close", None, timeout_s=30)
    peer.process.wait(timeout=30)
    with pytest.raises(PeerDied) as info:
        peer.request("echo", 1, timeout_s=30)
    assert info.value.exit_code == 7


def test_close_ends_the_loop_even_when_its_handler_raises():
    def handle(op: str, payload: Any) -> Any:
        raise OSError(f"cannot {op}")

    ours, theirs = Pipe()
    thread = threading.Thread(target=serve, args=(theirs, handle), daemon=True)
    thread.start()
    channel = Channel(ours)  # served by a thread: no process, no exit code
    with pytest.raises(RemoteError, match="'close' raised OSError: cannot close"):
        channel.request("close", None, timeout_s=30)
    thread.join(timeout=30)
    assert not thread.is_alive()
    theirs.close()  # the owner of the served end closes it
    with pytest.raises(PeerDied) as info:
        channel.request("echo", 1, timeout_s=30)
    assert info.value.exit_code is None


class PeerFault(Exception):
    pass


def faults(discard_on_error: bool) -> Faults:
    return Faults(fault=PeerFault, before_deadline="late before {op}", past_deadline="late in {op}",
                  no_reply="{op}: nothing in {timeout:g} s", died="{op}: died ({exit_code})",
                  raised="{op}: {type_name}: {message}", discard_on_error=discard_on_error)


@pytest.mark.parametrize("discard_on_error", [True, False])
def test_a_child_raises_each_failure_as_its_sides_fault_and_is_discarded_as_told(discard_on_error):
    child = Child("channel_peer", faults(discard_on_error), {"PYTHONPATH": TESTS})
    try:
        assert child.pid is None and child.request("echo", 1, timeout_s=30) == 1  # started when needed
        pid = child.pid
        with pytest.raises(PeerFault, match="^raise: RuntimeError: bad weights$"):
            child.request("raise", "bad weights", timeout_s=30)
        assert (child.pid is None) is discard_on_error  # the service discards; the policy keeps its process
        with pytest.raises(PeerFault, match="^hang: nothing in 0.2 s$"):
            child.request("hang", None, timeout_s=0.2)
        assert child.pid is None  # killed
        with pytest.raises(PeerFault, match=r"^exit: died \(3\)$"):
            child.request("exit", 3, timeout_s=30)
        assert child.request("echo", 2, timeout_s=30) == 2 and child.pid not in (None, pid)
    finally:
        child.close(timeout_s=30)


def test_a_childs_requests_end_at_the_deadline_in_its_sides_words():
    child = Child("channel_peer", faults(True), {"PYTHONPATH": TESTS})
    try:
        child.set_deadline(time.monotonic() - 1)
        with pytest.raises(PeerFault, match="^late before echo$"):
            child.request("echo", 1, timeout_s=30)
        assert child.pid is None  # nothing was started for a request already late
        child.set_deadline(time.monotonic() + 0.5)
        with pytest.raises(PeerFault, match="^late in hang$"):
            child.request("hang", None, timeout_s=30)  # the deadline is nearer than the timeout
        child.set_deadline(None)
        assert child.request("echo", 3, timeout_s=30) == 3
    finally:
        child.close(timeout_s=30)
