"""Stop when decided on real LIBERO: the demo replay (B) against the zero policy (A) decides "B better"
early, and resuming the stopped run runs nothing.

The demo (docs/demo-policy.md) succeeds at the control its log ends with, and a run selects one
suite: LIBERO-10 has five demo cells (tasks 0-4, init state 0). The cells are tasks 0, 2 and 4 (the
three whose first successes come soonest, so the budget below is smallest) and task 5 (no log), the
one left to stop before. Zero never succeeds. Order seed 0 deals tasks 4, 0, 2 first and task 5 last,
so every consumed pair is `only B`. With k such pairs and none favouring A,
E_B = 2^(k+1)/(k+1) (1 - 2^-(k+1)): 2.33 after two, 3.75 after three. At alpha 0.6 the boundary
2/alpha is 3.33, so the test decides after the third pair and task 5 never runs (at alpha 0.05 the
boundary, 40, is out of reach of three pairs). The decision machinery is the same for any alpha; a
large one keeps the run to three pairs, each of which costs two environment builds and ~230 controls.

The budget: on CPU rendering most of an episode's cost is the two camera renders at each
observation (docs/performance.md), and neither policy looks at what it sees (the demo replays
open loop, indexed by executed controls), so both runs take few long intervals: D = 5 calls of K
controls, K the fewest covering the latest first-success control (task 0's 231: K = 47, cap 255,
the cap of the default K = 5 too), each policy's chunk filling its interval. The demo then
succeeds at the same control as under K = 5 (asserted below), at a fraction of the renders of
D = 47 x K = 5. Both runs use the same options, so they share one protocol identity.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from evidence_helpers import records, run_dirs
from pytest_libero.adapters.demo import LOG_DIR
from pytest_libero.core.sequential import stratified_order

pytestmark = pytest.mark.real_libero

TASKS = (0, 2, 4, 5)
CELLS = tuple(f"libero_10-t{task:02d}-s00" for task in TASKS)
NO_LOG = "libero_10-t05-s00"
FIRST_SUCCESS = {cell: json.loads((LOG_DIR / f"{cell}.json").read_text())["first_success_control"]
                 for cell in CELLS if cell != NO_LOG}
D = 5
K = -(-max(FIRST_SUCCESS.values()) // D)
PROTOCOL = ("--libero-scope", "task_coverage", "--libero-suite", "libero_10",
            "--libero-task-ids", ",".join(map(str, TASKS)), "--libero-budget", "decisions",
            "--libero-max-policy-calls", str(D), "--libero-replan-interval", str(K), "--libero-video", "none")
CHUNK = f'--libero-policy-kwargs={{"chunk_size": {K}}}'  # a chunk per interval (the policy's option)
ORDER_SEED = 0
ALPHA = 0.6
PAIRS = len(CELLS) - 1  # all but the last dealt
STOP = f"stopped: decided (B better after {PAIRS} pairs)"


def e_b(k: int) -> float:
    """E_B after k pairs all favouring B (core/sequential.py's mixture, in closed form)."""
    return 2 ** (k + 1) / (k + 1) * (1 - 2 ** -(k + 1))


def run(path: Path, *args: str) -> pytest.RunResult:
    """One pytest run in `path` (a fresh process; conftest's CHILD_ADDOPTS, no colours). Paths go
    as --option=PATH: written with a space, pytest would take one for its rootdir (known-limitations.md)."""
    path.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "TOX_ENV_DIR"}  # PYTEST_ADDOPTS: conftest's CHILD_ADDOPTS
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=path,
                          env=dict(env, PY_COLORS="0"), capture_output=True, text=True, timeout=900)
    return pytest.RunResult(done.returncode, done.stdout.splitlines(), done.stderr.splitlines(),
                            time.monotonic() - started)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_libero", *args], capture_output=True, text=True,
                          timeout=300)


