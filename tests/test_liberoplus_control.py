"""LIBERO-plus control arms (--libero-plus-control): the drop per group and its interval (CPU).

Run folders here hold placeholder records with chosen outcomes, as tests/test_liberoplus.py's
_rebuilt_run writes them: LIBERO-plus variants over a synthetic classification file
(tests/liberoplus_helpers.py: variant i of a suite is in category CATEGORIES[i % 7]) and a control
of LIBERO records. Nothing here runs a simulator.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from liberoplus_helpers import classification, write_classification

from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
from pytest_libero.benchmarks.libero_plus import catalog as lp, control
from pytest_libero.benchmarks.libero_plus.adapter import ADAPTER as PLUS
from pytest_libero.benchmarks.libero_plus.options import PlusSettings
from pytest_libero.core.cells import Cell
from pytest_libero.core.protocol import Protocol
from pytest_libero.core.statistics import (Z95, holm_adjust, kish_effective_n, newcombe_difference_ci,
                                           newcombe_difference_p, wilson, wilson_limits)
from pytest_libero.errors import OptionError
from pytest_libero.results.files import write_json_atomic
from pytest_libero.results.records import RunDir, placeholder_record, run_manifest, write_record
from pytest_libero.results.summary import rebuild

ZERO = {"name": "zero", "kwargs": {}}
GOAL = "libero_goal"


@pytest.fixture(scope="module")
def synthetic_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_classification(tmp_path_factory.mktemp("lpc") / "task_classification.json", classification({}))


# -- statistics ---------------------------------------------------------------------------------

# Newcombe (Statistics in Medicine 17:873-890, 1998), Table II, method 10: the published limits of
# p1 - p2 for eight pairs of independent proportions, to four decimals.
NEWCOMBE_TABLE_II = [((56, 70), (48, 80), (0.0524, 0.3339)), ((9, 10), (3, 10), (0.1705, 0.8090)),
                     ((6, 7), (2, 7), (0.0582, 0.8062)), ((5, 56), (0, 29), (-0.0381, 0.1926)),
                     ((0, 10), (0, 20), (-0.1611, 0.2775)), ((0, 10), (0, 10), (-0.2775, 0.2775)),
                     ((10, 10), (0, 20), (0.6791, 1.0000)), ((10, 10), (0, 10), (0.6075, 1.0000))]


@pytest.mark.parametrize(("first", "second", "limits"), NEWCOMBE_TABLE_II)
def test_newcombe_hybrid_score_interval_matches_the_published_table(first, second, limits):
    low, high = newcombe_difference_ci(first[0] / first[1], first[1], second[0] / second[1], second[1])
    assert (round(low, 4), round(high, 4)) == limits


def test_wilson_limits_of_a_count_are_scipys_and_equal_weights_keep_the_count():
    for successes, trials in ((0, 5), (3, 7), (7, 7), (13, 40)):
        assert list(wilson_limits(successes / trials, trials)) == wilson(successes, trials)["ci95"]
    assert kish_effective_n([0.25] * 8) == pytest.approx(8)
    assert kish_effective_n([3, 1]) == pytest.approx(16 / 10)


@pytest.mark.parametrize(("first", "second", "limits"), NEWCOMBE_TABLE_II)
def test_the_p_value_is_the_intervals_dual(first, second, limits):
    """p < alpha exactly when the interval at level 1 - alpha excludes 0: checked at 0.05 on the
    published table, and at the p-value's own level the bound nearer 0 touches it."""
    from scipy.special import ndtri

    p1, n1, p2, n2 = first[0] / first[1], first[1], second[0] / second[1], second[1]
    p = newcombe_difference_p(p1, n1, p2, n2)
    assert (p < 0.05) == (limits[0] > 0 or limits[1] < 0)
    if p1 == p2:
        assert p == 1.0
        return
    assert 0 < p < 1
    low, high = newcombe_difference_ci(p1, n1, p2, n2, float(-ndtri(p / 2)))
    assert abs(low if p1 > p2 else high) < 1e-9
    assert newcombe_difference_ci(p1, n1, p2, n2, Z95) == newcombe_difference_ci(p1, n1, p2, n2)
    # Swapping the two proportions mirrors the test.
    assert newcombe_difference_p(p2, n2, p1, n1) == pytest.approx(p)


