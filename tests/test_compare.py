"""`python -m pytest_libero compare`: statistics checked by hand, the table, and the refusals."""

from __future__ import annotations

import json
import math

import pytest

from run_folders import full_protocol, write_run
from pytest_libero.__main__ import main
from pytest_libero.core.statistics import (Paired, analyse, holm_adjust, mcnemar_exact_p,
                                           min_discordant_for_significance, newcombe_paired_ci, verdict)


@pytest.mark.parametrize("paired, p_value, expected", [
    # all 6 discordant pairs favour B: p = 2 * 0.5**6 = 0.03125
    (Paired(both=10, only_a=0, only_b=6, neither=4), 0.03125, "better"),
    (Paired(both=10, only_a=6, only_b=0, neither=4), 0.03125, "worse"),
    # 6 of 7 favour B: p = 2 * (1 + 7) / 2**7 = 0.125
    (Paired(both=10, only_a=1, only_b=6, neither=3), 0.125, "no detectable difference"),
    # 5 of 5: p = 2 / 32 = 0.0625; no split of 5 discordant pairs can reach 0.05
    (Paired(both=40, only_a=0, only_b=5, neither=5), 0.0625, "underpowered"),
    (Paired(both=3, only_a=0, only_b=0, neither=7), 1.0, "underpowered"),
])
def test_mcnemar_exact_p_values_and_verdicts(paired, p_value, expected):
    assert mcnemar_exact_p(paired) == pytest.approx(p_value, abs=1e-12)
    assert verdict(paired, mcnemar_exact_p(paired)) == expected


def test_six_discordant_pairs_are_the_least_that_can_reach_significance():
    assert min_discordant_for_significance(0.05) == 6  # 2 * 0.5**5 = 0.0625, 2 * 0.5**6 = 0.03125
    assert min_discordant_for_significance(0.01) == 8  # 2 * 0.5**7 = 0.0156, 2 * 0.5**8 = 0.0078


