"""--libero-resume: a SIGKILLed run continued in its folder equals an uninterrupted run, cell for cell."""

from __future__ import annotations

import json

import pytest

from evidence_helpers import check_videos, records, run_dirs
from pytest_libero.results.files import is_temporary
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
    # the temporaries a killed session left are removed (every reader ignores them meanwhile)
    assert not [p for p in (partial / "episodes").iterdir() if is_temporary(p)]
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


def _temporaries(run_dir):
    return sorted(p.relative_to(run_dir).as_posix() for sub in ("episodes", "videos") if (run_dir / sub).is_dir()
                  for p in (run_dir / sub).iterdir() if is_temporary(p))


def test_a_run_killed_during_an_episode_and_resumed_leaves_no_temporary(pytester, project, monkeypatch):
    monkeypatch.setenv("EPISODE_LOG", str(project / "episodes.log"))
    # killed while an episode's video is being written (its temporary exists), half a second a call
    run(project, "--libero-policy-kwargs", '{"pause": 0.5}', "--libero-task-ids", "0,1",
        kill_when=lambda root: any(is_temporary(p) for p in root.glob("*/*/videos/*")))
    (run_dir,) = run_dirs(project / "reports")
    left = _temporaries(run_dir)
    assert any(name.startswith("videos/.") for name in left), left
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--libero-resume", str(run_dir))
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"libero: resume removed {len(left)} temporary file(s) a killed session left: "
                                 f"{left[0]}*"])
    assert _temporaries(run_dir) == []
    assert sorted(records(run_dir)) == ["libero_10-t00-s00", "libero_10-t01-s00"]
    check_videos(run_dir, records(run_dir))


def test_a_resumed_errored_cell_keeps_every_earlier_attempt_and_counts_the_last(pytester, project, monkeypatch):
    monkeypatch.setenv("EPISODE_LOG", str(project / "episodes.log"))
    run(project, "--libero-task-ids", "0,1")
    (run_dir,) = run_dirs(project / "reports")
    cell = "libero_10-t01-s00"
    path, video = run_dir / "episodes" / f"{cell}.json", run_dir / "videos" / f"{cell}.mp4"
    first_video = video.read_bytes()
    attempts = run_dir / "attempts" / cell
    written = []
    for attempt in (1, 2):  # errored twice, resumed twice: both attempts are kept, numbered
        record = json.loads(path.read_text())
        record["outcome"].update(outcome="env_error", termination="env_error", message=f"simulated fault {attempt}")
        path.write_text(json.dumps(record))
        written.append(path.read_bytes())
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--libero-resume", str(run_dir))
        assert result.ret == 0
        result.stdout.fnmatch_lines(["LIBERO: selected 2 = passed 2 + failed 0 + errored 0 + unattempted 0"])
        assert (attempts / f"{attempt}.json").read_bytes() == written[-1]  # unchanged, evidence as written
    assert (attempts / "1.mp4").read_bytes() == first_video
    assert (attempts / "2.mp4").is_file() and video.is_file()  # the second attempt's, the final one's
    assert sorted(p.name for p in attempts.iterdir()) == ["1.json", "1.mp4", "2.json", "2.mp4"]
    assert json.loads(path.read_text())["outcome"]["outcome"] == "success"  # the final attempt
    assert (project / "episodes.log").read_text().count("\n") == 2 + 2  # only the errored cell re-ran
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["overall"]["selected"] == 2 and summary["overall"]["passed"] == 2  # final attempts only
    assert summary["overall"]["errored"] == 0
    assert summary["earlier_attempts"] == [
        {"cell": cell, "attempt": n, "outcome": "env_error", "termination": "env_error",
         "message": f"simulated fault {n}", "record": f"attempts/{cell}/{n}.json", "video": f"attempts/{cell}/{n}.mp4"}
        for n in (1, 2)]
