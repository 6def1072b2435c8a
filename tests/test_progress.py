"""Goal progress (issue 35): the predicate tap and the episode's track (on a stand-in BDDL domain: the
tap's own logic), LIBERO's success checks read as the tap assumes (the installed source, parsed, not
imported), the record block and its schema, the summary, page and compare rows, and the statistics.

The real episodes (the demo's two predicates with their controls, a partial replay's one of two, the
zero policy's none) are in tests/test_demo.py, tests/test_real_libero.py and tests/test_packaging.py.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import json
import random
import re
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from pytest_libero.__main__ import main
from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
from pytest_libero.benchmarks.libero.progress import GoalTap, ProgressTrack, predicate_text
from pytest_libero.core.cells import Cell
from pytest_libero.core.score_statistics import mean_t_interval, sign_flip_p, t975
from pytest_libero.results.records import episode_record
from pytest_libero.results.summary import rebuild
from pytest_libero.results.validation import is_valid_record, record_problem
from run_folders import full_protocol, progress_block, write_run
from synthetic_runs import PROFILE, made_up_result, write_libero_run


class Domain:
    """A stand-in for a LIBERO problem class: its _check_success as LIBERO writes it (no short-circuit)."""

    def __init__(self, held: dict[str, bool]) -> None:
        self.held = held
        self.parsed_problem = {"goal_state": [["in", name, "basket_1_contain_region"] for name in held]}
        self.calls = 0

    def _eval_predicate(self, state: list[str]) -> bool:
        self.calls += 1
        return self.held[state[1]]

    def _check_success(self) -> bool:
        result = True
        for state in self.parsed_problem["goal_state"]:
            result = self._eval_predicate(state) and result
        return result


class ShortCircuiting(Domain):
    def _check_success(self) -> bool:
        return all(self._eval_predicate(state) for state in self.parsed_problem["goal_state"])


def test_the_tap_reads_the_success_checks_own_values_and_leaves_success_unchanged():
    env = Domain({"soup_1": True, "sauce_1": False})
    original = vars(Domain)["_eval_predicate"]
    tap = GoalTap(env)
    assert GoalTap.applies(env) and "_eval_predicate" in vars(env)
    assert vars(Domain)["_eval_predicate"] is original  # the class is untouched
    assert env._check_success() is False and env.calls == 2  # LIBERO's answer, each predicate once
    assert tap.read(tap.goal()) == [True, False] and tap.evaluated_here == 0 and env.calls == 2  # no re-evaluation
    env.held["sauce_1"] = True
    tap.clear()
    assert env._check_success() is True and tap.read(tap.goal()) == [True, True] and env.calls == 4
    assert Domain({"x_1": False})._eval_predicate(["in", "x_1", "r"]) is False  # another instance: not wrapped


def test_a_predicate_the_check_skipped_is_evaluated_with_the_same_predicate_code():
    env = ShortCircuiting({"soup_1": False, "sauce_1": True})
    tap = GoalTap(env)
    assert env._check_success() is False and env.calls == 1  # stopped at the first false predicate
    assert tap.read(tap.goal()) == [False, True] and tap.evaluated_here == 1


def test_an_environment_without_a_bddl_goal_gets_no_tap():
    class Other:
        parsed_problem = None

    assert not GoalTap.applies(Other()) and not GoalTap.applies(object())


def test_the_track_counts_executed_controls_and_credits_settling_to_no_one():
    env = Domain({"soup_1": True, "sauce_1": False, "milk_1": False})
    track = ProgressTrack(GoalTap(env))
    env._check_success()
    track.observe(0)  # after settling: soup already in the basket
    for control, (sauce, milk, soup) in enumerate([(True, False, True), (True, True, False), (False, False, False)],
                                                  start=1):
        env.held.update(sauce_1=sauce, milk_1=milk, soup_1=soup)
        track.tap.clear()
        env._check_success()
        track.observe(control)
    block = track.block()
    assert block == {"predicates": [
        {"text": "(in soup_1 basket_1_contain_region)", "held_at_end": False, "first_control": 0},
        {"text": "(in sauce_1 basket_1_contain_region)", "held_at_end": False, "first_control": 1},
        {"text": "(in milk_1 basket_1_contain_region)", "held_at_end": False, "first_control": 2}],
        "fraction_at_end": 0.0, "max_fraction": 2 / 3}
    assert predicate_text(["on", "a_1", "b_1"]) == "(on a_1 b_1)"


def _check_success_functions(package: Path) -> list[tuple[str, ast.FunctionDef]]:
    """Each problem class's _check_success, parsed on its own (LIBERO-plus's problem files are 7.6 MB of
    generated classes: the methods are cut out by their indentation, then parsed)."""
    found = []
    for path in sorted((package / "envs" / "problems").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for block in re.findall(r"\n    def _check_success\(.*?(?=\n    \S|\Z)", text, re.S):
            (function,) = ast.parse(textwrap.dedent(block.strip("\n"))).body
            assert isinstance(function, ast.FunctionDef)
            found.append((path.name, function))
    return found


@pytest.mark.parametrize("package", ["libero", "liberoplus"])
def test_every_installed_success_check_evaluates_every_goal_predicate(package):
    """The tap's premise, read from the installed source (parsed, never imported): each problem class's
    _check_success loops over goal_state with `result = self._eval_predicate(state) and result`, which
    evaluates every predicate (the call comes first), and returns that result."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations))) / package  # libero/libero, liberoplus/liberoplus
    checks = _check_success_functions(root)
    assert len(checks) >= 6
    for name, function in checks:
        loops = [n for n in ast.walk(function) if isinstance(n, ast.For)]
        assigned = {ast.unparse(n) for n in function.body if isinstance(n, ast.Assign)}
        assert len(loops) == 1 and ast.unparse(loops[0].iter) == "goal_state", name
        assert "goal_state = self.parsed_problem['goal_state']" in assigned, name
        (assign,) = [n for n in loops[0].body if isinstance(n, ast.Assign)]
        assert ast.unparse(assign) == "result = self._eval_predicate(state) and result", name
        assert ast.unparse(function.body[-1]) == "return result", name


