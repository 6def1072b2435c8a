"""RoboMemArena against its own runner: real rollouts of the checkout's LIBERO fork, scored by its code.

The reference is the checkout's run_all_tasks1_26.py (b175708, assembled from ../shared/data), with
the one call its tasks 2-26 loop gets wrong corrected (see robomemarena_helpers.DRIVER). Both
runners drive the same scripted adapter, which moves the arm and logs a hash of every observation
it gets: tasks 1 (S), 4 (O), 6 (C+O), 10 (C) and 18 (T), 20 controls, K 10, full mode; task 1 twice
(seeds 50 and 51, the second on the environment the first left, as the runner keeps it), the others once. The adapter
raises at its second call of task 4 (the runner scores that 0 and goes on; here it is a policy
error), and kills this suite's bench service at its second call of task 2 (harness only). The
harness runs its bench service under another interpreter path (--libero-robomemarena-python).
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from robomemarena_helpers import (ADAPTER, copy_checkout, episodes_tsv, interpreter_wrapper, log_lines, run_reference,
                                  tree_state, video_frames)

from pytest_libero.benchmarks.robomemarena import checkout as rc

pytestmark = pytest.mark.real_libero

DIFFERENTIAL = [1, 4, 6, 10, 18]
SEEDS = [50, 51]
TRIALS = {task: len(SEEDS) if task == 1 else 1 for task in DIFFERENTIAL}  # the kept environment: task 1 only
EPISODES = [(task, seed) for task in DIFFERENTIAL for seed in SEEDS[:TRIALS[task]]]
MAX_STEPS = 20
CALLS = MAX_STEPS // 10  # adapter calls per episode at K 10
RAISE_AT = {"drawer butter": 1}  # task 4: after 10 controls
KILL_AT = {"butter popcorn basket": 1}  # task 2 (harness only): after 10 controls
HARNESS_SELECTION = ("--libero-mode", "full", "--libero-robomemarena-trials", str(len(SEEDS)),
                     "--libero-robomemarena-tasks", ",".join(map(str, sorted([*DIFFERENTIAL, 2]))),
                     "--libero-robomemarena-max-steps", str(MAX_STEPS), "-k", "not seed51 or t01")


@pytest.fixture(scope="module")
def both_runs(robomemarena_checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The checkout's runner and this suite's run of the same episodes, started together (neither reads
    what the other writes), so that on two cores they overlap instead of queueing. The checkout's
    state is taken before both and after both, so a write by either is seen."""
    reference_work, harness_work = tmp_path_factory.mktemp("reference"), tmp_path_factory.mktemp("harness")
    before = tree_state(robomemarena_checkout)
    with ThreadPoolExecutor(max_workers=2) as pool:
        reference = pool.submit(_reference, robomemarena_checkout, reference_work)
        harness = pool.submit(_harness, robomemarena_checkout, harness_work)
        runs = {"reference": reference.result(), "harness": harness.result()}
    runs["harness"]["checkout_changed"] = sorted(set(tree_state(robomemarena_checkout).items()) ^ set(before.items()))
    return runs


