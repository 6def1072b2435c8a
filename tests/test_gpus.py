"""GPU pinning on CPU: faked GPU lists, the round-robin assignment, replacement workers, EGL mapping."""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from fakes import fake_conftest

from evidence_helpers import records, run_dirs
from pytest_libero.errors import EnvironmentFault
from pytest_libero.plugin import gpus as plugin_gpus
from pytest_libero.plugin.gpus import XdistGpus
from pytest_libero.runtime import gpus
from pytest_libero.runtime.gpus import Gpu, GpuAssignment, discover_gpus, egl_index_for

FAKES = (Path(__file__).parent / "fakes.py").read_text()


def fake_gpus(n: int) -> list[Gpu]:
    return [Gpu(str(i), i, "Fake GPU", f"GPU-{i:04d}") for i in range(n)]


def node(worker: str) -> SimpleNamespace:
    return SimpleNamespace(gateway=SimpleNamespace(id=worker), workerinput={})


@pytest.mark.parametrize("n_gpus", [1, 2, 4])
def test_eight_workers_are_balanced_over_the_gpus(n_gpus):
    assignment = XdistGpus(fake_gpus(n_gpus))
    nodes = [node(f"gw{i}") for i in range(8)]
    for n in nodes:
        assignment.pytest_configure_node(n)
    per_gpu = collections.Counter(n.workerinput["libero_gpu"]["id"] for n in nodes)
    assert sorted(per_gpu) == [str(i) for i in range(n_gpus)]
    assert set(per_gpu.values()) == {8 // n_gpus}
    # round-robin: neighbours land on different GPUs whenever there is more than one
    assert [n.workerinput["libero_gpu"]["index"] for n in nodes] == [i % n_gpus for i in range(8)]


@pytest.mark.parametrize("n_gpus", [2, 4])
def test_a_crashed_workers_replacement_gets_its_gpu(n_gpus):
    plugin = XdistGpus(fake_gpus(n_gpus))
    nodes = {f"gw{i}": node(f"gw{i}") for i in range(8)}
    for n in nodes.values():
        plugin.pytest_configure_node(n)
    # xdist: testnodedown for the dead node, then configure_node for its replacement (new id)
    for dead, replacement in (("gw5", "gw8"), ("gw2", "gw9"), ("gw8", "gw10")):
        lost = plugin.assignment.gpu_of(dead)
        plugin.pytest_testnodedown(nodes[dead], error="Not properly terminated")
        nodes[replacement] = node(replacement)
        plugin.pytest_configure_node(nodes[replacement])
        assert nodes[replacement].workerinput["libero_gpu"] == lost.as_dict()
    live = [w for w in nodes if w not in ("gw5", "gw2", "gw8")]
    assert set(collections.Counter(plugin.assignment.gpu_of(w).id for w in live).values()) == {8 // n_gpus}


@pytest.mark.parametrize("n_gpus, events, expected", [
    # (worker, "up" | "down") in order; expected: the GPU index each worker brought up got
    (2, [("a", "up"), ("b", "up"), ("c", "up")], {"a": 0, "b": 1, "c": 0}),
    (2, [("a", "up"), ("b", "up"), ("a", "down"), ("c", "up")], {"a": 0, "b": 1, "c": 0}),
    (3, [("a", "up"), ("b", "up"), ("c", "up"), ("c", "down"), ("a", "down"), ("d", "up"), ("e", "up")],
     {"a": 0, "b": 1, "c": 2, "d": 0, "e": 2}),  # the lowest free slot first
    (2, [("a", "up"), ("a", "up")], {"a": 0}),  # configured twice: the same slot
])
def test_the_slot_logic_needs_no_pytest(n_gpus, events, expected):
    assignment = GpuAssignment(fake_gpus(n_gpus))
    got = {}
    for worker, event in events:
        if event == "up":
            got[worker] = assignment.assign(worker).index
        else:
            assignment.release(worker)
    assert got == expected


def test_runtime_gpus_imports_no_pytest():
    code = "import sys, pytest_libero.runtime.gpus; sys.exit('pytest' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_the_plugin_keeps_the_pinned_gpu_and_its_egl_device_in_the_config(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # restored after the test, as pinning changes it
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.setattr(gpus, "probe_egl_devices", lambda env: [{"egl": 0, "cuda": 1}, {"egl": 1, "cuda": 0}])
    config, other = SimpleNamespace(stash=pytest.Stash()), SimpleNamespace(stash=pytest.Stash())
    assert plugin_gpus.record_fields(config) == {"gpu": None, "rendering_backend": "egl"}  # nothing pinned yet
    plugin_gpus.configure_worker(config, {"libero_gpu": fake_gpus(2)[1].as_dict()})
    assert plugin_gpus.service_env(config)["MUJOCO_EGL_DEVICE_ID"] == "0"
    assert plugin_gpus.record_fields(config)["gpu"] == dict(fake_gpus(2)[1].as_dict(), egl_device=0)
    assert plugin_gpus.record_fields(other)["gpu"] is None  # kept per config, not per process


def test_cpu_only_run_pins_nothing():
    assignment = XdistGpus([])
    n = node("gw0")
    assignment.pytest_configure_node(n)
    assert n.workerinput["libero_gpu"] is None


def test_gpu_list_precedence_option_then_cuda_visible_devices_then_detection():
    detected = fake_gpus(4)
    found, origin = discover_gpus("2,3", {"CUDA_VISIBLE_DEVICES": "0"}, detected)
    assert [g.id for g in found] == ["2", "3"] and origin == "--libero-gpus" and found[0].uuid == "GPU-0002"
    found, origin = discover_gpus(None, {"CUDA_VISIBLE_DEVICES": "1,GPU-0003"}, detected)
    assert [(g.id, g.index) for g in found] == [("1", 1), ("GPU-0003", 3)] and origin == "CUDA_VISIBLE_DEVICES"
    assert discover_gpus(None, {"CUDA_VISIBLE_DEVICES": ""}, detected)[0] == []
    assert [g.id for g in discover_gpus(None, {}, detected)[0]] == ["0", "1", "2", "3"]
    assert discover_gpus(None, {}, []) == ([], "none found (CPU)")
    with pytest.raises(ValueError, match="GPU 1 is listed twice"):
        discover_gpus("1,1", {}, detected)
    with pytest.raises(ValueError, match="'cuda:0' is not a GPU index"):
        discover_gpus("cuda:0", {}, detected)


def test_egl_index_comes_from_the_cuda_mapping_not_the_cuda_index():
    devices = [{"egl": 0, "cuda": 1}, {"egl": 1, "cuda": 0}, {"egl": 2, "cuda": None}]
    assert egl_index_for(0, devices) == 1 and egl_index_for(1, devices) == 0
    with pytest.raises(EnvironmentFault, match="no EGL device reports CUDA index 3.*EGL 2 -> CUDA None"):
        egl_index_for(3, devices)


def test_service_env_maps_the_given_gpu_and_keeps_nothing(monkeypatch):
    gpu = {"id": "1", "index": 1, "name": None, "uuid": None}
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    env, egl = gpus.service_env(gpu, [{"egl": 0, "cuda": 1}, {"egl": 1, "cuda": 0}])
    assert env == {"MUJOCO_EGL_DEVICE_ID": "0", "CUDA_VISIBLE_DEVICES": "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert egl == 0 and gpu == {"id": "1", "index": 1, "name": None, "uuid": None}  # not mutated
    assert gpus.record_fields(dict(gpu, egl_device=egl)) == {
        "gpu": {"id": "1", "index": 1, "name": None, "uuid": None, "egl_device": 0}, "rendering_backend": "egl"}
    assert gpus.service_env(None, []) == ({}, None)  # a CPU worker: nothing to map
    assert gpus.record_fields(None) == {"gpu": None, "rendering_backend": "egl"}
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    assert gpus.service_env(gpu, []) == ({}, None)  # CPU rendering: nothing to map
    monkeypatch.delenv("MUJOCO_GL")
    with pytest.raises(EnvironmentFault, match="its CUDA index is unknown"):
        gpus.service_env({"id": "GPU-x", "index": None}, [])


def test_pin_worker_sets_the_environment_and_returns_the_gpu(monkeypatch):
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert gpus.pin_worker(None) is None
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"  # a CPU worker changes nothing
    gpu = fake_gpus(3)[2].as_dict()
    assert gpus.pin_worker(gpu) == gpu
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2" and os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_the_egl_probe_sees_every_gpu_in_bus_order_while_the_worker_sees_one():
    # A pinned worker's own environment hides the other GPUs; the probe must not inherit that,
    # or EGL_CUDA_DEVICE_NV could number (or refuse) devices relative to the pinned one.
    worker = {"CUDA_VISIBLE_DEVICES": "3", "CUDA_DEVICE_ORDER": "FASTEST_FIRST", "PATH": "/usr/bin"}
    assert gpus.probe_environment(worker) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PATH": "/usr/bin"}
    assert worker["CUDA_VISIBLE_DEVICES"] == "3"  # the worker's own environment is left alone


def test_the_egl_probe_runs_and_finds_no_cuda_device_on_a_cpu_machine():
    if shutil.which("nvidia-smi"):
        pytest.skip("an NVIDIA machine: its EGL devices do report CUDA indices")
    devices = gpus.probe_egl_devices({"PATH": "/usr/bin:/bin"})
    assert all(d["cuda"] is None for d in devices)
    with pytest.raises(EnvironmentFault, match="cannot render on GPU 0"):
        egl_index_for(0, devices)


CONFTEST = fake_conftest()


def test_xdist_workers_on_two_faked_gpus_record_their_gpu(pytester):
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest("-n", "2", "--libero-gpus", "0,1", "--libero-scope", "development",
                                "--libero-task-ids", "0,1,2,3", "--libero-budget", "decisions",
                                "--libero-max-policy-calls", "1", "--libero-video", "none")
    result.assert_outcomes(failed=4)
    (run_dir,) = run_dirs(pytester.path / "reports")
    found = records(run_dir)
    assert {r["worker"] for r in found.values()} == {"gw0", "gw1"}  # xdist sends 2 of the 4 items to each
    for record in found.values():
        gpu = record["compute"]["gpu"]
        assert gpu["id"] == str(int(record["worker"][2:]) % 2)  # gw0 -> GPU 0, gw1 -> GPU 1
        assert gpu["index"] == int(gpu["id"]) and record["compute"]["rendering_backend"] == "egl"


def test_a_run_without_xdist_is_main_whatever_its_environment_says(pytester, monkeypatch):
    # A LIBERO run started from some other suite's xdist worker inherits that worker's variables;
    # its own worker name comes from xdist's config (workerinput), which it has none of.
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "8")
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest("--libero-scope", "development", "--libero-task-ids", "0", "--libero-budget",
                                "decisions", "--libero-max-policy-calls", "1", "--libero-video", "none")
    result.assert_outcomes(failed=1)
    (run_dir,) = run_dirs(pytester.path / "reports")
    assert {r["worker"] for r in records(run_dir).values()} == {"main"}
