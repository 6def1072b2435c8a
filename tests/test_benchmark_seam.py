"""The benchmark seam holds: a third adapter (tests/toy_benchmark.py), registered only through the
`pytest_libero.benchmarks` entry-point group, runs end to end with no change to generic code.

The registration is a temporary `*.dist-info` folder on PYTHONPATH (importlib.metadata finds it),
with tests/ beside it so that both the plugin and the bench service process import the toy
adapter and its fake service module. Every run is a real plugin run in a subprocess, with the
real bench service process (no simulator: the toy's service module).
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CELLS = ["toy_red-n1", "toy_red-n2", "toy_blue-n1", "toy_blue-n2"]
FAST = ["--libero-budget", "decisions", "--libero-max-policy-calls", "3", "--libero-video", "none"]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of every subprocess: the toy's registration and module on PYTHONPATH."""
    registry = tmp_path_factory.mktemp("registry")
    dist = registry / "toy_benchmark_registration-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-benchmark-registration\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[pytest_libero.benchmarks]\ntoy = toy_benchmark:ADAPTER\n")
    paths = [str(registry), str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths))


def pytest_run(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_libero", *args], env=env, capture_output=True, text=True,
                          timeout=300)


def run_folder(root: Path) -> Path:
    (folder,) = [p.parent for p in root.glob("reports/*/*/run.json")]
    return folder


def records(folder: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((folder / "episodes").glob("*.json"))
            if not p.name.startswith(".")}


def schema_errors(record: dict[str, Any]) -> list[str]:
    import jsonschema

    schema = json.loads((ROOT / "catalog" / "schemas" / "episode_record.schema.json").read_text())
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in jsonschema.Draft202012Validator(schema).iter_errors(record)]


def assert_schema_valid(folder: Path) -> None:
    """The generic results code reads only schema-valid records: every toy record must be one."""
    problems = {c: schema_errors(r) for c, r in records(folder).items()}
    assert not any(problems.values()), problems


