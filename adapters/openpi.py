"""`--libero-policy openpi`: a remote policy served over openpi's websocket protocol.

Wire protocol (openpi's `WebsocketPolicyServer` / `openpi_client.WebsocketClientPolicy`): the
server first sends one binary msgpack frame of metadata; then strictly one request at a time,
the client sends a msgpack map of observations and the server answers a map with "actions"
(horizon x 7) and timing. numpy arrays travel as {b"__ndarray__": True, b"data": bytes,
b"dtype": dtype.str, b"shape": shape}. A server exception arrives as a text frame followed by
close code 1011.

What this client adds to the reference one: a connect deadline (refusals are retried until it),
a per-request deadline after which the connection is dropped (so a late reply to an old request
can never be read as the answer to a new one; the next episode reconnects), a frame-size cap,
and a decoder that whitelists dtypes and checks shape against the buffer before any array is
built (pytest_libero.adapters.msgpack_wire, shared with the vla-eval adapter). Every transport or
protocol fault raises `PolicyServerError`, a policy fault: the episode ends as policy_error and the
run goes on (a server unreachable when the policy is built stops the run first, exit 4).

Model-side conventions of openpi's LIBERO example are the adapter's: images are resized with
padding to 224x224 here (PIL bilinear, as `openpi_client.image_tools.resize_with_pad`), and
"observation/state" is the observation's 8-d state on the openpi-compat track, else zeros(8)
because the rgb track has no proprioception (recorded in the profile; `zero_state=False` omits
the key instead).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Final

import numpy as np

from pytest_libero.core.contract import Observation
from pytest_libero.adapters.msgpack_wire import WireError, decode_array, drop, open_websocket, shutdown, unpack
from pytest_libero.errors import PolicyServerError

__all__ = ["OpenPIPolicy", "WireError", "decode_array", "encode_array", "pack", "unpack", "resize_with_pad"]

DEFAULT_MAX_FRAME_BYTES: Final = 16 * 2**20
_TEXT_EXCERPT: Final = 2000


def encode_array(obj: Any) -> Any:
    """msgpack `default` hook: numpy arrays and scalars in openpi's encoding."""
    if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in "VOcSUM":
        raise TypeError(f"cannot send dtype {obj.dtype} over the openpi protocol")
    if isinstance(obj, np.ndarray):
        return {b"__ndarray__": True, b"data": np.ascontiguousarray(obj).tobytes(), b"dtype": obj.dtype.str,
                b"shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"cannot send {type(obj).__name__} over the openpi protocol")


def pack(obj: Any) -> bytes:
    """Encode a message as openpi does (msgpack, arrays via `encode_array`)."""
    import msgpack

    return msgpack.packb(obj, default=encode_array)  # type: ignore[no-any-return]


def resize_with_pad(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear resize keeping the aspect ratio, centred on zeros (openpi's resize_with_pad)."""
    if image.shape[:2] == (height, width):
        return image
    from PIL import Image

    pil = Image.fromarray(image)
    ratio = max(pil.width / width, pil.height / height)
    new_w, new_h = int(pil.width / ratio), int(pil.height / ratio)
    canvas = Image.new(pil.mode, (width, height), 0)
    canvas.paste(pil.resize((new_w, new_h), resample=Image.Resampling.BILINEAR),
                 (max(0, (width - new_w) // 2), max(0, (height - new_h) // 2)))
    return np.asarray(canvas)


STATE_NOTE: Final = ("observation/state is the track's 8-d eef state on the openpi-compat track; "
                     "absent on the others, where zeros(8) are sent (no proprioception on the rgb track)")


def openpi_state(observation: Observation) -> np.ndarray:
    """The 8-d state openpi's LIBERO models expect: the openpi-compat track's, else zeros."""
    state = getattr(observation, "state", None)  # the field exists only with observation tracks
    if isinstance(state, np.ndarray) and state.shape == (8,):
        return np.array(state, dtype=np.float64)
    return np.zeros(8, dtype=np.float64)


class OpenPIPolicy:
    """Client of an openpi policy server; connects in the constructor to fail fast."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = 8000, api_key: str | None = None,
                 connect_timeout_s: float = 10.0, request_timeout_s: float = 60.0,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, image_size: int = 224,
                 zero_state: bool = True) -> None:
        if not (connect_timeout_s > 0 and request_timeout_s > 0 and max_frame_bytes > 0 and image_size > 0):
            raise ValueError("connect_timeout_s, request_timeout_s, max_frame_bytes and image_size must be positive")
        self.uri = host if host.startswith(("ws://", "wss://")) else f"ws://{host}"
        if port is not None:
            self.uri += f":{port}"
        self.api_key, self.image_size, self.zero_state = api_key, image_size, zero_state
        self.connect_timeout_s, self.request_timeout_s = connect_timeout_s, request_timeout_s
        self.max_frame_bytes = max_frame_bytes
        self._ws: Any = None
        self._prompt = ""
        self.server_metadata: Any = None
        self.last_server_timing: Any = None
        self._connect()
        self.profile: dict[str, Any] = {
            "label": f"openpi remote policy at {self.uri}", "adapter": "openpi", "server": self.uri,
            "image_size": image_size, "isolation": "remote",
            "state": (STATE_NOTE if zero_state else "absent: observation/state not sent"),
            "server_metadata": repr(self.server_metadata)[:500],
        }

    # -- connection ---------------------------------------------------------------------------

    def _connect(self) -> None:
        headers = {"Authorization": f"Api-Key {self.api_key}"} if self.api_key else None
        deadline = time.monotonic() + self.connect_timeout_s
        self._ws = open_websocket(
            self.uri, self.connect_timeout_s, self.max_frame_bytes, headers, self._unreachable,
            lambda status: PolicyServerError(f"openpi server at {self.uri} refused the websocket handshake: "
                                             f"HTTP {status}"))
        try:
            self.server_metadata = self._receive(max(deadline, time.monotonic() + 0.01), "metadata frame",
                                                 self.connect_timeout_s)
        except PolicyServerError:
            self._drop()
            raise

    def _unreachable(self, why: str) -> PolicyServerError:
        return PolicyServerError(f"openpi policy server unreachable at {self.uri} within "
                                 f"{self.connect_timeout_s:g} s ({why}); start the server or fix host/port")

    def _drop(self, graceful: bool = False) -> None:
        """Forget the connection; a late reply on it can never be read (we reconnect next episode)."""
        ws, self._ws = self._ws, None
        drop(ws, graceful)

    def _timed_out(self, what: str, limit_s: float) -> PolicyServerError:
        return PolicyServerError(f"no {what} from openpi server at {self.uri} within {limit_s:g} s; "
                                 "connection dropped (a late reply is never read)")

    def _receive(self, deadline: float, what: str, limit_s: float) -> Any:
        from websockets.exceptions import ConnectionClosed

        try:
            frame = self._ws.recv(timeout=max(deadline - time.monotonic(), 0.0))
        except TimeoutError:
            raise self._timed_out(what, limit_s) from None
        except ConnectionClosed as exc:
            raise PolicyServerError(self._closed_message(exc, what)) from None
        if isinstance(frame, str):
            text = frame if len(frame) <= _TEXT_EXCERPT else "...\n" + frame[-_TEXT_EXCERPT:]
            raise PolicyServerError(f"openpi server at {self.uri} raised an exception "
                                    f"(a text frame instead of the {what}):\n{text}")
        try:
            return unpack(frame)
        except WireError as exc:
            raise PolicyServerError(f"openpi server at {self.uri} sent a bad {what}: {exc}") from None

    def _closed_message(self, exc: Any, what: str) -> str:
        if exc.rcvd is None and exc.sent is not None and exc.sent.code == 1009:
            return (f"openpi server at {self.uri} sent a frame larger than max_frame_bytes="
                    f"{self.max_frame_bytes} instead of the {what}; connection closed")
        code = exc.rcvd.code if exc.rcvd is not None else None
        reason = f" ({exc.rcvd.reason})" if exc.rcvd is not None and exc.rcvd.reason else ""
        return f"openpi server at {self.uri} closed the connection (code {code}{reason}) before the {what}"

    # -- Policy -------------------------------------------------------------------------------

    def reset(self, language: str) -> None:
        """openpi has no reset message; reconnect here if an earlier fault dropped the connection."""
        self._prompt = language
        if self._ws is None:
            self._connect()

    def request(self, obs: dict[str, Any]) -> dict[str, Any]:
        """One request/response exchange under the request deadline; any fault drops the connection."""
        if self._ws is None:
            raise PolicyServerError(f"no connection to {self.uri}: an earlier fault in this episode dropped it")
        payload = pack(obs)
        deadline = time.monotonic() + self.request_timeout_s
        # send() has no timeout in websockets' sync API: a watchdog shuts the socket down if the
        # server stops reading, which makes send (or recv) fail instead of blocking forever.
        ws, expired = self._ws, threading.Event()

        def expire() -> None:
            expired.set()
            shutdown(ws)

        watchdog = threading.Timer(self.request_timeout_s, expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            ws.send(payload)
            reply = self._receive(deadline, "action reply", self.request_timeout_s)
        except Exception as exc:  # noqa: BLE001 - whatever broke, this connection is done
            self._drop()
            if expired.is_set():
                raise self._timed_out("action reply", self.request_timeout_s) from None
            if isinstance(exc, PolicyServerError):
                raise
            raise PolicyServerError(f"sending the observation to {self.uri} failed "
                                    f"({type(exc).__name__}: {exc})") from None
        finally:
            watchdog.cancel()
        if expired.is_set():  # the reply raced the watchdog, which has already cut the socket
            self._drop()
            raise self._timed_out("action reply", self.request_timeout_s)
        if not isinstance(reply, dict) or not isinstance(reply.get("actions"), np.ndarray):
            self._drop()
            keys = sorted(map(str, reply)) if isinstance(reply, dict) else type(reply).__name__
            raise PolicyServerError(f"openpi server at {self.uri} replied without an 'actions' array (got {keys})")
        self.last_server_timing = reply.get("server_timing")
        return reply

    def act(self, observation: Observation) -> Any:
        """Send the LIBERO-example observation; return the server's actions (the harness validates them)."""
        size = self.image_size
        obs: dict[str, Any] = {
            "observation/image": resize_with_pad(np.asarray(observation.images["agentview"]), size, size),
            "observation/wrist_image": resize_with_pad(np.asarray(observation.images["robot0_eye_in_hand"]),
                                                       size, size),
            "prompt": self._prompt or observation.language,
        }
        if self.zero_state:
            obs["observation/state"] = openpi_state(observation)
        return self.request(obs)["actions"]

    def close(self) -> None:
        """Close the connection (normal closure, waiting at most close_timeout=1 s)."""
        self._drop(graceful=True)
