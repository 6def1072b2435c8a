"""A machine that cannot do the work stops the run early (issue 34), through real pytest runs of the
toy benchmark (tests/toy_benchmark.py: the real plugin and bench service, no simulator):

- the preflight: nvidia-smi lists a GPU that EGL cannot map, or the benchmark cannot build its first
  cell: the run stops before the first cell (exit 4), every cell not_run in the run folder, and a
  resume on the fixed machine runs them; without xdist the first cell's episode is the one the
  preflight started;
- the breaker: a service module whose every build fails trips it after N cells in a row (exit 2),
  the rest not_run, and a resume runs them; a policy failing every episode never trips it.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import numpy as np
import pytest

from pytest_libero.errors import EnvironmentFault

from test_benchmark_seam import TOY_POLICY, pytest_run, records, run_folder, toy_environment

FAST = ["--libero-budget", "decisions", "--libero-max-policy-calls", "2", "--libero-video", "none"]
TOY = ["--libero-benchmark", "toy", "--libero-toy-inits", "3", *FAST]  # 12 cells: 2 suites x 2 tasks x 3 inits


@pytest.fixture(scope="module")
def toy_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The toy's registration and module on PYTHONPATH (as tests/test_benchmark_seam.py makes it), on
    a machine without CUDA_VISIBLE_DEVICES (so that GPUs come from nvidia-smi)."""
    env = dict(toy_environment(tmp_path_factory.mktemp("registry")), MUJOCO_GL="egl")  # EGL: what maps GPUs
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.pop("TOY_BENCHMARK_BROKEN", None)
    return env


def outcomes(folder: Path) -> dict[str, str]:
    return {cell: record["outcome"]["outcome"] for cell, record in records(folder).items()}


def test_a_gpu_that_egl_cannot_map_stops_the_run_before_any_cell_and_resume_runs_it(toy_env, tmp_path):
    if os.path.exists("/proc/driver/nvidia"):
        pytest.skip("an NVIDIA machine: its EGL does map its GPUs")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"  # lists one GPU; this machine's EGL (Mesa) reports no CUDA device
    smi.write_text("#!/bin/sh\necho '0, NVIDIA Fake H100, GPU-00000000-1111-2222-3333-444444444444'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    fake = dict(toy_env, PATH=f"{bin_dir}{os.pathsep}{toy_env['PATH']}")
    result = pytest_run(tmp_path / "run", fake, "--libero-benchmark", "toy", "--libero-policy", TOY_POLICY, *FAST)
    assert result.returncode == 4, result.stdout + result.stderr
    line = result.stderr
    for named in ("libero preflight: cannot render on GPU 0 (NVIDIA Fake H100", "MUJOCO_GL=egl",
                  "libEGL_nvidia", "MUJOCO_GL=osmesa", "--libero-resume", "4 selected cell(s) are recorded not_run"):
        assert named in line, line
    assert "test_rollout" not in result.stdout  # no cell started
    folder = run_folder(tmp_path / "run")
    assert (folder / "run.json").exists() and (folder / "selection.json").exists()
    found = records(folder)
    assert {c: r["outcome"]["outcome"] for c, r in found.items()} == dict.fromkeys(
        ["toy_red-n1", "toy_red-n2", "toy_blue-n1", "toy_blue-n2"], "not_run")
    assert all("the preflight stopped the run: cannot render on GPU 0" in r["outcome"]["message"]
               for r in found.values())
    # The fix: a machine whose nvidia-smi lists no GPU EGL cannot map (here: none, so the CPU renderer).
    resumed = pytest_run(tmp_path / "run", toy_env, "--libero-resume", str(folder))
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # the still policy fails every toy cell
    assert "libero: preflight (" in resumed.stdout and "the CPU renderer (no GPU; MUJOCO_GL=egl" in resumed.stdout
    assert set(outcomes(folder).values()) == {"failure"}


def test_the_same_env_error_n_cells_in_a_row_trips_the_breaker_and_resume_continues(toy_env, tmp_path):
    broken = dict(toy_env, TOY_BENCHMARK_BROKEN="1")  # every build fails (an asset missing), each cell's path differs
    result = pytest_run(tmp_path, broken, "--libero-policy", TOY_POLICY, "--libero-breaker", "3",
                        "--libero-preflight", "off", *TOY)  # past the preflight, which would stop it first
    assert result.returncode == 2, result.stdout + result.stderr
    assert "libero breaker: 3 cells in a row on worker main ended env_error with the same cause" in result.stdout
    folder = run_folder(tmp_path)
    found = outcomes(folder)
    assert len(found) == 12 and sorted(found.values()).count("env_error") == 3, found
    assert sorted(found.values()).count("not_run") == 9
    not_run = [r for r in records(folder).values() if r["outcome"]["outcome"] == "not_run"]
    assert all("never ran: libero breaker: 3 cells in a row" in r["outcome"]["message"] for r in not_run)
    assert "toy asset PATH is missing" in not_run[0]["outcome"]["message"]  # the cause's shape, paths made alike
    resumed = pytest_run(tmp_path, toy_env, "--libero-resume", str(folder))
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # the fixed machine: the still policy fails
    assert set(outcomes(folder).values()) == {"failure"}
    assert len(list((folder / "attempts").rglob("*.json"))) == 3  # the env_error evidence is kept


def test_under_xdist_a_tripped_worker_stops_the_whole_run(toy_env, tmp_path):
    """-n 2: the worker that trips tells the controller (its report crosses xdist), which stops
    dispatching: cells are left not_run with the breaker's reason, whichever worker tripped."""
    broken = dict(toy_env, TOY_BENCHMARK_BROKEN="1")
    result = pytest_run(tmp_path, broken, "-n", "2", "--libero-policy", TOY_POLICY, "--libero-breaker", "2",
                        "--libero-preflight", "off", *TOY)
    assert result.returncode == 2, result.stdout + result.stderr
    found = records(run_folder(tmp_path))
    ran = [r for r in found.values() if r["outcome"]["outcome"] == "env_error"]
    not_run = [r for r in found.values() if r["outcome"]["outcome"] == "not_run"]
    assert len(found) == 12 and len(ran) >= 2 and len(ran) + len(not_run) == 12 and not_run, len(ran)
    assert all("never ran: libero breaker: 2 cells in a row on worker gw" in r["outcome"]["message"] for r in not_run)


def test_a_policy_failing_every_episode_never_trips_the_breaker(toy_env, tmp_path):
    # LIBERO's zero policy returns 7-D chunks: under the toy (4-D) every episode is a policy fault.
    result = pytest_run(tmp_path, toy_env, "--libero-policy", "zero", "--libero-breaker", "2", "--libero-benchmark",
                        "toy", *FAST)  # 4 cells
    assert result.returncode == 1, result.stdout + result.stderr
    assert "libero breaker" not in result.stdout + result.stderr
    assert outcomes(run_folder(tmp_path)) == dict.fromkeys(["toy_red-n1", "toy_red-n2", "toy_blue-n1", "toy_blue-n2"],
                                                           "policy_error")


def test_the_cause_shape_makes_numbers_paths_and_hex_alike_and_keeps_the_first_line():
    from pytest_libero.plugin.breaker import Streak, cause_shape

    first = "bench service failed during 'start': OSError: /data/assets/t12/a.xml: 3 bytes at 0x7f3a9c2b10\nTrace"
    second = "bench service failed during 'start': OSError: /opt/x/t7/b.xml: 41 bytes at 0x55e0aa01ff\nOther"
    shape = "bench service failed during 'start': OSError: PATH: N bytes at X"
    assert cause_shape(first) == cause_shape(second) == shape
    streak = Streak(limit=2)
    assert not streak.note(first) and streak.note(second)  # two in a row of one shape
    streak = Streak(limit=2)
    assert not streak.note(first) and not streak.note(None) and not streak.note(second)  # a policy error between
    assert not streak.note("bench service process died during 'submit' (exit code -9)")  # another cause: count 1
    assert not Streak(limit=0).note(first)  # 0: off


def test_a_policy_host_that_gave_up_stops_the_session(monkeypatch):
    """The controller's side (a fake session and host: the plugin's own logic): a report after
    runtime/host.py gave up rebuilding stops the run with the host's reason, exit 2."""
    from types import SimpleNamespace

    from pytest_libero.plugin.breaker import BreakerStop
    from pytest_libero.plugin.policy_host import HOSTS_KEY

    accounting = SimpleNamespace(stop_reason=None)
    dsession = SimpleNamespace(shouldstop=False)
    plugins = {"libero-accounting": accounting, "dsession": dsession}
    config = SimpleNamespace(stash={HOSTS_KEY: {"cpu": SimpleNamespace(gave_up=None)}},
                             pluginmanager=SimpleNamespace(get_plugin=plugins.get))
    session = SimpleNamespace(shouldstop=False, exitstatus=0)
    breaker = BreakerStop(config)  # type: ignore[arg-type]
    breaker.pytest_sessionstart(session)  # type: ignore[arg-type]
    breaker.pytest_runtest_logreport(SimpleNamespace())  # type: ignore[arg-type]
    assert not session.shouldstop and breaker.stopped is None
    config.stash[HOSTS_KEY]["cpu"].gave_up = "the policy host died and could not be rebuilt 3 times: boom"
    breaker.pytest_runtest_logreport(SimpleNamespace())  # type: ignore[arg-type]
    assert "could not be rebuilt 3 times: boom" in session.shouldstop and session.shouldstop == dsession.shouldstop
    assert accounting.stop_reason.startswith("never ran: libero breaker: the policy host died")
    breaker.pytest_sessionfinish(session)  # type: ignore[arg-type]
    assert session.exitstatus == 2


def test_a_benchmark_that_cannot_build_stops_the_run_at_the_preflight_and_resume_runs_it(toy_env, tmp_path):
    """Every build fails (an asset missing): the preflight's build of the first cell fails, so no cell
    runs; the message names the benchmark, the cell, the cause, the renderer and the fix."""
    broken = dict(toy_env, TOY_BENCHMARK_BROKEN="1")
    result = pytest_run(tmp_path, broken, "--libero-policy", TOY_POLICY, *TOY)  # 12 cells
    assert result.returncode == 4, result.stdout + result.stderr
    line = result.stderr
    for named in ("libero preflight: cannot build toy cell toy_red-n1: bench service failed during 'start': "
                  "FileNotFoundError: toy asset /tmp/toy-assets/toy_red-0-0/scene.xml is missing (on the CPU "
                  "renderer (no GPU; MUJOCO_GL=egl)); fix the benchmark's install", "pytest_libero doctor",
                  "12 selected cell(s) are recorded not_run", "--libero-resume"):
        assert named in line, line
    assert "test_rollout" not in result.stdout  # no cell started
    folder = run_folder(tmp_path)
    found = records(folder)
    assert len(found) == 12 and {r["outcome"]["outcome"] for r in found.values()} == {"not_run"}
    assert all("the preflight stopped the run: cannot build toy cell toy_red-n1: " in r["outcome"]["message"]
               for r in found.values())
    resumed = pytest_run(tmp_path, toy_env, "--libero-resume", str(folder))
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # the fixed machine: the still policy fails
    assert "libero: preflight (" in resumed.stdout and "the CPU renderer (no GPU; MUJOCO_GL=egl) built toy " \
        "toy_red-n1 (reset, settled, first frame rendered" in resumed.stdout, resumed.stdout
    assert set(outcomes(folder).values()) == {"failure"}


def test_a_prestarted_episode_answers_its_cells_start_once_and_no_other():
    """BenchService.prestart (the preflight's kept service, tests above): the next `start` of the same
    payload is answered with the episode started ahead, nothing sent; any other starts afresh."""
    from test_benchmark_seam import TESTS

    from pytest_libero.core.benchmark import SERVICE_MODULE_ENV
    from pytest_libero.runtime.service import BenchService

    service = BenchService(timeout_s=60, env={SERVICE_MODULE_ENV: "toy_benchmark", "PYTHONPATH": str(TESTS)})
    payload = {"cell": {"suite": "toy_red", "task_index": 0, "init_index": 0, "seed": 7}, "control_cap": 12,
               "settle_controls": 0}
    try:
        reply = service.prestart(payload)
        pid = service.pid
        assert service.started_ahead_s(dict(payload)) > 0.0 and service.started_ahead_s({}) == 0.0
        assert reply["language"] == "stack the red cubes (red)"
        assert service.start(dict(payload)) is reply  # the cell's own start: the episode started ahead
        assert service.start(payload) is not reply  # once only: a start sent to the service
        service.prestart(payload)
        assert service.start(dict(payload, control_cap=11)) is not reply
        assert service.submit(np.zeros((2, 4)), deliver=False)["executed_total"] == 2
        assert service.pid == pid
    finally:
        service.close()


class _FakeService:
    """The preflight's view of a bench service (the plugin's own logic: which cell, which message)."""

    def __init__(self, fail: str | None = None, barrier: threading.Barrier | None = None) -> None:
        self.fail, self.barrier, self.started, self.closed = fail, barrier, [], False

    def check_sources(self) -> None:
        return None

    def prestart(self, payload: dict) -> dict:
        if self.barrier is not None:
            self.barrier.wait()  # passes only when every target builds at the same time
        if self.fail:
            raise EnvironmentFault(self.fail)
        self.started.append(payload["cell"])
        return {}

    def close(self) -> None:
        self.closed = True


def _job(refused: frozenset[str] = frozenset()):
    from pytest_libero.core.cells import Cell
    from pytest_libero.runtime import preflight

    cells = [Cell("libero_10", 0), Cell("libero_10", 1)]
    return preflight.Job("libero", cells, payload=lambda cell: {"cell": cell.id},
                         refused=lambda service, cell: "refused" if cell.id in refused else None)


def test_a_failed_build_names_the_cell_the_cause_the_renderer_and_the_fix_and_closes_the_service(monkeypatch):
    from pytest_libero.runtime import preflight

    monkeypatch.setenv("MUJOCO_GL", "nosuchgl")
    service = _FakeService(fail="bench service failed during 'start': RuntimeError: invalid value for "
                                "environment variable MUJOCO_GL: nosuchgl\nTraceback (most recent call last): ...")
    checked = preflight.check(preflight.targets([None]), _job(), lambda target, devices: (service, None), keep=True)
    assert checked.failure is not None and checked.lines == () and checked.kept is None and service.closed
    assert checked.failure.startswith(
        "cannot build libero cell libero_10-t00-s00: bench service failed during 'start': RuntimeError: invalid "
        "value for environment variable MUJOCO_GL: nosuchgl (on the CPU renderer (no GPU; MUJOCO_GL=nosuchgl)); "
        "fix the benchmark's install"), checked.failure
    assert "Traceback" not in checked.failure and "MUJOCO_GL=osmesa" in checked.failure


def test_a_refused_cell_is_passed_over_and_the_one_process_keeps_its_service(monkeypatch):
    from pytest_libero.runtime import preflight

    monkeypatch.setenv("MUJOCO_GL", "egl")
    service = _FakeService()
    checked = preflight.check(preflight.targets([None]), _job(frozenset({"libero_10-t00-s00"})),
                              lambda target, devices: (service, None), keep=True)
    assert checked.failure is None and checked.kept is service and not service.closed
    assert service.started == ["libero_10-t01-s00"]
    assert checked.lines == ("the CPU renderer (no GPU; MUJOCO_GL=egl) built libero libero_10-t01-s00 (reset, "
                             "settled, first frame rendered: 0.0 s)",)


def test_under_xdist_every_target_builds_at_once_and_every_service_is_closed(monkeypatch):
    from pytest_libero.runtime import preflight

    monkeypatch.setenv("MUJOCO_GL", "osmesa")  # no EGL: no device probe
    barrier = threading.Barrier(2, timeout=30)
    services = {gpu: _FakeService(barrier=barrier) for gpu in ("0", "1")}
    gpus = [{"id": gpu, "index": int(gpu), "name": "Fake", "uuid": None} for gpu in services]
    checked = preflight.check(preflight.targets([*gpus, gpus[0]]), _job(),
                              lambda target, devices: (services[target.gpu["id"]], None))
    assert checked.failure is None and checked.kept is None, checked
    assert all(s.closed and s.started == ["libero_10-t00-s00"] for s in services.values())
    assert [line.split(" built ")[0] for line in checked.lines] == ["GPU 0 (Fake) (MUJOCO_GL=osmesa)",
                                                                    "GPU 1 (Fake) (MUJOCO_GL=osmesa)"]