def sequential(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "summary.json").read_text())["sequential"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def run_a(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("zero")
    result = run(path, *PROTOCOL, "--libero-policy", "zero", CHUNK)
    result.assert_outcomes(failed=len(CELLS))
    (folder,) = run_dirs(path / "reports")
    return folder


@pytest.fixture(scope="module")
def stopped(run_a: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[pytest.RunResult, Path]:
    path = tmp_path_factory.mktemp("demo")
    result = run(path, *PROTOCOL, "--libero-policy", "demo", CHUNK, f"--libero-against={run_a}",
                 "--libero-alpha", str(ALPHA), "--libero-order-seed", str(ORDER_SEED))
    (folder,) = run_dirs(path / "reports")
    return result, folder


def test_the_demo_against_zero_decides_b_better_after_three_pairs_and_never_runs_the_fourth(stopped, run_a):
    result, folder = stopped
    # The session stops as -x does, but a decided comparison is no interruption: the status is that of
    # the three passing episodes, and the fourth cell is reported unattempted, not failed or skipped.
    result.assert_outcomes(passed=PAIRS)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        f"{NO_LOG} * UNATTEMPTED*",
        f"LIBERO: selected {len(CELLS)} = passed {PAIRS} + failed 0 + errored 0 + unattempted 1",
        f"LIBERO sequential comparison against {run_a.resolve()}: B better after {PAIRS} of {len(CELLS)} pairs; "
        f"statistic {math.log(e_b(PAIRS)):.2f} >= boundary log(2/alpha) {math.log(2 / ALPHA):.2f}",
        "LIBERO sequential: 0 errored pair(s) (never discordant), 0 episode(s) past the consumed prefix not "
        f"counted; alpha {ALPHA:g}, power 0.8, min effect 0.1, order seed {ORDER_SEED}",
        f"*Interrupted: {STOP}*"])

    block = sequential(folder)
    assert (block["decision"], block["stopped_after"], block["stopped"], block["order_cells"]) == \
        ("B better", PAIRS, True, len(CELLS))
    consumed = [step["cell"] for step in block["steps"]]
    # The order is the seed's (task 5 last, the premise above), and the demo's three cells come first.
    assert (*consumed, NO_LOG) == stratified_order(((cell, cell[:-4]) for cell in CELLS), ORDER_SEED)
    assert sorted(consumed) == sorted(FIRST_SUCCESS) and block["not_counted"] == [] and block["errored"] == 0
    assert [step["pair"] for step in block["steps"]] == ["only B"] * PAIRS
    # The statistic is the closed form's at every pair, below the boundary until the third.
    assert [step["log_e_b"] for step in block["steps"]] == \
        pytest.approx([math.log(e_b(k)) for k in range(1, PAIRS + 1)])
    assert e_b(PAIRS - 1) < 2 / ALPHA <= e_b(PAIRS)

    found = records(folder)
    assert set(found) == set(CELLS)
    for cell in consumed:  # each at the control its log ends with, and not one control later
        assert found[cell]["outcome"]["outcome"] == "success", found[cell]["outcome"]
        assert found[cell]["counters"]["executed_controls"] == FIRST_SUCCESS[cell], cell
    assert (found[NO_LOG]["outcome"]["outcome"], found[NO_LOG]["outcome"]["message"]) == ("not_run", STOP)
    assert json.loads((folder / "summary.json").read_text())["overall"]["unattempted"] == 1
    of_a = records(run_a)
    assert {(r["outcome"]["termination"], r["counters"]["executed_controls"]) for r in of_a.values()} == \
        {("truncation", D * K)}
    identities = {r["identities"]["protocol"]["identity"] for r in [*of_a.values(), *found.values()]}
    assert len(identities) == 1, identities

    # compare replays the same sequential analysis from the two folders.
    done = cli("compare", str(run_a), str(folder), "--json", str(folder.parent / "compare.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "analysis: sequential" in done.stdout and f"B better after {PAIRS} of {len(CELLS)} pairs" in done.stdout
    assert (f"pairs in order (seed {ORDER_SEED}): {PAIRS} consumed of {len(CELLS)}: only B {PAIRS}, only A 0, "
            "concordant 0, errored 0") in done.stdout
    assert json.loads((folder.parent / "compare.json").read_text())["sequential"] == block


def test_resuming_the_stopped_comparison_runs_nothing_and_changes_no_record(stopped, tmp_path):
    folder = shutil.copytree(stopped[1], tmp_path / "b")  # the original stays as the other test reads it
    before = {p.name: p.read_bytes() for p in (folder / "episodes").glob("*.json")}
    result = run(tmp_path, f"--libero-resume={folder}")
    # The kept prefix decides at once: the three kept episodes report, the fourth cell skips again.
    result.assert_outcomes(passed=PAIRS, skipped=1)
    result.stdout.fnmatch_lines(["*libero_10-t0[024]-s00 * PASSED * [[]resumed: recorded earlier[]]*",
                                 f"*B better after {PAIRS} of {len(CELLS)} pairs*"])
    assert {p.name: p.read_bytes() for p in (folder / "episodes").glob("*.json")} == before
    assert not (folder / "attempts").exists()
    assert sequential(folder)["steps"] == sequential(stopped[1])["steps"]
