"""A peer for tests/test_channel.py, run as `python -m channel_peer FD` (tests/ on PYTHONPATH)."""

from __future__ import annotations

import os
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from pytest_libero.runtime.channel import serve


def handle(op: str, payload: Any) -> Any:
    if op == "echo":
        return payload
    if op == "raise":
        raise RuntimeError(payload)
    if op == "hang":
        threading.Event().wait()
    if op == "exit":
        os._exit(payload)
    if op == "signal":
        os.kill(os.getpid(), payload)
    if op == "close":
        return "closing"
    raise ValueError(f"unknown request {op!r}")


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])), handle)
    # Ended by `close` or EOF: say so through the exit code.
    sys.exit(7)
