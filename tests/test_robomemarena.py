"""RoboMemArena without the simulator: the checkout's checks and provenance, selection, presets and the
protocol identity, the results block. The checkout is assembled from ../shared/data (never copied
into the project); the rollouts against RoboMemArena's own runner are in test_robomemarena_real.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from robomemarena_helpers import copy_checkout

from pytest_libero.benchmarks.robomemarena import checkout as rc
from pytest_libero.benchmarks.robomemarena import options, presets, results
from pytest_libero.benchmarks.robomemarena.adapter import ADAPTER
from pytest_libero.core.protocol import Protocol, setting_differences
from pytest_libero.errors import OptionError
from pytest_libero.results.summary import group_stats


def settings(checkout: Path, **more: Any) -> dict[str, Any]:
    return {"libero_robomemarena_checkout": str(checkout), **more}


def protocol(selection: Any) -> Protocol:
    defaults = dict(scope="default", budget="horizon", replan_interval=5, max_policy_calls=None, track="rgb")
    return Protocol(spec=ADAPTER.spec, **dict(defaults, **selection.protocol))  # as the plugin builds it


def test_the_checkout_is_read_with_its_tasks_memory_types_and_hashes(robomemarena_checkout: Path) -> None:
    found = rc.load(robomemarena_checkout)
    assert [t.task_id for t in found.tasks] == list(range(1, 27))
    # The task table's memory types (written "C + O" there), the prompt rule of eval_common.get_prompt.
    assert {t.task_id: t.memory_type for t in found.tasks if t.task_id in (1, 4, 6, 10, 11, 18)} == {
        1: "S", 4: "O", 6: "C+O", 10: "C", 11: "O+C", 18: "T"}
    assert found.task(4).prompt == "drawer butter" and found.task(1).prompt == "cookies tomato basket"
    assert found.commit == "unknown" and found.dirty is None  # assembled, not a git clone
    assert dict(found.scorer_sha256) == {name: rc.sha256_file(robomemarena_checkout / rc.SCRIPTS / name)
                                         for name in rc.SCORER_FILES}


def test_a_git_checkout_records_its_head_and_whether_it_is_dirty(robomemarena_checkout: Path, tmp_path: Path) -> None:
    root = copy_checkout(robomemarena_checkout, tmp_path / "clone")
    git = ["git", "-C", str(root), "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "evaluation_benchmark/scripts", "evaluation_benchmark/bddl"], check=True)
    subprocess.run([*git, "commit", "-qm", "snapshot"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert (rc.load(root).commit, rc.load(root).dirty) == (head, False)
    with (root / rc.SCRIPTS / "eval_common.py").open("a") as stream:
        stream.write("# edited\n")
    assert rc.load(root).dirty is True


def test_a_missing_or_wrong_checkout_says_what_was_expected_where(robomemarena_checkout: Path,
                                                                  tmp_path: Path) -> None:
    with pytest.raises(OptionError, match=r"--libero-robomemarena-checkout PATH or set PYTEST_LIBERO_ROBOMEMARENA"):
        options.select({}, environ={})
    with pytest.raises(OptionError, match=r"no such folder"):
        options.select(settings(tmp_path / "absent"), environ={})
    root = copy_checkout(robomemarena_checkout, tmp_path / "partial")
    (root / rc.SCRIPTS / "task2_26_reference_stage.py").unlink()
    next((root / rc.BDDL).glob("18_*.bddl")).unlink()
    with pytest.raises(OptionError, match=r"missing evaluation_benchmark/scripts/task2_26_reference_stage.py"):
        options.select(settings(root), environ={})
    (root / rc.SCRIPTS / "task2_26_reference_stage.py").write_text("")
    with pytest.raises(OptionError, match=r"no BDDL file for task\(s\) 18 in evaluation_benchmark/bddl"):
        options.select(settings(root), environ={})
    # The environment variable serves as well as the option.
    assert len(options.select({}, environ={rc.CHECKOUT_ENV: str(robomemarena_checkout)}).cells) == 26


def test_fast_mode_runs_each_task_once_at_seed_50_with_the_readme_protocol(robomemarena_checkout: Path) -> None:
    chosen = options.select(settings(robomemarena_checkout, libero_robomemarena_tasks="1,4,6-8"))
    assert [c.id for c in chosen.cells] == [f"robomemarena-t{t:02d}-seed50" for t in (1, 4, 6, 7, 8)]
    run = protocol(chosen)
    assert (run.replan_interval, run.settle_controls, run.track, run.seed, run.mode) == (10, 10, "openpi-compat", 50,
                                                                                       "fast")
    assert run.control_cap("robomemarena") == 3000 and "max_steps 3000" in run.cap_source("robomemarena")
    opts = dict(run.benchmark_options)
    assert (opts["post_goal_steps"], opts["resize_size"], opts["preset"]) == (200, 256, "robomemarena")
    # A K or track given on the command line wins, and is part of the identity.
    other = protocol(options.select(settings(robomemarena_checkout, libero_replan_interval=5, libero_track="rgb")))
    assert (other.replan_interval, other.track) == (5, "rgb") and other.identity != run.identity
    assert other.as_dict()["overrides"] == {"replan_interval": {"preset": 10, "run": 5},
                                           "track": {"preset": "openpi-compat", "run": "rgb"}}
    assert "overrides" not in run.as_dict()
    same = protocol(options.select(settings(robomemarena_checkout, libero_replan_interval=10)))
    assert same.identity == run.identity  # the preset's own value is no variant


def test_full_mode_runs_a_presets_trials_or_chosen_seeds(robomemarena_checkout: Path) -> None:
    full = options.select(settings(robomemarena_checkout, libero_mode="full"))
    assert len(full.cells) == 26 * 51 and {c.seed for c in full.cells} == set(range(50, 101))
    old = options.select(settings(robomemarena_checkout, libero_mode="full", libero_schedule="robomemarena-b175708",
                                  libero_robomemarena_tasks="2"))
    assert [c.seed for c in old.cells] == list(range(100, 150)) and protocol(old).replan_interval == 5
    some = options.select(settings(robomemarena_checkout, libero_mode="full", libero_robomemarena_tasks="3",
                                   libero_robomemarena_trials=3))
    assert [c.id for c in some.cells] == ["robomemarena-t03-seed50", "robomemarena-t03-seed51",
                                          "robomemarena-t03-seed52"]
    chosen = options.select(settings(robomemarena_checkout, libero_mode="full", libero_robomemarena_tasks="3",
                                     libero_seeds="60,52"))
    assert [c.seed for c in chosen.cells] == [52, 60] and [c.init_index for c in chosen.cells] == [2, 10]
    assert protocol(full).identity == protocol(some).identity  # a subset of the same protocol


@pytest.mark.parametrize("given, message", [
    ({"libero_robomemarena_tasks": "0,3"}, r"task 0 does not exist; RoboMemArena's tasks are 1-26"),
    ({"libero_robomemarena_tasks": "3,2-4"}, r"task 3 is listed twice"),
    ({"libero_robomemarena_tasks": "x"}, r"'x' is not a task id or range"),
    ({"libero_seeds": "50"}, r"--libero-seeds applies only with --libero-mode full"),
    ({"libero_mode": "full", "libero_seeds": "49"}, r"49 not among preset robomemarena's episode seeds 50..100"),
    ({"libero_mode": "full", "libero_robomemarena_trials": 52}, r"preset robomemarena has 51 trials"),
    ({"libero_mode": "full", "libero_schedule": "standard"}, r"RoboMemArena's presets are robomemarena, "),
    ({"libero_scope": "development"}, r"--libero-scope does not apply .* --libero-robomemarena-tasks"),
    ({"libero_budget": "decisions"}, r"--libero-budget decisions does not apply"),
    ({"libero_suite": "libero_10"}, r"RoboMemArena has one suite, robomemarena"),
    ({"libero_robomemarena_max_steps": 0}, r"--libero-robomemarena-max-steps 0: must be at least 1"),
    ({"libero_robomemarena_python": "/nonexistent/python"}, r"not an executable file"),
])
def test_bad_selection_input_names_the_value_and_the_fix(robomemarena_checkout: Path, given: dict[str, Any],
                                                         message: str) -> None:
    with pytest.raises(OptionError, match=message):
        options.select(settings(robomemarena_checkout, **given))


def test_presets_match_their_sources(robomemarena_checkout: Path) -> None:
    """robomemarena: the README's command (seed 004); robomemarena-b175708: the runner's own argparse defaults,
    read here from the checkout's run_all_tasks1_26.py."""
    runner = (robomemarena_checkout / rc.SCRIPTS / "run_all_tasks1_26.py").read_text()
    defaults = {m["flag"]: int(m["value"]) for m in re.finditer(
        r'add_argument\("--(?P<flag>[a-z-]+)", type=int, default=(?P<value>\d+)\)', runner)}
    old = presets.PRESETS["robomemarena-b175708"]
    assert (old.trials, old.seed_start, old.replan_steps, old.max_steps, old.post_goal_steps, old.settle_controls,
            old.resize_size) == tuple(defaults[f] for f in ("num-trials-per-task", "seed", "replan-steps", "max-steps",
                                                             "post-goal-steps", "num-steps-wait", "resize-size"))
    seed = next(Path(__file__).resolve().parents[2].glob("shared/seeds/004_*")).read_text()
    readme = presets.PRESETS["robomemarena"]
    assert "--num-trials-per-task 51" in seed and "--seed 50" in seed and "The default is 10 steps" in seed
    assert (readme.trials, readme.seed_start, readme.replan_steps) == (51, 50, 10)
    # What the README leaves out is the runner's.
    assert (readme.max_steps, readme.post_goal_steps, readme.settle_controls, readme.resize_size) == (
        defaults["max-steps"], defaults["post-goal-steps"], defaults["num-steps-wait"], defaults["resize-size"])
    assert all(key in readme.sources for key in ("trials", "replan_steps", "max_steps", "post_goal_steps"))
    assert any("README states none" in line for line in readme.describe())


