"""Child interpreters spoken to over a socket pair: the bench service and an isolated policy.

A fresh interpreter (not fork): nothing of the parent's heap exists in the child, and the
caller needs no `if __name__ == "__main__"` guard. The child module is run as
`python -m MODULE FD` and wraps FD in a multiprocessing Connection.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from multiprocessing.connection import Connection

from pytest_libero.core.benchmark import SERVICE_PYTHON_ENV


def spawn(module: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], Connection]:
    """Start `python -m module FD`; return the process and the parent's end of the pipe.

    The interpreter is this one unless `env` names another (SERVICE_PYTHON_ENV)."""
    parent, child = socket.socketpair()
    python = (env or {}).get(SERVICE_PYTHON_ENV) or sys.executable
    with child:
        process = subprocess.Popen([python, "-m", module, str(child.fileno())],
                                   pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
                                   env=dict(os.environ, **env) if env else None)
    return process, Connection(parent.detach())


def stop(process: subprocess.Popen[bytes] | None, conn: Connection | None) -> None:
    """Close the pipe and kill the child if it is still running."""
    if conn is not None:
        conn.close()
    if process is not None:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
