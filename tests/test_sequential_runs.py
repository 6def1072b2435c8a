"""Stop when decided, end to end: `--libero-against RUN_A` runs policy B on run A's cells in a fixed
stratified order and stops when the sequential paired test decides (pytest_libero/plugin/sequential.py,
pytest_libero/results/sequential.py).

Real plugin runs in subprocesses on the test-only toy benchmark (tests/toy_benchmark.py, registered
through its entry point as in test_benchmark_seam.py), with policies of known behaviour: `still`
never succeeds, `push` succeeds on every cell of toy task n1 and on none of task n2. With 6 init
states a task there are 24 cells; still (A) against push (B) gives an only-B pair on every n1
cell and a concordant one on every n2 cell, so the order (alternating the two tasks) decides
"B better" at the 8th only-B pair: after 16 pairs, core.sequential's numbers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import test_benchmark_seam as seam
from pytest_libero.core.confidence import confidence_sequence
from pytest_libero.core.statistics import Paired, newcombe_paired_ci
from test_benchmark_seam import POLICIES, assert_schema_valid, cli, pytest_run, records

env = seam.env  # the toy's registration (a module-scoped fixture)

INITS = 6
CELLS = 2 * 2 * INITS
TOY = ["--libero-benchmark", "toy", "--libero-toy-inits", str(INITS), "--libero-budget", "decisions",
       "--libero-max-policy-calls", "3", "--libero-video", "none"]
STOP = "stopped: decided (B better after 16 pairs)"
EFFECT = "effect B - A +50.0 pp over 16 pairs; anytime-valid 95% interval [+2.7, +83.4] pp (a confidence sequence"


def run(cwd: Path, env: dict[str, str], *args: str) -> tuple[Any, Path | None]:
    """A plugin run writing under cwd/out; (the process, its run folder or None)."""
    result = pytest_run(cwd, env, "-q", "--libero-output", str(cwd / "out"), *args)
    found = [p.parent for p in cwd.glob("out/*/*/run.json")]
    return result, (found[0] if len(found) == 1 else None)


def sequential(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "summary.json").read_text())["sequential"]  # type: ignore[no-any-return]


def task(cell: str) -> str:
    return cell.split("-")[1]  # "n1" or "n2", the toy's task label without its prefix


@pytest.fixture(scope="module")
def run_a(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    result, folder = run(tmp_path_factory.mktemp("a"), env, *TOY, *POLICIES["still"])
    assert result.returncode == pytest.ExitCode.TESTS_FAILED and folder is not None, result.stdout + result.stderr
    return folder


@pytest.fixture(scope="module")
def stopped(env: dict[str, str], run_a: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """B (push) against A (still), without xdist."""
    result, folder = run(tmp_path_factory.mktemp("b"), env, *TOY, *POLICIES["push"], "--libero-against", str(run_a))
    assert folder is not None, result.stdout + result.stderr
    return result, folder


def test_a_difference_stops_early_and_the_rest_is_not_run_with_the_reason(stopped, run_a):
    result, folder = stopped
    # B's n2 cells fail (as they would in any run): the exit status is theirs, not an interruption.
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout + result.stderr
    assert "B better after 16 of 24 pairs; statistic 4.04 >= boundary log(2/alpha) 3.69" in result.stdout
    block = sequential(folder)
    assert (block["decision"], block["stopped_after"], block["stopped"], block["order_cells"]) == \
        ("B better", 16, True, CELLS)
    assert (block["steps"][-1]["only_b"], block["steps"][-1]["concordant"], block["errored"]) == (8, 8, 0)
    assert block["against"] == str(run_a) and block["order_seed"] == 27 and block["not_counted"] == []
    # The order is stratified: after every prefix the two tasks differ by at most one cell.
    consumed = [step["cell"] for step in block["steps"]]
    for n in range(1, len(consumed) + 1):
        assert abs(sum(task(c) == "n1" for c in consumed[:n]) - sum(task(c) == "n2" for c in consumed[:n])) <= 1
    found = records(folder)
    assert len(found) == CELLS
    not_run = {cell for cell, r in found.items() if r["outcome"]["outcome"] == "not_run"}
    assert not_run == set(found) - set(consumed) and len(not_run) == CELLS - 16
    assert {found[cell]["outcome"]["message"] for cell in not_run} == {STOP}
    assert_schema_valid(folder)
    # Ordinary episodes of A's protocol identity; run.json holds the comparison.
    a_identity = json.loads((run_a / "run.json").read_text())["protocol"]["identity"]
    assert {r["identities"]["protocol"]["identity"] for r in found.values()} == {a_identity}
    manifest = json.loads((folder / "run.json").read_text())
    assert manifest["comparison"]["against_identity"] == a_identity and manifest["comparison"]["stop"] == "decided"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["overall"]["unattempted"] == CELLS - 16
    # The effect at the stop: 8 only-B of 16 pairs, its anytime-valid interval above 0 as the verdict says.
    effect = block["effect"]
    assert (effect["pairs"], effect["estimate"]) == (16, 0.5)
    assert effect["anytime_valid"]["interval"] == list(confidence_sequence(8, 0, 8, 0.05))
    assert effect["anytime_valid"]["interval"][0] > 0 and effect["anytime_valid"]["level"] == 0.95
    assert effect["fixed_n"]["ci95"] == list(newcombe_paired_ci(Paired(both=0, only_a=0, only_b=8, neither=8)))
    assert EFFECT in result.stdout


def test_the_items_are_collected_in_the_order_and_the_header_says_so(env, run_a, stopped, tmp_path):
    result = pytest_run(tmp_path, env, "--collect-only", *TOY, *POLICIES["push"], "--libero-against", str(run_a))
    assert f"libero: against {run_a}: 24 cells in order (seed 27), sequential test, stop decided" in result.stdout
    collected = [line.split("[")[1].split("]")[0] for line in result.stdout.splitlines() if "[toy_" in line]
    assert collected[:16] == [step["cell"] for step in sequential(stopped[1])["steps"]] and len(collected) == CELLS


def test_the_verdict_is_the_same_under_xdist(env, run_a, stopped, tmp_path):
    result, folder = run(tmp_path, env, "-n", "2", *TOY, *POLICIES["push"], "--libero-against", str(run_a))
    assert folder is not None and result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout + result.stderr
    block, serial = sequential(folder), sequential(stopped[1])
    # The same pairs consumed in the same order, whatever the workers' timing; episodes that were already
    # running when it decided are recorded and listed, never counted.
    assert block["steps"] == serial["steps"] and block["decision"] == "B better"
    found = records(folder)
    ran = {cell for cell, r in found.items() if r["outcome"]["outcome"] != "not_run"}
    assert ran - {step["cell"] for step in block["steps"]} == set(block["not_counted"])
    # The rest is not run, with the reason; on a busy machine the workers may have run all 24 cells
    # (a toy episode takes milliseconds) before the controller read the 16th report: then none is left.
    assert block["stopped"] and len(found) == CELLS
    assert {r["outcome"]["message"] for c, r in found.items() if c not in ran} <= {STOP}


def test_report_rebuilds_the_block_and_the_page_plots_it(stopped, tmp_path, env):
    folder = shutil.copytree(stopped[1], tmp_path / "copy")
    before = sequential(folder)
    (folder / "summary.json").unlink()
    (folder / "sequential_stop.json").unlink()  # the session's marker: not needed to rebuild
    done = cli(env, "report", str(folder))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sequential(folder) == before
    page = (folder / "report.html").read_text()
    assert "Sequential comparison against run A" in page and "B better after 16 of 24 pairs" in page
    assert page.count("<polyline") == 2 and "log(2/alpha) = 3.69" in page
    assert EFFECT in page


def test_compare_applies_the_sequential_analysis_to_a_stopped_comparison(stopped, run_a, env, tmp_path):
    done = cli(env, "compare", str(run_a), str(stopped[1]), "--json", str(tmp_path / "c.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "analysis: sequential" in done.stdout and "B better after 16 of 24 pairs" in done.stdout
    assert "only B 8, only A 0, concordant 8, errored 0" in done.stdout and EFFECT in done.stdout
    result = json.loads((tmp_path / "c.json").read_text())
    assert result["analysis"] == "sequential" and result["sequential"] == sequential(stopped[1])
    # Two ordinary runs: the fixed-n analysis, as before.
    fixed = cli(env, "compare", str(run_a), str(run_a))
    assert fixed.returncode == 0 and "analysis: fixed-n" in fixed.stdout and "analysis: sequential" not in fixed.stdout


def test_the_same_policy_is_futile_and_stop_never_runs_every_cell(env, run_a, tmp_path):
    result, folder = run(tmp_path / "futile", env, *TOY, *POLICIES["still"], "--libero-against", str(run_a),
                         "--libero-min-effect", "0.3")
    assert folder is not None and "futile after 8 of 24 pairs" in result.stdout, result.stdout + result.stderr
    assert sum(r["outcome"]["outcome"] == "not_run" for r in records(folder).values()) == CELLS - 8
    result, folder = run(tmp_path / "never", env, *TOY, *POLICIES["still"], "--libero-against", str(run_a),
                         "--libero-min-effect", "0.3", "--libero-stop", "never")
    assert folder is not None, result.stdout + result.stderr
    block = sequential(folder)
    assert (block["decision"], block["stopped_after"], block["stopped"]) == ("futile", 8, False)
    assert {r["outcome"]["outcome"] for r in records(folder).values()} == {"failure"}  # all 24 ran


# Usage errors need no episode: in-process collection under LIBERO (the default benchmark).
@pytest.mark.parametrize(("args", "message"), [
    (["--libero-alpha", "1.5"], "--libero-alpha 1.5: must be strictly between 0 and 1"),
    (["--libero-power", "1"], "--libero-power 1.0: must be strictly between 0 and 1"),
    (["--libero-min-effect", "0"], "--libero-min-effect 0.0: a difference of success rates strictly between"),
    (["--libero-shard", "1/2"], "--libero-against with --libero-shard"),
    ([], "its protocol identity sha256:0000000000000000 differs from this run's"),
    ([], "budget: 'decisions' in RUN_A, 'horizon' in this run"),
])
def test_bad_comparisons_are_usage_errors_before_any_episode(pytester, args, message):
    run_a = pytester.path / "run_a"
    run_a.mkdir()
    (run_a / "run.json").write_text(json.dumps({"protocol": {"identity": "sha256:0000000000000000",
                                                             "settings": {"budget": "decisions"}}}))
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider", "--libero-scope", "development",
                                "--libero-against", str(run_a), *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and message in "\n".join(result.errlines), result.errlines


@pytest.mark.parametrize(("args", "message"), [
    (["--libero-power", "0.9"], "--libero-power applies only with --libero-against RUN_A"),
    (["--libero-against", "nothing"], "nothing is not a pytest-libero run folder (no run.json or episodes/)"),
])
def test_options_without_a_run_a_are_usage_errors(pytester, args, message):
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider", "--libero-scope", "development", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and message in "\n".join(result.errlines), result.errlines


def test_resume_continues_the_same_sequence_without_running_a_pair_twice(env, run_a, stopped, tmp_path):
    # Interrupted at its first failure (-x), then continued with its recorded options alone.
    result, folder = run(tmp_path, env, "-x", *TOY, *POLICIES["push"], "--libero-against", str(run_a))
    assert folder is not None and "not decided yet after" in result.stdout, result.stdout + result.stderr
    first = {cell for cell, r in records(folder).items() if r["outcome"]["outcome"] != "not_run"}
    resumed = pytest_run(tmp_path, env, "-q", "--libero-resume", str(folder))
    assert "B better after 16 of 24 pairs" in resumed.stdout, resumed.stdout + resumed.stderr
    assert sequential(folder)["steps"] == sequential(stopped[1])["steps"]  # the same order, the same pairs
    assert not (folder / "attempts").exists()  # no completed episode ran again
    kept = records(folder)
    assert first <= {cell for cell, r in kept.items() if r["outcome"]["outcome"] != "not_run"}
    # The kept prefix decides: resuming again runs nothing.
    again = pytest_run(tmp_path, env, "-q", "--libero-resume", str(folder))
    assert again.returncode == pytest.ExitCode.TESTS_FAILED, again.stdout + again.stderr
    assert f"{CELLS - 16} skipped" in again.stdout and records(folder) == kept
    assert not (folder / "attempts").exists()


def test_pairs_are_consumed_strictly_in_order_and_errored_ones_are_never_discordant():
    from pytest_libero.results.sequential import Against, Settings

    order = [f"c{i}" for i in range(12)]
    against = Against.build(Settings("/a", "a", "sha256:x"), order, {c: c[-1] for c in order},
                            {c: {"outcome": {"outcome": "failure"}} for c in order})
    b = {c: "success" for c in against.order[1:]}  # every pair but the first one in order is complete
    assert against.advance(against.start(), b).steps == ()  # they wait for it
    b[against.order[0]] = "env_error"
    test = against.advance(against.start(), b)
    assert [s.kind for s in test.steps[:2]] == ["errored", "only B"] and test.steps[-1].errored == 1
    assert test.steps[-1].b_only == len(test.steps) - 1  # the errored pair counted apart, never as only B
    block = against.block({**b, against.order[0]: "not_run"})
    assert block["cells"] == 0 and block["waiting_for"] == against.order[0]
