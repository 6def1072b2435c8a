"""The vla-eval client (`--libero-policy vla-eval`) against PyPI vla-eval 0.8.0's own model server
class and against a hostile server.

The friendly server is a scripted subclass of vla-eval's `PredictModelServer` served by vla-eval's
own `serve_async` (tests/vla_eval_servers.py), with max_batch_size 1 and 4. The hostile one is a
websockets server speaking vla-eval's framing whose n-th observation (over all connections) plays
`modes[n]`; every fault must raise a PolicyServerError within its deadline, end the episode the
engine runs through it as policy_error, and leave the next episode working.
"""

from __future__ import annotations

import pickle
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import msgpack
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve

from fakes import blank_images, fake_conftest
from pytest_libero.adapters.vla_eval import VlaEvalPolicy, frame, pack
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.contract import Counters, seal_observation
from pytest_libero.core.outcomes import Outcome
from pytest_libero.errors import PolicyFault, PolicyServerError
from vla_eval_servers import make_server, scripted_action, scripted_chunk, serving
from wire_helpers import assert_policy_error, episode

pytest.importorskip("vla_eval", reason="install the test extra: pip install -e '.[test]'")

REQUEST_TIMEOUT_S = 0.5
# A generous bound for "on time" on a loaded machine: many times the deadlines used here and still
# far from never. Whether the deadline or the fault ended a request is told by the message.
PROMPT_S = 5.0
HANG_S = 1.0
GOOD = scripted_action(0)
STALE = np.full(7, 0.9, dtype=np.float32)


def observation(language: str = "put the bowl on the plate") -> Any:
    rng = np.random.default_rng(0)
    images = {k: rng.integers(0, 256, v.shape, dtype=np.uint8) for k, v in blank_images().items()}
    return seal_observation(language, images, Counters(), LIBERO_SPEC)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- against vla-eval's own PredictModelServer -------------------------------------------------

@pytest.mark.parametrize("max_batch_size", [1, 4])
def test_what_is_sent_is_what_vla_evals_libero_benchmark_sends(max_batch_size):
    model = make_server(chunk=5, max_batch_size=max_batch_size,
                        observation_params={"send_wrist_image": True, "send_state": True})
    obs = observation()
    with serving(model) as port:
        policy = VlaEvalPolicy(url=f"ws://127.0.0.1:{port}", actions_per_call=5)
        assert policy.server_info["model_server"] == "ScriptedServer" and policy.send_state
        policy.reset(obs.language)
        np.testing.assert_array_equal(policy.act(obs), scripted_chunk(0, 5))  # one inference, 4 from the buffer
        np.testing.assert_array_equal(policy.act(obs), scripted_chunk(5, 5))
        policy.reset("the next episode")  # episode_start empties the server's chunk buffer
        np.testing.assert_array_equal(policy.act(obs), scripted_chunk(0, 5))
        policy.close()
    assert [s["step"] for s in model.seen] == [0, 5, 0]
    sent = model.seen[0]
    assert sorted(sent) == ["images", "states", "step", "task_description"]
    assert sent["task_description"] == obs.language
    # PNG is lossless: the server decodes the harness's (rotated-180) images exactly.
    np.testing.assert_array_equal(sent["images"]["agentview"], obs.images["agentview"])
    np.testing.assert_array_equal(sent["images"]["wrist"], obs.images["robot0_eye_in_hand"])
    np.testing.assert_array_equal(sent["states"], np.zeros(8))  # the rgb track has no state
    assert model.episode_starts == [{"task": {"name": obs.language}}, {"task": {"name": "the next episode"}}]
    assert model.batch_sizes == [1, 1, 1]


def test_one_action_per_call_and_a_whole_chunk_reply():
    obs = observation()
    with serving(make_server(chunk=5)) as port:  # no observation_params: agentview only
        policy = VlaEvalPolicy(port=port)
        policy.reset("x")
        np.testing.assert_array_equal(policy.act(obs), scripted_action(0))  # vla-eval's own: one per control
        np.testing.assert_array_equal(policy.act(obs), scripted_action(1))
        policy.close()
    model = make_server(chunk=5, buffered=False)
    with serving(model) as port:
        policy = VlaEvalPolicy(port=port, actions_per_call=3)
        policy.reset("x")
        np.testing.assert_array_equal(policy.act(obs), scripted_chunk(0, 5))  # a chunk reply is the chunk
        policy.close()
    assert sorted(model.seen[0]) == ["images", "step", "task_description"]
    assert sorted(model.seen[0]["images"]) == ["agentview"]