def test_p_values_print_to_four_decimals_and_tiny_ones_in_scientific_notation():
    from pytest_libero.benchmarks.libero_plus.results import p_value_text

    assert [p_value_text(v) for v in (1.0, 0.04321, 0.0001, 3.21e-9, None)] == ["1.0000", "0.0432", "0.0001",
                                                                                "3.2e-09", "-"]


def test_every_variant_has_exactly_one_base_task():
    from pytest_libero.benchmarks.libero.catalog import entries

    bases = lp.base_tasks()
    for suite in lp.SUITES:
        names = {e["task_index"]: e["task_name"] for e in entries(suite)}
        assert len(bases[suite]) == lp.COUNTS[suite] and set(bases[suite]) == set(names)
        for (name, _), index in zip(lp.public_variants()[suite], bases[suite], strict=True):
            matching = [i for i, base in names.items() if name == base or name.startswith(base + "_")]
            assert matching == [index], name


# -- run folders --------------------------------------------------------------------------------

def plus_protocol(**changes: Any) -> Protocol:
    fields = dict(scope="default", budget="horizon", replan_interval=5, max_policy_calls=None,
                  benchmark_options=(("clean_instructions", False), ("robot_init", "upstream"),
                                     ("trials_per_variant", 1)))
    return Protocol(spec=PLUS.spec, **{**fields, **changes})


def placeholder(cell: str, outcome: str, adapter: Any, context: Any, protocol: Protocol,
                policy: dict[str, Any]) -> dict[str, Any]:
    record = placeholder_record(cell, outcome, outcome, adapter=adapter, context=context, protocol=protocol.as_dict(),
                                identity=protocol.identity, worker="main", policy_profile={"spec": policy})
    if outcome == "failure":
        record["outcome"]["termination"] = "truncation"  # as the engine ends a failure
    return record


def write_control(folder: Path, outcomes: dict[int, list[str]], *, policy: dict[str, Any] = ZERO,
                  protocol: Protocol | None = None) -> Path:
    """A LIBERO run folder: per libero_goal task index, one episode per outcome (init states 0, 1, ...)."""
    protocol = protocol or Protocol(spec=LIBERO.spec, scope="default", budget="horizon", replan_interval=5,
                                    max_policy_calls=None)
    run = RunDir(folder)
    cells = []
    for task, ends in outcomes.items():
        for init, outcome in enumerate(ends):
            cell = Cell(GOAL, task, init_index=init).id
            cells.append(cell)
            write_record(run, placeholder(cell, outcome, LIBERO, None, protocol, policy))
    write_json_atomic(folder / "run.json", run_manifest(folder.name, "t", protocol.as_dict(), protocol.identity,
                                                        policy, ["pytest"], source=LIBERO.source, gpus=[]))
    write_json_atomic(folder / "selection.json", {"schema_version": 1, "cells": cells})
    return folder


def write_plus_run(folder: Path, synthetic_file: Path, outcomes: dict[str, str], control_dir: Path) -> Path:
    """A LIBERO-plus run folder of these variants' outcomes whose run.json names `control_dir`, as the
    plugin records it."""
    protocol = plus_protocol()
    context = PlusSettings(classification=str(synthetic_file), assets=None)
    run = RunDir(folder)
    for cell, outcome in outcomes.items():
        write_record(run, placeholder(cell, outcome, PLUS, context, protocol, ZERO))
    manifest = run_manifest(folder.name, "t", protocol.as_dict(), protocol.identity, ZERO, ["pytest"],
                            source=PLUS.source, gpus=[])
    manifest[control.RUN_KEY] = control.check(str(control_dir), {}, PLUS.spec)
    write_json_atomic(folder / "run.json", manifest)
    write_json_atomic(folder / "selection.json", {"schema_version": 1, "cells": list(outcomes)})
    return folder


