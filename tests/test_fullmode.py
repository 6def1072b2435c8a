"""Full mode through pytester: cells, ids, seeds, counts, usage errors; the bench service is a fake."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fakes import fake_conftest
from run_folders import full_protocol, write_run
from pytest_libero.benchmarks.libero import catalog
from pytest_libero.core.cells import Cell
from pytest_libero.core.cells import cell_id, parse_cell_id, parse_run_seed

FAKES = (Path(__file__).parent / "fakes.py").read_text()
LOGGING_SERVICE = """
import json
from fakes import FakeService

class LoggingService(FakeService):
    def start(self, payload):
        with open("payloads.jsonl", "a") as stream:
            stream.write(json.dumps(payload) + "\\n")
        return super().start(payload)
"""


def collected_ids(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.outlines
    return [line.split("[")[1].rstrip("]") for line in result.outlines if "::test_rollout[" in line]


def test_full_plan_is_130_tasks_by_50_init_states_in_order(pytester):
    ids = collected_ids(pytester, "--libero-mode", "full", "--libero-scope", "plan")
    expected = [f"{e['suite']}-t{e['task_index']:02d}-s{i:02d}" for e in catalog.entries() for i in range(50)]
    assert len(ids) == 6500 and ids == expected


def test_default_full_schedule_is_the_four_standard_suites(pytester):
    ids = collected_ids(pytester, "--libero-mode", "full")
    assert len(ids) == 2000
    assert {parse_cell_id(i)[0] for i in ids} == set(catalog.STANDARD_SUITES)  # type: ignore[index]
    assert ids[:2] == ["libero_spatial-t00-s00", "libero_spatial-t00-s01"] and ids[-1] == "libero_10-t09-s49"


def test_seeds_repeat_the_schedule_and_tag_the_ids(pytester):
    ids = collected_ids(pytester, "--libero-mode", "full", "--libero-schedule", "libero-native",
                        "--libero-seeds", "7,8,9", "--libero-scope", "task_coverage", "--libero-suite", "libero_goal",
                        "--libero-task-ids", "4")
    expected = [f"libero_goal-t04-s{i:02d}-seed{seed}" for seed in (7, 8, 9) for i in range(20)]
    assert ids == expected


def test_libero_pro_suites_select_in_fast_and_full_mode(pytester):
    assert collected_ids(pytester, "--libero-scope", "task_coverage", "--libero-suite", "libero_10_swap") == [
        f"libero_10_swap-t{i:02d}-s00" for i in range(10)]
    ids = collected_ids(pytester, "--libero-mode", "full", "--libero-scope", "task_coverage",
                        "--libero-suite", "libero_object_lan", "--libero-task-ids", "9")
    assert ids == [f"libero_object_lan-t09-s{i:02d}" for i in range(50)]


@pytest.mark.parametrize("suite", catalog.ALL_SUITES)
def test_cell_ids_invert_for_every_suite_with_and_without_seed(suite):
    for cell in (Cell(suite, 3, 17), Cell(suite, 3, 17, seed=0, run_seed=9)):
        assert parse_cell_id(cell.id) == (suite, 3, 17)
        assert parse_run_seed(f"cases/test_libero.py::test_rollout[{cell.id}]") == cell.run_seed
    assert Cell(suite, 3, 17, run_seed=9).id == f"{suite}-t03-s17-seed9"
    # the id finder shared with LIBERO-plus keeps the seed part (accounting and records key on it)
    assert cell_id(f"cases/test_libero.py::test_rollout[{suite}-t03-s17-seed9]") == f"{suite}-t03-s17-seed9"


def test_libero_pro_catalog_has_the_16_suites_with_their_instructions():
    assert len(catalog.PRO_SUITES) == 16
    for suite in catalog.PRO_SUITES:
        entries = catalog.entries(suite)
        base = catalog.entries(catalog.base_suite(suite))
        assert [e["task_name"] for e in entries] == [e["task_name"] for e in base]
        changed = [e["language"] != b["language"] for e, b in zip(entries, base, strict=True)]
        # _lan and _task rewrite the instruction; _object and _swap keep the base one
        assert all(changed) if catalog.perturbation(suite) in ("lan", "task") else not any(changed), suite
    assert len(catalog.entries()) == 130  # the standard plan is unchanged


@pytest.mark.parametrize("args, message", [
    (["--libero-schedule", "openvla"], "*--libero-schedule openvla applies only with --libero-mode full*"),
    (["--libero-seeds", "7,8"], "*--libero-seeds 7,8 applies only with --libero-mode full*"),
    (["--libero-mode", "full", "--libero-schedule", "openvla-oft"],
     "*unknown schedule 'openvla-oft'; available: lerobot, lerobot-docs, libero-native, oft, openpi, openvla, "
     "standard*"),
    (["--libero-mode", "full", "--libero-seeds", "7,x"], "*--libero-seeds '7,x': 'x' is not a seed*"),
    (["--libero-mode", "full", "--libero-seeds", "7,7"], "*7 is listed twice*"),
    (["--libero-mode", "full", "--libero-schedule", "libero-native", "--libero-init-states", "0,25"],
     "*init state 25 is not in schedule libero-native's libero_spatial plan (init states 0-19)*"),
    (["--libero-mode", "full", "--libero-benchmark", "libero_plus"],
     "*--libero-mode full does not apply to --libero-benchmark libero_plus*"),
])
def test_bad_full_mode_options_are_usage_errors(pytester, args, message):
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_collecting_6500_cells_imports_no_simulator():
    code = ("import sys, pytest\n"
            "rc = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', '--libero-mode', 'full',"
            " '--libero-scope', 'plan'])\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mujoco', 'robosuite', 'libero', 'torch'))\n"
            "print('HEAVY', heavy, 'RC', rc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert "6500 tests collected" in done.stdout
    assert "HEAVY [] RC 0" in done.stdout, done.stdout[-2000:]


def test_full_mode_runs_init_states_in_order_with_the_schedule_seeds_and_settling(pytester):
    pytester.makepyfile(fakes=FAKES, logging_service=LOGGING_SERVICE)
    pytester.makeconftest(fake_conftest().replace("from fakes import FakeService",
                                                  "from logging_service import LoggingService as FakeService"))
    result = pytester.runpytest("-p", "no:cacheprovider", "--libero-mode", "full", "--libero-schedule", "lerobot",
                                "--libero-seeds", "1000,2000", "--libero-scope", "development",
                                "--libero-task-ids", "3", "--libero-init-states", "0,1,2",
                                "--libero-budget", "decisions", "--libero-max-policy-calls", "2",
                                "--libero-output", "out", "--libero-video", "none")
    result.assert_outcomes(failed=6)
    payloads = [json.loads(line) for line in (pytester.path / "payloads.jsonl").read_text().splitlines()]
    assert [(p["cell"]["init_index"], p["cell"]["seed"]) for p in payloads] == [
        (0, 1000), (1, 1001), (2, 1002), (0, 2000), (1, 2001), (2, 2002)]  # env seed = run seed + init index
    assert {(p["settle_controls"], tuple(p["settle_action"])) for p in payloads} == {(10, (0.0,) * 6 + (-1.0,))}
    (run_dir,) = [p.parent for p in (pytester.path / "out").glob("*/*/run.json")]
    record = json.loads((run_dir / "episodes" / "libero_10-t03-s02-seed2000.json").read_text())
    assert record["cell"]["run_seed"] == 2000 and record["cell"]["seed"] == 2002
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["schedule"]["name"] == "lerobot" and summary["schedule"]["all_init_states_at_schedule_caps"] is False
    assert sorted(summary["seeds"]["per_seed"]) == ["1000", "2000"]
    result.stdout.fnmatch_lines(["LIBERO schedule: full mode, schedule lerobot*seeds 1000,2000; partial: init "
                                 "states 0,1,2 only*", "LIBERO seeds: seed 1000 0.0%; seed 2000 0.0%; mean 0.0%*",
                                 "LIBERO task libero_10-t03: 0.0% [[]0.0, 39.0] (n=6); "
                                 "seed 1000 0.0% (n=3), seed 2000 0.0% (n=3)"])
    assert summary["seeds"]["per_seed"]["2000"]["tasks"]["libero_10-t03"]["failed"] == 3


def test_resume_refuses_a_run_of_another_schedule_naming_the_difference(pytester):
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(fake_conftest())
    run_dir = write_run(pytester.path / "earlier", full_protocol("openvla", scope="development"),
                        {"libero_10-t00-s00": "failure"})
    result = pytester.runpytest("-p", "no:cacheprovider", "--libero-mode", "full", "--libero-schedule", "lerobot",
                                "--libero-scope", "development", "--libero-resume", str(run_dir))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*its protocol differs*schedule.caps.libero_spatial: 220 in the folder, 280 now*"])
    assert (run_dir / "episodes" / "libero_10-t00-s00.json").is_file()  # the evidence stays


def test_core_raises_option_errors_and_never_imports_pytest():
    import ast
    from pathlib import Path

    from pytest_libero.core import fullmode
    from pytest_libero.errors import OptionError

    with pytest.raises(OptionError, match="--libero-seeds '1,1': 1 is listed twice"):
        fullmode.parse_int_list("--libero-seeds", "1,1", "a seed")
    for path in sorted(Path(fullmode.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert "pytest" not in imported, f"{path.name} imports pytest: only pytest_libero/plugin may"
