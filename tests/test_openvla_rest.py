"""The OpenVLA REST adapter: deploy.py's wire, json_numpy interop, and every fault path.

A small server (stdlib http.server on 127.0.0.1, port 0) implements `POST /act` as
openvla/openvla vla-scripts/deploy.py documents it: a JSON body with json_numpy-encoded arrays,
`{"image": uint8 HxWx3, "instruction": str, "unnorm_key"?}`, answered by one 7-d action. Its n-th
request plays `modes[n]`; every fault must end the request with a PolicyServerError within its
deadline, the episode the engine runs through it must end as policy_error (the policy's side of
the wire is the policy), and the next request must work.
"""

from __future__ import annotations

import base64
import http.server
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from fakes import blank_images, fake_conftest
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.adapters.openvla_rest import (OpenVLARestPolicy, WireError, dumps, libero_gripper, loads,
                                                 openvla_image)
from pytest_libero.core.contract import Counters, seal_observation
from pytest_libero.core.outcomes import Outcome
from pytest_libero.errors import PolicyFault, PolicyServerError
from wire_helpers import assert_policy_error, episode

# OpenVLA's action: 6 deltas and the gripper in [0, 1], 1 = open.
ACTION = np.array([0.01, -0.02, 0.03, 0.0, 0.1, -0.1, 1.0], dtype=np.float32)
REQUEST_TIMEOUT_S = 0.5
# A generous bound for "on time" and "fails fast" on a loaded machine: many times the deadlines
# used here and still far from never. Whether the deadline or the fault ended a request is told by
# the message, not by the clock.
PROMPT_S = 5.0
MAX_REPLY = 4096


def encoded(dtype: str, shape: list[int], data: bytes) -> dict[str, Any]:
    return {"__numpy__": base64.b64encode(data).decode(), "dtype": dtype, "shape": shape}


def observation(language: str = "put the bowl on the plate") -> Any:
    rng = np.random.default_rng(0)
    images = {k: rng.integers(0, 256, v.shape, dtype=np.uint8) for k, v in blank_images().items()}
    return seal_observation(language, images, Counters(), LIBERO_SPEC)