@pytest.fixture(scope="module")
def runs(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One zero-policy and one random-policy run of the 4 toy cells (colour blue), shared by the tests."""
    base = tmp_path_factory.mktemp("runs")
    done: dict[str, Any] = {}
    for policy in ("zero", "random"):
        result = pytest_run(base / policy, env, "-v", "--libero-benchmark", "toy", "--libero-toy-colour", "blue",
                            "--libero-policy", policy, *FAST)
        done[policy] = (result, run_folder(base / policy))
    return done


# -- collection and options -------------------------------------------------------------------

def test_collection_uses_the_adapters_ids_header_and_keywords(tmp_path, env):
    result = pytest_run(tmp_path, env, "--collect-only", "--libero-benchmark", "toy")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "libero: benchmark toy, scope default, 4 cell(s)" in result.stdout
    quiet = pytest_run(tmp_path, env, "--collect-only", "-q", "--libero-benchmark", "toy")
    ids = [line.split("[")[1].rstrip("]") for line in quiet.stdout.splitlines() if "::test_rollout[" in line]
    assert ids == CELLS
    # the adapter's keywords (task names) and the generic per-suite markers
    hide = pytest_run(tmp_path, env, "--collect-only", "-q", "--libero-benchmark", "toy", "-k", "hide_the")
    assert [line.split("[")[1].rstrip("]") for line in hide.stdout.splitlines()
            if "::test_rollout[" in line] == ["toy_red-n2", "toy_blue-n2"]
    marked = pytest_run(tmp_path, env, "--collect-only", "-q", "--libero-benchmark", "toy", "-m", "toy_blue")
    assert [line.split("[")[1].rstrip("]") for line in marked.stdout.splitlines()
            if "::test_rollout[" in line] == ["toy_blue-n1", "toy_blue-n2"]
    assert re.search(r"--libero-benchmark=\{libero,libero_plus,robomemarena,toy\}", pytest_run(tmp_path, env, "--help").stdout)


def test_another_benchmarks_suite_under_libero_is_a_usage_error_not_a_crash(tmp_path, env):
    """--libero-suite offers every benchmark's suites; LIBERO's selection refuses one that is not its own
    (it once selected nothing and collection crashed on pytest's empty-parametrization placeholder)."""
    result = pytest_run(tmp_path, env, "--collect-only", "--libero-scope", "task_coverage", "--libero-suite", "toy_red")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "--libero-suite toy_red: not a LIBERO suite" in result.stderr


def test_the_adapters_option_is_refused_without_its_benchmark(tmp_path, env):
    result = pytest_run(tmp_path, env, "--collect-only", "--libero-toy-colour", "red")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "--libero-toy-colour applies only with --libero-benchmark toy" in result.stderr


def test_the_adapters_selection_errors_are_usage_errors(tmp_path, env):
    result = pytest_run(tmp_path, env, "--collect-only", "--libero-benchmark", "toy", "--libero-suite", "libero_10")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "the toy benchmark has suites toy_red, toy_blue" in result.stderr


# -- runs, records, summary, page, terminal ---------------------------------------------------

def test_runs_with_builtin_policies_write_records_with_the_adapters_fields(runs):
    zero, zero_dir = runs["zero"]
    rand, rand_dir = runs["random"]
    assert zero.returncode == 1 and "LIBERO: selected 4 = passed 0 + failed 4 + errored 0 + unattempted 0" \
        in zero.stdout, zero.stdout[-3000:] + zero.stderr[-3000:]
    assert "LIBERO: selected 4 = passed 2 + failed 2 + errored 0 + unattempted 0" in rand.stdout, rand.stdout[-3000:]
    for cell in CELLS:
        assert f"test_rollout[{cell}] {'PASSED' if cell.endswith('n1') else 'FAILED'}" in rand.stdout
    for folder, policy in ((zero_dir, "zero"), (rand_dir, "random")):
        found = records(folder)
        assert sorted(found) == sorted(CELLS)
        for cell, record in found.items():
            assert record["cell"]["id"] == cell and record["cell"]["suite"] == cell.split("-")[0]
            assert record["cell"]["benchmark"]["name"] == "toy"
            assert record["cell"]["benchmark"]["colour"] == "blue"  # cell_fields, from the protocol
            assert "max_x" in record["cell"]["benchmark"]  # record_fields, from the service's evidence
            assert record["cell"]["benchmark"]["service_colour"] == "blue"  # service_env reached the service
            assert record["identities"]["protocol"]["settings"]["benchmark"] == "toy"
            assert record["identities"]["protocol"]["settings"]["benchmark_options"] == {"colour": "blue"}
            assert record["counters"]["control_cap"] == 15
            if policy == "random":
                assert record["outcome"]["outcome"] == ("success" if cell.endswith("n1") else "failure")
            else:
                assert record["cell"]["benchmark"]["max_x"] == 0.0
                assert record["outcome"]["outcome"] == "failure"
    errors = sorted({e for r in records(rand_dir).values() for e in schema_errors(r)})
    assert not errors, errors


def test_summary_page_and_terminal_have_the_adapters_blocks(runs):
    rand, folder = runs["random"]
    assert "TOY: task n1: passed" in rand.stdout and "TOY: task n2: passed" in rand.stdout
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["toy"]["benchmark"] == "toy" and set(summary["suites"]) == {"toy_red", "toy_blue"}
    page = (folder / "report.html").read_text()
    assert '<div class="toy">' in page
    assert_schema_valid(folder)
    assert summary["unreadable_records"] == []
    assert "TOY: task n1: passed 2 of 2" in rand.stdout and "TOY: task n2: passed 0 of 2" in rand.stdout
    assert summary["toy"]["by_task_number"]["n1"]["passed"] == 2
    assert summary["toy"]["overall"]["passed"] == 2 and summary["overall"]["passed"] == 2
    assert {s: row["passed"] for s, row in summary["suites"].items()} == {"toy_red": 1, "toy_blue": 1}
    assert "TOY: 2 of 4 toy cells passed" in page


def test_report_command_rebuilds_with_the_adapter(runs, env):
    _, folder = runs["random"]
    result = cli(env, "report", str(folder))
    assert result.returncode == 0, result.stderr
    assert "toy" in json.loads((folder / "summary.json").read_text())
    assert_schema_valid(folder)
    assert "selected 4 = passed 2 + failed 2 + errored 0 + unattempted 0" in result.stdout


# -- resume, merge, compare ------------------------------------------------------------------

def test_resume_reruns_only_the_missing_cell(runs, env, tmp_path):
    _, source = runs["random"]
    assert_schema_valid(source)  # resume keeps only records load_run accepts
    import shutil

    folder = tmp_path / "reports" / "random" / source.name
    shutil.copytree(source, folder)
    (folder / "episodes" / "toy_blue-n1.json").unlink()
    before = {c: r["finished"] for c, r in records(folder).items()}
    result = pytest_run(tmp_path, env, "-v", "--libero-benchmark", "toy", "--libero-toy-colour", "blue",
                        "--libero-policy", "random", *FAST, "--libero-resume", str(folder))
    assert "LIBERO: selected 4 = passed 2 + failed 2" in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]
    resumed = {c for c in CELLS for line in result.stdout.splitlines()
               if line.startswith(f"test_rollout[{c}]") or (line.startswith(c) and "resumed: recorded earlier" in line)
               if "resumed: recorded earlier" in line}
    assert resumed == set(CELLS) - {"toy_blue-n1"}, result.stdout[-3000:]
    after = records(folder)
    assert sorted(after) == sorted(CELLS)
    assert {c: after[c]["finished"] for c in before} == before  # nothing else ran again
    assert after["toy_blue-n1"]["outcome"]["outcome"] == "success"


def test_two_shards_merge_into_the_whole_run(env, tmp_path, runs):
    shards = []
    for index in (1, 2):
        result = pytest_run(tmp_path / f"shard{index}", env, "--libero-benchmark", "toy", "--libero-policy", "random",
                            "--libero-toy-colour", "blue", *FAST, "--libero-shard", f"{index}/2")
        assert "libero: benchmark toy" in result.stdout and result.returncode in (0, 1), result.stderr[-2000:]
        shards.append(run_folder(tmp_path / f"shard{index}"))
    assert sorted(c for s in shards for c in records(s)) == sorted(CELLS)
    merged = tmp_path / "merged"
    result = cli(env, "merge", str(merged), *map(str, shards))
    assert_schema_valid(shards[0])
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((merged / "summary.json").read_text())
    assert summary["overall"]["selected"] == 4 and summary["overall"]["passed"] == 2
    assert summary["toy"]["overall"]["passed"] == 2
    assert sorted(records(merged)) == sorted(CELLS)


def test_compare_pairs_a_zero_and_a_random_run_by_the_adapters_task_label(runs, env):
    _, zero_dir = runs["zero"]
    _, rand_dir = runs["random"]
    result = cli(env, "compare", str(zero_dir), str(rand_dir))
    assert_schema_valid(rand_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 paired episodes" in result.stdout
    assert "toy task n1" in result.stdout and "toy task n2" in result.stdout
    assert "toy_red" in result.stdout and "toy_blue" in result.stdout