def camera_variants_on(task: int, count: int) -> list[str]:
    """`count` libero_goal Camera Viewpoints variants (synthetic: index % 7 == 1) of base task `task`."""
    bases = lp.base_tasks()[GOAL]
    found = [lp.variant_id(GOAL, i) for i in range(lp.COUNTS[GOAL]) if i % 7 == 1 and bases[i] == task]
    return found[:count]


def layout_variant_on(task: int) -> str:
    bases = lp.base_tasks()[GOAL]
    return next(lp.variant_id(GOAL, i) for i in range(lp.COUNTS[GOAL]) if i % 7 == 0 and bases[i] == task)


@pytest.fixture(scope="module")
def with_control(tmp_path_factory: pytest.TempPathFactory, synthetic_file: Path) -> tuple[Path, dict[str, Any]]:
    """Camera variants: 3 on base task 0 (1 passes), 1 on task 1 (fails); an Objects Layout variant on
    task 2, which the control ran only into an error. Control: task 0 3/4 (and an error), task 1 1/2."""
    work = tmp_path_factory.mktemp("control")
    # A name the page must escape.
    control_dir = write_control(work / "control<b>", {0: ["success", "success", "failure", "success", "env_error"],
                                                     1: ["failure", "success"], 2: ["env_error"]})
    on_0, on_1 = camera_variants_on(0, 3), camera_variants_on(1, 1)
    outcomes = {on_0[0]: "success", on_0[1]: "failure", on_0[2]: "failure", on_1[0]: "failure",
                layout_variant_on(2): "success"}
    folder = write_plus_run(work / "plus", synthetic_file, outcomes, control_dir)
    return folder, rebuild(folder, PLUS)


def test_the_drop_and_its_interval_per_category_equal_a_hand_computation(with_control):
    _, summary = with_control
    row = summary["libero_plus"]["control"]["by_category"]["Camera Viewpoints"]
    # Variants 1/4. Control matched to the mix: task 0 under 3 of 4 variants at 3/4, task 1 under 1 at 1/2.
    matched = 3 / 4 * 3 / 4 + 1 / 4 * 1 / 2
    # Weights: each of task 0's 4 episodes (3/4)/4 = 3/16, each of task 1's 2 episodes (1/4)/2 = 1/8.
    effective = 1 / (4 * (3 / 16) ** 2 + 2 * (1 / 8) ** 2)
    assert effective == pytest.approx(256 / 44)
    assert row["variants"]["rate"] == 0.25 and row["control"]["rate"] == pytest.approx(matched)
    assert row["control"]["episodes"] == 6 and row["control"]["effective_n"] == pytest.approx(effective)
    assert row["control"]["base_tasks"] == 2 and row["missing_base_tasks"] == []
    assert row["drop_pp"] == pytest.approx(100 * (matched - 0.25))
    low, high = newcombe_difference_ci(matched, effective, 0.25, 4)
    assert row["drop_ci95_pp"] == pytest.approx([100 * low, 100 * high])
    assert row["p_value"] == newcombe_difference_p(matched, effective, 0.25, 4)
    assert -100 < row["drop_ci95_pp"][0] < row["drop_pp"] < row["drop_ci95_pp"][1] < 100
    # The table's cells of the category carry drops too; a cell of one variant on task 1 alone is
    # matched to task 1 only.
    single = [r for r in summary["libero_plus"]["control"]["table"]
              if r["category"] == "Camera Viewpoints" and r["variants"]["trials"] == 1
              and r["control"] is not None and r["control"]["base_tasks"] == 1 and r["control"]["episodes"] == 2]
    assert single and single[0]["control"]["rate"] == 0.5