def test_a_changed_scorer_file_changes_the_identity_naming_the_file(robomemarena_checkout: Path,
                                                                    tmp_path: Path) -> None:
    before = protocol(options.select(settings(robomemarena_checkout)))
    root = copy_checkout(robomemarena_checkout, tmp_path / "edited")
    with (root / rc.SCRIPTS / "task2_26_reference_stage.py").open("a") as stream:
        stream.write("\n# a threshold changed\n")
    after = protocol(options.select(settings(root)))
    assert before.identity != after.identity
    differences = setting_differences(before.as_dict(), after.as_dict(), "in A", "in B")
    assert len(differences) == 1 and differences[0].startswith(
        "benchmark_options.scorer_sha256:task2_26_reference_stage.py: ")
    # The checkout's location is not part of the protocol.
    assert protocol(options.select(settings(copy_checkout(robomemarena_checkout, tmp_path / "moved")))).identity \
        == before.identity


def test_cells_records_and_the_results_block(robomemarena_checkout: Path) -> None:
    chosen = options.select(settings(robomemarena_checkout, libero_robomemarena_tasks="1,6"))
    run = protocol(chosen).as_dict()
    fields = ADAPTER.cell_fields("robomemarena-t06-seed50", run, chosen.context)
    assert fields["benchmark"]["memory_type"] == "C+O" and fields["language"] == "pour tomato sauce into bowl drainer"
    assert fields["benchmark"]["provenance"]["commit"] == "unknown"
    assert set(fields["benchmark"]["provenance"]["scorer_sha256"]) == set(rc.SCORER_FILES)
    assert ADAPTER.markers(chosen.cells[1]) == ("memory_counting", "memory_occlusion")
    assert ADAPTER.cell_id("cases/test_libero.py::test_rollout[robomemarena-t06-seed50]") == "robomemarena-t06-seed50"
    records = {}
    for cell, outcome, score, tsr, goal in (("robomemarena-t01-seed50", "success", 100.0, True, True),
                                            ("robomemarena-t06-seed50", "failure", 100 / 3, False, True)):
        record = {"cell": ADAPTER.cell_fields(cell, run, chosen.context), "outcome": {
            "outcome": outcome, "first_success_control": 300 if tsr else None}}
        stages = [{"name": "a", "completed_control": 10}, {"name": "b", "completed_control": 20 if tsr else None}]
        ADAPTER.record_fields(record, {"robomemarena": {
            "score_pct": score, "tsr_success": tsr, "goal_success": goal, "goal_reached_control": 12, "stages": stages,
            "episode_ended": True, "prompt": "p", "scorer_sha256": {}}})
        records[cell] = record
    block = results.results(list(records), records, lambda cells: group_stats(cells, records))
    assert block is not None
    assert block["overall"]["tsr"]["successes"] == 1 and block["overall"]["csr"]["successes"] == 2
    assert block["overall"]["average_score_pct"] == pytest.approx((100 + 100 / 3) / 2)
    assert block["by_task"]["6"]["stage_completion"]["b"] == {"completed": 0, "episodes": 1, "rate": 0.0}
    assert set(block["by_memory_type"]) == {"S", "C+O"}
    lines = ADAPTER.terminal_lines({"robomemarena": block})
    assert any(line.startswith("RoboMemArena task 6 (C+O): TSR 0.0%") for line in lines)
    assert "<td>task 1 (S)</td>" in ADAPTER.html_block({"robomemarena": block})


