"""Outcome and termination names: their one owner, and how pytest and the results count them.

Both are `str` enums, so a member is equal to (and serializes as) its JSON string: a record
says `"outcome": "success"` whether it was written from `Outcome.SUCCESS` or read back. Data
that leaves a process (records, report rows crossing xdist) carries the plain `.value`.

| outcome      | pytest status | group     |
|--------------|---------------|-----------|
| success      | passed        | completed |
| failure      | failed        | completed |
| policy_error | failed        | completed |
| env_error    | errored       | errors    |
| crashed      | errored       | errors    |
| not_run      | unattempted   |           |
"""

from __future__ import annotations

import enum
from types import MappingProxyType
from collections.abc import Mapping

from pytest_libero.errors import LiberoError


class UnknownOutcome(LiberoError, ValueError):
    """A record names an outcome or termination this version does not know."""


class _Name(str, enum.Enum):
    def __str__(self) -> str:
        return str(self.value)  # f-strings and messages print the JSON string, not Outcome.SUCCESS

    @classmethod
    def _missing_(cls, value: object) -> None:
        known = ", ".join(member.value for member in cls)
        raise UnknownOutcome(f"unknown {cls.__name__.lower()} {value!r}: one of {known} was expected "
                             "(a record written by another version of pytest-libero?)")


class Outcome(_Name):
    """How an episode ended, as it counts (the record's `outcome.outcome`)."""

    SUCCESS = "success"
    FAILURE = "failure"
    POLICY_ERROR = "policy_error"
    ENV_ERROR = "env_error"
    CRASHED = "crashed"
    NOT_RUN = "not_run"


class Termination(_Name):
    """Why an episode ended (the record's `outcome.termination`)."""

    SUCCESS = "success"
    TRUNCATION = "truncation"
    POLICY_STOP = "policy_stop"
    POLICY_ERROR = "policy_error"
    ENV_ERROR = "env_error"
    CRASHED = "crashed"
    NOT_RUN = "not_run"


STATUSES = ("passed", "failed", "errored", "unattempted")

# How pytest counts each outcome: selected = passed + failed + errored + unattempted.
STATUS: Mapping[Outcome, str] = MappingProxyType({
    Outcome.SUCCESS: "passed", Outcome.FAILURE: "failed", Outcome.POLICY_ERROR: "failed",
    Outcome.ENV_ERROR: "errored", Outcome.CRASHED: "errored", Outcome.NOT_RUN: "unattempted",
})

# Episodes that ran to a verdict on the policy (resume keeps them; compare pairs them).
COMPLETED = frozenset({Outcome.SUCCESS, Outcome.FAILURE, Outcome.POLICY_ERROR})
# Episodes the simulator or the harness ended (re-run by resume unless --libero-resume-keep-errors).
ERRORS = frozenset({Outcome.ENV_ERROR, Outcome.CRASHED})


def status(outcome: str) -> str:
    """The pytest status of an outcome; UnknownOutcome (naming it) for a name not in Outcome."""
    return STATUS[Outcome(outcome)]


def completeness(outcome: str) -> int:
    """How much a record of this outcome says: completed 2, errors 1, not_run 0 (merge keeps the most)."""
    value = Outcome(outcome)
    return 2 if value in COMPLETED else 1 if value in ERRORS else 0
