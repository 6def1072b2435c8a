"""The `demo` policy: open-loop replay of the bundled scripted demonstrations.

    pytest --libero-scope development --libero-policy demo

`demo` is `replay` (adapters/replay.py) over the logs shipped in adapters/demo_logs/, one per
fast-mode cell (init state 0). They were produced by tools/demo_expert.py, a scripted expert
that reads privileged simulator state; that expert is a data-generation tool and never a
policy. `demo` itself sees only the contract's Observation (task language and two images).
Its results are labelled a demonstration replay, never a capability attempt: they show that a
real success path exists through the harness (native success, early termination, counters).

It refuses tasks it has no log for, and a first observation that differs from the recorded one
(another init state), with a policy error naming the language and the available cells.
"""

from __future__ import annotations

from pathlib import Path

from pytest_libero.adapters.replay import ActionLog, LogReplayPolicy, load_log

LOG_DIR = Path(__file__).resolve().parent / "demo_logs"


def bundled_logs() -> list[ActionLog]:
    return [load_log(path) for path in sorted(LOG_DIR.glob("*.json"))]


class DemoPolicy(LogReplayPolicy):
    """Replays the bundled demonstration of the task named by the language."""

    profile = {"kind": "demonstration-replay",
               "label": "demo: open-loop replay of a scripted-expert demonstration (not a learned policy)"}

    def __init__(self, chunk_size: int = 5) -> None:
        super().__init__(bundled_logs(), chunk_size=chunk_size, source="bundled with the demo policy ")