class Server:
    """deploy.py's endpoint; request n (over all connections) plays `modes[n]`, default "ok"."""

    def __init__(self, modes: dict[int, str] | None = None) -> None:
        self.modes = modes or {}
        self.received: list[dict[str, Any]] = []
        self.release = threading.Event()  # lets a "hang" handler go at teardown
        self._lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with outer._lock:
                    index = len(outer.received)
                    outer.received.append(loads(body) if self.path == "/act" else {"path": self.path})
                if self.path != "/act":
                    self._send(404, b'{"detail":"Not Found"}')
                    return
                outer._play(self, outer.modes.get(index, "ok"))

            def _send(self, status: int, data: bytes, length: int | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data) if length is None else length))
                self.end_headers()
                self.wfile.write(data)

        self.Handler = Handler
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _play(self, handler: Any, mode: str) -> None:
        send = handler._send
        if mode == "ok":
            send(200, dumps(ACTION))
        elif mode == "list":  # a server that returns plain JSON numbers
            send(200, json.dumps(ACTION.tolist()).encode())
        elif mode == "double":  # deploy.py's "encoded" path: the action's json_numpy text as a JSON string
            send(200, json.dumps(dumps(ACTION).decode()).encode())
        elif mode == "error-string":  # deploy.py's answer when inference raised
            send(200, b'"error"')
        elif mode == "http-500":
            send(500, b"Internal Server Error")
        elif mode == "hang":
            self.release.wait(30)
        elif mode == "trickle":  # headers at once, then a byte now and then: never a whole reply in time
            handler.send_response(200)
            handler.send_header("Content-Length", "1000")
            handler.end_headers()
            for _ in range(100):
                if self.release.wait(0.05):
                    break
                handler.wfile.write(b" ")
                handler.wfile.flush()
        elif mode == "malformed":
            send(200, b'{"__numpy__": "AAAA", "dtype": "<f4", "sha')
        elif mode == "object":
            send(200, json.dumps(encoded("|O", [7], b"\0" * 56)).encode())
        elif mode == "complex":
            send(200, json.dumps(encoded("<c16", [7], b"\0" * 112)).encode())
        elif mode == "short-data":
            send(200, json.dumps(encoded("<f4", [7], b"\0" * 8)).encode())
        elif mode == "wrong-shape":
            send(200, dumps(np.zeros((3,), dtype=np.float32)))
        elif mode == "oversized":
            send(200, json.dumps(encoded("|u1", [MAX_REPLY * 4], b"\0" * MAX_REPLY * 4)).encode())
        elif mode == "oversized-unannounced":  # no Content-Length: HTTP/1.0 style, read until close
            handler.send_response(200)
            handler.end_headers()
            handler.wfile.write(b"[" + b"0," * MAX_REPLY * 2 + b"0]")
            handler.close_connection = True
        else:
            raise AssertionError(mode)

    def close(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def server() -> Iterator[Any]:
    made: list[Server] = []

    def make(modes: dict[int, str] | None = None) -> Server:
        made.append(Server(modes))
        return made[-1]

    yield make
    for srv in made:
        srv.close()


def client(srv: Server, **kwargs: Any) -> OpenVLARestPolicy:
    options = dict(port=srv.port, request_timeout_s=REQUEST_TIMEOUT_S, connect_timeout_s=2.0,
                   max_reply_bytes=MAX_REPLY)
    return OpenVLARestPolicy(**{**options, **kwargs})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the wire -----------------------------------------------------------------------------------

def test_a_request_follows_deploy_py_and_the_reply_becomes_a_libero_action(server):
    srv = server()
    policy = client(srv, unnorm_key="libero_spatial_no_noops")
    policy.reset("put the bowl on the plate")
    action = policy.act(observation())
    (sent,) = srv.received
    assert set(sent) == {"image", "instruction", "unnorm_key"}
    assert sent["image"].dtype == np.uint8 and sent["image"].shape == (224, 224, 3) and sent["image"].any()
    assert sent["instruction"] == "put the bowl on the plate" and sent["unnorm_key"] == "libero_spatial_no_noops"
    np.testing.assert_allclose(action[:6], ACTION[:6].astype(np.float64))
    assert action[6] == -1.0  # OpenVLA's 1 = open is LIBERO's -1 = open
    assert policy.profile["adapter"] == "openvla-rest" and policy.profile["kind"] == "capability"


@pytest.mark.parametrize("mode", ["list", "double"])
def test_plain_json_and_double_encoded_replies_are_read(server, mode):
    srv = server({0: mode})
    policy = client(srv)
    policy.reset("x")
    np.testing.assert_allclose(policy.act(observation()), libero_gripper(ACTION))


def test_unnorm_key_is_omitted_unless_given(server):
    srv = server()
    client(srv).act(observation())
    assert "unnorm_key" not in srv.received[0]


@pytest.mark.parametrize("gripper, expected", [(1.0, -1.0), (0.0, 1.0), (0.7, -1.0), (0.3, 1.0), (0.5, -1.0)])
def test_gripper_follows_openvlas_libero_evaluator(gripper, expected):
    # normalize_gripper_action: 2g - 1, binarized with sign (0 -> +1); invert_gripper_action: * -1
    assert libero_gripper(np.array([0, 0, 0, 0, 0, 0, gripper]))[6] == expected


def test_preprocessing_resizes_and_crops_the_agentview():
    image = np.zeros((256, 256, 3), dtype=np.uint8)
    image[:, :128] = 255  # left half white
    out = openvla_image(image)
    assert out.shape == (224, 224, 3) and out.dtype == np.uint8
    assert out[112, 20].mean() > 200 and out[112, 200].mean() < 50  # orientation kept
    uncropped = openvla_image(image, center_crop=False)
    # the crop zooms in: the white-black edge stays central, the image is not the uncropped one
    assert not np.array_equal(out, uncropped)


def test_codec_round_trips_and_refuses_what_it_must_not_build():
    array = np.arange(14, dtype=">f8").reshape(2, 7)
    back = loads(dumps({"a": array}))["a"]
    np.testing.assert_array_equal(back, array)
    assert back.dtype == np.dtype("<f8") and back.flags.writeable
    for bad, message in [
        (encoded("|O", [1], b"\0" * 8), "dtype '|O' is not accepted"),
        (encoded("<c16", [1], b"\0" * 16), "dtype '<c16' is not accepted"),
        (encoded("<U2", [1], b"\0" * 8), "dtype '<U2' is not accepted"),
        ({"__numpy__": "AAAA", "dtype": [["a", "<f8"]], "shape": [1]}, "dtype [['a', '<f8']] is not accepted"),
        (encoded("<f4", [7], b"\0" * 8), "needs 28 bytes, the reply carries 8"),
        (encoded("<f4", [-1], b""), "not a list of at most 8 non-negative ints"),
        ({"__numpy__": "!!", "dtype": "<f4", "shape": [0]}, "not base64"),
    ]:
        with pytest.raises(WireError, match=message.replace("[", r"\[").replace("]", r"\]")):
            loads(json.dumps(bad).encode())
    with pytest.raises(WireError, match="malformed JSON"):
        loads(b"[" * 100_000)


def test_json_numpy_interop_and_why_its_decoder_is_not_used():
    json_numpy = pytest.importorskip("json_numpy")
    # Interop both ways on the documented payload and reply.
    image = np.random.default_rng(1).integers(0, 256, (224, 224, 3), dtype=np.uint8)
    theirs = json_numpy.loads(dumps({"image": image, "instruction": "x"}).decode())
    np.testing.assert_array_equal(theirs["image"], image)
    np.testing.assert_array_equal(loads(json_numpy.dumps(ACTION).encode()), ACTION)
    # Object dtype: json_numpy fails only because numpy cannot build one from a buffer (a bare ValueError).
    obj = json.dumps(encoded("|O", [1], b"\0" * 8))
    with pytest.raises(ValueError, match="OBJECT"):
        json_numpy.loads(obj)
    # It builds non-numeric arrays, and decodes any size: nothing bounds a hostile reply.
    assert json_numpy.loads(json.dumps(encoded("<c16", [1], b"\0" * 16))).dtype.kind == "c"
    assert json_numpy.loads(json.dumps(encoded("<U2", [1], b"\0" * 8))).dtype.kind == "U"
    big = json.dumps(encoded("|u1", [8 * 2**20], b"\0" * 8 * 2**20))
    assert json_numpy.loads(big).nbytes == 8 * 2**20
    for text in (obj, json.dumps(encoded("<c16", [1], b"\0" * 16))):
        with pytest.raises(WireError):
            loads(text.encode())


# -- faults -------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode, message", [
    ("http-500", "answered HTTP 500 Internal Server Error: Internal Server Error"),
    ("error-string", 'answered "error": inference raised on the server'),
    ("hang", f"no reply from the OpenVLA REST server at http://127.0.0.1:*/act within {REQUEST_TIMEOUT_S:g} s"),
    ("trickle", f"no reply from the OpenVLA REST server at http://127.0.0.1:*/act within {REQUEST_TIMEOUT_S:g} s"),
    ("malformed", "sent a bad reply: malformed JSON"),
    ("object", "sent a bad reply: array dtype '|O' is not accepted (only bool, int, uint and float)"),
    ("complex", "sent a bad reply: array dtype '<c16' is not accepted"),
    ("short-data", "sent a bad reply: array of shape (7,) and dtype <f4 needs 28 bytes, the reply carries 8"),
    ("wrong-shape", "replied (3,), not one 7-d action"),
    ("oversized", f"announced a * reply, over max_reply_bytes={MAX_REPLY}"),
    ("oversized-unannounced", f"sent a reply larger than max_reply_bytes={MAX_REPLY}"),
])
def test_each_fault_is_a_policy_error_on_time_and_the_next_request_works(server, mode, message):
    import fnmatch

    srv = server({0: mode, 2: mode})
    policy = client(srv)
    policy.reset("x")
    tick = time.monotonic()
    with pytest.raises(PolicyServerError) as caught:
        policy.act(observation())
    assert time.monotonic() - tick < REQUEST_TIMEOUT_S + PROMPT_S
    assert fnmatch.fnmatch(str(caught.value), f"*{message}*"), str(caught.value)
    assert isinstance(caught.value, PolicyFault)
    np.testing.assert_allclose(policy.act(observation()), libero_gripper(ACTION))  # a fresh connection works
    # Through the engine: the episode's first request plays the fault again.
    assert_policy_error(episode(policy), f"policy.act raised PolicyServerError: *{message}*")
    result = episode(policy)
    assert result.outcome is Outcome.FAILURE and result.policy_calls == 2, result.message


