"""The rollout engine against a scripted service: counters, caps, stops and faults."""

from __future__ import annotations

import numpy as np
import pytest

from fakes import FakeService
from pytest_libero.core.cells import Cell
from pytest_libero.core.contract import STOP
from pytest_libero.errors import EnvironmentFault
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.protocol import Protocol
from pytest_libero.core.rollout import run_episode

CELL = Cell("libero_10", 0)
HOLD = [0.0] * 6 + [-1.0]


class Scripted:
    """Returns the given responses in turn (repeating the last), recording what it saw."""

    def __init__(self, *responses):
        self.responses = list(responses)
        self.seen = []
        self.languages = []

    def reset(self, language):
        self.languages.append(language)

    def act(self, observation):
        self.seen.append(observation)
        response = self.responses[min(len(self.seen) - 1, len(self.responses) - 1)]
        if isinstance(response, Exception):
            raise response
        return response

    def close(self):
        pass


def decisions(d, k):
    return Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=k, max_policy_calls=d)


def test_decisions_budget_counts_calls_decisions_and_controls():
    service, policy = FakeService(), Scripted(np.tile(HOLD, (8, 1)))
    result = run_episode(service, policy, CELL, decisions(3, 5))
    assert (result.outcome, result.termination) == ("failure", "truncation")
    assert (result.policy_calls, result.action_decisions, result.executed_controls) == (3, 3, 15)
    assert result.settling_controls == 10 and result.control_cap == 15
    assert [len(c) for c in service.submitted] == [5, 5, 5]
    assert service.delivered == 2  # no observation is rendered after the last allowed call
    assert [o.counters.policy_calls for o in policy.seen] == [0, 1, 2]
    assert policy.languages == ["put the fake bowl on the plate"]


def test_first_success_records_control_and_actual_policy_call():
    service = FakeService(success_at=12)
    policy = Scripted(np.tile(HOLD, (3, 1)), np.tile(HOLD, (7, 1)))  # 3 controls, then 5 per call
    result = run_episode(service, policy, CELL, decisions(10, 5))
    assert (result.outcome, result.termination) == ("success", "success")
    assert result.first_success_control == 12
    assert result.first_success_policy_call == 3  # 3 + 5 + 4: not 12 / 5 rounded up
    assert result.executed_controls == 12


def test_horizon_budget_uses_the_suite_reference_horizon():
    protocol = Protocol(spec=LIBERO_SPEC, scope="test", budget="horizon", replan_interval=8, max_policy_calls=None)
    service = FakeService()
    result = run_episode(service, Scripted(np.tile(HOLD, (8, 1))), Cell("libero_spatial", 0), protocol)
    assert result.control_cap == 220 and result.executed_controls == 220
    assert result.policy_calls == 28 and sum(len(c) for c in service.submitted) == 224
    assert "220" in result.cap_source and result.termination == "truncation"


def test_stop_consumes_a_policy_call_but_no_decision():
    service = FakeService()
    result = run_episode(service, Scripted(np.tile(HOLD, (5, 1)), STOP), CELL, decisions(10, 5))
    assert (result.policy_calls, result.action_decisions, result.executed_controls) == (2, 1, 5)
    assert (result.outcome, result.termination) == ("failure", "policy_stop")


@pytest.mark.parametrize("bad, defect", [
    ([float("nan")] * 7, "not finite"),
    ([0.0] * 6, "shape (6,)"),
    ([1.5] + [0.0] * 6, "out of bounds"),
    (np.zeros((0, 7)), "shape (0, 7)"),
])
def test_invalid_action_is_a_policy_fault_and_never_reaches_the_service(bad, defect):
    service = FakeService()
    result = run_episode(service, Scripted(np.tile(HOLD, (5, 1)), bad), CELL, decisions(10, 5))
    assert (result.outcome, result.termination) == ("policy_error", "policy_error")
    assert defect in result.message and "policy call 2" in result.message
    assert len(service.submitted) == 1 and np.isfinite(service.submitted[0]).all()


def test_adapter_exception_is_a_policy_fault_with_traceback():
    result = run_episode(FakeService(), Scripted(RuntimeError("model exploded")), CELL, decisions(3, 5))
    assert result.outcome == "policy_error" and "RuntimeError: model exploded" in result.message
    assert "Traceback" in (result.error or "")


def test_environment_fault_raises_with_the_partial_result():
    with pytest.raises(EnvironmentFault) as info:
        run_episode(FakeService(fault_at=2), Scripted(np.tile(HOLD, (5, 1))), CELL, decisions(5, 5))
    partial = info.value.partial  # type: ignore[attr-defined]
    assert partial.outcome == "env_error" and partial.policy_calls == 2 and partial.executed_controls == 5


def test_only_the_declared_prefix_is_executed():
    service = FakeService()
    run_episode(service, Scripted(np.linspace(-1, 1, 70).reshape(10, 7)), CELL, decisions(2, 3))
    np.testing.assert_array_equal(service.submitted[0], np.linspace(-1, 1, 70).reshape(10, 7)[:3])


def test_random_policy_is_seeded_per_episode_and_within_bounds():
    from pytest_libero.adapters.builtin import RandomPolicy, ZeroPolicy

    policy = RandomPolicy(seed=4, chunk_size=6)
    first = run_episode(FakeService(), policy, CELL, decisions(3, 6))
    again = run_episode(service := FakeService(), policy, CELL, decisions(3, 6))
    assert first.executed_controls == again.executed_controls == 18
    chunks = np.concatenate(service.submitted)
    assert np.abs(chunks).max() <= 1.0 and set(chunks[:, 6]) <= {-1.0, 1.0}
    policy.reset("x")
    np.testing.assert_array_equal(policy.act(None), service.submitted[0])
    np.testing.assert_array_equal(ZeroPolicy(chunk_size=2).act(None), [HOLD, HOLD])