def _record(progress):
    cell = Cell("libero_10", 0, 0)
    result = made_up_result(cell, full_protocol(), controls=20, success=False, rng=np.random.default_rng(0))
    result.private["progress"] = progress
    return episode_record(result, adapter=LIBERO, context=None, protocol=full_protocol().as_dict(),
                          policy_profile=PROFILE, video=None, worker="main", started=0.0,
                          compute={"gpu": None, "rendering_backend": "egl"})


def test_the_record_carries_the_block_and_the_schema_checks_it():
    block = progress_block([True, False], [7, None])
    record = _record(block)
    assert record["progress"] == block and record_problem(record) is None and is_valid_record(record)
    assert "progress" not in _record(None)  # a service that reports none: no block
    assert record_problem(_record(None)) is None
    for bad in (dict(block, fraction_at_end=1.5), dict(block, predicates=[]),
                dict(block, predicates=[{"text": "(on a b)", "held_at_end": True}]), dict(block, extra=1)):
        record = _record(bad)
        assert record_problem(record) is not None and not is_valid_record(record)


def test_summary_and_page_report_progress_per_task_suite_and_run(tmp_path):
    (folder,) = write_libero_run(tmp_path / "run", count=20)
    summary = rebuild(folder, LIBERO)
    records = [json.loads(p.read_text()) for p in sorted((folder / "episodes").glob("*.json"))]
    ends = [r["progress"]["fraction_at_end"] for r in records]
    overall = summary["overall"]["progress"]
    assert overall["episodes"] == 20 and overall["fraction_at_end"]["mean"] == pytest.approx(np.mean(ends))
    low, high = scipy.stats.t.interval(0.95, len(ends) - 1, loc=np.mean(ends), scale=scipy.stats.sem(ends))
    assert overall["fraction_at_end"]["ci95"] == pytest.approx([max(low, 0), min(high, 1)], abs=1e-6)
    assert "Student t" in overall["label"]
    assert summary["suites"]["libero_spatial"]["progress"]["episodes"] == 20
    (task,) = [t for t in summary["tasks"].values() if t["selected"] == 20]
    first = task["progress"]["predicates"][0]
    assert first["reached"] == sum(r["progress"]["predicates"][0]["first_control"] is not None for r in records)
    assert first["episodes"] == 20 and first["reached_rate"] == first["reached"] / 20
    page = (folder / "report.html").read_text()
    assert page.count("goal progress at end, mean (95% t CI)") == 2  # the suite table and the task table
    assert 'value="progress-desc"' in page and "goal predicates reached" in page
    data = json.loads(page.split('id="libero-data">')[1].split("</script>")[0])
    assert "progress_end" in data["fields"]
    texts = data["values"][data["fields"].index("progress")]
    assert any(t and t.startswith("2 of 2 at the end (at most 2); (in synthetic_bowl_1") for t in texts)


