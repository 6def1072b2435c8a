"""`--libero-policy vla-eval`: a model server of vla-eval (allenai/vla-evaluation-harness) as the policy.

Wire protocol (vla-eval 0.8.0, `vla_eval.protocol` and `vla_eval.model_servers.serve`): one
websocket per client; every message, both ways, is one binary msgpack map `{"type", "payload",
"seq", "timestamp"}` with type one of hello, episode_start, observation, action, episode_end, error.
numpy arrays travel as `{"__ndarray__": True, "data", "dtype", "shape"}` (str keys), HWC uint8
images as PNG `{"__image__": True, "format": "png", "data", "shape"}`. The client says hello and
the server answers hello (its class name and `observation_params`, e.g. send_wrist_image and
send_state); then per episode: episode_start `{"task": {...}}` (no reply), one observation per
request answered by an action `{"actions": ...}` carrying the observation's seq, or by an error
`{"error": "observation_failed: ..."}`; episode_end (no reply). A server with `chunk_size` answers
each observation with one (7,) action from its chunk buffer (inference on the observation that
found the buffer empty); one without answers with what `predict` returned, e.g. a (H, 7) chunk.

What is sent is what vla-eval's LIBERO benchmark sends (`vla_eval.benchmarks.libero`):
`images.agentview` (256x256, rotated 180 degrees: this harness's convention already),
`images.wrist` (robot0_eye_in_hand, same) when the server asks for it, `task_description`, and
`states` (8-d eef position, axis-angle, gripper) when the server asks for it: the observation's
state on the openpi-compat track, else zeros(8) as the openpi adapter sends (the profile says so).
vla-eval's `controller_states` (X-VLA) is not sent. episode_start carries `{"task": {"name":
language}}` (the adapter is not told the suite or the init index).

One reply, one call: an (H, 7) reply is returned as the chunk (the harness executes its first K).
A (7,) reply is one action: with `actions_per_call` n > 1 the client re-sends the same observation
(its encoded bytes, a new seq) until it holds n actions, which a chunk-buffered server answers
from its buffer without inference. With n = K (the replan interval) and n dividing the server's
chunk_size, the model sees the same observations at the same controls and the same actions are
executed as under vla-eval's own LIBERO benchmark, which sends an observation every control; the
default n = 1 is that protocol literally (one render and one request per control).

Safety as in the openpi adapter (pytest_libero.adapters.msgpack_wire): a frame-size cap, a dtype
allow-list, shapes checked against their data, no pickle, msgpack's depth limit, a connect deadline
(refusals retried until it) and a deadline on each act (a watchdog shuts the socket; the connection
is dropped so that a late reply is never read as the next one; the next episode reconnects).
Every fault of the server raises `PolicyServerError`, a policy fault (policy_error); a server
unreachable when the policy is built stops the run (exit 4).
"""

from __future__ import annotations

import io
import threading
import time
from typing import Any, Final

import numpy as np

from pytest_libero.adapters.msgpack_wire import WireError, drop, open_websocket, shutdown, unpack
from pytest_libero.adapters.openpi import openpi_state
from pytest_libero.core.contract import Observation
from pytest_libero.errors import PolicyServerError

DEFAULT_URL: Final = "ws://127.0.0.1:8000"
DEFAULT_MAX_FRAME_BYTES: Final = 16 * 2**20
PROTOCOL_VERSION: Final = 1
MESSAGE_TYPES: Final = ("hello", "episode_start", "observation", "action", "episode_end", "error")
_EXCERPT: Final = 2000
STATE_NOTE: Final = ("states (when the server asks for them) is the track's 8-d eef state on the openpi-compat "
                     "track; zeros(8) on the others (no proprioception on the rgb track)")


