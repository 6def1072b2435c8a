"""Adapter loading: RoboMemArena-style adapters run unchanged; installed packages register names.

Entry points are real: a `*.dist-info` folder with an entry_points.txt on a sys.path entry is
an installed distribution as far as importlib.metadata (and so pytest-libero) can tell.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from fakes import fake_conftest
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.adapters.robomemarena import RoboMemArenaPolicy, adapter_obs_keys
from pytest_libero.core.contract import Counters, seal_observation
from pytest_libero.errors import PolicyLoadError
from pytest_libero.core.policy import PolicySpec, profile_of
from pytest_libero.runtime.policies import build_builtin, check_policy_object, check_spec

FAKES = (Path(__file__).parent / "fakes.py").read_text()

ROBOMEMARENA_ADAPTER = """
import json
import numpy as np

class MemAdapter:
    '''Written for RoboMemArena's runner: reset(), infer_actions(obs, prompt, resize_size).'''

    def __init__(self, checkpoint_dir, horizon=8):
        self.checkpoint_dir, self.horizon = checkpoint_dir, horizon
        self.calls, self.resets, self.closed = [], 0, False

    def reset(self):
        self.resets += 1

    def infer_actions(self, obs, prompt, resize_size):
        self.calls.append((obs, prompt, resize_size))
        with open("calls.txt", "a") as f:
            f.write(json.dumps({"prompt": prompt, "resize_size": resize_size,
                                "image": list(obs["observation/image"].shape)}) + "\\n")
        actions = np.zeros((self.horizon, 7), dtype=np.float32)
        actions[:, 6] = -1.0
        return actions

    def close(self):
        self.closed = True

def build_adapter(checkpoint_dir, horizon=8):
    return MemAdapter(checkpoint_dir, horizon)

def build_sized(checkpoint_dir, resize_size):
    adapter = MemAdapter(checkpoint_dir)
    adapter.built_with = resize_size
    return adapter

class Plain:
    def reset(self, language): pass
    def act(self, observation): return np.zeros(7)
    def close(self): pass

def build_plain():
    return Plain()
"""


@pytest.fixture
def adapter_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "mem_adapter.py"
    path.write_text(ROBOMEMARENA_ADAPTER)
    monkeypatch.chdir(tmp_path)
    return path


def distinct_observation(language: str = "put both the cookies and the sauce in the basket"):
    rng = np.random.default_rng(7)
    images = {c: rng.integers(0, 256, (256, 256, 3), dtype=np.uint8) for c in ("agentview", "robot0_eye_in_hand")}
    return seal_observation(language, images, Counters(), LIBERO_SPEC)


def test_robomemarena_adapter_is_wrapped_and_gets_its_obs_prompt_and_resize_size(adapter_file):
    spec = PolicySpec(f"{adapter_file}:build_adapter", {"checkpoint_dir": "/ckpt", "resize_size": 224})
    policy = check_policy_object(build_builtin(spec), spec)
    assert isinstance(policy, RoboMemArenaPolicy)
    inner = policy.adapter
    assert inner.checkpoint_dir == "/ckpt"  # resize_size was the wrapper's, not the factory's
    obs = distinct_observation()
    policy.reset(obs.language)
    chunk = policy.act(obs)
    assert inner.resets == 1 and chunk.shape == (8, 7)
    (seen, prompt, size), = inner.calls
    assert prompt == obs.language and size == 224
    assert sorted(seen) == adapter_obs_keys()
    ours = obs.images["agentview"]
    np.testing.assert_array_equal(seen["observation/image"], ours[:, ::-1])  # RoboMemArena's flipud
    np.testing.assert_array_equal(seen["base_0_rgb"], ours[:, ::-1])
    np.testing.assert_array_equal(seen["agentview_image"], ours[::-1, ::-1])  # native render
    np.testing.assert_array_equal(seen["observation/wrist_image"], obs.images["robot0_eye_in_hand"][:, ::-1])
    assert not seen["left_wrist_0_rgb"].any() and seen["prompt"] == obs.language
    assert seen["observation/image"].shape == (256, 256, 3)  # the harness passes the size, never resizes
    with pytest.raises(KeyError, match="observation/state.*not available: the rgb track"):
        seen["observation/state"]
    profile = profile_of(policy, spec)
    assert profile["adapter_style"] == "robomemarena" and profile["resize_size"] == 224
    assert profile["kind"] == "capability" and "absent" in profile["state"]
    policy.close()
    assert inner.closed


def test_the_openpi_compat_state_becomes_observation_state(adapter_file):
    from types import SimpleNamespace

    policy = build_builtin(PolicySpec(f"{adapter_file}:build_adapter", {"checkpoint_dir": "c"}))
    obs = distinct_observation()
    policy.reset(obs.language)
    state = np.arange(8, dtype=np.float64)
    policy.act(SimpleNamespace(language=obs.language, images=obs.images, counters=obs.counters, state=state))
    seen = policy.adapter.calls[0][0]
    assert seen["observation/state"].dtype == np.float32 and seen["observation/state"].tolist() == list(range(8))


def test_resize_size_defaults_to_256_and_reaches_a_factory_that_takes_it(adapter_file):
    default = build_builtin(PolicySpec(f"{adapter_file}:build_adapter", {"checkpoint_dir": "c"}))
    assert default.resize_size == 256
    sized = build_builtin(PolicySpec(f"{adapter_file}:build_sized", {"checkpoint_dir": "c", "resize_size": 200}))
    assert sized.resize_size == 200 and sized.adapter.built_with == 200


@pytest.mark.parametrize("kwargs, message", [
    ({"resize_size": 224}, "does not take kwarg 'resize_size'"),
])
def test_resize_size_is_refused_for_ordinary_policies(adapter_file, kwargs, message):
    with pytest.raises(PolicyLoadError, match=message):
        build_builtin(PolicySpec(f"{adapter_file}:build_plain", kwargs))


def test_bad_resize_size_is_a_load_error(adapter_file):
    with pytest.raises(PolicyLoadError, match="resize_size must be a positive integer"):
        build_builtin(PolicySpec(f"{adapter_file}:build_adapter", {"checkpoint_dir": "c", "resize_size": "224"}))


def test_a_hook_returning_a_robomemarena_adapter_is_wrapped_too():
    class Bare:  # no close(): optional for RoboMemArena adapters
        def reset(self):
            pass

        def infer_actions(self, obs, prompt, resize_size):
            return np.zeros((2, 7))

    policy = check_policy_object(Bare(), PolicySpec("mymodel", {}))
    policy.reset("x")
    assert policy.act(distinct_observation()).shape == (2, 7)
    policy.close()


def test_robomemarena_adapter_runs_as_pytest_items_without_wrapper_code(pytester):
    pytester.makepyfile(fakes=FAKES, mem_adapter=ROBOMEMARENA_ADAPTER)
    pytester.makeconftest(fake_conftest(success_at=None))
    result = pytester.runpytest("--libero-policy", "mem_adapter.py:build_adapter",
                                "--libero-policy-kwargs", '{"checkpoint_dir": "/ckpt", "resize_size": 224}',
                                "--libero-budget", "decisions", "--libero-max-policy-calls", "3")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*failure: no native success within the cap: 3 policy calls*"])
    # The profile is recorded with every episode, wherever the evidence layout puts it.
    # Records are compact JSON: each is read and written back with the default separators.
    records = [json.dumps(json.loads(p.read_text())) for p in pytester.path.rglob("*.json")
               if "adapter_style" in p.read_text()]
    assert records and all('"adapter_style": "robomemarena"' in r and '"resize_size": 224' in r for r in records)
    calls = (pytester.path / "calls.txt").read_text().splitlines()
    assert len(calls) == 6 and '"resize_size": 224' in calls[0] and '"image": [256, 256, 3]' in calls[0]



EP_MODULE = """
import numpy as np

