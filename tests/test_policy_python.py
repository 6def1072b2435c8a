"""--libero-policy-python: the policy's child in another interpreter (a venv with only numpy 2).

The venv is made once per test session from the local wheels (pip's find-links; no download). It
holds numpy and nothing else: no pip, no pytest, no jsonschema, no LIBERO, so whatever the child
imports beyond the standard library and numpy must be this suite's own modules, by path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evidence_helpers import records, run_dirs
from pytest_libero.core.policy import PolicySpec
from pytest_libero.errors import OptionError, PolicyLoadError
from pytest_libero.runtime import wire
from pytest_libero.runtime.interpreter import probe
from pytest_libero.runtime.isolation import ProcessPolicy, check_in

NUMPY_2 = "numpy==2.1.3"

# Writes, at each call, the top-level modules loaded in its process and the numpy it runs; returns
# a deterministic chunk built from what it was given, so values and dtypes cross both ways.
POLICY = '''
import json, os, sys
import numpy as np

class Echo:
    def __init__(self, report=None):
        self.report, self.calls = report, 0
    def reset(self, language):
        self.calls = 0
    def act(self, observation):
        self.calls += 1
        if self.report:
            with open(self.report, "w") as f:
                json.dump({"modules": sorted({m.split(".")[0] for m in sys.modules}), "numpy": np.__version__,
                           "keys": sorted(observation)}, f)
        return np.tile(np.array([0.01 * self.calls, 0, 0, 0, 0, 0, -1], dtype=np.float32), (5, 1))
    def act_batch(self, requests):
        return [self.act(r.observation) for r in requests]

def factory(report=None):
    return Echo(report)
'''


@pytest.fixture(scope="session")
def numpy2_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A venv's bin/python holding only numpy 2 (made once per session, from the local wheels)."""
    folder = tmp_path_factory.mktemp("numpy2-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = str(folder / "bin" / "python")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", NUMPY_2],
                   check=True)
    return python


@pytest.fixture
def echo(tmp_path: Path) -> Path:
    (tmp_path / "echo.py").write_text(POLICY)
    return tmp_path


def test_the_child_imports_only_stdlib_numpy_and_this_suite_and_arrays_cross_both_ways(numpy2_python, echo):
    report = echo / "report.json"
    python = probe(numpy2_python)
    assert python.numpy.startswith("2.") and np.__version__.startswith("1.")
    spec = PolicySpec(f"{echo / 'echo.py'}:factory", {"report": str(report)})
    check_in(python, spec)  # the controller's dry check, run there
    policy = ProcessPolicy(spec, timeout_s=60.0, python=python)
    try:
        assert policy.profile["interpreter"] == {"executable": python.executable, "python": python.python,
                                                 "numpy": python.numpy}
        policy.reset("put the bowl on the plate")
        observation = {"agentview_image": np.arange(48, dtype=np.uint8).reshape(4, 4, 3),
                       "state": np.linspace(0, 1, 8), "gripper": np.float32(0.5)}
        chunk = policy.act(observation)
        assert chunk.dtype == np.float32 and chunk.shape == (5, 7) and chunk[0, 0] == np.float32(0.01)
    finally:
        policy.close()
    found = json.loads(report.read_text())
    assert found["numpy"] == NUMPY_2.split("==")[1] and found["keys"] == sorted(observation)
    # The policy file itself is loaded under a private name; __mp_main__ is multiprocessing's alias of __main__.
    allowed = set(sys.stdlib_module_names) | {"numpy", "pytest_libero", "__main__", "__mp_main__"}
    extra = {m for m in found["modules"] if m not in allowed and not m.startswith("pytest_libero_user_policy_")}
    assert extra == set(), "the policy child loaded modules beyond stdlib + numpy + this suite's"
    assert "pytest_libero" in found["modules"] and "pytest" not in found["modules"]


def test_the_wire_round_trips_what_numpy_pickles_would_not_carry_across_versions():
    values = {"u8": np.zeros((2, 3), np.uint8), "f": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
              "s": np.float32(1.5), "i": np.int64(-3), "dt": np.dtype("float32"), "b": np.bool_(True),
              "obj": np.array(["a", None], dtype=object), "text": "x"}
    back = wire.loads(wire.dumps(values))
    for name, value in values.items():
        if isinstance(value, np.ndarray):
            assert back[name].dtype == value.dtype and np.array_equal(back[name], value), name
        else:
            assert back[name] == value and type(back[name]) is type(value), name
    (nested,) = wire.loads(wire.dumps([np.ones(2)]))
    assert nested.dtype == np.float64 and nested.tolist() == [1.0, 1.0]
    assert b"numpy.core" not in wire.dumps(values) and b"numpy._core" not in wire.dumps(values)


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def _fake_probe(path: Path, version: list[int], numpy: str) -> str:
    line = json.dumps({"magic": "pytest-libero-probe", "version": version, "executable": str(path), "numpy": numpy})
    return _script(path, f"echo 'PYTEST-LIBERO-PROBE {line}'\n")


