"""`--libero-policy openvla-rest`: a remote policy served by OpenVLA's REST server.

Wire protocol (openvla/openvla `vla-scripts/deploy.py`): `POST /act` with a JSON body in which
numpy arrays travel in json_numpy's encoding, `{"__numpy__": <base64 of the C-order bytes>,
"dtype": <numpy dtype string>, "shape": [...]}`; the body is `{"image": uint8 HxWx3,
"instruction": str}` plus an optional `"unnorm_key"`. The reply is one action (a 7-d array in the
same encoding). deploy.py answers the JSON string "error" (HTTP 200) when inference raised, and
a FastAPI server answers 4xx/5xx on other faults.

What this client adds to the documented one (requests + json_numpy): a connect deadline (refusals
are retried until it), a whole-request deadline enforced by a watchdog that shuts the socket down
(a server that trickles bytes cannot hold the run), a fresh connection per request (a late reply
to an abandoned request can never be read as the next one), a reply-size cap, and its own decoder.

Why not json_numpy's decoder (json-numpy 2.1.1, tried before deciding; tests/test_openvla_rest.py
keeps the comparison): it does refuse object dtype, but only because numpy cannot build an object
array from a buffer (a bare ValueError); it builds complex, unicode, datetime, void and structured
arrays, reshapes without checking the size first, and decodes any size (64 MiB in 2 s, no bound).
The decoder here accepts bool, int, uint and float dtypes only, checks the shape against the
data before building anything, and never sees more than `max_reply_bytes`.

Model-side conventions of OpenVLA's LIBERO evaluator are this adapter's (the `openvla` preset's
adapter duties): agentview only; JPEG round trip, resize to 224x224 (Lanczos), center crop of 0.9
of the area resized back to 224x224; the reply's gripper in [0, 1] (1 = open) mapped to [-1, 1],
binarized and inverted to LIBERO's -1 open / +1 close. The image steps use PIL where OpenVLA uses
TensorFlow: close, not bit-identical.
"""

from __future__ import annotations

import base64
import binascii
import http.client
import io
import json
import math
import re
import socket
import threading
import time
from typing import Any, Final

import numpy as np

from pytest_libero.core.contract import Observation
from pytest_libero.errors import PolicyServerError

DEFAULT_MAX_REPLY_BYTES: Final = 1 * 2**20  # one 7-d action is about 100 bytes
# Real numbers and bools only, any byte order (the openpi adapter's whitelist).
_DTYPE_RE: Final = re.compile(r"[<>|=]?(b1|[iu][1248]|f[248])")
_MAX_NDIM: Final = 8
_EXCERPT: Final = 300
CROP_SCALE: Final = 0.9  # OpenVLA's center crop keeps 0.9 of the image area


class WireError(ValueError):
    """A reply that breaks json_numpy's encoding or this adapter's limits."""


def encode(obj: Any) -> Any:
    """`json.dumps` default hook: numpy arrays and scalars in json_numpy's encoding."""
    if isinstance(obj, (np.ndarray, np.generic)):
        if obj.dtype.kind in "VOcSUMm":
            raise TypeError(f"cannot send dtype {obj.dtype} in json_numpy's encoding")
        array = np.ascontiguousarray(obj)
        return {"__numpy__": base64.b64encode(array.tobytes()).decode("ascii"), "dtype": array.dtype.str,
                "shape": list(array.shape)}
    raise TypeError(f"cannot send {type(obj).__name__} as JSON")


def dumps(obj: Any) -> bytes:
    """A JSON body in json_numpy's encoding."""
    return json.dumps(obj, default=encode).encode()


def _decode_array(obj: dict[str, Any]) -> Any:
    """`json.loads` object hook: an array only after its dtype, shape and size check out."""
    if "__numpy__" not in obj:
        return obj
    dtype_text, shape, data = obj.get("dtype"), obj.get("shape"), obj.get("__numpy__")
    if not isinstance(dtype_text, str) or not _DTYPE_RE.fullmatch(dtype_text):
        raise WireError(f"array dtype {dtype_text!r:.80} is not accepted (only bool, int, uint and float)")
    if (not isinstance(shape, list) or len(shape) > _MAX_NDIM
            or not all(type(d) is int and d >= 0 for d in shape)):
        raise WireError(f"array shape {shape!r:.80} is not a list of at most {_MAX_NDIM} non-negative ints")
    if not isinstance(data, str):
        raise WireError(f"array data is {type(data).__name__}, not a base64 string")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WireError(f"array data is not base64 ({exc})") from None
    dtype = np.dtype(dtype_text)
    if math.prod(shape) * dtype.itemsize != len(raw):
        raise WireError(f"array of shape {tuple(shape)} and dtype {dtype.str} needs "
                        f"{math.prod(shape) * dtype.itemsize} bytes, the reply carries {len(raw)}")
    return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="), copy=True).reshape(shape)