def test_policy_server_error_is_a_policy_fault_not_an_environment_fault():
    """The policy's side of a wire is the policy: a remote server's fault during the run is policy_error."""
    from pytest_libero.errors import PolicyServerError

    result = run_episode(FakeService(), Scripted(PolicyServerError("server went away")), CELL, decisions(3, 5))
    assert result.outcome == "policy_error" and result.termination == "policy_error"
    assert "policy.act raised PolicyServerError: server went away" in result.message


def test_settings_reach_the_service_and_the_video_unchanged():
    from pytest_libero.core.rollout import EpisodeSettings

    class Recording(FakeService):
        def start(self, payload):
            self.payload = payload
            return super().start(payload)

        def set_deadline(self, deadline):
            self.deadlines = [*getattr(self, "deadlines", []), deadline]

    frames = []
    service = Recording(success_at=7)
    settings = EpisodeSettings(allow_source_mismatch=True, deadline_s=60.0, video_rate="control", reuse_env=False)
    result = run_episode(service, Scripted(np.tile(HOLD, (5, 1))), CELL, decisions(3, 5), settings,
                         on_frame=lambda images, success: frames.append(success))
    assert service.payload == {
        "cell": {"suite": "libero_10", "task_index": 0, "init_index": 0, "seed": CELL.seed}, "control_cap": 15,
        "settle_controls": 10, "settle_action": [0.0] * 6 + [-1.0], "allow_mismatch": True, "track": "rgb",
        "reuse_env": False}
    assert service.deadlines[0] is not None and service.deadlines[1:] == [None]  # set for the episode only
    assert result.outcome == "success" and frames == [False] * 7 + [True]  # first observation, then per control


def test_a_two_million_row_chunk_is_a_policy_fault_naming_length_bound_and_option():
    service = FakeService()
    huge = np.broadcast_to(np.asarray(HOLD), (2_000_000, 7))  # valid values, in bounds
    result = run_episode(service, Scripted(np.tile(HOLD, (5, 1)), huge), CELL, decisions(3, 5))
    assert (result.outcome, result.termination) == ("policy_error", "policy_error")
    assert result.message.startswith("invalid action at policy call 2: chunk of 2000000 rows is longer than the "
                                     "bound of 1024 rows per chunk")
    assert "--libero-max-chunk-rows" in result.message
    assert [len(c) for c in service.submitted] == [5]  # nothing of the long chunk reached the service
    assert result.chunks[-1]["invalid"]["shape"] == [2_000_000, 7] and len(result.chunks[-1]["invalid"]["repr"]) <= 300


def test_the_chunk_bound_comes_from_the_protocol():
    short = Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=5, max_policy_calls=2,
                     max_chunk_rows=8)
    assert run_episode(FakeService(), Scripted(np.tile(HOLD, (8, 1))), CELL, short).outcome == "failure"
    result = run_episode(FakeService(), Scripted(np.tile(HOLD, (9, 1))), CELL, short)
    assert result.outcome == "policy_error" and "bound of 8 rows" in result.message
    assert decisions(2, 5).identity != short.identity  # another bound is another protocol


def test_chunk_entries_keep_executed_actions_exactly_and_the_rest_by_shape_dtype_and_hash():
    import hashlib

    from pytest_libero.core.chunk_evidence import chunk_block, executed_actions

    rng = np.random.default_rng(3)
    returned = [rng.uniform(-1, 1, (50, 7)).astype(np.float32) for _ in range(3)] + [rng.uniform(-1, 1, 7)]
    service = FakeService(success_at=13)
    result = run_episode(service, Scripted(*returned), CELL, decisions(10, 5))
    assert result.outcome == "success" and [c["executed"] for c in result.chunks] == [5, 5, 3]
    executed = np.concatenate(service.submitted)[:13]
    np.testing.assert_array_equal(executed_actions(result.chunks), executed)  # bit for bit
    first = result.chunks[0]
    assert (first["shape"], first["dtype"]) == ([50, 7], "float32")
    assert first["sha256"] == hashlib.sha256(returned[0].astype("<f8").tobytes()).hexdigest()
    assert "returned" not in first and len(first["actions_b64"]) == 4 * ((5 * 7 * 4 + 2) // 3)  # 140 bytes
    np.testing.assert_array_equal(executed_actions(chunk_block(result.chunks)), executed)  # the record's block


def test_replaying_a_records_executed_actions_executes_the_same_actions():
    from pytest_libero.core.chunk_evidence import chunk_block, executed_actions

    rng = np.random.default_rng(5)
    recorded = FakeService()
    first = run_episode(recorded, Scripted(*[rng.uniform(-1, 1, (30, 7)).astype(np.float32) for _ in range(4)]),
                        CELL, decisions(4, 5))
    actions = executed_actions(chunk_block(first.chunks))
    replayed = FakeService()
    again = run_episode(replayed, Scripted(*[actions[i:i + 5] for i in range(0, len(actions), 5)]), CELL,
                        decisions(4, 5))
    assert again.executed_controls == first.executed_controls == 20
    np.testing.assert_array_equal(np.concatenate(replayed.submitted), np.concatenate(recorded.submitted))