def test_the_benchmark_is_refused_without_a_checkout_before_any_episode(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--libero-benchmark",
                           "robomemarena", "--libero-robomemarena-checkout", str(tmp_path / "nowhere")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"RoboMemArena checkout {tmp_path / 'nowhere'}: no such folder" in done.stderr


def test_the_schedule_command_lists_and_prints_the_presets(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_libero.__main__ import main

    assert main(["schedule"]) == 0
    listing = capsys.readouterr().out
    assert re.search(r"^robomemarena-b175708 +RoboMemArena .*50 trials from seed 100, K 5$", listing, re.M)
    assert main(["schedule", "robomemarena"]) == 0
    out = capsys.readouterr().out
    assert "trials per task: 51 (seeds 50..100" in out and "replan steps K: 10" in out
    assert "max steps (cap): 3000  [evaluation_benchmark/scripts/run_all_tasks1_26.py at b175708" in out


def test_the_summary_names_the_preset_and_any_variant(robomemarena_checkout: Path) -> None:
    from pytest_libero.results.schedule_summary import schedule_block

    fast = schedule_block(protocol(options.select(settings(robomemarena_checkout))).as_dict())
    assert fast["text"].startswith("fast mode, robomemarena preset robomemarena, seed 50, each selected task once")
    full = schedule_block(protocol(options.select(settings(
        robomemarena_checkout, libero_mode="full", libero_schedule="robomemarena-b175708",
        libero_robomemarena_max_steps=500))).as_dict())
    assert full["text"] == ("full mode, robomemarena preset robomemarena-b175708; a variant of the preset: "
                            "max_steps 500 (preset 3000)")
