"""Summaries of full-mode runs: the schedule line, per-seed rates with mean and spread, and
LIBERO-PRO perturbations beside their base suite (from run folders written here)."""

from __future__ import annotations

import math

import pytest

from run_folders import full_protocol, write_run
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.benchmarks.libero import catalog
from pytest_libero.benchmarks.libero.inventory import check_installation
from pytest_libero.results.schedule_summary import lines
from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
from pytest_libero.results.summary import build_summary, rebuild


def test_seeds_are_reported_each_and_as_mean_with_spread(tmp_path):
    outcomes = {}
    for seed, wins in ((7, 1), (8, 2), (9, 0)):  # per-seed rates 1/2, 2/2, 0/2
        for index in range(2):
            outcomes[f"libero_10-t00-s{index:02d}-seed{seed}"] = "success" if index < wins else "failure"
    summary = build_summary(write_run(tmp_path / "run", full_protocol(seeds=(7, 8, 9)), outcomes), LIBERO)
    per_seed = summary["seeds"]["per_seed"]
    assert {s: b["overall"]["success_rate_errors_excluded"]["rate"] for s, b in per_seed.items()} == {
        "7": 0.5, "8": 1.0, "9": 0.0}
    mean = summary["seeds"]["mean"]["overall"]
    assert mean["mean"] == pytest.approx(0.5) and mean["n_seeds"] == 3
    assert mean["sd"] == pytest.approx(0.5)  # sample sd of 0.5, 1, 0
    assert mean["sem"] == pytest.approx(0.5 / math.sqrt(3))
    assert summary["seeds"]["mean"]["suites"]["libero_10"]["mean"] == pytest.approx(0.5)
    assert "LIBERO seeds: seed 7 50.0%; seed 8 100.0%; seed 9 0.0%; mean 50.0% +- 50.0 (sd), sem 28.9 over 3 seeds" \
        in lines(summary)


def test_per_task_rates_have_wilson_intervals_and_per_seed_rows_in_full_mode(tmp_path):
    from pytest_libero.results.summary import rate_lines

    outcomes = {}
    for seed in (7, 8):
        for index in range(4):  # task 0 wins 3 of 4 at seed 7 and 1 of 4 at seed 8; task 1 always fails
            wins = 3 if seed == 7 else 1
            outcomes[f"libero_10-t00-s{index:02d}-seed{seed}"] = "success" if index < wins else "failure"
            outcomes[f"libero_10-t01-s{index:02d}-seed{seed}"] = "env_error" if index == 0 else "failure"
    run_dir = write_run(tmp_path / "run", full_protocol(seeds=(7, 8)), outcomes)
    summary = rebuild(run_dir, LIBERO)
    task0, task1 = summary["tasks"]["libero_10-t00"], summary["tasks"]["libero_10-t01"]
    assert (task0["selected"], task0["passed"], task0["failed"], task0["suite"]) == (8, 4, 4, "libero_10")
    assert task0["success_rate_errors_excluded"]["ci95"] == pytest.approx([0.2152, 0.7848], abs=1e-4)
    assert (task1["errored"], task1["success_rate_errors_excluded"]["trials"]) == (2, 6)
    per_seed = summary["seeds"]["per_seed"]
    assert per_seed["7"]["tasks"]["libero_10-t00"]["success_rate_errors_excluded"]["rate"] == 0.75
    assert per_seed["8"]["tasks"]["libero_10-t00"]["success_rate_errors_excluded"]["rate"] == 0.25
    assert summary["suites"]["libero_10"]["selected"] == 16  # the per-suite rows are still there
    text = rate_lines(summary)
    assert "LIBERO suite libero_10: 28.6% [11.7, 54.6] (n=14)" in text
    assert "LIBERO task libero_10-t00: 50.0% [21.5, 78.5] (n=8); seed 7 75.0% (n=4), seed 8 25.0% (n=4)" in text
    page = (run_dir / "report.html").read_text()
    assert 'id="grid"' in page and '<a href="#task=libero_10-t01">libero_10-t01</a>' in page


def test_schedule_line_says_full_partial_or_fast(tmp_path):
    full = build_summary(write_run(tmp_path / "a", full_protocol("openpi"), {"libero_10-t00-s00": "success"}), LIBERO)
    assert full["schedule"]["all_init_states_at_schedule_caps"] is True
    assert full["schedule"]["text"].startswith("full mode, schedule openpi (sha256 ")
    partial = build_summary(write_run(tmp_path / "b", full_protocol("openpi", init_states=(0,)),
                                      {"libero_10-t00-s00": "success"}), LIBERO)
    assert "partial: init states 0 only, not the full schedule" in partial["schedule"]["text"]
    from pytest_libero.core.protocol import Protocol

    fast = build_summary(write_run(tmp_path / "c", Protocol("default", "horizon", 5, None, spec=LIBERO_SPEC),
                                   {"libero_10-t00-s00": "success"}), LIBERO)
    assert fast["schedule"]["mode"] == "fast" and "not the published protocol" in fast["schedule"]["text"]
    assert "seeds" not in fast and "perturbations" not in fast


def test_libero_pro_suites_are_summarized_per_perturbation_beside_the_base(tmp_path):
    outcomes = {f"libero_goal-t00-s{i:02d}": "success" for i in range(4)}
    outcomes |= {f"libero_goal_swap-t00-s{i:02d}": "success" if i < 1 else "failure" for i in range(4)}
    outcomes |= {f"libero_goal_lan-t00-s{i:02d}": "success" if i < 3 else "failure" for i in range(4)}
    run_dir = write_run(tmp_path / "run", full_protocol(), outcomes)
    summary = rebuild(run_dir, LIBERO)
    row = summary["perturbations"]["libero_goal"]
    assert row["base"]["rate"] == 1.0
    assert row["perturbations"]["swap"]["rate"] == 0.25 and row["perturbations"]["swap"]["difference_vs_base"] == -0.75
    assert row["perturbations"]["lan"]["rate"] == 0.75
    assert set(summary["suites"]) == {"libero_goal", "libero_goal_lan", "libero_goal_swap"}
    line = "LIBERO-PRO libero_goal: base 100.0% (n=4); lan 75.0% (n=4), swap 25.0% (n=4)"
    assert line in LIBERO.terminal_lines(summary)
    page = (run_dir / "report.html").read_text()
    assert "LIBERO-PRO libero_goal: base 100.0% (n=4)" in page and "LIBERO schedule: full mode" in page


def test_libero_pro_files_are_in_the_source_inventory_and_match_the_installed_package():
    inventory = catalog.load_inventory()["libero_pro_entries"]
    assert len(inventory) == 160
    assert {e["suite"] for e in inventory} == set(catalog.PRO_SUITES)
    assert all(e["reset_count"] == 50 for e in inventory)
    assert check_installation(inventory) == []  # hashes every installed PRO BDDL and init-state file
