"""The openpi remote-policy adapter: wire format, interop with the PyPI packages, and faults.

A small openpi-compatible server (websockets' threaded server on 127.0.0.1, port 0) plays each
fault; every fault must end the request with a PolicyServerError within its deadline, the episode
the engine runs through it must end as policy_error (the policy's side of the wire is the policy),
and the next episode (a fresh connection) must work.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import msgpack
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve

from fakes import blank_images, fake_conftest
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.adapters.openpi import OpenPIPolicy, pack, resize_with_pad, unpack
from pytest_libero.core.contract import Counters, seal_observation
from pytest_libero.core.outcomes import Outcome
from pytest_libero.errors import PolicyFault, PolicyServerError
from wire_helpers import assert_policy_error, episode

GOOD = np.full((10, 7), 0.1, dtype=np.float32)
STALE = np.full((10, 7), 0.9, dtype=np.float32)
HANG_S = 1.0
# A generous bound for "fails fast": a fraction of what ignoring the deadline would take (the
# adapter's default connect_timeout_s of 10 s, or never), many times the 0.5 s deadlines used here,
# so that a loaded machine does not fail it. Where the claim is an order of events (the client
# gives up before the server's late reply, without a closing handshake), that order is asserted.
PROMPT_S = 5.0
REQUEST_TIMEOUT_S = 0.5


def observation(language: str = "put the bowl on the plate") -> Any:
    rng = np.random.default_rng(0)
    images = {k: rng.integers(0, 256, v.shape, dtype=np.uint8) for k, v in blank_images().items()}
    return seal_observation(language, images, Counters(), LIBERO_SPEC)


def raw_array(dtype: str, shape: list[int], data: bytes) -> dict[bytes, Any]:
    return {b"__ndarray__": True, b"data": data, b"dtype": dtype, b"shape": shape}


class Server:
    """An openpi-compatible server whose n-th request (over all connections) plays `modes[n]`."""

    def __init__(self, modes: dict[int, str] | None = None, metadata: Any = None) -> None:
        self.modes = modes or {}
        self.metadata = {} if metadata is None else metadata
        self.received: list[dict[str, Any]] = []
        self.stale_attempted = threading.Event()
        self._lock = threading.Lock()
        self._server = serve(self._handle, "127.0.0.1", 0, max_size=None, compression=None)
        self.port = self._server.socket.getsockname()[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _handle(self, ws: ServerConnection) -> None:
        ws.send(pack(self.metadata))
        for message in ws:
            with self._lock:
                n = len(self.received)
                self.received.append(unpack(message))
            mode = self.modes.get(n, "ok")
            if mode == "ok":
                ws.send(pack({"actions": GOOD, "server_timing": {"infer_ms": 1.0}}))
            elif mode == "raise":
                ws.send("Traceback (most recent call last):\nValueError: model exploded")
                ws.close(1011, "Internal server error. Traceback included in previous frame.")
                return
            elif mode == "hang":
                time.sleep(HANG_S)
                try:  # the late reply to the timed-out request
                    ws.send(pack({"actions": STALE}))
                except ConnectionClosed:
                    pass
                self.stale_attempted.set()
            elif mode == "close":
                ws.close()
                return
            else:
                ws.send(BAD_REPLIES[mode]())

    def close(self) -> None:
        self._server.shutdown()


HUGE = bytes(64 * 2**20)

BAD_REPLIES = {
    "garbage": lambda: b"\xc1\xc1\xc1",
    "truncated": lambda: pack({"actions": GOOD})[:-5],
    "extra": lambda: pack({"actions": GOOD}) + b"\x00",
    "object": lambda: msgpack.packb({"actions": raw_array("|O", [1, 7], b"\x01" * 56)}),
    "void": lambda: msgpack.packb({"actions": raw_array("|V8", [1, 7], b"\x01" * 56)}),
    "structured": lambda: msgpack.packb({"actions": raw_array("[('a', 'O')]", [1], b"\x01" * 8)}),
    "mismatch": lambda: msgpack.packb({"actions": raw_array("<f8", [10, 7], b"\x00" * 8)}),
    "negative": lambda: msgpack.packb({"actions": raw_array("<f8", [-1, 7], b"")}),
    "nested": lambda: b"\x91" * 100_000 + b"\xc0",  # 100k nested one-element arrays
    "scalar": lambda: msgpack.packb({"actions": {b"__npgeneric__": True, b"data": 1, b"dtype": "|O"}}),
    "no_actions": lambda: pack({"action": GOOD}),
    "huge": lambda: HUGE,
    "huge_shape": lambda: msgpack.packb({"actions": raw_array("<f8", [10**12, 7], b"\x00" * 56)}),
    "pickle": lambda: pickle.dumps({"actions": GOOD}),
}


@pytest.fixture
def server() -> Iterator[Any]:
    started: list[Server] = []

    def start(modes: dict[int, str] | None = None, **kwargs: Any) -> Server:
        started.append(Server(modes, **kwargs))
        return started[-1]

    yield start
    for s in started:
        s.close()


def client(port: int, **kwargs: Any) -> OpenPIPolicy:
    kwargs = {"connect_timeout_s": 2.0, "request_timeout_s": REQUEST_TIMEOUT_S, **kwargs}
    return OpenPIPolicy(host="127.0.0.1", port=port, **kwargs)


def reference(module: str) -> Any:
    """A module of the reference openpi packages (the `test` extra: pip install -e '.[test]')."""
    return pytest.importorskip(module, reason="install the test extra: pip install -e '.[test]'")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_request_follows_the_libero_example_and_returns_the_actions(server):
    srv = server(metadata={"action_horizon": 10})
    policy = client(srv.port)
    assert policy.server_metadata == {"action_horizon": 10}
    obs = observation()
    policy.reset(obs.language)
    actions = policy.act(obs)
    np.testing.assert_array_equal(actions, GOOD)
    assert actions.flags.writeable and actions.dtype == np.float32
    (sent,) = srv.received
    assert sorted(sent) == ["observation/image", "observation/state", "observation/wrist_image", "prompt"]
    assert sent["prompt"] == obs.language
    for key, camera in (("observation/image", "agentview"), ("observation/wrist_image", "robot0_eye_in_hand")):
        assert sent[key].dtype == np.uint8 and sent[key].shape == (224, 224, 3)
        np.testing.assert_array_equal(sent[key], resize_with_pad(np.asarray(obs.images[camera]), 224, 224))
    np.testing.assert_array_equal(sent["observation/state"], np.zeros(8))
    assert "zeros(8)" in policy.profile["state"] and policy.profile["adapter"] == "openpi"
    policy.close()


def test_the_openpi_compat_track_state_is_sent_when_the_observation_has_one(server):
    srv = server()
    policy = client(srv.port)
    obs = observation()
    state = np.arange(8, dtype=np.float64) / 10
    # An observation of the openpi-compat track (its `state` field), as the adapter reads it.
    tracked = SimpleNamespace(language=obs.language, images=obs.images, counters=obs.counters, state=state)
    policy.reset(obs.language)
    policy.act(tracked)
    policy.act(SimpleNamespace(language=obs.language, images=obs.images, counters=obs.counters,
                               state=np.ones(9)))  # rgb+proprio: joint encoders are not openpi's state
    np.testing.assert_array_equal(srv.received[0]["observation/state"], state)
    np.testing.assert_array_equal(srv.received[1]["observation/state"], np.zeros(8))
    policy.close()


def test_zero_state_false_omits_the_state(server):
    srv = server()
    policy = client(srv.port, zero_state=False)
    policy.reset("x")
    policy.act(observation())
    assert "observation/state" not in srv.received[0]
    policy.close()


@pytest.mark.parametrize("shape", [(256, 256, 3), (200, 300, 3), (300, 120, 3)])
def test_resize_with_pad_matches_openpi_client(shape):
    image_tools = reference("openpi_client.image_tools")
    image = np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)
    np.testing.assert_array_equal(resize_with_pad(image, 224, 224), image_tools.resize_with_pad(image, 224, 224))


def test_codec_matches_openpi_msgpack_numpy():
    msgpack_numpy = reference("openpi_client.msgpack_numpy")
    message = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.zeros((2, 2, 3), np.uint8),
               "s": "text", "n": np.float64(2.5), "nested": {"c": np.array([True, False])}}
    assert pack(message) == msgpack_numpy.packb(message)
    theirs = msgpack_numpy.unpackb(pack(message))
    ours = unpack(msgpack_numpy.packb(message))
    for key in ("a", "b"):
        np.testing.assert_array_equal(ours[key], theirs[key])
        assert ours[key].dtype == theirs[key].dtype
    assert ours["n"] == theirs["n"] == 2.5 and ours["s"] == "text"
    np.testing.assert_array_equal(ours["nested"]["c"], [True, False])
    # Big-endian data from a foreign server is accepted and converted to native order.
    big = unpack(msgpack.packb(raw_array(">f8", [2], np.array([1.5, -2.0], ">f8").tobytes())))
    assert big.dtype == np.float64 and big.dtype.isnative and big.tolist() == [1.5, -2.0]


# openpi-client 0.1.2 calls websockets' connect() without a context manager (websockets >= 17.1 warns).
@pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")
def test_real_openpi_client_talks_to_our_server(server):
    WebsocketClientPolicy = reference("openpi_client.websocket_client_policy").WebsocketClientPolicy
    srv = server(metadata={"reset_pose": [0, 1]})
    theirs = WebsocketClientPolicy(host="127.0.0.1", port=srv.port)
    assert theirs.get_server_metadata() == {"reset_pose": [0, 1]}
    reply = theirs.infer({"observation/image": np.ones((224, 224, 3), np.uint8), "prompt": "go"})
    np.testing.assert_array_equal(reply["actions"], GOOD)
    assert srv.received[0]["prompt"] == "go" and srv.received[0]["observation/image"].shape == (224, 224, 3)
    theirs._ws.close()


class _RealServerThread:
    """openpi-server's WebsocketPolicyServer on its own event loop, stoppable."""

    def __init__(self, policy: Any, port: int) -> None:
        WebsocketPolicyServer = reference("openpi_server").WebsocketPolicyServer
        self.loop = asyncio.new_event_loop()
        self.server = WebsocketPolicyServer(policy, host="127.0.0.1", port=port, metadata={"from": "openpi-server"})
        self.task: asyncio.Task[Any] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.task = self.loop.create_task(self.server.run())
        try:
            self.loop.run_until_complete(self.task)
        except BaseException:  # noqa: BLE001 - cancelled at teardown
            pass

    def stop(self) -> None:
        if self.task is not None:
            self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(5)


