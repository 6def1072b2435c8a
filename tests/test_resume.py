"""--libero-resume: a SIGKILLed run continued in its folder equals an uninterrupted run, cell for cell."""

from __future__ import annotations

import json

import pytest

from evidence_helpers import check_videos, records, run_dirs
from scale_helpers import comparable, run, setup_project, summary_core

PAUSE = ["--libero-policy-kwargs", '{"pause": 0.1}']


@pytest.fixture
def project(pytester):
    setup_project(pytester.path)
    return pytester.path


def test_sigkill_then_resume_equals_an_uninterrupted_run_and_runs_nothing_twice(project):
    assert run(project, *PAUSE, root="whole", log="whole.log") == 0
    (whole,) = run_dirs(project / "whole")
    run(project, *PAUSE, kill_after_records=2)
    (partial,) = run_dirs(project / "reports")
    before = {p.name: p.read_bytes() for p in (partial / "episodes").glob("*.json")}
    assert 2 <= len(before) < 5
    # a torn temporary left by the kill is ignored (and the cell redone)
    (partial / "episodes" / ".libero_10-t04-s00.999.tmp.json").write_text('{"torn": ')
    played_before = (project / "episodes.log").read_text().splitlines()
    # `--libero-resume RUN` alone: the run's recorded options (run.json's command line) are reused
    assert run(project, "--libero-resume", str(partial), bare=True) == 0
    played_after = (project / "episodes.log").read_text().splitlines()[len(played_before):]
    assert len(played_after) == 5 - len(before)  # only the cells without a complete record ran
    after = {p.name: p.read_bytes() for p in (partial / "episodes").glob("*.json")}
    for name, content in before.items():
        assert after[name] == content, f"{name} was run again"
    torn = partial / "episodes" / ".libero_10-t04-s00.999.tmp.json"
    assert torn.read_text() == '{"torn": '  # left alone: every reader ignores temporaries
    torn.unlink()
    final, reference = records(partial), records(whole)
    assert sorted(final) == sorted(reference) == [f"libero_10-t0{i}-s00" for i in range(5)]
    for cell in final:
        assert comparable(final[cell]) == comparable(reference[cell]), cell
    check_videos(partial, final)
    assert summary_core(partial) == summary_core(whole)
    manifest = json.loads((partial / "run.json").read_text())
    assert len(manifest["previous_sessions"]) == 1


def test_resume_reruns_errored_cells_unless_told_to_keep_them(pytester, project):
    run(project, "--libero-video", "none")
    (run_dir,) = run_dirs(project / "reports")
    path = run_dir / "episodes" / "libero_10-t01-s00.json"
    record = json.loads(path.read_text())
    record["outcome"].update(outcome="env_error", termination="env_error", message="simulated fault")
    path.write_text(json.dumps(record))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--libero-policy", "policy.py:Logged",
                                           "--libero-budget", "decisions", "--libero-max-policy-calls", "4",
                                           "--libero-scope", "development", "--libero-task-ids", "0,1,2,3,4",
                                           "--libero-resume", str(run_dir), "--libero-resume-keep-errors",
                                           "--libero-video", "none")
    result.stdout.fnmatch_lines(["*env_error (kept by --libero-resume-keep-errors): simulated fault*",
                                 "libero_10-t00-s00 * PASSED * [[]resumed: recorded earlier[]]*",
                                 "LIBERO: selected 5 = passed 4 + failed 0 + errored 1 + unattempted 0"])
    assert (project / "episodes.log").read_text().count("\n") == 5  # nothing re-ran
    assert run(project, "--libero-video", "none", "--libero-resume", str(run_dir)) == 0
    assert json.loads(path.read_text())["outcome"]["outcome"] == "success"
    assert (project / "episodes.log").read_text().count("\n") == 6  # only the errored cell re-ran


@pytest.mark.parametrize("args, message", [
    (["--libero-max-policy-calls", "5"], "*its protocol differs*max_policy_calls: 4 in the folder, 5 now*"),
    (["--libero-policy-kwargs", '{"pause": 0.0}'], "*its policy differs*kwargs.pause: None in the folder, 0.0 now*"),
    # named by the option that sets it; tuples now against lists in the folder are no difference
    (["--libero-track", "rgb+proprio"], "*differs*(--libero-track (track: 'rgb' in the folder, 'rgb+proprio' now))*"),
])
def test_resume_refuses_a_folder_of_another_protocol_or_policy(pytester, project, args, message):
    run(project, "--libero-video", "none", "--libero-task-ids", "0")
    (run_dir,) = run_dirs(project / "reports")
    base = ["--libero-policy", "policy.py:Logged", "--libero-budget", "decisions", "--libero-max-policy-calls", "4",
            "--libero-scope", "development", "--libero-task-ids", "0,1"]
    result = pytester.runpytest_subprocess(*base, *args, "--libero-resume", str(run_dir))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "cameras" not in result.stderr.str() and "image_shape" not in result.stderr.str()
