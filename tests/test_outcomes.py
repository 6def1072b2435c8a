"""Outcome names have one owner (core.outcomes): values, pytest statuses, groups, unknown names."""

from __future__ import annotations

import json

import pytest

from pytest_libero.core.outcomes import (COMPLETED, ERRORS, STATUS, STATUSES, Outcome, Termination,
                                         UnknownOutcome, completeness, status)
from pytest_libero.errors import LiberoError


def test_values_are_the_json_strings_of_the_record_schema():
    from pytest_libero.core.data import SCHEMA_DIR

    schema = json.loads((SCHEMA_DIR / "episode_record.schema.json").read_text(encoding="utf-8"))
    outcome = schema["properties"]["outcome"]["properties"]
    assert [o.value for o in Outcome] == outcome["outcome"]["enum"]
    assert [t.value for t in Termination] == outcome["termination"]["enum"]


def test_members_serialize_and_print_as_their_plain_string():
    assert json.dumps({Outcome.SUCCESS: Termination.POLICY_STOP}) == '{"success": "policy_stop"}'
    assert f"{Outcome.ENV_ERROR}: x" == "env_error: x" and str(Outcome.NOT_RUN) == "not_run"
    assert type(Outcome.CRASHED.value) is str and Outcome("failure") == "failure"


@pytest.mark.parametrize("outcome, expected, rank", [
    ("success", "passed", 2), ("failure", "failed", 2), ("policy_error", "failed", 2),
    ("env_error", "errored", 1), ("crashed", "errored", 1), ("not_run", "unattempted", 0),
])
def test_status_and_merge_rank_of_each_outcome(outcome, expected, rank):
    assert status(outcome) == expected and completeness(outcome) == rank
    assert (outcome in COMPLETED, outcome in ERRORS) == (rank == 2, rank == 1)


def test_every_outcome_has_a_status_and_every_status_an_outcome():
    assert set(STATUS) == set(Outcome) and set(STATUS.values()) == set(STATUSES)


@pytest.mark.parametrize("lookup", [status, completeness, Outcome])
def test_an_unknown_outcome_is_named_not_a_key_error(lookup):
    with pytest.raises(UnknownOutcome) as info:
        lookup("timeout")
    assert "unknown outcome 'timeout'" in str(info.value) and "policy_error" in str(info.value)
    assert isinstance(info.value, LiberoError) and isinstance(info.value, ValueError)


def test_an_unknown_termination_is_named():
    with pytest.raises(UnknownOutcome, match="unknown termination 'gave_up'"):
        Termination("gave_up")
