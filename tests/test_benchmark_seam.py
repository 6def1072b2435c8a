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
# The toy's own policy (its actions are 4-D): still (x = 0, never succeeds) and push (x = 1).
TOY_POLICY = f"{TESTS / 'toy_benchmark.py'}:ToyPolicy"
POLICIES = {"still": ["--libero-policy", TOY_POLICY],
            "push": ["--libero-policy", TOY_POLICY, "--libero-policy-kwargs", '{"push": 1.0}']}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of every subprocess: the toy's registration and module on PYTHONPATH."""
    return toy_environment(tmp_path_factory.mktemp("registry"))


def toy_environment(registry: Path) -> dict[str, str]:
    """This process's environment with the toy registered (a dist-info folder made in `registry`)."""
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
    """One still and one push run of the 4 toy cells (colour blue), shared by the tests."""
    base = tmp_path_factory.mktemp("runs")
    done: dict[str, Any] = {}
    for policy, args in POLICIES.items():
        result = pytest_run(base / policy, env, "-v", "--libero-benchmark", "toy", "--libero-toy-colour", "blue",
                            *args, *FAST)
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
    assert re.search(r"--libero-benchmark=\{libero,libero_plus,robomemarena,toy\}",
                     pytest_run(tmp_path, env, "--help").stdout)


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


# -- the toy's own observation and action spec ------------------------------------------------

def test_the_policy_gets_the_toys_images_and_the_identity_holds_the_toys_spec(runs):
    """ToyPolicy raises on any other images, so a push success means it got the toy's; the record's
    hash of each delivered image is that of a blank 48x64x3 frame of the toy's one camera."""
    import hashlib

    from pytest_libero.core.chunk_evidence import observation_entries

    _, folder = runs["push"]
    blank = hashlib.sha256(bytes(48 * 64 * 3)).hexdigest()
    for cell, record in records(folder).items():
        assert record["outcome"]["outcome"] == ("success" if cell.endswith("n1") else "failure"), record["outcome"]
        entries = observation_entries(record["observations"])
        assert entries and all(e["sha256"] == {"overhead": blank} for e in entries)
        settings = record["identities"]["protocol"]["settings"]
        assert (settings["cameras"], settings["image_shape"]) == (["overhead"], [48, 64, 3])
        assert settings["settle_action"] == [0.0] * 4 and settings["camera_transform"] == "image"
        assert settings["horizons"] == {"toy_red": [12, "the toy's own cap"], "toy_blue": [12, "the toy's own cap"]}


def test_a_libero_policys_7d_chunk_is_refused_naming_the_toys_action_shape(env, tmp_path):
    """The built-in zero policy returns LIBERO's (n, 7) chunks: under the toy each is a policy fault
    that names the toy's (n, 4), and nothing reaches the toy's service."""
    result = pytest_run(tmp_path, env, "--libero-benchmark", "toy", "--libero-suite", "toy_red",
                        "--libero-policy", "zero", *FAST)
    assert "selected 2 = passed 0 + failed 2 + errored 0" in result.stdout, result.stdout[-3000:] + result.stderr
    for record in records(run_folder(tmp_path)).values():
        assert record["outcome"]["outcome"] == "policy_error"
        assert "action shape (10, 7) is not (4,) or (n, 4)" in record["outcome"]["message"]
        assert record["counters"]["executed_controls"] == 0


def test_the_contract_checks_read_the_toys_spec():
    import numpy as np
    import toy_benchmark

    from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO
    from pytest_libero.core.contract import Counters, seal_observation, validate_chunk
    from pytest_libero.errors import ActionError, EnvironmentFault

    toy = toy_benchmark.SPEC
    assert validate_chunk(np.ones((3, 4)), toy).shape == (3, 4)
    with pytest.raises(ActionError, match=re.escape("is not (4,) or (n, 4)")):
        validate_chunk(np.zeros((5, 7)), toy)
    libero_images = {camera: np.zeros(LIBERO.image_shape, np.uint8) for camera in LIBERO.cameras}
    with pytest.raises(EnvironmentFault, match=re.escape("['overhead'] (toy's)")):
        seal_observation("go", libero_images, Counters(), toy)
    with pytest.raises(EnvironmentFault, match=re.escape("the toy contract needs uint8 (48, 64, 3)")):
        seal_observation("go", {"overhead": np.zeros((256, 256, 3), np.uint8)}, Counters(), toy)
    observation = seal_observation("go", {"overhead": np.zeros((48, 64, 3), np.uint8)}, Counters(), toy)
    assert observation.images["overhead"].shape == (48, 64, 3)


# -- runs, records, summary, page, terminal ---------------------------------------------------

def test_runs_write_records_with_the_adapters_fields(runs):
    zero, zero_dir = runs["still"]
    rand, rand_dir = runs["push"]
    assert zero.returncode == 1 and "LIBERO: selected 4 = passed 0 + failed 4 + errored 0 + unattempted 0" \
        in zero.stdout, zero.stdout[-3000:] + zero.stderr[-3000:]
    assert "LIBERO: selected 4 = passed 2 + failed 2 + errored 0 + unattempted 0" in rand.stdout, rand.stdout[-3000:]
    for cell in CELLS:
        assert f"test_rollout[{cell}] {'PASSED' if cell.endswith('n1') else 'FAILED'}" in rand.stdout
    for folder, policy in ((zero_dir, "still"), (rand_dir, "push")):
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
            if policy == "push":
                assert record["outcome"]["outcome"] == ("success" if cell.endswith("n1") else "failure")
            else:
                assert record["cell"]["benchmark"]["max_x"] == 0.0
                assert record["outcome"]["outcome"] == "failure"
    errors = sorted({e for r in records(rand_dir).values() for e in schema_errors(r)})
    assert not errors, errors


def test_summary_page_and_terminal_have_the_adapters_blocks(runs):
    rand, folder = runs["push"]
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
    _, folder = runs["push"]
    result = cli(env, "report", str(folder))
    assert result.returncode == 0, result.stderr
    assert "toy" in json.loads((folder / "summary.json").read_text())
    assert_schema_valid(folder)
    assert "selected 4 = passed 2 + failed 2 + errored 0 + unattempted 0" in result.stdout


# -- resume, merge, compare ------------------------------------------------------------------

def test_resume_reruns_only_the_missing_cell(runs, env, tmp_path):
    _, source = runs["push"]
    assert_schema_valid(source)  # resume keeps only records load_run accepts
    import shutil

    folder = tmp_path / "reports" / "random" / source.name
    shutil.copytree(source, folder)
    (folder / "episodes" / "toy_blue-n1.json").unlink()
    before = {c: r["finished"] for c, r in records(folder).items()}
    result = pytest_run(tmp_path, env, "-v", "--libero-benchmark", "toy", "--libero-toy-colour", "blue",
                        *POLICIES["push"], *FAST, "--libero-resume", str(folder))
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
        result = pytest_run(tmp_path / f"shard{index}", env, "--libero-benchmark", "toy", *POLICIES["push"],
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


def test_compare_pairs_a_still_and_a_push_run_by_the_adapters_task_label(runs, env):
    _, zero_dir = runs["still"]
    _, rand_dir = runs["push"]
    result = cli(env, "compare", str(zero_dir), str(rand_dir))
    assert_schema_valid(rand_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 paired episodes" in result.stdout
    assert "toy task n1" in result.stdout and "toy task n2" in result.stdout
    assert "toy_red" in result.stdout and "toy_blue" in result.stdout