def test_the_frames_are_vla_evals_own_encoding():
    from vla_eval.protocol.messages import Message, MessageType, pack_message, unpack_message

    payload = {"images": {"agentview": observation().images["agentview"]}, "task_description": "x",
               "states": np.arange(8, dtype=np.float64)}
    theirs = unpack_message(frame("observation", pack(payload), 7))
    assert theirs.type is MessageType.OBSERVATION and theirs.seq == 7
    np.testing.assert_array_equal(theirs.payload["images"]["agentview"], payload["images"]["agentview"])
    np.testing.assert_array_equal(theirs.payload["states"], payload["states"])
    reply = pack_message(Message(MessageType.ACTION, {"actions": GOOD}, seq=7))
    from pytest_libero.adapters.msgpack_wire import unpack

    ours = unpack(reply)
    assert ours["type"] == "action" and ours["seq"] == 7
    np.testing.assert_array_equal(ours["payload"]["actions"], GOOD)


def test_a_batching_server_batches_the_requests_of_several_clients():
    model = make_server(chunk=1, max_batch_size=4, max_wait_time=0.05, cost_a_s=0.2)
    obs = observation()
    with serving(model) as port:
        policies = [VlaEvalPolicy(port=port, request_timeout_s=10) for _ in range(4)]
        for p in policies:
            p.reset("x")
        replies: list[Any] = []
        threads = [threading.Thread(target=lambda p=p: replies.append(p.act(obs))) for p in policies]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        for p in policies:
            p.close()
    assert len(replies) == 4 and all(np.array_equal(r, GOOD) for r in replies)
    assert sum(model.batch_sizes) == 4 and max(model.batch_sizes) >= 2, model.batch_sizes


def test_the_servers_own_error_is_a_policy_error_and_the_next_episode_works():
    with serving(make_server(chunk=5, fail_at_step=5)) as port:
        policy = VlaEvalPolicy(port=port)
        result = episode(policy, calls=8, replan_interval=1)
        assert_policy_error(result, "policy.act raised PolicyServerError: vla-eval server at ws://127.0.0.1:* "
                                    "answered with an error: observation_failed: RuntimeError: scripted failure at "
                                    "step 5*")
        assert result.policy_calls == 6 and result.executed_controls == 5
        result = episode(policy, calls=3, replan_interval=1)
        assert result.outcome is Outcome.FAILURE and result.executed_controls == 3, result.message
        policy.close()


def test_a_server_that_dies_mid_episode_is_a_policy_fault():
    with serving(make_server(chunk=5)) as port:
        policy = VlaEvalPolicy(port=port, connect_timeout_s=0.3)
        policy.reset("x")
        policy.act(observation())
    # The server is gone: this episode's next call, and the next episode's reconnect, are the policy's faults.
    result = episode(policy)
    assert_policy_error(result, "policy.*raised PolicyServerError: *ws://127.0.0.1:*")
    assert_policy_error(episode(policy), "policy.reset raised PolicyServerError: vla-eval model server unreachable*")
    policy.close()


# -- against a hostile server --------------------------------------------------------------------

def message(kind: str, payload: Any, seq: int) -> bytes:
    return msgpack.packb({"type": kind, "payload": payload, "seq": seq, "timestamp": 0.0}, use_bin_type=True)


def array(dtype: str, shape: list[int], data: bytes) -> dict[str, Any]:
    return {"__ndarray__": True, "data": data, "dtype": dtype, "shape": shape}


def good(seq: int) -> bytes:
    return message("action", {"actions": array("<f4", [7], GOOD.tobytes())}, seq)


