"""Fault paths of the harness itself, each through a real pytest run of the plugin (the toy benchmark,
tests/toy_benchmark.py, registered as tests/test_benchmark_seam.py registers it: no simulator).

- ffmpeg fails: the episode is an env_error whose message carries ffmpeg's exit status and
  stderr tail, the record keeps what the episode measured, and no video is left or named.
- an xdist worker is killed mid-episode under `--libero-policy-isolation host`: its cell is
  `crashed`, and the replacement worker's cell is answered by the same policy host.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_benchmark_seam import TOY_POLICY, assert_schema_valid, pytest_run, records, run_folder, toy_environment

FAST = ["--libero-benchmark", "toy", "--libero-budget", "decisions", "--libero-max-policy-calls", "3"]
PUSH = ["--libero-policy", TOY_POLICY, "--libero-policy-kwargs", '{"push": 1.0}']


@pytest.fixture(scope="module")
def toy_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of every run: the toy registered."""
    return toy_environment(tmp_path_factory.mktemp("registry"))


def fake_ffmpeg(folder: Path, body: str) -> Path:
    """An executable standing in for ffmpeg (IMAGEIO_FFMPEG_EXE): a shell script with this body."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "ffmpeg"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return script


def test_a_failed_encode_is_an_env_error_with_ffmpegs_stderr_and_no_video(tmp_path: Path,
                                                                            toy_env: dict[str, str]) -> None:
    """An ffmpeg that reads every frame into a file that does not decode, then fails: the failure is found
    at commit, after the episode's own verdict (n1 succeeds under push, n2 fails), and overrides it: the
    item errors, as an env_error, and the file is removed (unchecked, it was renamed into place and the
    record named it)."""
    # It writes what it reads (raw frames, not an MP4) to its output, the last argument, then fails.
    encoder = fake_ffmpeg(tmp_path / "bin", 'for out; do :; done; cat > "$out"; '
                                            "echo 'x264 [error]: the test broke this encoder' >&2; "
                                            "echo 'Conversion failed!' >&2; exit 1")
    result = pytest_run(tmp_path / "run", dict(toy_env, IMAGEIO_FFMPEG_EXE=str(encoder)), "-rA", *FAST, *PUSH,
                        "-k", "toy_red", "--libero-video", "all")
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "2 errors" in result.stdout, output
    folder = run_folder(tmp_path / "run")
    found = records(folder)
    assert sorted(found) == ["toy_red-n1", "toy_red-n2"]
    verdicts = {"toy_red-n1": "success (success)", "toy_red-n2": "failure (truncation)"}
    for cell, record in found.items():
        outcome = record["outcome"]
        assert (outcome["outcome"], outcome["termination"]) == ("env_error", "env_error"), outcome
        message = outcome["message"]
        assert message.startswith(f"video encoder failed for {cell}: VideoEncodeError: the encode failed: "
                                  "ffmpeg exited with status 1 (encoder "), message
        assert message.endswith("ffmpeg's stderr ends: x264 [error]: the test broke this encoder | "
                                "Conversion failed!"), message
        assert record["errors"] and "Conversion failed!" in record["errors"][0]["traceback"]
        assert record["video"] is None
        # what the episode measured is kept, its own verdict among the warnings
        assert record["counters"]["policy_calls"] >= 1 and record["observations"]
        assert any(w.startswith(f"before its video failed the episode ended {verdicts[cell]}")
                   for w in record["warnings"]), record["warnings"]
        assert f"env_error: video encoder failed for {cell}" in result.stdout, output
    assert_schema_valid(folder)
    # no video in place, and no temporary of one left behind
    assert [p.name for p in folder.rglob("*.mp4")] == []
    overall = json.loads((folder / "summary.json").read_text())["overall"]
    assert (overall["errored"], overall["by_outcome"]["env_error"]) == (2, 2), overall


def test_a_worker_killed_mid_episode_is_replaced_and_its_successor_reaches_the_policy_host(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """gw0 is killed (SIGKILL, by its own bench service: tests/toy_benchmark.py `crash_gate`) during its
    first episode, after the host answered its reset and first act. xdist replaces it; the replacement
    (gw2) gets the cell gw0 left and answers it through the same policy host, whose address the
    controller hands to every worker it starts (plugin/policy_host.py XdistHosts).

    Four cells on two workers: xdist's load scheduling sends each worker two at once and, the queue
    then empty, tells both to finish; gw1 takes nothing more, so the cell gw0 left can only go to
    its replacement, whichever worker is quicker."""
    crash = tmp_path / "crash"
    crash.mkdir()
    result = pytest_run(tmp_path / "run", dict(toy_env, TOY_CRASH_DIR=str(crash)), "-rA", *FAST, *PUSH, "-n", "2",
                        "--libero-policy-isolation", "host", "--libero-video", "none")
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output  # the crashed item errors; n2s fail
    assert sorted(p.name for p in crash.iterdir()) == ["killed", "reached-by-gw2"], output
    assert "replacing crashed worker gw0" in output, output
    found = records(run_folder(tmp_path / "run"))
    assert sorted(found) == ["toy_blue-n1", "toy_blue-n2", "toy_red-n1", "toy_red-n2"]
    crashed = [cell for cell, record in found.items() if record["outcome"]["outcome"] == "crashed"]
    assert len(crashed) == 1, {cell: r["outcome"] for cell, r in found.items()}
    assert found[crashed[0]]["outcome"]["message"].startswith(f"worker crashed while running {crashed[0]}")
    answered = {cell: record for cell, record in found.items() if cell not in crashed}
    assert sorted(r["worker"] for r in answered.values()) == ["gw1", "gw1", "gw2"], \
        {cell: r["worker"] for cell, r in found.items()}
    for cell, record in answered.items():
        # answered by the policy's own verdict (n1 succeeds under push, n2 is truncated) through the host
        assert record["outcome"]["outcome"] == ("success" if cell.endswith("-n1") else "failure"), record["outcome"]
        assert record["identities"]["model_profile"]["isolation"] == "host"
        timing = record["timing"]
        assert {"policy_queue_s", "policy_host_compute_s", "policy_batch_size_max"} <= set(timing), timing
        assert record["counters"]["policy_calls"] >= 1