def test_each_levels_rows_get_holm_adjusted_p_values_and_the_overall_row_none(with_control):
    _, summary = with_control
    block = summary["libero_plus"]["control"]
    assert "Holm" in block["multiplicity"] and "overall row is the primary test, unadjusted" in block["multiplicity"]
    families = {name: dict(block[name]) for name in ("by_category", "by_difficulty", "by_suite")}
    families["table"] = {str(i): row for i, row in enumerate(block["table"])}
    adjusted_somewhere = False
    for name, rows in families.items():
        tested = {key: row["p_value"] for key, row in rows.items() if row["drop_pp"] is not None}
        expected = holm_adjust(tested)
        for key, row in rows.items():
            assert row["holm_p"] == expected.get(key), (name, key)
            assert (row["p_value"] is None) == (row["drop_pp"] is None)
        adjusted_somewhere |= len(tested) > 1 and any(expected[k] > tested[k] for k in tested)
    assert adjusted_somewhere  # some family has more than one test, and Holm raised a p there
    # The one suite's row holds the variant whose base task the control lacks: no test, no holm_p.
    assert block["by_suite"][GOAL]["p_value"] is None and block["by_suite"][GOAL]["holm_p"] is None
    assert "holm_p" not in block["overall"]


def test_a_group_whose_base_tasks_the_control_lacks_says_which_instead_of_a_number(with_control):
    _, summary = with_control
    block = summary["libero_plus"]["control"]
    layout = block["by_category"]["Objects Layout"]
    # Task 2's only control episode errored: not covered.
    assert layout["drop_pp"] is None and layout["control"] is None
    assert layout["missing_base_tasks"] == ["libero_goal-t02"] and layout["variants"]["rate"] == 1.0
    overall = block["overall"]
    assert overall["drop_pp"] is None and overall["missing_base_tasks"] == ["libero_goal-t02"]
    assert "1 of these variants' 3 base task(s)" in overall["note"]


def test_terminal_lines_and_page_show_the_drops(with_control):
    folder, summary = with_control
    lines = PLUS.terminal_lines(summary)
    row = summary["libero_plus"]["control"]["by_category"]["Camera Viewpoints"]
    low, high = row["drop_ci95_pp"]
    camera = next(line for line in lines if line.startswith("LIBERO-plus Camera Viewpoints:"))
    assert camera.endswith(f"; 25.0% vs control {100 * row['control']['rate']:.1f}%, drop {row['drop_pp']:.1f} pp "
                           f"[{low:.1f}, {high:.1f}], p {row['p_value']:.4f}, Holm p {row['holm_p']:.4f}")
    layout = next(line for line in lines if line.startswith("LIBERO-plus Objects Layout:"))
    assert layout.endswith("100.0% vs control: not covered, no control episode of base task(s) libero_goal-t02")
    assert any(line.startswith("LIBERO-plus control: ") and "control<b>" in line for line in lines)
    assert any(line.startswith("LIBERO-plus overall: 40.0% vs control: not covered") for line in lines)
    page = (folder / "report.html").read_text()
    assert "Against the control arm" in page and "control&lt;b&gt;" in page and "control<b>" not in page
    assert f"{row['drop_pp']:.1f} [{low:.1f}," in page
    assert "not covered: the control has no episode of\n libero_goal-t02" in page
    assert "<th>Holm p</th>" in page and "Holm p is Holm's step-down adjustment of p within each level" in page
    assert f"<td>{row['p_value']:.4f}</td><td>{row['holm_p']:.4f}</td>" in page


def test_report_rebuilds_the_block_from_the_two_folders(with_control):
    from pytest_libero.__main__ import main

    folder, summary = with_control
    (folder / "summary.json").unlink()
    assert main(["report", str(folder)]) == 0
    again = json.loads((folder / "summary.json").read_text())
    assert again["libero_plus"]["control"] == json.loads(json.dumps(summary["libero_plus"]["control"]))


def test_a_moved_control_is_named_instead_of_drops(tmp_path, synthetic_file):
    control_dir = write_control(tmp_path / "control", {0: ["success"]})
    folder = write_plus_run(tmp_path / "plus", synthetic_file, {camera_variants_on(0, 1)[0]: "failure"}, control_dir)
    control_dir.rename(tmp_path / "moved")
    summary = rebuild(folder, PLUS)
    block = summary["libero_plus"]["control"]
    assert "has no readable run.json" in block["error"] and "by_category" not in block
    assert any("no drops" in line for line in PLUS.terminal_lines(summary))