def _wilson_by_hand(x: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


@pytest.mark.parametrize("both, only_a, only_b, neither", [(5, 1, 3, 1), (30, 2, 9, 9), (0, 0, 4, 6), (12, 0, 0, 8)])
def test_newcombe_paired_interval_matches_a_hand_computation(both, only_a, only_b, neither):
    n = both + only_a + only_b + neither
    p1, p2 = (both + only_b) / n, (both + only_a) / n
    l1, u1 = _wilson_by_hand(both + only_b, n)
    l2, u2 = _wilson_by_hand(both + only_a, n)
    product = (both + only_b) * (only_a + neither) * (both + only_a) * (only_b + neither)
    cross = both * neither - only_b * only_a
    corrected = cross - n / 2 if cross > n / 2 else min(cross, 0)
    phi = corrected / math.sqrt(product) if product else 0.0
    low = p1 - p2 - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = p1 - p2 + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    got = newcombe_paired_ci(Paired(both, only_a, only_b, neither))
    assert got == pytest.approx((max(low, -1), min(high, 1)), abs=1e-9)
    assert got[0] <= (only_b - only_a) / n <= got[1]


def test_a_worked_example():
    # 50 paired episodes: 30 both, 2 only A, 9 only B, 9 neither -> B - A = 7/50 = +14 points
    row = analyse(Paired(both=30, only_a=2, only_b=9, neither=9))
    assert row["rate_a"] == pytest.approx(0.64) and row["rate_b"] == pytest.approx(0.78)
    assert row["difference"] == pytest.approx(0.14)
    assert row["mcnemar_exact_p"] == pytest.approx(0.0654296875)  # 2 * P(X <= 2), X ~ Bin(11, 1/2) = 2*67/2048
    assert row["verdict"] == "no detectable difference"
    low, high = row["ci95"]
    # The score interval just excludes 0 while the exact test (conservative) does not reach 0.05: the
    # verdict follows the exact test (docs/schedules-and-compare.md).
    assert 0.0 < low < 0.05 and 0.2 < high < 0.3


def _outcomes(successes_by_cell: dict[str, bool]) -> dict[str, str]:
    return {cell: "success" if ok else "failure" for cell, ok in successes_by_cell.items()}


def test_compare_prints_the_table_and_verdicts(tmp_path, capsys):
    cells = [f"libero_goal-t{t:02d}-s{i:02d}" for t in (0, 1) for i in range(10)]
    a = {c: i % 2 == 0 for i, c in enumerate(cells)}  # 10 of 20
    b = {c: True for c in cells}  # 20 of 20: 10 discordant pairs, all for B
    run_a = write_run(tmp_path / "a", full_protocol(), _outcomes(a), policy="zero")
    run_b = write_run(tmp_path / "b", full_protocol(), dict(_outcomes(b), **{"libero_goal-t02-s00": "env_error"}),
                      policy="random")
    assert main(["compare", str(run_a), str(run_b), "--json", str(tmp_path / "cmp.json")]) == 0
    out = capsys.readouterr().out
    assert "20 paired episodes, 1 cell(s) unpaired" in out
    overall = next(line for line in out.splitlines() if line.startswith("overall"))
    assert overall.split()[1:5] == ["20", "50.0%", "100.0%", "+50.0"] and overall.endswith("better")
    task = next(line for line in out.splitlines() if line.startswith("libero_goal-t00"))
    assert task.split()[1] == "10" and task.endswith("underpowered")  # 5 discordant pairs
    result = json.loads((tmp_path / "cmp.json").read_text())
    assert result["overall"]["only_b"] == 10 and result["overall"]["only_a"] == 0
    assert result["overall"]["mcnemar_exact_p"] == pytest.approx(2 * 0.5**10)
    assert result["unpaired_cells"] == ["libero_goal-t02-s00"]
    assert set(result["suites"]) == {"libero_goal"} and set(result["tasks"]) == {"libero_goal-t00", "libero_goal-t01"}


def test_compare_refuses_different_identities_and_names_the_settings(tmp_path, capsys):
    cells = {"libero_spatial-t00-s00": "success"}
    run_a = write_run(tmp_path / "a", full_protocol("openvla"), cells)
    run_b = write_run(tmp_path / "b", full_protocol("lerobot", seeds=(1000,)), cells)
    assert main(["compare", str(run_a), str(run_b)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "refusing to compare: the protocol identities differ" in captured.err
    assert "schedule.caps.libero_spatial: 220 in RUN_A, 280 in RUN_B" in captured.err
    assert "schedule.name: 'openvla' in RUN_A, 'lerobot' in RUN_B" in captured.err
    assert "seeds: [7] in RUN_A, [1000] in RUN_B" in captured.err


def test_compare_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    run_a = write_run(tmp_path / "a", full_protocol(), {"libero_10-t00-s00": "success"})
    assert main(["compare", str(run_a), str(tmp_path / "missing")]) == 2
    assert "is not a pytest-libero run folder" in capsys.readouterr().err


def test_compare_refuses_runs_with_nothing_in_common(tmp_path, capsys):
    run_a = write_run(tmp_path / "a", full_protocol(), {"libero_10-t00-s00": "success"})
    run_b = write_run(tmp_path / "b", full_protocol(), {"libero_10-t00-s01": "success"})
    assert main(["compare", str(run_a), str(run_b)]) == 2
    assert "no completed cell in common" in capsys.readouterr().err


def test_holm_adjustment_matches_a_hand_computation():
    # m = 4: sorted 0.01, 0.02, 0.03, 0.5 -> 4*0.01=0.04, 3*0.02=0.06, 2*0.03=0.06 (kept monotone), 1*0.5
    adjusted = holm_adjust({"a": 0.03, "b": 0.01, "c": 0.5, "d": 0.02})
    assert adjusted == pytest.approx({"b": 0.04, "d": 0.06, "a": 0.06, "c": 0.5})
    assert holm_adjust({"x": 0.4, "y": 0.6}) == pytest.approx({"x": 0.8, "y": 0.8})  # capped monotone
    assert holm_adjust({"z": 0.7, "w": 0.9}) == pytest.approx({"z": 1.0, "w": 1.0})  # capped at 1
    assert holm_adjust({}) == {}


def test_compare_gives_per_task_rows_holm_adjusted_p_and_leaves_overall_primary(tmp_path, capsys):
    cells = [f"libero_goal-t{t:02d}-s{i:02d}" for t in (0, 1) for i in range(10)]
    a = {c: False for c in cells}
    b = {c: c.startswith("libero_goal-t00") or c.endswith(("s00", "s01")) for c in cells}  # t00: 10 of 10, t01: 2
    run_a = write_run(tmp_path / "a", full_protocol(), _outcomes(a), policy="zero")
    run_b = write_run(tmp_path / "b", full_protocol(), _outcomes(b), policy="random")
    assert main(["compare", str(run_a), str(run_b), "--json", str(tmp_path / "cmp.json")]) == 0
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "cmp.json").read_text())
    t0, t1 = result["tasks"]["libero_goal-t00"], result["tasks"]["libero_goal-t01"]
    assert t0["mcnemar_exact_p"] == pytest.approx(2 * 0.5**10) and t1["mcnemar_exact_p"] == pytest.approx(0.5)
    assert t0["holm_p"] == pytest.approx(2 * 2 * 0.5**10) and t1["holm_p"] == pytest.approx(0.5)
    suite = result["suites"]["libero_goal"]
    assert suite["holm_p"] == pytest.approx(suite["mcnemar_exact_p"])  # a family of one
    assert "holm_p" not in result["overall"] and "Holm" in result["method"]["multiplicity"]
    task = next(line for line in out.splitlines() if line.startswith("libero_goal-t00"))
    assert f"{4 * 0.5**10:.4f}" in task.split()
    overall = next(line for line in out.splitlines() if line.startswith("overall"))
    assert overall.split()[-2] == "-" and "Holm p" in out