HUGE = bytes(64 * 2**20)
BAD_REPLIES = {
    "error": lambda seq: message("error", {"error": "observation_failed: ValueError: model exploded"}, seq),
    "garbage": lambda seq: b"\xc1\xc1\xc1",
    "object": lambda seq: message("action", {"actions": array("|O", [7], b"\x01" * 56)}, seq),
    "pickle": lambda seq: pickle.dumps({"type": "action", "payload": {"actions": GOOD}, "seq": seq}),
    "pickled_array": lambda seq: message("action", {"actions": array("|O", [1], pickle.dumps(GOOD))}, seq),
    "mismatch": lambda seq: message("action", {"actions": array("<f4", [10, 7], b"\x00" * 8)}, seq),
    "huge_shape": lambda seq: message("action", {"actions": array("<f4", [10**12, 7], b"\x00" * 28)}, seq),
    "huge": lambda seq: HUGE,
    "nested": lambda seq: b"\x91" * 100_000 + b"\xc0",
    "wrong_seq": lambda seq: message("action", {"actions": array("<f4", [7], GOOD.tobytes())}, seq + 100),
    "no_actions": lambda seq: message("action", {"action": 1}, seq),
    "bad_shape": lambda seq: message("action", {"actions": array("<f4", [3], b"\x00" * 12)}, seq),
    "not_a_message": lambda seq: msgpack.packb([1, 2, 3]),
}
FAULTS = [
    ("error", "answered with an error: observation_failed: ValueError: model exploded"),
    ("garbage", "sent a bad action reply: malformed msgpack"),
    ("object", "array dtype '|O' is not accepted"),
    ("pickle", "sent a bad action reply: malformed msgpack"),
    ("pickled_array", "array dtype '|O' is not accepted"),
    ("mismatch", "array of shape (10, 7) and dtype <f4 needs 280 bytes, the frame carries 8"),
    ("huge_shape", "array of shape (1000000000000, 7) and dtype <f4 needs 28000000000000 bytes"),
    ("huge", "sent a frame larger than max_frame_bytes=16777216"),
    ("nested", "sent a bad action reply: malformed msgpack"),
    ("text", "sent a text frame instead of the action reply: Traceback"),
    ("close", "closed the connection (code 1000) before the action reply"),
    ("hang", f"no action reply from vla-eval server at ws://127.0.0.1:* within {REQUEST_TIMEOUT_S:g} s"),
    ("wrong_seq", "answered observation * with 'action' *"),
    ("no_actions", "replied actions 'NoneType', not one (7,) action"),
    ("bad_shape", "replied actions (3,), not one (7,) action"),
    ("not_a_message", "that is not a vla-eval message"),
]


