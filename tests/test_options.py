"""Selection and option parsing: table-driven, pure."""

from __future__ import annotations

import pytest

from pytest_libero.errors import OptionError

from pytest_libero.core.cells import Cell
from pytest_libero.benchmarks.libero.selection import parse_task_ids, select_cells
from pytest_libero.core.policy import PolicySpec, parse_policy_kwargs
from pytest_libero.runtime.policies import check_spec
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.protocol import Protocol


@pytest.mark.parametrize("scope, suite, ids, expected", [
    (None, None, None, [("libero_10", 0), ("libero_10", 1)]),
    ("development", None, None, [("libero_10", 0), ("libero_10", 1)]),
    ("development", "libero_10", "4,0", [("libero_10", 0), ("libero_10", 4)]),
    ("task_coverage", "libero_goal", "3", [("libero_goal", 3)]),
    ("task_coverage", "libero_90", None, [("libero_90", i) for i in range(90)]),
])
def test_selection(scope, suite, ids, expected):
    cells = select_cells(scope, suite, ids)
    assert [(c.suite, c.task_index) for c in cells] == expected
    assert all((c.init_index, c.task_order_index, c.seed) == (0, 0, 20260907) for c in cells)


def test_plan_is_all_130_once():
    cells = select_cells("plan", None, None)
    assert len(cells) == 130 == len(set(cells))


@pytest.mark.parametrize("scope, suite, ids, message", [
    ("development", None, "5", "allows LIBERO-10 task ids 0-4"),
    ("development", "libero_goal", None, "LIBERO-10 only"),
    ("task_coverage", None, None, "needs --libero-suite"),
    ("task_coverage", "libero_object", "10", "has task ids 0-9, not 10"),
    ("plan", "libero_10", None, "does not apply to --libero-scope plan"),
    (None, None, "1", "does not apply to the default selection"),
    ("development", None, "1,x", "'x' is not a task index"),
    ("development", None, "1,1", "listed twice"),
])
def test_bad_selection_is_a_usage_error_naming_the_fix(scope, suite, ids, message):
    with pytest.raises(OptionError) as info:
        select_cells(scope, suite, ids)
    assert message in str(info.value)


def test_parse_task_ids_sorts_into_native_order():
    assert parse_task_ids(" 3, 0 ,2") == [0, 2, 3]


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"), ("[1]", "must be a JSON object"),
])
def test_bad_policy_kwargs(text, message):
    with pytest.raises(ValueError) as info:
        parse_policy_kwargs(text)
    assert message in str(info.value)


def test_unknown_policy_suggests_and_lists():
    with pytest.raises(ValueError) as info:
        check_spec(PolicySpec("zeor"))
    message = str(info.value)
    assert "Did you mean 'zero'?" in message
    available = message.split("Available: ")[1]
    assert "random" in available and "zero" in available and "path/to/file.py:FACTORY" in available


def test_protocol_identity_changes_with_every_setting():
    base = Protocol(spec=LIBERO_SPEC, scope="development", budget="decisions", replan_interval=5, max_policy_calls=3)
    variants = [
        Protocol(spec=LIBERO_SPEC, scope="plan", budget="decisions", replan_interval=5, max_policy_calls=3),
        Protocol(spec=LIBERO_SPEC, scope="development", budget="decisions", replan_interval=4, max_policy_calls=3),
        Protocol(spec=LIBERO_SPEC, scope="development", budget="decisions", replan_interval=5, max_policy_calls=4),
        Protocol(spec=LIBERO_SPEC, scope="development", budget="horizon", replan_interval=5, max_policy_calls=None),
        Protocol(spec=LIBERO_SPEC, scope="development", budget="decisions", replan_interval=5, max_policy_calls=3,
                 settle_controls=5),
    ]
    identities = {base.identity} | {v.identity for v in variants}
    assert len(identities) == 6
    assert base.identity == Protocol(spec=LIBERO_SPEC, scope="development", budget="decisions", replan_interval=5,
                                     max_policy_calls=3).identity
    assert base.control_cap("libero_90") == 15 and variants[3].control_cap("libero_90") == 400
    assert Cell("libero_10", 2) in select_cells("development", None, "2")