def test_a_refused_connection_fails_fast_with_one_clear_message():
    port = free_port()
    tick = time.monotonic()
    with pytest.raises(PolicyServerError, match=f"OpenVLA REST server unreachable at http://127.0.0.1:{port}/act "
                                                r"within 0.3 s \(ConnectionRefusedError"):
        OpenVLARestPolicy(port=port, connect_timeout_s=0.3)
    assert time.monotonic() - tick < PROMPT_S


def test_a_server_that_dies_mid_episode_is_a_policy_fault(server):
    srv = server({1: "hang"})  # the second request is in flight when the server goes
    policy = client(srv, connect_timeout_s=0.3, request_timeout_s=5.0)
    policy.reset("x")
    policy.act(observation())
    threading.Timer(0.3, srv.close).start()
    result = episode(policy)
    assert_policy_error(result, "policy.act raised PolicyServerError: *http://127.0.0.1:*")
    assert "no reply from" not in result.message  # the closed connection ended the request, not the deadline
    assert result.policy_calls == 1
    # Gone for good: the next episode's request is refused (or reset), again the policy's fault.
    assert_policy_error(episode(policy), "policy.act raised PolicyServerError: *http://127.0.0.1:*/act*")


# -- through pytest -----------------------------------------------------------------------------

FAKES = (Path(__file__).parent / "fakes.py").read_text()