class EpPolicy:
    profile = {"kind": "diagnostic", "label": "from an entry point"}
    def __init__(self, n=4):
        self.n = n
    def reset(self, language): pass
    def act(self, observation): return np.tile([0.0] * 6 + [-1.0], (self.n, 1))
    def close(self): pass

def make(**kwargs):
    return EpPolicy(**kwargs)
"""


def install_fake_distribution(site: Path) -> None:
    """An installed distribution declaring two policies; one of them cannot even be imported."""
    site.mkdir(exist_ok=True)
    (site / "ep_policies.py").write_text(EP_MODULE)
    (site / "ep_broken.py").write_text("raise ImportError('this adapter needs torch')\n")
    info = site / "ep_policies-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-policies\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[pytest_libero.policies]\nepmodel = ep_policies:make\nepbroken = ep_broken:make\n")


def test_entry_point_names_are_listed_and_loaded_lazily(tmp_path, monkeypatch):
    install_fake_distribution(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(ValueError, match="Unknown policy 'epmodl'. Did you mean 'epmodel'") as error:
        check_spec(PolicySpec("epmodl"))
    available = str(error.value).split("Available: ")[1].split(", or ")[0].split(", ")
    assert {"epbroken", "epmodel", "openpi", "random", "zero"} <= set(available) and available == sorted(available)
    check_spec(PolicySpec("epmodel"))
    policy = build_builtin(PolicySpec("epmodel", {"n": 2}))
    assert policy.act(distinct_observation()).shape == (2, 7)
    assert "ep_broken" not in sys.modules  # never imported: nobody asked for it
    with pytest.raises(PolicyLoadError, match="cannot load policy 'ep_broken:make' .*epbroken.* of ep-policies"
                                              ".*ImportError: this adapter needs torch"):
        build_builtin(PolicySpec("epbroken"))
    assert build_builtin(PolicySpec("nobody")) is None


def test_installed_entry_point_runs_from_the_command_line(pytester, monkeypatch):
    install_fake_distribution(pytester.path / "site")
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(fake_conftest(success_at=6))
    env_path = str(pytester.path / "site")
    monkeypatch.setenv("PYTHONPATH", env_path)  # a fresh interpreter sees an installed package
    result = pytester.runpytest_subprocess("--libero-policy", "epmodel", "--libero-policy-kwargs", '{"n": 3}',
                                           "--libero-budget", "decisions", "--libero-max-policy-calls", "3")
    result.assert_outcomes(passed=2)
    unknown = pytester.runpytest_subprocess("--collect-only", "--libero-policy", "nonesuch")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [x for x in unknown.stderr.lines if "Unknown policy 'nonesuch'. Available: " in x]
    assert {"epbroken", "epmodel", "openpi", "zero"} <= set(line.split("Available: ")[1].split(", or ")[0].split(", "))
