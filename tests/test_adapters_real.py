"""Each way of bringing a policy runs a real LIBERO rollout: entry point, file.py:factory,
RoboMemArena-style build_adapter file, and a conftest-registered adapter."""

from __future__ import annotations

import pytest

from pytest_libero.benchmarks import get, service_env
from pytest_libero.core.cells import Cell
from pytest_libero.core.policy import PolicySpec
from pytest_libero.runtime.policies import build_builtin, check_policy_object
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.protocol import Protocol
from pytest_libero.core.rollout import run_episode
from pytest_libero.runtime.service import BenchService
from test_adapters import EP_MODULE, ROBOMEMARENA_ADAPTER, install_fake_distribution

pytestmark = pytest.mark.real_libero
PROTOCOL = Protocol(spec=LIBERO_SPEC, scope="test", budget="decisions", replan_interval=5, max_policy_calls=2)


def test_entry_point_file_factory_and_robomemarena_adapters_run_real_rollouts(tmp_path, monkeypatch):
    install_fake_distribution(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    (tmp_path / "mine.py").write_text(EP_MODULE)
    (tmp_path / "mem_adapter.py").write_text(ROBOMEMARENA_ADAPTER)
    monkeypatch.chdir(tmp_path)
    specs = [PolicySpec("epmodel", {"n": 5}), PolicySpec("mine.py:make", {"n": 6}),
             PolicySpec("mem_adapter.py:build_adapter", {"checkpoint_dir": "/ckpt"})]
    service = BenchService(env=service_env(get("libero"), None))
    try:
        for spec in specs:
            policy = check_policy_object(build_builtin(spec), spec)
            result = run_episode(service, policy, Cell("libero_10", 0), PROTOCOL)
            assert (result.outcome, result.policy_calls, result.executed_controls) == ("failure", 2, 10), spec
            assert len(result.observations) == 2 and len(result.private["final_state_sha256"]) == 64
    finally:
        service.close()
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 2  # the RoboMemArena adapter was asked twice


def test_conftest_registered_adapter_runs_a_real_rollout(pytester):
    pytester.makeconftest("""
import numpy as np

class Hooked:
    profile = {"kind": "capability", "label": "registered by a conftest hook"}
    def reset(self, language): pass
    def act(self, observation): return np.tile([0.0] * 6 + [-1.0], (5, 1))
    def close(self): pass

def pytest_libero_policy_names():
    return ["hooked"]

def pytest_libero_make_policy(spec):
    return Hooked() if spec.name == "hooked" else None
""")
    result = pytester.runpytest_subprocess("--libero-scope", "development", "--libero-task-ids", "1",
                                           "--libero-policy", "hooked", "--libero-budget", "decisions",
                                           "--libero-max-policy-calls", "2")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*2 policy calls, 2 action decisions, 10 executed controls, 10 settling*"])
