"""What the websocket policy adapters (openpi, vla-eval) share: msgpack-numpy decoding, and opening
and dropping a connection.

Both wires carry numpy arrays as a map `{"__ndarray__": True, "data": bytes, "dtype": dtype.str,
"shape": [...]}`: openpi's msgpack_numpy with bytes keys, vla-eval's numpy_codec with str keys.
`decode_array` reads either: it rebuilds an array only after its dtype (bool, int, uint and float,
any byte order; object, void, complex, strings and structured dtypes never reach np.dtype()), its
shape (at most 8 non-negative ints) and its size (shape times itemsize equals the data) check out.
`unpack` bounds nothing by itself: the frame size is the websocket's `max_size`, and msgpack's own
stack limit refuses deep nesting (as malformed msgpack). No pickle anywhere.
"""

from __future__ import annotations

import math
import re
import socket
import time
from typing import Any, Callable, Final

import numpy as np

# Real numbers and bools only, any byte order.
DTYPE_RE: Final = re.compile(r"[<>|=]?(b1|[iu][1248]|f[248])")
MAX_NDIM: Final = 8


class WireError(ValueError):
    """A reply that breaks the msgpack-numpy encoding."""


def _field(obj: dict[Any, Any], name: str, as_bytes: bool) -> Any:
    return obj.get(name.encode() if as_bytes else name)


def checked_dtype(text: Any) -> np.dtype[Any]:
    if not isinstance(text, str) or not DTYPE_RE.fullmatch(text):
        raise WireError(f"array dtype {text!r:.80} is not accepted (only bool, int, uint and float)")
    return np.dtype(text)


def decode_array(obj: dict[Any, Any]) -> Any:
    """msgpack `object_hook`: an array (or numpy scalar) map of either key type, checked first.

    The result is a writeable, native-byte-order copy (the reference decoders return read-only
    views on the frame, or trust the shape).
    """
    for as_bytes in (True, False):
        if (b"__ndarray__" if as_bytes else "__ndarray__") in obj:
            dtype = checked_dtype(_field(obj, "dtype", as_bytes))
            shape, data = _field(obj, "shape", as_bytes), _field(obj, "data", as_bytes)
            if (not isinstance(shape, (list, tuple)) or len(shape) > MAX_NDIM
                    or not all(type(d) is int and d >= 0 for d in shape)):
                raise WireError(f"array shape {shape!r:.80} is not a list of at most {MAX_NDIM} non-negative ints")
            if not isinstance(data, bytes):
                raise WireError(f"array data is {type(data).__name__}, not bytes")
            if math.prod(shape) * dtype.itemsize != len(data):
                raise WireError(f"array of shape {tuple(shape)} and dtype {dtype.str} needs "
                                f"{math.prod(shape) * dtype.itemsize} bytes, the frame carries {len(data)}")
            flat = np.frombuffer(data, dtype=dtype)
            return flat.astype(dtype.newbyteorder("="), copy=True).reshape(shape)
        if (b"__npgeneric__" if as_bytes else "__npgeneric__") in obj:
            dtype = checked_dtype(_field(obj, "dtype", as_bytes))
            value = _field(obj, "data", as_bytes)
            if isinstance(value, (bytes, str, list, dict)) or value is None:
                raise WireError(f"numpy scalar data {value!r:.80} is not a number")
            return dtype.type(value)
    return obj


def unpack(frame: bytes) -> Any:
    """Decode a message defensively; every defect is a `WireError`."""
    import msgpack

    try:
        return msgpack.unpackb(frame, object_hook=decode_array, raw=False, strict_map_key=True)
    except WireError:
        raise
    except Exception as exc:  # noqa: BLE001 - msgpack raises several types for bad input
        raise WireError(f"malformed msgpack ({type(exc).__name__}: {exc})") from None


def open_websocket(uri: str, connect_timeout_s: float, max_frame_bytes: int, headers: dict[str, str] | None,
                   unreachable: Callable[[str], Exception], refused: Callable[[int], Exception]) -> Any:
    """A sync websocket client connection to `uri`, refusals retried until `connect_timeout_s`.

    `unreachable(why)` is raised when the deadline passes or the network fails, `refused(status)`
    when the server answers the handshake with an HTTP error. ping_interval=None: a model server
    may run inference on its event loop and miss keepalive pongs; liveness is the request
    deadline's job. __enter__ marks the connection as managed (websockets >= 17.1 warns
    otherwise); `drop` ends it.
    """
    from websockets.exceptions import InvalidStatus, WebSocketException
    from websockets.sync.client import connect

    deadline = time.monotonic() + connect_timeout_s
    delay = 0.05
    while True:
        remaining = deadline - time.monotonic()
        try:
            return connect(uri, open_timeout=max(remaining, 0.01), max_size=max_frame_bytes, compression=None,
                           proxy=None, ping_interval=None, close_timeout=1.0, additional_headers=headers).__enter__()
        except (ConnectionRefusedError, ConnectionResetError) as exc:
            # A server still starting refuses connections: retry until the deadline.
            if time.monotonic() + delay >= deadline:
                raise unreachable(f"{type(exc).__name__}: {exc}") from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        except InvalidStatus as exc:
            raise refused(exc.response.status_code) from None
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise unreachable(f"{type(exc).__name__}: {exc}") from None


def drop(ws: Any, graceful: bool = False) -> None:
    """Close `ws`: without a closing handshake unless `graceful` (a server that broke the protocol gets
    none), and release the descriptor now, so a server still writing to it gets a reset."""
    if ws is None:
        return
    if not graceful:
        shutdown(ws)
    try:
        ws.close()
    except Exception:  # noqa: BLE001 - best effort on an already broken connection
        pass
    try:
        ws.socket.close()
    except OSError:
        pass


def shutdown(ws: Any) -> None:
    """Shut a websocket's socket down both ways (a blocked send or recv then fails at once)."""
    try:
        ws.socket.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass
