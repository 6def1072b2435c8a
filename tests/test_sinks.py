"""The results hooks (`pytest_libero_record`, `pytest_libero_summary`) and the built-in sinks.

Every run is a real plugin run of the toy benchmark (tests/toy_benchmark.py: no simulator, four
cells, about a second of episodes) in a subprocess. The sinks are read back with each tool's own
reader: W&B's offline run with `wandb leet inspect` (wandb's reader of its .wandb log), MLflow's
file store with MlflowClient, TensorBoard's event files with TensorBoard's EventAccumulator. No
network: W&B offline, MLflow on a `file:` store, the failing ones pointed at a closed loopback port.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from test_benchmark_seam import toy_environment

TESTS = Path(__file__).resolve().parent
CELLS = ["toy_red-n1", "toy_red-n2", "toy_blue-n1", "toy_blue-n2"]
TOY_POLICY = f"{TESTS / 'toy_benchmark.py'}:ToyPolicy"
TOY = ["--libero-benchmark", "toy", "--libero-policy", TOY_POLICY, "--libero-policy-kwargs", '{"push": 1.0}',
       "--libero-budget", "decisions", "--libero-max-policy-calls", "3", "--libero-video", "none"]
# What differs between two runs of the same deterministic toy episodes: the times, and the process that
# ran each (the working run is under xdist, gw0 and gw1; the failing one in the one process, main).
VOLATILE = ("finished", "timing", "worker")

# A conftest that writes down every call it gets: on which process, the record, and the bytes of the
# record's file (and of summary.json) at the moment of the call.
RECORDER = '''
import json, os

def pytest_libero_record(config, record, run_dir):
    path = run_dir / "episodes" / (record["cell"]["id"] + ".json")
    with open(os.environ["CALLS"], "a") as out:
        out.write(json.dumps({"hook": "record", "worker": hasattr(config, "workerinput"), "record": record,
                              "bytes": path.read_bytes().hex()}) + "\\n")

def pytest_libero_summary(config, summary, run_dir):
    with open(os.environ["CALLS"], "a") as out:
        out.write(json.dumps({"hook": "summary", "worker": hasattr(config, "workerinput"), "summary": summary,
                              "bytes": (run_dir / "summary.json").read_bytes().hex()}) + "\\n")
'''

# ... and a plugin whose record hook changes the record it is given, then raises.
FAILING = '''
class Raiser:
    def pytest_libero_record(self, record):
        record["outcome"]["outcome"] = "changed by a hook"
        raise RuntimeError("the user's record hook broke")

    def pytest_libero_summary(self, summary):
        raise AssertionError("a plugin whose record hook raised gets no summary")

def pytest_configure(config):
    config.pluginmanager.register(Raiser(), "raiser")
'''

# ... and one that raises only on the summary.
SUMMARY_RAISER = '''

class SummaryRaiser:
    def pytest_libero_summary(self, summary):
        raise ValueError("the user's summary hook broke")

def pytest_configure(config):
    config.pluginmanager.register(SummaryRaiser(), "summary-raiser")
'''


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The toy benchmark's registration (an entry point) and module on PYTHONPATH; no tracker login."""
    registered = toy_environment(tmp_path_factory.mktemp("registry"))
    clean = {k: v for k, v in registered.items() if not k.startswith(("WANDB_", "MLFLOW_"))}
    home = tmp_path_factory.mktemp("home")  # no ~/.netrc or wandb settings of the machine's user
    return dict(clean, HOME=str(home), WANDB_SILENT="true")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): connections to it are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def toy_run(cwd: Path, env: dict[str, str], *args: str, **extra_env: str) -> tuple[subprocess.CompletedProcess[str],
                                                                                   Path]:
    cwd.mkdir(parents=True, exist_ok=True)
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *TOY, *args], cwd=cwd,
                            env=dict(env, CALLS=str(cwd / "calls.jsonl"), **extra_env), capture_output=True,
                            text=True, timeout=300)
    folders = [p.parent for p in cwd.glob("reports/*/*/run.json")]
    assert len(folders) == 1, result.stdout + result.stderr
    return result, folders[0]


def calls(cwd: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (cwd / "calls.jsonl").read_text().splitlines()]


def record_files(folder: Path) -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in sorted((folder / "episodes").glob("*.json"))}


def steady(data: bytes) -> dict[str, Any]:
    return {k: v for k, v in json.loads(data).items() if k not in VOLATILE}


def warnings_of(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("WARNING libero:")]


@pytest.fixture(scope="module")
def runs(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two runs of the four toy cells: under xdist with the recorder and all three sinks working;
    and with the recorder, a raising plugin and all three sinks failing."""
    base = tmp_path_factory.mktemp("sinks")
    done: dict[str, Any] = {}
    work = base / "working"
    work.mkdir()
    (work / "conftest.py").write_text(RECORDER)
    done["working"] = toy_run(work, env, "-n", "2", "--libero-sink", "wandb,mlflow,tensorboard",
                              "--libero-sink-dir", str(work / "trackers"), WANDB_MODE="offline",
                              MLFLOW_TRACKING_URI=(work / "mlruns").as_uri(), MLFLOW_ALLOW_FILE_STORE="true")
    fail = base / "failing"
    fail.mkdir()
    (fail / "conftest.py").write_text(RECORDER)
    (fail / "raiser_plugin.py").write_text(FAILING)
    (fail / "trackers").mkdir()
    (fail / "trackers" / "runs").write_text("a file where TensorBoard's folder would go")
    refused = f"http://127.0.0.1:{closed_port()}"
    # W&B online with no API key (HOME is empty) and its server a refused port; MLflow's server refused.
    done["failing"] = toy_run(fail, dict(env, PYTHONPATH=f"{fail}{os.pathsep}{env['PYTHONPATH']}"),
                              "-p", "raiser_plugin", "--libero-sink", "wandb,mlflow,tensorboard",
                              "--libero-sink-dir", str(fail / "trackers"), WANDB_MODE="online",
                              WANDB_BASE_URL=refused, MLFLOW_TRACKING_URI=refused,
                              MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="5")
    done["base"] = base
    return done


def test_the_hooks_get_each_record_once_then_the_summary_on_the_xdist_controller(runs):
    result, folder = runs["working"]
    assert result.returncode == 1, result.stdout + result.stderr  # the toy's n2 tasks fail: 2 passed, 2 failed
    assert "2 failed, 2 passed" in result.stdout
    got = calls(folder.parents[2])
    assert [c["hook"] for c in got] == ["record"] * 4 + ["summary"]
    assert not any(c["worker"] for c in got)  # the controller, not an xdist worker
    files = record_files(folder)
    assert sorted(c["record"]["cell"]["id"] for c in got[:4]) == sorted(CELLS) == sorted(files)
    for call in got[:4]:  # the record as written, and the file already complete when the hook ran
        cell = call["record"]["cell"]["id"]
        assert bytes.fromhex(call["bytes"]) == files[cell]
        assert call["record"] == json.loads(files[cell])
    summary_bytes = (folder / "summary.json").read_bytes()
    assert got[4]["summary"] == json.loads(summary_bytes) and bytes.fromhex(got[4]["bytes"]) == summary_bytes
    assert warnings_of(result) == []


def test_records_the_controller_writes_reach_the_hook_too(env, tmp_path):
    """-x stops after the first failure: the cells that never ran get not_run records at the session
    end, written by the controller, and the hook gets those before the summary."""
    (tmp_path / "conftest.py").write_text(RECORDER + SUMMARY_RAISER)
    result, folder = toy_run(tmp_path, env, "-x")
    (warned,) = warnings_of(result)
    assert "pytest_libero_summary in summary-raiser failed (ValueError: the user's summary hook broke)" in warned
    got = calls(tmp_path)
    outcomes = {c["record"]["cell"]["id"]: c["record"]["outcome"]["outcome"] for c in got if c["hook"] == "record"}
    assert outcomes == {"toy_red-n1": "success", "toy_red-n2": "failure", "toy_blue-n1": "not_run",
                        "toy_blue-n2": "not_run"}, result.stdout
    assert got[-1]["hook"] == "summary" and len(got) == 5
    assert got[-1]["summary"]["overall"]["unattempted"] == 2


def test_wandb_offline_run_read_back_with_wandbs_own_reader(runs):
    result, folder = runs["working"]
    (wandb_dir,) = (folder.parents[2] / "trackers" / "wandb").glob("offline-run-*")
    inspect = [sys.executable, "-m", "wandb", "leet", "inspect", str(wandb_dir), "--json"]
    summary = json.loads(subprocess.run([*inspect, "--summary"], capture_output=True, text=True, check=True,
                                        timeout=120).stdout)
    manifest = json.loads((folder / "run.json").read_text())
    assert summary["state"] == "finished" and summary["name"] == manifest["run_id"]
    assert summary["config"]["protocol_identity"] == manifest["protocol"]["identity"]
    assert summary["config"]["protocol.budget"] == "decisions"
    stats = json.loads((folder / "summary.json").read_text())
    rate = stats["overall"]["success_rate_errors_excluded"]
    assert summary["summary"]["overall/rate"] == pytest.approx(rate["rate"]) == 0.5
    assert summary["summary"]["overall/rate_ci95_low"] == pytest.approx(rate["ci95"][0])
    assert summary["summary"]["task/toy task n1/rate"] == 1.0
    assert summary["summary"]["suite/toy_red/rate_ci95_high"] == pytest.approx(
        stats["suites"]["toy_red"]["success_rate_errors_excluded"]["ci95"][1])
    lines = subprocess.run(inspect, capture_output=True, text=True, check=True, timeout=120).stdout.splitlines()
    history = [json.loads(line)["history"]["item"] for line in lines if '"type":"history"' in line]
    records = {cell: json.loads(data) for cell, data in record_files(folder).items()}
    assert sorted(step["episode/cell"] for step in history) == sorted(CELLS)
    for step in history:
        record = records[step["episode/cell"]]
        assert step["episode/success"] == (record["outcome"]["outcome"] == "success")
        assert step["episode/outcome"] == record["outcome"]["outcome"]
        assert step["episode/executed_controls"] == record["counters"]["executed_controls"]
        assert step["episode/policy_calls"] == record["counters"]["policy_calls"]


def test_mlflow_file_store_run_read_back_with_mlflows_client(runs, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    result, folder = runs["working"]
    client = MlflowClient(tracking_uri=(folder.parents[2] / "mlruns").as_uri())
    experiment = client.get_experiment_by_name("pytest-libero")
    (run,) = client.search_runs([experiment.experiment_id])
    manifest = json.loads((folder / "run.json").read_text())
    assert run.info.run_name == manifest["run_id"] and run.info.status == "FINISHED"
    assert run.data.params["protocol_identity"] == manifest["protocol"]["identity"]
    assert run.data.params["protocol.max_policy_calls"] == "3"
    assert run.data.tags["pytest_libero.run_id"] == manifest["run_id"]
    assert run.data.metrics["overall/rate"] == 0.5 and run.data.metrics["overall/passed"] == 2
    assert run.data.metrics["task/toy task n2/rate_ci95_high"] == pytest.approx(
        json.loads((folder / "summary.json").read_text())["tasks"]["toy task n2"]
        ["success_rate_errors_excluded"]["ci95"][1])
    success = client.get_metric_history(run.info.run_id, "episode/success")
    controls = client.get_metric_history(run.info.run_id, "episode/executed_controls")
    records = [json.loads(data) for data in record_files(folder).values()]
    assert sorted(m.step for m in success) == [0, 1, 2, 3]
    assert sorted(m.value for m in success) == sorted(float(r["outcome"]["outcome"] == "success") for r in records)
    assert sorted(m.value for m in controls) == sorted(float(r["counters"]["executed_controls"]) for r in records)


def test_tensorboard_scalars_read_back_with_tensorboards_reader(runs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result, folder = runs["working"]
    (logdir,) = (folder.parents[2] / "trackers" / "runs").glob("*/*")
    assert logdir.name == folder.name and logdir.parent.name == folder.parent.name  # runs/<profile>/<run id>
    events = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    success = events.Scalars("episode/success")
    records = [json.loads(data) for data in record_files(folder).values()]
    assert sorted(e.step for e in success) == [0, 1, 2, 3]
    assert sorted(e.value for e in success) == sorted(float(r["outcome"]["outcome"] == "success") for r in records)
    (overall,) = events.Scalars("overall/rate")
    assert overall.value == 0.5
    assert events.Scalars("suite/toy_blue/passed")[0].value == 1.0
    (params,) = events.Tensors("run/params/text_summary")
    text = params.tensor_proto.string_val[0].decode()
    assert json.loads((folder / "run.json").read_text())["protocol"]["identity"] in text


def test_failing_sinks_and_hooks_warn_once_each_and_leave_the_run_as_it_is(runs):
    plain, plain_folder = runs["working"]  # the same run without a failing sink
    failing, folder = runs["failing"]
    warned = warnings_of(failing)
    output = failing.stdout + failing.stderr
    assert len(warned) == 4, output  # three sinks and the raising plugin: once each, one line each
    by_who = {who: [line for line in warned if who in line]
              for who in ("sink wandb", "sink mlflow", "sink tensorboard", "pytest_libero_record in raiser")}
    assert all(len(lines) == 1 for lines in by_who.values()), warned
    assert "WANDB_MODE=offline" in by_who["sink wandb"][0] and "wandb login" in by_who["sink wandb"][0]
    assert "MLFLOW_TRACKING_URI" in by_who["sink mlflow"][0]
    assert "--libero-sink-dir" in by_who["sink tensorboard"][0]
    assert "the user's record hook broke" in by_who["pytest_libero_record in raiser"][0]
    # The run is the working run's: same exit status and counts, the recorder got every call (the
    # mutating hook changed no one else's record), and the records and summary are unchanged by it.
    assert failing.returncode == plain.returncode == 1
    assert "2 failed, 2 passed" in failing.stdout and "2 failed, 2 passed" in plain.stdout
    got = calls(folder.parents[2])
    assert [c["hook"] for c in got] == ["record"] * 4 + ["summary"]
    files = record_files(folder)
    for call in got[:4]:  # byte for byte what the worker wrote before any hook ran
        assert bytes.fromhex(call["bytes"]) == files[call["record"]["cell"]["id"]]
        assert call["record"]["outcome"]["outcome"] in ("success", "failure")
    assert bytes.fromhex(got[4]["bytes"]) == (folder / "summary.json").read_bytes()
    plain_files = record_files(plain_folder)
    assert sorted(files) == sorted(plain_files)
    assert all(steady(files[cell]) == steady(plain_files[cell]) for cell in files)
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in plain_folder.iterdir())
    assert not any((folder.parents[2] / "trackers").glob("wandb/*run-*"))  # W&B never started a run


def test_a_resume_with_failing_sinks_keeps_every_record_byte_identical(runs, env, tmp_path):
    """The same records with and without a failing sink: a resume of the working run keeps its four
    records (nothing reruns), calls the hooks and sinks on them, and each sink fails, TensorBoard's
    for want of its package (a tensorboardX module that is not there: it raises as a missing one does)."""
    plain, plain_folder = runs["working"]
    folder = tmp_path / "copy"
    shutil.copytree(plain_folder, folder)
    before = record_files(folder)
    refused = f"http://127.0.0.1:{closed_port()}"
    missing = tmp_path / "missing"
    missing.mkdir()
    (missing / "tensorboardX.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'tensorboardX'\", name='tensorboardX')\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *TOY, "--libero-resume",
                             str(folder), "--libero-sink", "mlflow,wandb,tensorboard"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300,
                            env=dict(env, WANDB_MODE="online", WANDB_BASE_URL=refused, MLFLOW_TRACKING_URI=refused,
                                     MLFLOW_HTTP_REQUEST_MAX_RETRIES="0",
                                     PYTHONPATH=f"{missing}{os.pathsep}{env['PYTHONPATH']}"))
    assert "2 failed, 2 passed" in result.stdout, result.stdout + result.stderr  # as recorded
    warned = warnings_of(result)
    assert len(warned) == 3, result.stdout + result.stderr
    (tensorboard,) = [line for line in warned if "sink tensorboard" in line]
    assert "No module named 'tensorboardX'" in tensorboard and "pip install 'pytest-libero[tensorboard]'" in tensorboard
    assert record_files(folder) == before


@pytest.mark.parametrize("args, message", [
    (["--libero-sink", "neptune"], "*--libero-sink neptune: unknown sink neptune; choose from wandb, mlflow, "
                                   "tensorboard, comma-separated*"),
    (["--libero-sink", ","], "*--libero-sink ,: unknown sink (none given)*"),
    (["--libero-sink-dir", "x"], "*--libero-sink-dir x applies only with --libero-sink*"),
])
def test_bad_sink_options_are_usage_errors_naming_the_value(pytester, args, message):
    result = pytester.runpytest("--collect-only", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