@pytest.fixture(scope="module")
def reference(both_runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return both_runs["reference"]


@pytest.fixture(scope="module")
def harness(both_runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return both_runs["harness"]


def _reference(checkout: Path, work: Path) -> dict[str, Any]:
    kwargs = json.dumps({"log": str(work / "observations.jsonl"), "raise_at": RAISE_AT})
    done = run_reference(checkout, work, TRIALS, work / "out", [
        "--adapter-spec", f"{ADAPTER}:build_adapter", "--adapter-kwargs", kwargs, "--seed", str(SEEDS[0]),
        "--max-steps", str(MAX_STEPS), "--replan-steps", "10"])
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {}
    for task in DIFFERENTIAL:
        for row in episodes_tsv(work / "out" / f"task{task}"):
            (video,) = (work / "out" / f"task{task}" / "videos" / f"task{task}").glob(
                f"*_ep{row['ep']}_seed{row['seed']}.mp4")
            rows[task, int(row["seed"])] = dict(row, frames=video_frames(video))
    return {"rows": rows, "log": log_lines(work / "observations.jsonl"), "stderr": done.stderr}


def _harness(checkout: Path, work: Path) -> dict[str, Any]:
    kwargs = json.dumps({"log": str(work / "observations.jsonl"), "raise_at": RAISE_AT, "kill_service_at": KILL_AT})
    python = interpreter_wrapper(work / "bin", work / "interpreter.log")
    done = _harness_run(work, checkout, *HARNESS_SELECTION, f"--libero-robomemarena-python={python}",
                        "--libero-policy", f"{ADAPTER}:build_adapter", "--libero-policy-kwargs", kwargs)
    (run_dir,) = (work / "reports").glob("*/*")
    records = {path.stem: json.loads(path.read_text()) for path in (run_dir / "episodes").glob("*.json")}
    return {"done": done, "run_dir": run_dir, "records": records, "log": log_lines(work / "observations.jsonl"),
            "summary": json.loads((run_dir / "summary.json").read_text()), "interpreter": work / "interpreter.log"}


def _harness_run(work: Path, checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--libero-benchmark", "robomemarena",
        f"--libero-robomemarena-checkout={checkout}", f"--libero-output={work / 'reports'}", *args],
        cwd=work, capture_output=True, text=True, timeout=1800)


def _ours(harness: dict[str, Any], task: int, seed: int = 50) -> dict[str, Any]:
    return harness["records"][f"robomemarena-t{task:02d}-seed{seed}"]


@pytest.mark.parametrize(("task", "seed"), EPISODES)
def test_every_episode_scores_as_the_checkouts_own_runner(reference: dict[str, Any], harness: dict[str, Any],
                                                          task: int, seed: int) -> None:
    ref, record = reference["rows"][task, seed], _ours(harness, task, seed)
    scored = record["cell"]["benchmark"]
    assert (f"{scored['score_pct']:.1f}", "Y" if scored["tsr_success"] else "N",
            "Y" if scored["goal_success"] else "N") == (ref["score_pct"], ref["tsr_success"], ref["goal"])
    assert record["cell"]["language"] == ref["prompt"] == scored["service_prompt"]
    # The runner films the frame it hands the adapter before each call: one per control, plus one when
    # the adapter raised instead of answering.
    raised = task == 4
    assert record["counters"]["executed_controls"] + raised == ref["frames"]
    assert record["counters"]["executed_controls"] == (10 if raised else MAX_STEPS)
    # What the adapter was given, call by call (both images, the 8-d state, prompt, resize size): equal.
    # Each runner ran the task's episodes in seed order, CALLS calls each.
    prompt, first = ref["prompt"], CALLS * SEEDS.index(seed)
    theirs = [line for line in reference["log"] if line["prompt"] == prompt][first:first + CALLS]
    mine = [line for line in harness["log"] if line["prompt"] == prompt][first:first + CALLS]
    assert mine == theirs and len(mine) == CALLS
    assert record["compute"]["env_reused"] is (seed != SEEDS[0])  # the second trial kept the first's env


def test_an_adapter_exception_is_a_policy_error_where_the_runner_prints_a_score(reference: dict[str, Any],
                                                                                 harness: dict[str, Any]) -> None:
    assert "Episode failed: scripted adapter failure at call 1" in reference["stderr"]
    assert reference["rows"][4, 50]["score_pct"] == "0.0"  # the runner's episodes.tsv: just a 0% episode
    record = _ours(harness, 4)
    assert record["outcome"]["outcome"] == "policy_error"
    assert "scripted adapter failure at call 1" in record["outcome"]["message"]
    assert record["cell"]["benchmark"]["score_pct"] == 0.0  # the stages so far are still recorded


def test_a_service_that_dies_is_an_environment_error_and_the_run_goes_on(harness: dict[str, Any]) -> None:
    record = _ours(harness, 2)
    assert record["outcome"]["outcome"] == "env_error"
    assert "bench service process died" in record["outcome"]["message"]
    assert _ours(harness, 4)["outcome"]["outcome"] == "policy_error"  # the next task ran on a fresh service


def test_records_summary_and_page_carry_the_checkout_and_the_metrics(robomemarena_checkout: Path,
                                                                     harness: dict[str, Any]) -> None:
    done = harness["done"]
    assert done.returncode == 1, done.stdout[-3000:]  # failures and errors, none passed
    expected = {name: rc.sha256_file(robomemarena_checkout / rc.SCRIPTS / name) for name in rc.SCORER_FILES}
    for task in [*DIFFERENTIAL, 2]:
        benchmark = _ours(harness, task)["cell"]["benchmark"]
        assert benchmark["provenance"]["commit"] == "unknown"  # an assembled checkout, not a git clone
        assert benchmark["provenance"]["scorer_sha256"] == expected
        bddl = next((robomemarena_checkout / rc.BDDL).glob(f"{task}_*.bddl"))
        assert benchmark["bddl_sha256"] == rc.sha256_file(bddl)
        if task != 2:  # the service that died sent no evidence
            assert _ours(harness, task)["private"]["bddl_sha256"] == benchmark["bddl_sha256"]
    assert _ours(harness, 1)["cell"]["benchmark"]["provenance"]["scorer_sha256_in_service"] == expected
    # The install check against catalog/fingerprints/robomemarena-llvmpipe.json (its sample holds these
    # cells), at each cell's first observation: task 1 at seed 51 on the environment seed 50 left too.
    for task, seed in EPISODES:
        check = _ours(harness, task, seed)["install"]
        assert (check["verdict"], check["states"], check["images"]) == ("matches", "match", "match"), (task, check)
    assert "LIBERO install: matches the reference" in done.stdout
    assert _ours(harness, 6)["cell"]["benchmark"]["memory_type"] == "C+O"
    video = _ours(harness, 1)["video"]
    assert video is not None and (harness["run_dir"] / video["path"]).is_file()
    block = harness["summary"]["robomemarena"]
    assert set(block["by_task"]) == {"1", "2", "4", "6", "10", "18"}
    assert set(block["by_memory_type"]) == {"S", "O", "C", "C+O", "T"}
    outcomes = block["overall"]["episodes"]["by_outcome"]
    assert (outcomes["env_error"], outcomes["policy_error"], outcomes["failure"]) == (1, 1, 5)
    assert block["overall"]["tsr"]["trials"] == 6  # a policy error fails its item; an env error is left out
    assert block["by_task"]["1"]["episodes"]["selected"] == 2
    assert harness["summary"]["schedule"]["text"] == ("full mode, robomemarena preset robomemarena; a variant of the "
                                                      "preset: max_steps 20 (preset 3000)")
    assert "RoboMemArena task 6 (C+O): TSR 0.0%" in done.stdout
    page = (harness["run_dir"] / "report.html").read_text()
    assert "RoboMemArena: TSR, CSR and stages" in page and "memory type C+O" in page


def test_the_service_ran_under_the_given_interpreter_and_wrote_nothing_into_the_checkout(
        harness: dict[str, Any]) -> None:
    assert "-m pytest_libero.runtime.server" in harness["interpreter"].read_text()
    assert harness["checkout_changed"] == []


def test_a_changed_scorer_refuses_resume_merge_and_compare_naming_the_file(
        robomemarena_checkout: Path, harness: dict[str, Any], tmp_path: Path) -> None:
    edited = copy_checkout(robomemarena_checkout, tmp_path / "edited")
    # A scorer bug: task 1's first stage check raises.
    with (edited / rc.SCRIPTS / "eval_task1_only.py").open("a") as stream:
        stream.write("\n\ndef _broken(env):\n    raise RuntimeError('a scorer bug')\n\n\n"
                     "STAGE_CHECKS = [('cookies_in_basket', _broken)] + STAGE_CHECKS[1:]\n")
    named = "benchmark_options.scorer_sha256:eval_task1_only.py"
    first = harness["run_dir"]
    resumed = _harness_run(tmp_path, edited, *HARNESS_SELECTION, f"--libero-resume={first}")
    assert resumed.returncode == 4 and named in resumed.stderr, resumed.stderr[-2000:]
    # A second real run (one short episode) over the edited checkout: the scorer's exception is an
    # environment error, not a zero score.
    second = _harness_run(tmp_path, edited, "--libero-robomemarena-tasks", "1", "--libero-robomemarena-max-steps", "2")
    assert second.returncode == 1, second.stdout[-2000:]
    (run_b,) = (tmp_path / "reports").glob("*/*")
    record = json.loads((run_b / "episodes" / "robomemarena-t01-seed50.json").read_text())
    assert record["outcome"]["outcome"] == "env_error" and "RuntimeError: a scorer bug" in record["outcome"]["message"]
    for command in (["compare", str(first), str(run_b)], ["merge", str(tmp_path / "merged"), str(first), str(run_b)]):
        done = subprocess.run([sys.executable, "-m", "pytest_libero", *command], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode != 0 and named in done.stderr, (command, done.stderr[-2000:])


def test_demonstration_a_scripted_replay_reaches_tsr_on_task_1(robomemarena_checkout: Path, tmp_path: Path) -> None:
    """A demonstration (privileged-state script, replayed open-loop), labelled so: the success path is real."""
    done = _harness_run(tmp_path, robomemarena_checkout, "--libero-robomemarena-tasks", "1",
                        "--libero-robomemarena-max-steps", "294", "--libero-policy",
                        f"{Path(__file__).parent / 'robomemarena_demo_adapter.py'}:build_adapter")
    assert done.returncode == 0, done.stdout[-3000:]
    (run_dir,) = (tmp_path / "reports").glob("*/*")
    record = json.loads((run_dir / "episodes" / "robomemarena-t01-seed50.json").read_text())
    scored = record["cell"]["benchmark"]
    assert record["outcome"]["outcome"] == "success" and scored["tsr_success"] and scored["score_pct"] == 100.0
    # The runner logged t=109 and t=289; its t counts the 10 settling controls from 0.
    assert [s["completed_control"] for s in scored["stages"]] == [100, 280]
    assert scored["goal_success"] and record["counters"]["executed_controls"] == 294
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_kind"]["kind"] == "demonstration-replay"
    assert "demonstration replay" in done.stdout