def test_a_run_without_progress_shows_none(tmp_path):
    run = write_run(tmp_path / "a", full_protocol(), {"libero_10-t00-s00": "success", "libero_10-t00-s01": "failure"})
    summary = rebuild(run, LIBERO)
    assert "progress" not in summary["overall"] and summary["episodes"][0]["progress"] is None
    assert "goal progress at end" not in (run / "report.html").read_text()


def test_errored_episodes_are_left_out_of_progress(tmp_path):
    run = write_run(tmp_path / "a", full_protocol(), {"libero_10-t00-s00": "failure", "libero_10-t00-s01": "env_error"},
                    progress={"libero_10-t00-s00": [True, False], "libero_10-t00-s01": [True, True]})
    block = rebuild(run, LIBERO)["overall"]["progress"]
    assert block["episodes"] == 1 and block["fraction_at_end"] == {"mean": 0.5, "ci95": None, "n": 1}


def test_compare_reports_the_paired_progress_difference_with_the_sign_flip_test(tmp_path, capsys):
    cells = [f"libero_10-t00-s{i:02d}" for i in range(8)]
    held_a = {c: [i % 2 == 0, False] for i, c in enumerate(cells)}
    held_b = {c: [True, i < 3] for i, c in enumerate(cells)}
    run_a = write_run(tmp_path / "a", full_protocol(), {c: "failure" for c in cells}, progress=held_a)
    run_b = write_run(tmp_path / "b", full_protocol(), {c: "success" if held_b[c][1] else "failure" for c in cells},
                      progress=held_b)
    assert main(["compare", str(run_a), str(run_b), "--json", str(tmp_path / "cmp.json")]) == 0
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "cmp.json").read_text())
    progress = result["overall"]["progress"]
    differences = [Fraction(sum(held_b[c]), 2) - Fraction(sum(held_a[c]), 2) for c in cells]
    assert progress["pairs"] == 8 and progress["difference"] == pytest.approx(float(sum(differences)) / 8)
    assert progress["sign_flip_p"] == pytest.approx(_brute_force_p(differences))
    assert result["tasks"]["libero_10-t00"]["progress"] == progress and "sign-flip" in result["method"]["progress"]
    assert "goal progress at the end" in out
    line = [row for row in out.splitlines() if row.startswith("overall")][-1]
    assert line.split()[1:5] == ["8", "25.0%", "68.8%", "+43.8"]


def _brute_force_p(differences):
    nonzero = [d for d in differences if d]
    observed = abs(sum(nonzero))
    hits = sum(abs(sum(s * d for s, d in zip(signs, nonzero, strict=True))) >= observed
               for signs in itertools.product((1, -1), repeat=len(nonzero)))
    return hits / 2 ** len(nonzero)


def test_sign_flip_p_is_the_exact_enumeration():
    rng = random.Random(3)
    for _ in range(30):
        n = rng.randint(1, 12)
        differences = [Fraction(rng.randint(-3, 3), rng.choice((1, 2, 3))) for _ in range(n)]
        assert sign_flip_p(differences) == pytest.approx(_brute_force_p(differences))
    assert sign_flip_p([Fraction(0)] * 4) == 1.0
    assert sign_flip_p([Fraction(1)] * 10) == pytest.approx(2 * 0.5**10)


def test_the_t_quantile_and_interval_match_scipy():
    for df in range(1, 300):
        assert t975(df) == pytest.approx(scipy.stats.t.ppf(0.975, df), abs=1e-5)
    values = [0.0, 0.5, 0.5, 1.0, 0.0, 0.5]
    low, high = scipy.stats.t.interval(0.95, 5, loc=np.mean(values), scale=scipy.stats.sem(values))
    assert mean_t_interval(values) == {"mean": pytest.approx(0.4166666), "ci95": pytest.approx([low, high]), "n": 6}
    assert mean_t_interval([1.0, 1.0, 0.0])["ci95"][1] == 1.0  # clipped to the score's range
    assert mean_t_interval([]) == {"mean": None, "ci95": None, "n": 0}
