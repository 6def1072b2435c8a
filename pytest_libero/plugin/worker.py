"""The name this process records as its worker: xdist's own id for it, or "main".

It comes from pytest-xdist's config (`config.workerinput["workerid"]`), not from the
PYTEST_XDIST_WORKER environment variable: a LIBERO run started as a subprocess of some other
suite's xdist worker inherits that variable, and would otherwise call itself that worker.
"""

from __future__ import annotations

from typing import Any


def worker_name(config: Any) -> str:
    """xdist's id of this worker (gw0, gw1, ...), or "main" in a run without xdist (and on its controller)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return "main"
    return str(workerinput.get("workerid", "main"))
