"""`--libero-policy lerobot` (adapters/lerobot.py): usage errors at start, the differential test
against lerobot's own LIBERO path, and real episodes from the LeRobot venv in every mode.

The checks of the folder run before lerobot is imported, so they hold in any interpreter; the
missing-lerobot error is shown with this suite's own venv as the policy's interpreter (it has
numpy, not lerobot).

Cost (issue 32, the CI gate): the nested pytest runs are pytester's in-process runs, so each pays
no interpreter and plugin start of its own (the policy's child and the bench services are still
processes of their own: what is tested is unchanged); the usage errors build no environment.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import lerobot_helpers
from evidence_helpers import records, run_dirs
from pytest_libero.runtime.interpreter import package_roots

RUN = ("--libero-scope", "development", "--libero-budget", "decisions", "--libero-max-policy-calls", "2",
       "--libero-video", "none", "--libero-task-ids", "0", "--libero-track", "openpi-compat",
       "--libero-replan-interval", "5", "--libero-policy", "lerobot", "--libero-policy-isolation", "process",
       "--libero-policy-python", sys.executable)


def _saved_looking_folder(folder: Path) -> Path:
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "policy_preprocessor.json", "policy_postprocessor.json"):
        (folder / name).write_text("{}")
    return folder


def test_usage_errors_at_start_exit_4_naming_the_path_and_the_fix(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A bad interpreter path, a folder that is not a saved policy, an interpreter without lerobot:
    each exit 4 before any episode, naming the value and the fix."""
    nowhere_python = tmp_path / "no-venv" / "bin" / "python"
    given = [*RUN[:-1], str(nowhere_python), "--libero-policy-kwargs", "{}"]
    result = pytester.runpytest_inprocess(*given)
    assert result.ret == 4, (result.stdout.str(), result.stderr.str())
    assert (f"--libero-policy-python {nowhere_python}: no such file; give the path of the policy environment's "
            "Python" in " ".join(result.stderr.str().split())), result.stderr.str()
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    looks_saved = _saved_looking_folder(tmp_path / "looks-saved")
    cases = [
        ({}, "no policy folder given: pass --libero-policy-kwargs '{\"path\": \"PATH/TO/pretrained_model\"}'"),
        ({"path": str(tmp_path / "nowhere")}, f"policy folder {str(tmp_path / 'nowhere')!r} does not exist"),
        ({"path": str(partial)}, f"{str(partial)!r} is not a saved LeRobot policy: it lacks model.safetensors, "
                                 "policy_preprocessor.json, policy_postprocessor.json"),
        ({"path": str(looks_saved)}, f"this interpreter ({sys.executable}) cannot import "),
    ]
    for kwargs, said in cases:
        result = pytester.runpytest_inprocess(*RUN, "--libero-policy-kwargs", json.dumps(kwargs))
        err = " ".join(result.stderr.str().split())
        assert result.ret == 4, (kwargs, result.stdout.str(), result.stderr.str())
        assert " ".join(said.split()) in err, (kwargs, result.stderr.str())
        assert not list(pytester.path.glob("libero-runs/*/*/episodes/*.json")), "an episode ran"
    assert f"{sys.executable} -m pip install lerobot==0.4.4" in " ".join(result.stderr.str().split())