def encode(obj: Any) -> Any:
    """msgpack `default` hook: vla-eval's numpy_codec encoding, images (HWC uint8, 1/3/4 channels) as PNG."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise TypeError(f"cannot send dtype {obj.dtype} over the vla-eval protocol")
        if obj.ndim == 3 and obj.dtype == np.uint8 and obj.shape[2] in (1, 3, 4):
            from PIL import Image

            buffer = io.BytesIO()
            image = obj[:, :, 0] if obj.shape[2] == 1 else obj
            Image.fromarray(np.ascontiguousarray(image)).save(buffer, format="PNG")
            return {"__image__": True, "format": "png", "data": buffer.getvalue(), "shape": list(obj.shape)}
        return {"__ndarray__": True, "data": np.ascontiguousarray(obj).tobytes(), "dtype": obj.dtype.str,
                "shape": list(obj.shape)}
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    raise TypeError(f"cannot send {type(obj).__name__} over the vla-eval protocol")


def pack(obj: Any) -> bytes:
    import msgpack

    return msgpack.packb(obj, default=encode, use_bin_type=True)  # type: ignore[no-any-return]


def frame(kind: str, payload_bytes: bytes, seq: int) -> bytes:
    """One message whose payload is already packed: a msgpack map of 4, spliced (no re-encoding)."""
    return (b"\x84" + pack("type") + pack(kind) + pack("payload") + payload_bytes + pack("seq") + pack(seq)
            + pack("timestamp") + pack(time.time()))


class VlaEvalPolicy:
    """Client of a vla-eval model server; connects (and says hello) in the constructor to fail fast."""

    def __init__(self, url: str | None = None, host: str | None = None, port: int | None = None,
                 connect_timeout_s: float = 10.0, request_timeout_s: float = 60.0,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, actions_per_call: int = 1,
                 send_wrist_image: bool | None = None, send_state: bool | None = None) -> None:
        if not (connect_timeout_s > 0 and request_timeout_s > 0 and max_frame_bytes > 0):
            raise ValueError("connect_timeout_s, request_timeout_s and max_frame_bytes must be positive")
        if type(actions_per_call) is not int or actions_per_call < 1:
            raise ValueError(f"actions_per_call={actions_per_call!r} must be an int >= 1 (set it to the replan "
                             "interval K, a divisor of the server's chunk_size)")
        if url is not None and (host is not None or port is not None):
            raise ValueError(f"give url={url!r} or host/port, not both")
        if url is None:
            url = DEFAULT_URL if host is None and port is None else f"{host or '127.0.0.1'}:{port or 8000}"
        self.url = url if url.startswith(("ws://", "wss://")) else f"ws://{url}"
        self.connect_timeout_s, self.request_timeout_s = connect_timeout_s, request_timeout_s
        self.max_frame_bytes, self.actions_per_call = max_frame_bytes, actions_per_call
        self._ws: Any = None
        self._seq = 0
        self._language = ""
        self._in_episode = False
        self.server_info: dict[str, Any] = {}
        self._connect()
        params = self.server_info.get("observation_params")
        params = params if isinstance(params, dict) else {}
        self.send_wrist_image = bool(params.get("send_wrist_image", False)) if send_wrist_image is None \
            else send_wrist_image
        self.send_state = bool(params.get("send_state", False)) if send_state is None else send_state
        self.profile: dict[str, Any] = {
            "label": f"vla-eval model server {self.server_info.get('model_server', '?')} at {self.url}",
            "adapter": "vla-eval", "server": self.url, "isolation": "remote",
            "actions_per_call": actions_per_call,
            "images": "agentview" + (" and wrist" if self.send_wrist_image else "") + ", 256x256 rotated-180, PNG",
            "state": STATE_NOTE if self.send_state else "absent: states not sent",
            "server_info": repr(self.server_info)[:500],
        }

    # -- connection ---------------------------------------------------------------------------

    def _connect(self) -> None:
        deadline = time.monotonic() + self.connect_timeout_s
        ws = open_websocket(
            self.url, self.connect_timeout_s, self.max_frame_bytes, None, self._unreachable,
            lambda status: PolicyServerError(f"vla-eval server at {self.url} refused the websocket handshake: "
                                             f"HTTP {status}"))
        self._ws = ws
        self._in_episode = False
        try:
            hello = pack({"protocol_version": PROTOCOL_VERSION, "harness": "pytest-libero", "benchmark": "libero"})
            reply = self._exchange([frame("hello", hello, self._next_seq())], "hello reply", self.connect_timeout_s,
                                   max(deadline, time.monotonic() + 0.01))
            if reply["type"] != "hello" or not isinstance(reply["payload"], dict):
                raise PolicyServerError(f"vla-eval server at {self.url} answered hello with {reply['type']!r}")
        except PolicyServerError:
            self._drop()
            raise
        self.server_info = reply["payload"]

    def _unreachable(self, why: str) -> PolicyServerError:
        return PolicyServerError(f"vla-eval model server unreachable at {self.url} within {self.connect_timeout_s:g} s "
                                 f"({why}); start the server (vla-eval serve ...) or fix url")

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _drop(self, graceful: bool = False) -> None:
        """Forget the connection; a late reply on it can never be read (the next episode reconnects)."""
        ws, self._ws = self._ws, None
        self._in_episode = False
        drop(ws, graceful)

    def _exchange(self, frames: list[bytes], what: str | None, limit_s: float, deadline: float | None = None) -> Any:
        """Send `frames`, then (when `what`) read one message, all by `deadline` (default: `limit_s` from
        now; `limit_s` is the limit messages name); any fault drops the connection and raises
        PolicyServerError."""
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            raise PolicyServerError(f"no connection to {self.url}: an earlier fault in this episode dropped it")
        ws, expired = self._ws, threading.Event()

        def expire() -> None:  # send() has no timeout in websockets' sync API
            expired.set()
            shutdown(ws)

        deadline = time.monotonic() + limit_s if deadline is None else deadline
        watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            for data in frames:
                ws.send(data)
            if what is None:
                return None
            try:
                data = ws.recv(timeout=max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                raise PolicyServerError(f"no {what} from vla-eval server at {self.url} within {limit_s:g} s; "
                                        "connection dropped (a late reply is never read)") from None
            except ConnectionClosed as exc:
                if expired.is_set():
                    raise
                raise PolicyServerError(self._closed_message(exc, what)) from None
            return self._message(data, what)
        except Exception as exc:  # noqa: BLE001 - whatever broke, this connection is done
            self._drop()
            if expired.is_set():
                raise PolicyServerError(f"no {what or 'send'} from vla-eval server at {self.url} within "
                                        f"{limit_s:g} s; connection dropped (a late reply is never read)") from None
            if isinstance(exc, PolicyServerError):
                raise
            raise PolicyServerError(f"sending to the vla-eval server at {self.url} failed "
                                    f"({type(exc).__name__}: {exc})") from None
        finally:
            watchdog.cancel()

    def _closed_message(self, exc: Any, what: str) -> str:
        if exc.rcvd is None and exc.sent is not None and exc.sent.code == 1009:
            return (f"vla-eval server at {self.url} sent a frame larger than max_frame_bytes="
                    f"{self.max_frame_bytes} instead of the {what}; connection closed")
        code = exc.rcvd.code if exc.rcvd is not None else None
        reason = f" ({exc.rcvd.reason})" if exc.rcvd is not None and exc.rcvd.reason else ""
        return f"vla-eval server at {self.url} closed the connection (code {code}{reason}) before the {what}"

    def _message(self, data: Any, what: str) -> dict[str, Any]:
        """A decoded, well-formed message; the server's own error message is raised as such."""
        if isinstance(data, str):
            text = data if len(data) <= _EXCERPT else data[:_EXCERPT] + "..."
            raise PolicyServerError(f"vla-eval server at {self.url} sent a text frame instead of the {what}: {text}")
        try:
            message = unpack(data)
        except WireError as exc:
            raise PolicyServerError(f"vla-eval server at {self.url} sent a bad {what}: {exc}") from None
        if (not isinstance(message, dict) or message.get("type") not in MESSAGE_TYPES
                or not isinstance(message.get("payload"), dict) or type(message.get("seq")) is not int):
            shown = sorted(map(str, message)) if isinstance(message, dict) else type(message).__name__
            raise PolicyServerError(f"vla-eval server at {self.url} sent a {what} that is not a vla-eval message "
                                    f"(type, payload, seq): {shown!r:.300}")
        if message["type"] == "error":
            detail = str(message["payload"].get("error", message["payload"]))
            detail = detail if len(detail) <= _EXCERPT else detail[:_EXCERPT] + "..."
            raise PolicyServerError(f"vla-eval server at {self.url} answered with an error: {detail}")
        return message

    # -- Policy -------------------------------------------------------------------------------

    def reset(self, language: str) -> None:
        """End the previous episode (episode_end), reconnecting if a fault dropped the connection, and
        start this one (episode_start, which resets the server's chunk buffer)."""
        self._language = language
        if self._ws is None:
            self._connect()
        frames = [frame("episode_end", pack({}), self._next_seq())] if self._in_episode else []
        frames.append(frame("episode_start", pack({"task": {"name": language}}), self._next_seq()))
        self._exchange(frames, None, self.request_timeout_s)
        self._in_episode = True

    def observation_payload(self, observation: Observation) -> dict[str, Any]:
        """What vla-eval's LIBERO benchmark sends for this observation."""
        images = {"agentview": np.asarray(observation.images["agentview"])}
        if self.send_wrist_image:
            images["wrist"] = np.asarray(observation.images["robot0_eye_in_hand"])
        payload: dict[str, Any] = {"images": images, "task_description": self._language or observation.language}
        if self.send_state:
            payload["states"] = openpi_state(observation)
        return payload

    def act(self, observation: Observation) -> Any:
        """Send the observation (again, up to actions_per_call times while the server answers one action
        each); return the server's chunk, or the actions collected. The whole call has one deadline."""
        body = pack(self.observation_payload(observation))
        deadline = time.monotonic() + self.request_timeout_s
        collected: list[np.ndarray] = []
        while True:
            seq = self._next_seq()
            reply = self._exchange([frame("observation", body, seq)], "action reply", self.request_timeout_s, deadline)
            actions = self._actions(reply, seq)
            if actions.ndim == 2:
                if collected:
                    self._drop()
                    raise PolicyServerError(f"vla-eval server at {self.url} answered a {actions.shape} chunk after "
                                            f"{len(collected)} single actions in one call")
                return actions
            collected.append(actions)
            if len(collected) == self.actions_per_call:
                return collected[0] if len(collected) == 1 else np.stack(collected)

    def _actions(self, reply: dict[str, Any], seq: int) -> np.ndarray:
        if reply["type"] != "action" or reply["seq"] != seq:
            self._drop()
            raise PolicyServerError(f"vla-eval server at {self.url} answered observation {seq} with "
                                    f"{reply['type']!r} {reply['seq']!r}")
        actions = reply["payload"].get("actions")
        if not isinstance(actions, np.ndarray) or actions.ndim not in (1, 2) or actions.shape[-1] != 7 \
                or actions.shape[0] == 0:
            self._drop()
            shown = getattr(actions, "shape", type(actions).__name__)
            raise PolicyServerError(f"vla-eval server at {self.url} replied actions {shown!r:.300}, not one (7,) "
                                    "action or an (n, 7) chunk")
        return actions

    def close(self) -> None:
        """End the open episode (episode_end) and close the connection (normal closure)."""
        if self._ws is not None and self._in_episode:
            try:
                self._exchange([frame("episode_end", pack({}), self._next_seq())], None, 1.0)
            except PolicyServerError:
                return
        self._drop(graceful=True)
