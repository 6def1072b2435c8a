"""The policy's wire: pickles whose numpy arrays travel as raw bytes, readable by any numpy.

The policy's own interpreter (`--libero-policy-python`) may run another numpy than this suite's
(numpy 2 beside the suite's 1.26). numpy's own pickles name its private modules, which moved in
2.0 (`numpy.core` -> `numpy._core`): a protocol-5 pickle of a numpy-2 array does not load under
numpy 1.x, and one of a numpy-1 array warns under 2.x. So on the policy's channels every plain
ndarray is reduced here to (dtype, shape, bytes) and every numpy scalar to (dtype, bytes), rebuilt
by `rebuild_array` / `rebuild_scalar` of this module, which both ends have; everything else
pickles as usual, at a fixed protocol (4) that every supported Python reads. Standard library
and numpy only: this module is loaded by the policy's interpreter.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np

PROTOCOL = 4


def _dtype_code(dtype: np.dtype[Any]) -> Any:
    """What rebuilds `dtype` under any numpy: its descr for structured types, else its string."""
    return dtype.descr if dtype.fields is not None else dtype.str


def rebuild_array(dtype: Any, shape: tuple[int, ...], data: bytes) -> np.ndarray[Any, Any]:
    """The array `_Pickler` reduced (writable, C-contiguous)."""
    return np.frombuffer(bytearray(data), dtype=np.dtype(dtype)).reshape(shape)


def rebuild_object_array(shape: tuple[int, ...], items: list[Any]) -> np.ndarray[Any, Any]:
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array.reshape(shape)


def rebuild_scalar(dtype: Any, data: bytes) -> Any:
    return np.frombuffer(data, dtype=np.dtype(dtype))[0]


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:  # noqa: D102 - pickle's hook
        kind = type(obj)
        if kind is np.ndarray:
            if obj.dtype.hasobject:
                return rebuild_object_array, (obj.shape, list(obj.ravel()))
            return rebuild_array, (_dtype_code(obj.dtype), obj.shape, obj.tobytes())
        if isinstance(obj, np.generic) and not obj.dtype.hasobject:
            return rebuild_scalar, (_dtype_code(obj.dtype), obj.tobytes())
        if isinstance(obj, np.dtype):
            return np.dtype, (_dtype_code(obj),)
        return NotImplemented


def dumps(obj: Any) -> bytes:
    """`obj` pickled with numpy's values as raw bytes (see the module docstring)."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=PROTOCOL).dump(obj)
    return buffer.getvalue()


def loads(data: bytes) -> Any:
    return pickle.loads(data)


def send(conn: Any, obj: Any) -> None:
    """Send `obj` over a multiprocessing Connection in this wire's pickling."""
    conn.send_bytes(dumps(obj))


def recv(conn: Any) -> Any:
    """Receive what `send` sent (EOFError or OSError when the peer is gone)."""
    return loads(conn.recv_bytes())