@pytest.mark.lerobot
@pytest.mark.real_libero
def test_the_adapter_hands_the_policy_what_lerobots_own_libero_path_gives(lerobot_python, lerobot_act, tmp_path):
    """One raw observation of libero_10 task 0's first init state, captured from real LIBERO by the
    harness's service code, goes through lerobot's LIBERO conversion (lerobot/envs/libero.py, with
    LIBERO's import stubbed: LIBERO is not in the LeRobot venv, see lerobot_helpers.DIFFERENTIAL)
    and through the adapter's, from the contract's images and state the service makes of it."""
    captured = tmp_path / "raw.npz"
    subprocess.run([sys.executable, "-c", lerobot_helpers.CAPTURE, str(captured)], check=True, timeout=600)
    done = subprocess.run([str(lerobot_python), "-c", lerobot_helpers.DIFFERENTIAL, json.dumps(package_roots()),
                           str(captured), str(lerobot_act)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("DIFFERENTIAL ")]
    found = json.loads(line.split(" ", 1)[1])
    wanted = {"observation.images.image", "observation.images.image2", "observation.state", "task"}
    for stage in ("before", "after"):  # before and after the policy's own saved preprocessor
        assert set(found[stage]) == wanted, (stage, sorted(found[stage]))
        # Bit-equal here, the state's axis-angle included (float32 in lerobot, float64 then float32
        # in the harness: they could differ in the last bit at another pose, which would show here).
        assert all(entry["equal"] for entry in found[stage].values()), (stage, found[stage])
    assert found["before"]["observation.images.image"]["shape"] == [[1, 3, 256, 256]] * 2
    assert found["after"]["observation.state"]["dtype"] == ["torch.float32"] * 2
    assert found["actions_max_abs"] == 0.0
    # The host's batch of two against each observation alone: bit-equal (the adapter runs the
    # backbone over the batch and each row's forward alone; a plain batched forward differs by about
    # 1e-8 here, CPU torch 2.10 at 1 or 2 threads).
    assert found["rows_differ"] and found["batch_vs_alone_max_abs"] == 0.0, found["batch_vs_alone_max_abs"]


@pytest.mark.lerobot
@pytest.mark.real_libero
def test_an_act_policy_from_its_own_venv_gives_equal_records_isolated_hosted_and_hosted_under_n2(
        pytester: pytest.Pytester, lerobot_python, lerobot_act) -> None:
    """libero_10 task 0, 2 policy calls of K = 5 (the policy's n_action_steps), in the isolated child,
    under the host, and under the host with -n 2 beside task 1: the same record for task 0 each time."""
    base = [*RUN[:RUN.index("--libero-task-ids")], "--libero-policy", "lerobot", "--libero-track", "openpi-compat",
            "--libero-replan-interval", "5", "--libero-policy-kwargs", json.dumps({"path": str(lerobot_act)}),
            "--libero-policy-python", str(lerobot_python)]
    runs = {"process": ("--libero-task-ids", "0", "--libero-policy-isolation", "process"),
            "host": ("--libero-task-ids", "0", "--libero-policy-isolation", "host"),
            "host-n2": ("--libero-task-ids", "0,1", "-n", "2", "--libero-policy-isolation", "host")}
    found = {}
    for name, extra in runs.items():
        result = pytester.runpytest_inprocess(*base, *extra, "--libero-output", name)
        assert result.ret in (0, 1), result.stdout.str()[-3000:] + result.stderr.str()[-3000:]
        (run_dir,) = run_dirs(pytester.path / name)
        found[name] = records(run_dir)
    (cell,) = found["process"]
    assert len(found["host-n2"]) == 2 and cell in found["host-n2"]
    first = found["process"][cell]
    assert first["counters"]["policy_calls"] == 2 and first["counters"]["executed_controls"] == 10, first["counters"]
    profile = first["identities"]["model_profile"]
    assert profile["adapter"] == "lerobot" and profile["policy_type"] == "act" and profile["lerobot_version"] == "0.4.4"
    assert profile["interpreter"]["executable"] == str(lerobot_python)
    for name in ("host", "host-n2"):
        record = found[name][cell]
        # Bit-equal, batches of two included: the adapter's batch gives each row what that
        # observation alone gives (the differential test checks it on one batch).
        for block in ("outcome", "counters", "private", "chunks", "observations", "cell"):
            assert record[block] == first[block], (name, block)
        assert record["identities"].get("protocol") == first["identities"].get("protocol")
    assert found["host"][cell]["timing"]["policy_batch_size_max"] == 1  # one worker: never a batch of two
    for record in found["host-n2"].values():  # task 1 ran its two calls too
        assert record["counters"]["policy_calls"] == 2, record["counters"]