# -- usage errors -----------------------------------------------------------------------------

def select(synthetic_file: Path, control_dir: Path, **options: Any) -> Any:
    return PLUS.select({"libero_plus_classification": str(synthetic_file), "libero_plus_robot_init": "upstream",
                        "libero_plus_variants": camera_variants_on(0, 1)[0],
                        "libero_plus_control": str(control_dir), **options})


def test_a_good_control_is_recorded_for_run_json(tmp_path, synthetic_file):
    control_dir = write_control(tmp_path / "c", {0: ["success"]})
    recorded = select(synthetic_file, control_dir).run_fields[control.RUN_KEY]
    assert recorded["run"] == str(control_dir.resolve()) and recorded["policy"] == ZERO
    assert recorded["mode"] == "fast" and recorded["protocol_identity"].startswith("sha256:")
    assert PLUS.select({"libero_plus_classification": str(synthetic_file)}).run_fields == {}
    from synthetic_runs import full_mode_protocol

    full = write_control(tmp_path / "full", {0: ["success"] * 3}, protocol=full_mode_protocol())
    assert select(synthetic_file, full).run_fields[control.RUN_KEY]["mode"] == "full"


@pytest.mark.parametrize(("make", "options", "message"), [
    (lambda d: d.mkdir(), {}, "not a pytest-libero run folder"),
    (lambda d: write_control(d, {0: ["success"]}, protocol=plus_protocol()), {},
     "a libero_plus run; the control is a run of --libero-benchmark libero"),
    (lambda d: write_control(d, {0: ["success"]}, policy={"name": "demo", "kwargs": {}}), {},
     "its policy is 'demo', this run's 'zero'"),
    (lambda d: write_control(d, {0: ["success"]}), {"libero_policy_kwargs": '{"seed": 3}'},
     "this run's 'zero' with kwargs"),
    (lambda d: write_control(d, {0: ["success"]}), {"libero_replan_interval": 8},
     "replan_interval: 5 in the control, 8 in this run"),
    (lambda d: write_control(d, {0: ["success"]}), {"libero_track": "rgb_proprio"}, "track: 'rgb' in the control"),
    (lambda d: write_control(d, {0: ["success"]}), {"libero_budget": "decisions"},
     "budget: 'horizon' in the control, 'decisions' in this run"),
])
def test_a_control_that_does_not_fit_is_a_usage_error_naming_the_fix(tmp_path, synthetic_file, make, options,
                                                                     message):
    folder = tmp_path / "control"
    make(folder)
    with pytest.raises(OptionError, match="--libero-plus-control ") as caught:
        select(synthetic_file, folder, **options)
    assert message in str(caught.value)


def test_the_plugin_records_the_control_and_prints_its_lines(pytester, synthetic_file):
    """End to end through the plugin without a simulator: a resumed run whose one variant is recorded."""
    variant = camera_variants_on(0, 1)[0]
    control_dir = write_control(pytester.path / "control", {0: ["success", "success"]})
    run = RunDir(pytester.path / "earlier")
    write_record(run, placeholder(variant, "failure", PLUS, PlusSettings(classification=str(synthetic_file),
                                                                         assets=None), plus_protocol(), ZERO))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--libero-resume", str(run.path),
                                           "--libero-benchmark", "libero_plus", "--libero-plus-classification",
                                           str(synthetic_file), "--libero-plus-variants", variant,
                                           "--libero-plus-control", str(control_dir))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["LIBERO-plus Camera Viewpoints: *; 0.0% vs control 100.0%, drop 100.0 pp "
                                 "[[]*, 100.0], p *, Holm p *"])
    manifest = json.loads((run.path / "run.json").read_text())
    assert manifest[control.RUN_KEY]["run"] == str(control_dir.resolve())
    row = json.loads((run.path / "summary.json").read_text())["libero_plus"]["control"]["overall"]
    assert row["drop_pp"] == 100.0 and math.isclose(row["control"]["effective_n"], 2)