def loads(body: bytes) -> Any:
    """Decode a reply defensively; every defect is a `WireError`."""
    try:
        return json.loads(body, object_hook=_decode_array)
    except WireError:
        raise
    except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, absurd nesting
        raise WireError(f"malformed JSON ({type(exc).__name__}: {str(exc)[:_EXCERPT]})") from None


def openvla_image(image: np.ndarray, size: int = 224, center_crop: bool = True) -> np.ndarray:
    """OpenVLA's LIBERO preprocessing, in PIL: JPEG round trip, Lanczos resize to size x size, then
    the center crop of CROP_SCALE of the area resized back (bilinear)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.asarray(image)).save(buffer, format="JPEG", quality=95)
    pil = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB").resize((size, size), Image.Resampling.LANCZOS)
    if center_crop:
        side = size * math.sqrt(CROP_SCALE)
        offset = (size - side) / 2
        pil = pil.resize((size, size), Image.Resampling.BILINEAR, box=(offset, offset, offset + side, offset + side))
    return np.asarray(pil, dtype=np.uint8)


def libero_gripper(actions: np.ndarray) -> np.ndarray:
    """OpenVLA's gripper [0, 1] (1 = open) to LIBERO's: 2g - 1, binarized with sign, inverted
    (-1 open, +1 close), as OpenVLA's LIBERO evaluator does before stepping."""
    out = np.array(actions, dtype=np.float64)
    gripper = 2.0 * out[..., -1] - 1.0
    out[..., -1] = -np.where(gripper >= 0.0, 1.0, -1.0)
    return out