class HostileServer:
    """vla-eval's framing; the n-th observation (over all connections) plays `modes[n]`, default a good action."""

    def __init__(self, modes: dict[int, str] | None = None) -> None:
        self.modes = modes or {}
        self.observations = 0
        self.stale_attempted = threading.Event()
        self._lock = threading.Lock()
        self._server = serve(self._handle, "127.0.0.1", 0, max_size=None, compression=None)
        self.port = self._server.socket.getsockname()[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _handle(self, ws: ServerConnection) -> None:
        for data in ws:
            msg = msgpack.unpackb(data, raw=False)
            if msg["type"] == "hello":
                ws.send(message("hello", {"model_server": "Hostile", "protocol_version": 1}, msg["seq"]))
            if msg["type"] != "observation":
                continue
            with self._lock:
                n, self.observations = self.observations, self.observations + 1
            mode, seq = self.modes.get(n, "ok"), msg["seq"]
            if mode == "ok":
                ws.send(good(seq))
            elif mode == "text":
                ws.send("Traceback (most recent call last):\nValueError: model exploded")
            elif mode == "close":
                ws.close()
                return
            elif mode == "hang":
                time.sleep(HANG_S)
                try:  # the late reply to the abandoned request
                    ws.send(message("action", {"actions": array("<f4", [7], STALE.tobytes())}, seq))
                except ConnectionClosed:
                    pass
                self.stale_attempted.set()
            else:
                ws.send(BAD_REPLIES[mode](seq))

    def close(self) -> None:
        self._server.shutdown()


@pytest.fixture
def hostile() -> Iterator[Any]:
    started: list[HostileServer] = []

    def start(modes: dict[int, str] | None = None) -> HostileServer:
        started.append(HostileServer(modes))
        return started[-1]

    yield start
    for s in started:
        s.close()


@pytest.mark.parametrize("mode, pattern", FAULTS, ids=[f[0] for f in FAULTS])
def test_a_hostile_reply_is_a_policy_error_on_time_and_the_next_episode_works(hostile, mode, pattern):
    import fnmatch

    srv = hostile({1: mode, 3: mode})
    timeout_s = 10.0 if mode == "huge" else REQUEST_TIMEOUT_S  # writing 64 MiB takes a while on 2 busy cores
    policy = VlaEvalPolicy(port=srv.port, connect_timeout_s=2.0, request_timeout_s=timeout_s)
    policy.reset("task")
    np.testing.assert_array_equal(policy.act(observation()), GOOD)
    tick = time.monotonic()
    with pytest.raises(PolicyServerError) as caught:
        policy.act(observation())
    assert time.monotonic() - tick < timeout_s + PROMPT_S
    assert isinstance(caught.value, PolicyFault)
    assert fnmatch.fnmatch(str(caught.value), f"*{pattern}*"), str(caught.value)
    with pytest.raises(PolicyServerError, match="earlier fault in this episode"):
        policy.act(observation())  # nothing is sent on a dropped connection
    # Through the engine: a fresh connection; observation 2 is fine, observation 3 plays the fault again.
    result = episode(policy, calls=3)
    assert_policy_error(result, f"policy.act raised PolicyServerError: *{pattern}*")
    assert result.policy_calls == 2 and result.executed_controls == 1
    result = episode(policy)
    assert result.outcome is Outcome.FAILURE and result.policy_calls == 2, result.message
    policy.close()


def test_a_late_reply_is_never_read_as_the_next_one(hostile):
    srv = hostile({0: "hang"})
    policy = VlaEvalPolicy(port=srv.port, request_timeout_s=REQUEST_TIMEOUT_S)
    policy.reset("task")
    with pytest.raises(PolicyServerError, match="no action reply"):
        policy.act(observation())
    assert srv.stale_attempted.wait(5)
    policy.reset("task")
    np.testing.assert_array_equal(policy.act(observation()), GOOD)  # GOOD, never STALE
    policy.close()


def test_bad_kwargs_name_the_value_and_the_fix():
    with pytest.raises(ValueError, match="actions_per_call=0 must be an int >= 1"):
        VlaEvalPolicy(actions_per_call=0)
    with pytest.raises(ValueError, match="give url='ws://x:1' or host/port, not both"):
        VlaEvalPolicy(url="ws://x:1", port=2)


# -- through pytest ------------------------------------------------------------------------------

FAKES = (Path(__file__).parent / "fakes.py").read_text()


def test_an_unreachable_server_stops_the_run_with_one_line(pytester):
    """Found when the policy is built, before any item: exit 4, one line, nothing recorded."""
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(fake_conftest())
    port = free_port()
    result = pytester.runpytest("-p", "no:cacheprovider", "--libero-policy", "vla-eval", "--libero-policy-kwargs",
                                f'{{"port": {port}, "connect_timeout_s": 0.3}}', "--libero-output", "out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.errlines
    assert f"PolicyServerError: vla-eval model server unreachable at ws://127.0.0.1:{port} within 0.3 s" in errors[0]
    assert not (pytester.path / "out").exists()


@pytest.mark.real_libero
def test_a_real_libero_rollout_against_vla_evals_own_server_class(pytester):
    model = make_server(chunk=5, max_batch_size=4, observation_params={"send_wrist_image": True})
    with serving(model) as port:
        kwargs = f'{{"url": "ws://127.0.0.1:{port}", "request_timeout_s": 30, "actions_per_call": 5}}'
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--libero-scope", "development", "--libero-task-ids", "0",
            "--libero-policy", "vla-eval", "--libero-policy-kwargs", kwargs,
            "--libero-budget", "decisions", "--libero-max-policy-calls", "2", "--libero-video", "none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*2 policy calls, 2 action decisions, 10 executed controls*"])
    # One inference per call (the other 4 actions of each came from the server's chunk buffer).
    assert [s["step"] for s in model.seen] == [0, 5]
    first = model.seen[0]
    assert first["task_description"] == "put both the alphabet soup and the tomato sauce in the basket"
    for camera in ("agentview", "wrist"):
        assert first["images"][camera].shape == (256, 256, 3) and first["images"][camera].any()  # real renders