class EchoPolicy:
    """A model-free openpi BasePolicy: raises on request 2, else returns GOOD."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        self.seen.append(obs)
        if len(self.seen) == 2:
            raise ValueError("model exploded")
        return {"actions": GOOD.copy()}

    def reset(self) -> None:
        pass


def test_our_adapter_against_the_real_openpi_server():
    model, port = EchoPolicy(), free_port()
    real = _RealServerThread(model, port)
    try:
        policy = client(port, request_timeout_s=5.0)
        assert policy.server_metadata == {"from": "openpi-server"}
        policy.reset("open the drawer")
        np.testing.assert_array_equal(policy.act(observation()), GOOD)
        assert policy.last_server_timing and "infer_ms" in policy.last_server_timing
        assert model.seen[0]["observation/image"].shape == (224, 224, 3)
        assert model.seen[0]["prompt"] == "open the drawer"
        with pytest.raises(PolicyServerError, match="(?s)raised an exception.*ValueError: model exploded"):
            policy.act(observation())
        policy.reset("next episode")  # reconnects
        np.testing.assert_array_equal(policy.act(observation()), GOOD)
        policy.close()
    finally:
        real.stop()


class SlowPolicy(EchoPolicy):
    """Blocks openpi-server's event loop (it runs infer synchronously) on the first request."""

    def __init__(self) -> None:
        super().__init__()
        self.replied = threading.Event()  # the first (late) reply is done

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        self.seen.append(obs)
        if len(self.seen) == 1:
            time.sleep(1.5)
            self.replied.set()
        return {"actions": (STALE if len(self.seen) == 1 else GOOD).copy()}