def test_a_fault_fails_the_item_as_policy_error_and_the_next_item_runs(pytester, server):
    srv = server({0: "object"})
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(fake_conftest())
    kwargs = f'{{"port": {srv.port}, "request_timeout_s": 2}}'
    result = pytester.runpytest("-p", "no:cacheprovider", "--libero-policy", "openvla-rest", "--libero-policy-kwargs",
                                kwargs, "--libero-budget", "decisions", "--libero-max-policy-calls", "2")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*policy_error: policy.act raised PolicyServerError: OpenVLA REST server at http://127.0.0.1:*/act sent a "
        "bad reply: array dtype '|O'*",
        "*failure: no native success within the cap: 2 policy calls*",
        "LIBERO: selected 2 = passed 0 + failed 2 + errored 0 + unattempted 0",
    ])


def test_an_unreachable_server_stops_the_run_with_one_line(pytester):
    """Found when the policy is built, before any item: exit 4, one line, nothing recorded."""
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(fake_conftest())
    port = free_port()
    result = pytester.runpytest("-p", "no:cacheprovider", "--libero-policy", "openvla-rest", "--libero-policy-kwargs",
                                f'{{"port": {port}, "connect_timeout_s": 0.3}}', "--libero-output", "out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.errlines
    assert f"PolicyServerError: OpenVLA REST server unreachable at http://127.0.0.1:{port}/act" in errors[0]
    assert not (pytester.path / "out").exists()


@pytest.mark.real_libero
def test_a_real_libero_rollout_against_a_local_deploy_py_server(pytester, server):
    srv = server()
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--libero-scope", "development", "--libero-task-ids", "0",
        "--libero-policy", "openvla-rest", "--libero-policy-kwargs", f'{{"port": {srv.port}, "request_timeout_s": 30}}',
        "--libero-budget", "decisions", "--libero-max-policy-calls", "2", "--libero-video", "none")
    result.assert_outcomes(failed=1)
    # one action per query: 2 calls execute 2 controls
    result.stdout.fnmatch_lines(["*2 policy calls, 2 action decisions, 2 executed controls*"])
    assert len(srv.received) == 2
    first = srv.received[0]
    assert first["image"].shape == (224, 224, 3) and first["image"].any()  # a real render
    assert first["instruction"] == "put both the alphabet soup and the tomato sauce in the basket"
