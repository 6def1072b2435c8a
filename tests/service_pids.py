"""Find this process's bench service children (Linux /proc). Tests copy it next to their policies."""

from __future__ import annotations

import os
from typing import Iterator


def service_children() -> Iterator[int]:
    me = os.getpid()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if ppid == me and b"pytest_libero.runtime.server" in cmd:
            yield int(pid)