@pytest.fixture
def drops(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each connection the adapter drops, as whether it was closed with a closing handshake (graceful)."""
    import pytest_libero.adapters.openpi as adapter

    seen: list[bool] = []
    real = adapter.drop

    def spy(ws: Any, graceful: bool = False) -> None:
        seen.append(graceful)
        real(ws, graceful)

    monkeypatch.setattr(adapter, "drop", spy)
    return seen


def test_timeout_against_a_blocked_real_openpi_server_returns_on_time(drops):
    port = free_port()
    slow = SlowPolicy()
    real = _RealServerThread(slow, port)
    try:
        policy = client(port)
        policy.reset("task")
        tick = time.monotonic()
        with pytest.raises(PolicyServerError, match="no action reply .* within 0.5 s"):
            policy.act(observation())
        # At its own deadline: before the blocked server replied, the connection dropped without a
        # closing handshake (the server, blocked, could not answer one).
        assert not slow.replied.is_set() and drops == [False]
        assert time.monotonic() - tick < PROMPT_S
        policy.reset("task")
        policy.request_timeout_s = 5.0  # the server is busy for a second more on the old request
        np.testing.assert_array_equal(policy.act(observation()), GOOD)
        policy.close()
    finally:
        real.stop()


FAULTS = [
    ("raise", r"(?s)raised an exception \(a text frame instead of the action reply\):\nTrace.*Error: model exploded"),
    ("close", r"closed the connection \(code 1000\) before the action reply"),
    ("garbage", "sent a bad action reply: malformed msgpack"),
    ("truncated", "malformed msgpack"),
    ("extra", "malformed msgpack .*ExtraData"),
    ("object", r"dtype '\|O' is not accepted"),
    ("void", r"dtype '\|V8' is not accepted"),
    ("structured", "dtype .* is not accepted"),
    ("mismatch", r"shape \(10, 7\) and dtype <f8 needs 560 bytes, the frame carries 8"),
    ("negative", "is not a list of at most 8 non-negative ints"),
    ("nested", "malformed msgpack"),
    ("scalar", r"dtype '\|O' is not accepted"),
    ("no_actions", "replied without an 'actions' array"),
    ("huge", "larger than max_frame_bytes=16777216"),
    ("huge_shape", r"shape \(1000000000000, 7\) and dtype <f8 needs 56000000000000 bytes, the frame carries 56"),
    ("pickle", "sent a bad action reply: malformed msgpack"),
]


@pytest.mark.parametrize("mode, message", FAULTS, ids=[f[0] for f in FAULTS])
def test_server_fault_is_a_policy_error_and_the_next_episode_works(server, mode, message):
    srv = server({1: mode})
    # Writing 64 MiB can take the (shared, 2-core) test server longer than the short deadline;
    # the size check itself happens on the frame header.
    timeout_s = 10.0 if mode == "huge" else REQUEST_TIMEOUT_S
    policy = client(srv.port, request_timeout_s=timeout_s)
    policy.reset("task")
    policy.act(observation())
    with pytest.raises(PolicyServerError, match=message) as caught:
        policy.act(observation())
    assert "no action reply" not in str(caught.value)  # the fault itself, not the deadline, ended the request
    assert isinstance(caught.value, PolicyFault)
    with pytest.raises(PolicyServerError, match="earlier fault in this episode"):
        policy.act(observation())  # nothing is sent on a dropped connection
    # Through the engine: request 2 (this episode's first) is fine, request 3 plays the fault again.
    srv.modes = {3: mode}
    result = episode(policy, calls=3)
    assert_policy_error(result, "policy.act raised PolicyServerError: openpi server at ws://127.0.0.1:*")
    assert result.policy_calls == 2 and result.executed_controls == 5
    result = episode(policy)  # next episode: a fresh connection
    assert result.outcome is Outcome.FAILURE and result.policy_calls == 2, result.message
    policy.close()


def test_timeout_drops_the_connection_and_never_reads_the_stale_reply(server, drops):
    srv = server({0: "hang"})
    policy = client(srv.port)
    policy.reset("task")
    tick = time.monotonic()
    with pytest.raises(PolicyServerError, match="no action reply from openpi server .* within 0.5 s; connection dropp"):
        policy.act(observation())
    # before the server's late reply, and without a closing handshake
    assert not srv.stale_attempted.is_set() and drops == [False]
    assert time.monotonic() - tick < PROMPT_S
    assert srv.stale_attempted.wait(5)  # the server has now (tried to) send the late reply
    policy.reset("task")
    np.testing.assert_array_equal(policy.act(observation()), GOOD)  # GOOD, never STALE
    policy.close()


def test_unreachable_server_fails_fast_with_one_clear_message():
    port = free_port()
    tick = time.monotonic()
    with pytest.raises(PolicyServerError, match=f"unreachable at ws://127.0.0.1:{port} within 0.5 s"):
        OpenPIPolicy(port=port, connect_timeout_s=0.5)
    assert time.monotonic() - tick < PROMPT_S


def test_a_listener_that_never_answers_the_handshake_hits_the_connect_deadline():
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen()
        tick = time.monotonic()
        with pytest.raises(PolicyServerError, match="unreachable .* within 0.5 s"):
            OpenPIPolicy(port=mute.getsockname()[1], connect_timeout_s=0.5)
        assert time.monotonic() - tick < PROMPT_S


def test_missing_metadata_frame_hits_the_connect_deadline():
    done = threading.Event()

    def silent(ws: ServerConnection) -> None:
        done.wait(5)

    with serve(silent, "127.0.0.1", 0) as srv:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        tick = time.monotonic()
        with pytest.raises(PolicyServerError, match="no metadata frame from .* within 0.5 s"):
            OpenPIPolicy(port=srv.socket.getsockname()[1], connect_timeout_s=0.5)
        assert time.monotonic() - tick < PROMPT_S
        done.set()
        srv.shutdown()


SERVER_CONFTEST = fake_conftest()


def test_a_server_fault_fails_one_item_as_policy_error_and_the_next_item_runs(pytester, server):
    srv = server({0: "raise"})
    pytester.makepyfile(fakes=(Path(__file__).parent / "fakes.py").read_text())
    pytester.makeconftest(SERVER_CONFTEST)
    kwargs = f'{{"host": "127.0.0.1", "port": {srv.port}, "request_timeout_s": 2}}'
    result = pytester.runpytest("--libero-policy", "openpi", "--libero-policy-kwargs", kwargs,
                                "--libero-budget", "decisions", "--libero-max-policy-calls", "2")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*policy_error/policy_error: 1 calls, 0 decisions, 0 controls*",
        "*failure/truncation: 2 calls, 2 decisions, 10 controls*",
        "LIBERO: selected 2 = passed 0 + failed 2 + errored 0 + unattempted 0",
    ])
    assert len(srv.received) == 3


def test_a_server_that_dies_mid_episode_is_a_policy_fault(server):
    """Killed after its first reply: this episode and the next (whose reconnect is refused) are policy_error."""
    srv = server()
    policy = client(srv.port, connect_timeout_s=0.3)
    policy.reset("task")
    policy.act(observation())
    srv.close()  # the listener goes, and every open connection with it
    result = episode(policy)
    assert_policy_error(result, "policy.act raised PolicyServerError: *ws://127.0.0.1:*")
    result = episode(policy)
    assert_policy_error(result, "policy.reset raised PolicyServerError: openpi policy server unreachable*")
    policy.close()


def test_an_unreachable_server_stops_the_run_with_one_line_after_one_try(pytester):
    """The policy is built (and the connect tried) once, before any item: exit 4, nothing recorded.

    The server is a listener that accepts and never answers the handshake (a connection refused
    is retried within the deadline, so it cannot count tries): one connection means one try."""
    pytester.makepyfile(fakes=(Path(__file__).parent / "fakes.py").read_text())
    pytester.makeconftest(SERVER_CONFTEST)
    accepted: list[socket.socket] = []
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(16)
        port = mute.getsockname()[1]

        def accept() -> None:
            try:
                while True:
                    accepted.append(mute.accept()[0])
            except OSError:
                pass  # the listener closed

        threading.Thread(target=accept, daemon=True).start()
        result = pytester.runpytest("--libero-policy", "openpi", "--libero-policy-kwargs",
                                    f'{{"port": {port}, "connect_timeout_s": 0.5}}', "--libero-output", "out")
        mute.shutdown(socket.SHUT_RDWR)
    for conn in accepted:
        conn.close()
    assert len(accepted) == 1, f"{len(accepted)} connections: the policy was built more than once"
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.errlines
    assert (f"PolicyServerError: openpi policy server unreachable at ws://127.0.0.1:{port} within 0.5 s"
            in errors[0]), errors[0]
    assert not (pytester.path / "out").exists()


@pytest.mark.real_libero
def test_a_real_libero_rollout_against_the_local_server(pytester, server):
    srv = server()
    result = pytester.runpytest_subprocess(
        "--libero-scope", "development", "--libero-task-ids", "0", "--libero-policy", "openpi",
        "--libero-policy-kwargs", f'{{"port": {srv.port}, "request_timeout_s": 30}}',
        "--libero-budget", "decisions", "--libero-max-policy-calls", "2")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*2 policy calls, 2 action decisions, 10 executed controls*"])
    assert len(srv.received) == 2
    first = srv.received[0]
    assert first["prompt"] and first["observation/image"].shape == (224, 224, 3)
    assert first["observation/image"].any() and first["observation/wrist_image"].any()  # real renders