def test_probe_names_each_wrong_interpreter_and_the_fix(tmp_path):
    cases = {
        str(tmp_path / "missing" / "python"): "no such file",
        str(tmp_path): "is a folder",
        _script(tmp_path / "plain", "echo hi\n"): "is not a Python interpreter",
        _fake_probe(tmp_path / "old", [3, 8, 18], "1.24.4"): "is Python 3.8.18; the policy's interpreter must be "
                                                             "Python 3.10 or newer",
        _fake_probe(tmp_path / "oldnp", [3, 11, 7], "1.21.6"): "has numpy 1.21.6, which the policy wire does not "
                                                               "support",
        _fake_probe(tmp_path / "np3", [3, 11, 7], "3.0.0"): "has numpy 3.0.0",
    }
    (tmp_path / "noexec").write_text("")
    cases[str(tmp_path / "noexec")] = "is not executable"
    for path, said in cases.items():
        with pytest.raises(OptionError) as caught:
            probe(path)
        assert said in str(caught.value) and path.rstrip("/") in str(caught.value), (path, str(caught.value))


def test_a_policy_its_interpreter_cannot_import_says_how_to_install_it(numpy2_python, tmp_path):
    (tmp_path / "needs.py").write_text("import lerobot_not_here\ndef factory(): pass\n")
    with pytest.raises(PolicyLoadError, match=rf"No module named 'lerobot_not_here'.*{numpy2_python} -m pip "
                                              r"install lerobot_not_here"):
        check_in(probe(numpy2_python), PolicySpec(f"{tmp_path / 'needs.py'}:factory", {}))


RUN = ("--libero-scope", "development", "--libero-budget", "decisions", "--libero-max-policy-calls", "2",
       "--libero-video", "none", "--libero-task-ids", "0", "--libero-policy", "echo.py:factory")


@pytest.mark.parametrize("isolation", ["process", "host"])
def test_usage_errors_at_start_exit_4_naming_the_interpreter(pytester, tmp_path, numpy2_python, isolation):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    pytester.makepyfile(echo=POLICY, needs="import lerobot_not_here\ndef factory(): pass\n")
    missing = str(tmp_path / "nowhere" / "python")
    cases = [
        ((missing,), f"--libero-policy-python {missing}: no such file"),
        ((str(bare / "bin" / "python"),), "has no numpy"),
        ((_fake_probe(tmp_path / "old", [3, 9, 18], "1.26.4"),), "is Python 3.9.18"),
        ((numpy2_python, "--libero-policy", "needs.py:factory"),
         f"module 'lerobot_not_here' is missing from --libero-policy-python {numpy2_python}: install it into that "
         f"environment: {numpy2_python} -m pip install lerobot_not_here"),
    ]
    for extra, said in cases:
        result = pytester.runpytest_subprocess(*RUN, "--libero-policy-isolation", isolation,
                                               "--libero-policy-python", *extra)
        assert result.ret == 4, (extra, result.stdout.str(), result.stderr.str())
        assert said in result.stderr.str(), (extra, result.stderr.str())
        assert not list(pytester.path.glob("libero-runs/*/*/episodes/*.json")), "an episode ran"


def test_the_option_without_isolation_is_a_usage_error(pytester, numpy2_python):
    pytester.makepyfile(echo=POLICY)
    result = pytester.runpytest_subprocess(*RUN, "--libero-policy-python", numpy2_python)
    assert result.ret == 4
    assert ("the policy runs in this process under --libero-policy-isolation none; add "
            "--libero-policy-isolation process (or host)") in result.stderr.str()


@pytest.mark.real_libero
def test_isolated_and_hosted_in_numpy2_give_the_records_of_the_suites_own_interpreter(pytester, numpy2_python):
    pytester.makepyfile(echo=POLICY)
    found = {}
    runs = {"own": ("process",), "process": ("process", "--libero-policy-python", numpy2_python),
            "host": ("host", "--libero-policy-python", numpy2_python)}
    for name, extra in runs.items():
        result = pytester.runpytest_subprocess(*RUN, "--libero-output", name, "--libero-policy-isolation", *extra)
        assert result.ret in (0, 1), result.stdout.str()[-3000:] + result.stderr.str()[-3000:]
        (run_dir,) = run_dirs(pytester.path / name)
        (found[name],) = records(run_dir).values()
    for name in ("process", "host"):
        for block in ("outcome", "counters", "private", "chunks", "observations", "cell"):
            assert found[name][block] == found["own"][block], (name, block)
        profile = found[name]["identities"]["model_profile"]
        assert profile["interpreter"]["numpy"] == "2.1.3", profile
        assert profile["interpreter"]["executable"] == numpy2_python
        assert found[name]["identities"].get("protocol") == found["own"]["identities"].get("protocol")
    assert found["own"]["identities"]["model_profile"]["interpreter"]["numpy"] == np.__version__
