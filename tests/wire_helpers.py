"""Episodes of a remote-policy adapter through the real rollout engine, against the FakeService.

The wire tests (test_openpi.py, test_openvla_rest.py, test_vla_eval.py) use it to show what a
server's fault becomes in the record: the engine's outcome, not only the exception the adapter
raises.
"""

from __future__ import annotations

from typing import Any

from fakes import FakeService
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.cells import Cell
from pytest_libero.core.outcomes import Outcome
from pytest_libero.core.protocol import Protocol
from pytest_libero.core.rollout import EpisodeResult, run_episode

CELL = Cell("libero_10", 0)


def episode(policy: Any, calls: int = 2, replan_interval: int = 5) -> EpisodeResult:
    """One episode of `policy`: at most `calls` policy calls of K = `replan_interval` controls."""
    protocol = Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=replan_interval,
                        max_policy_calls=calls)
    return run_episode(FakeService(), policy, CELL, protocol)


def assert_policy_error(result: EpisodeResult, pattern: str) -> None:
    """The episode ended as policy_error (a policy fault, counted in the rate) with `pattern` in its message."""
    import fnmatch

    assert result.outcome is Outcome.POLICY_ERROR, (result.outcome, result.message)
    assert fnmatch.fnmatch(result.message, f"*{pattern}*"), result.message