class OpenVLARestPolicy:
    """Client of OpenVLA's REST server (`vla-scripts/deploy.py`); checks reachability in the constructor."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8000, unnorm_key: str | None = None,
                 connect_timeout_s: float = 10.0, request_timeout_s: float = 60.0,
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES, image_size: int = 224, center_crop: bool = True,
                 convert_gripper: bool = True) -> None:
        if not (connect_timeout_s > 0 and request_timeout_s > 0 and max_reply_bytes > 0 and image_size > 0):
            raise ValueError("connect_timeout_s, request_timeout_s, max_reply_bytes and image_size must be positive")
        self.host, self.port, self.unnorm_key = host, int(port), unnorm_key
        self.url = f"http://{host}:{self.port}/act"
        self.connect_timeout_s, self.request_timeout_s = connect_timeout_s, request_timeout_s
        self.max_reply_bytes, self.image_size = max_reply_bytes, image_size
        self.center_crop, self.convert_gripper = center_crop, convert_gripper
        self._instruction = ""
        self._connect(time.monotonic() + connect_timeout_s).close()  # fail fast on a wrong host/port
        self.profile: dict[str, Any] = {
            "kind": "capability", "label": f"OpenVLA REST policy at {self.url}", "adapter": "openvla-rest",
            "server": self.url, "unnorm_key": unnorm_key, "isolation": "remote", "image_convention": "rotated-180",
            "preprocessing": (f"agentview only; JPEG round trip, Lanczos resize to {image_size}x{image_size}"
                              + (", center crop 0.9 of the area" if center_crop else "") + " (PIL)"),
            "gripper": ("OpenVLA [0, 1] (1 open) -> binarized, inverted LIBERO [-1 open, +1 close]"
                        if convert_gripper else "as the server returns it"),
        }

    # -- transport ------------------------------------------------------------------------------

    def _connect(self, deadline: float) -> http.client.HTTPConnection:
        """A connected HTTPConnection; refusals (a server still starting) are retried until the deadline."""
        delay = 0.05
        while True:
            remaining = deadline - time.monotonic()
            connection = http.client.HTTPConnection(self.host, self.port, timeout=max(remaining, 0.01))
            try:
                connection.connect()
                return connection
            except (ConnectionRefusedError, ConnectionResetError) as exc:
                connection.close()
                if time.monotonic() + delay >= deadline:
                    raise self._unreachable(f"{type(exc).__name__}: {exc}") from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            except OSError as exc:  # socket.timeout is an OSError; so are DNS failures
                connection.close()
                raise self._unreachable(f"{type(exc).__name__}: {exc}") from None

    def _unreachable(self, why: str) -> PolicyServerError:
        return PolicyServerError(f"OpenVLA REST server unreachable at {self.url} within {self.connect_timeout_s:g} s "
                                 f"({why}); start vla-scripts/deploy.py or fix host/port")

    def _timed_out(self) -> PolicyServerError:
        return PolicyServerError(f"no reply from the OpenVLA REST server at {self.url} within "
                                 f"{self.request_timeout_s:g} s; request abandoned (its connection closed)")

    def request(self, payload: dict[str, Any]) -> Any:
        """One POST /act under the request deadline; returns the decoded reply."""
        body = dumps(payload)
        deadline = time.monotonic() + self.request_timeout_s
        connection = self._connect(min(deadline, time.monotonic() + self.connect_timeout_s))
        # Kept here: http.client drops connection.sock once the response says it will close, while
        # the response goes on reading from the same socket.
        sock = connection.sock
        expired = threading.Event()

        def expire() -> None:  # send, header parsing and body reads all fail once the socket is shut
            expired.set()
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        watchdog = threading.Timer(self.request_timeout_s, expire)
        watchdog.daemon = True
        watchdog.start()
        response: http.client.HTTPResponse | None = None
        try:
            sock.settimeout(self.request_timeout_s)
            connection.request("POST", "/act", body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            status, reason = response.status, response.reason
            length = response.getheader("Content-Length")
            if length is not None and length.isdecimal() and int(length) > self.max_reply_bytes:
                raise PolicyServerError(f"OpenVLA REST server at {self.url} announced a {length}-byte reply, over "
                                        f"max_reply_bytes={self.max_reply_bytes}")
            data = response.read(self.max_reply_bytes + 1)
        except PolicyServerError:
            raise
        except (OSError, http.client.HTTPException) as exc:
            # The socket's own timeout (one operation waited request_timeout_s) may fire before the
            # watchdog's thread runs: either way, no reply came within the request's time.
            if expired.is_set() or isinstance(exc, TimeoutError):
                raise self._timed_out() from None
            raise PolicyServerError(f"POST {self.url} failed ({type(exc).__name__}: {exc})") from None
        finally:
            watchdog.cancel()
            if response is not None:
                response.close()
            connection.close()
        if expired.is_set():
            raise self._timed_out()
        if len(data) > self.max_reply_bytes:
            raise PolicyServerError(f"OpenVLA REST server at {self.url} sent a reply larger than "
                                    f"max_reply_bytes={self.max_reply_bytes}")
        if status != 200:
            text = data[:_EXCERPT].decode("utf-8", "replace")
            raise PolicyServerError(f"OpenVLA REST server at {self.url} answered HTTP {status} {reason}: {text}")
        try:
            reply = loads(data)
            if isinstance(reply, str) and reply != "error":  # deploy.py's double-encoded reply
                reply = loads(reply.encode())
        except WireError as exc:
            raise PolicyServerError(f"OpenVLA REST server at {self.url} sent a bad reply: {exc}") from None
        if isinstance(reply, str) and reply == "error":
            raise PolicyServerError(f"OpenVLA REST server at {self.url} answered \"error\": inference raised on the "
                                    "server (deploy.py logs the traceback there)")
        return reply

    # -- Policy ---------------------------------------------------------------------------------

    def reset(self, language: str) -> None:
        """The REST wire has no reset; remember the instruction."""
        self._instruction = language

    def act(self, observation: Observation) -> Any:
        """Send the agentview image and the instruction; return the server's action (LIBERO gripper)."""
        payload: dict[str, Any] = {
            "image": openvla_image(np.asarray(observation.images["agentview"]), self.image_size, self.center_crop),
            "instruction": self._instruction or observation.language,
        }
        if self.unnorm_key is not None:
            payload["unnorm_key"] = self.unnorm_key
        reply = self.request(payload)
        try:  # numbers only: a list of strings or dicts is not an action
            actions = np.asarray(reply) if isinstance(reply, (list, np.ndarray)) else None
        except (TypeError, ValueError):  # a ragged list
            actions = None
        if actions is not None and actions.dtype.kind not in "biuf":
            actions = None
        if actions is None or actions.ndim not in (1, 2) or actions.shape[-1] != 7:
            shown = getattr(actions, "shape", None) if actions is not None else type(reply).__name__
            raise PolicyServerError(f"OpenVLA REST server at {self.url} replied {shown!r:.{_EXCERPT}}, not one 7-d "
                                    "action (or an (n, 7) chunk)")
        return libero_gripper(actions) if self.convert_gripper else actions

    def close(self) -> None:
        """Nothing is held between requests."""
