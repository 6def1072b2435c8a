"""Cluster submission without a cluster: the sbatch scripts run by bash against a stub interpreter,
Slurm's answers parsed from real squeue/sacct/scontrol text, submission and resubmission through
a fake sbatch, and the Kubernetes manifest checked against the batch/v1 Job fields it uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import jsonschema
import pytest
import yaml

from pytest_libero.results.cluster.jobs import ClusterError
from pytest_libero.results.cluster.k8s import K8sSpec, k8s_manifest, k8s_text, to_yaml
from pytest_libero.results.cluster.slurm import (SlurmSpec, array_range, check_shard_count, merge_script, shard_script,
                                                 submit_slurm)
from pytest_libero.results.cluster.status import (gather_status, parse_sacct, parse_scontrol, parse_squeue,
                                                  render_status, resubmit_slurm)
from pytest_libero.results.records import scheduler_fields
from pytest_libero.core.shards import Shard
from run_folders import full_protocol, write_run

JOB_SCHEMA = json.loads((Path(__file__).parent / "k8s_job_batch_v1.schema.json").read_text())
CELLS = tuple(f"libero_10-t{t:02d}-s00" for t in range(5))
# Prints its arguments one per line: stands in for the interpreter the scripts exec.
STUB = "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done\nexit ${STUB_EXIT:-0}\n"


def spec(tmp_path: Path, **changes: object) -> SlurmSpec:
    stub = tmp_path / "python-stub"
    stub.write_text(STUB)
    stub.chmod(0o755)
    settings: dict[str, object] = dict(run_dir=tmp_path / "RUN", shards=4, python=str(stub), workdir=tmp_path,
                                       pytest_args=("--libero-scope", "development", "--libero-policy-kwargs",
                                                    '{"seed": 3}'))
    return SlurmSpec(**dict(settings, **changes))  # type: ignore[arg-type]


def bash(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=dict(os.environ, **env))


# -- the sbatch scripts ---------------------------------------------------------------------------


def test_the_array_script_runs_shard_index_plus_one_into_its_folder_with_the_users_options(tmp_path):
    s = spec(tmp_path)
    script = shard_script(s)
    assert "#SBATCH --array=0-3\n" in script and "--gres" not in script
    done = bash(script, {"SLURM_ARRAY_TASK_ID": "2"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "-m", "pytest", "-p", "no:cacheprovider", "--libero-shard", "3/4", "--libero-output",
        str(s.run_dir / "shard-3"), "--libero-scope", "development", "--libero-policy-kwargs", '{"seed": 3}']


@pytest.mark.parametrize("pytest_exit, job_exit", [(0, 0), (1, 0), (2, 2), (4, 4), (5, 5)])
def test_failed_episodes_end_the_job_well_and_a_pytest_that_could_not_run_fails_it(tmp_path, pytest_exit, job_exit):
    done = bash(shard_script(spec(tmp_path)), {"SLURM_ARRAY_TASK_ID": "0", "STUB_EXIT": str(pytest_exit)})
    assert done.returncode == job_exit


def test_the_array_script_continues_a_shard_folder_that_holds_a_run(tmp_path):
    s = spec(tmp_path)
    run = s.run_dir / "shard-1" / "random" / "20261201T000000Z-abcdef"
    run.mkdir(parents=True)
    (s.run_dir / "shard-1" / "random" / "no-run-json-here").mkdir()  # a shard killed before writing run.json
    (run / "run.json").write_text("{}")
    out = bash(shard_script(s), {"SLURM_ARRAY_TASK_ID": "0"}).stdout.splitlines()
    assert out[out.index("--libero-resume") + 1] == str(run)
    assert "--libero-resume" not in bash(shard_script(s), {"SLURM_ARRAY_TASK_ID": "1"}).stdout


def test_gpus_options_and_parallel_cap_become_directives(tmp_path):
    s = spec(tmp_path, gpus_per_shard=2, max_parallel=3, sbatch_options=("--partition=gpu", "--time=12:00:00"))
    script = shard_script(s)
    for line in ("#SBATCH --array=0-3%3", "#SBATCH --gres=gpu:2", "#SBATCH --partition=gpu", "#SBATCH --time=12:00:00"):
        assert line + "\n" in script
    merge = merge_script(s)
    assert "#SBATCH --partition=gpu\n" in merge and "--gres" not in merge


def test_the_merge_script_merges_every_shard_run_folder_and_fails_when_there_is_none(tmp_path):
    s = spec(tmp_path)
    done = bash(merge_script(s), {})
    assert done.returncode == 1 and "nothing to merge" in done.stderr
    folders = [s.run_dir / f"shard-{k}" / "random" / "r" for k in (1, 3)]
    for folder in folders:
        folder.mkdir(parents=True)
        (folder / "run.json").write_text("{}")
    done = bash(merge_script(s), {})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["-m", "pytest_libero", "merge", str(s.merged), *map(str, folders)]


@pytest.mark.parametrize("indices, cap, expected", [
    ([0, 1, 2, 3], None, "0-3"), ([0, 2], None, "0,2"), ([3, 0, 1, 5, 6], 2, "0-1,3,5-6%2"), ([7], None, "7"),
])
def test_array_ranges(indices, cap, expected):
    assert array_range(indices, cap) == expected


@pytest.mark.parametrize("changes, message", [
    ({"pytest_args": ("--libero-shard", "1/2")}, "'--libero-shard' among the pytest options"),
    ({"pytest_args": ("--libero-output=/x",)}, "'--libero-output=/x' among the pytest options"),
    ({"pytest_args": ("--libero-resume", "x")}, "'--libero-resume' among"),
    ({"shards": 0}, "--shards 0: give at least 1"),
    ({"gpus_per_shard": 0}, "--gpus-per-shard 0"),
    ({"sbatch_options": ("partition=gpu",)}, "--sbatch-option 'partition=gpu': give one sbatch option"),
    ({"sbatch_options": ("--array=0-9",)}, "sets the array, the dependency"),
    ({"sbatch_options": ("--time=1:00:00\nrm -rf /",)}, "give one sbatch option"),
])
def test_bad_settings_name_the_value_and_the_fix(tmp_path, changes, message):
    with pytest.raises(ClusterError, match=message.replace("(", r"\(").replace("[", r"\[")):
        spec(tmp_path, **changes)


def test_more_shards_than_cells_is_refused_before_submitting():
    check_shard_count(5, CELLS)
    with pytest.raises(ClusterError, match="--shards 6 for a selection of 5 cell.*shards 6..6 would be empty"):
        check_shard_count(6, CELLS)


# -- Slurm's answers, as this machine's Slurm 22.05 writes them ----------------------------------

SQUEUE = "0|RUNNING|12\n1|RUNNING|13\n2|PENDING|12\n3|PENDING|12\n"
SACCT = ("12_0|COMPLETED|0:0\n12_1|CANCELLED by 0|0:15\n12_2|FAILED|1:0\n12_[3-4]|PENDING|0:0\n")
SCONTROL = (
    "JobId=14 ArrayJobId=12 ArrayTaskId=0 JobName=libero-shards JobState=COMPLETED Reason=None ExitCode=0:0 "
    "RunTime=00:00:31\n"
    "JobId=13 ArrayJobId=12 ArrayTaskId=1 JobName=libero-shards JobState=CANCELLED Reason=None ExitCode=0:15\n"
    "JobId=12 ArrayJobId=12 ArrayTaskId=2-3 JobName=libero-shards JobState=PENDING Reason=Resources ExitCode=0:0\n")


def test_squeue_sacct_and_scontrol_lines_give_each_array_task_its_state():
    assert {k: v["state"] for k, v in parse_squeue(SQUEUE).items()} == {
        0: "RUNNING", 1: "RUNNING", 2: "PENDING", 3: "PENDING"}
    found = parse_sacct(SACCT + "12_0.batch|COMPLETED|0:0\n")
    assert {k: (v["state"], v["exit_code"]) for k, v in found.items()} == {
        0: ("COMPLETED", "0:0"), 1: ("CANCELLED", "0:15"), 2: ("FAILED", "1:0"), 3: ("PENDING", "0:0"),
        4: ("PENDING", "0:0")}
    found = parse_scontrol(SCONTROL)
    assert {k: (v["state"], v["job"]) for k, v in found.items()} == {
        0: ("COMPLETED", "12_0"), 1: ("CANCELLED", "12_1"), 2: ("PENDING", "12_2"), 3: ("PENDING", "12_3")}


# -- submission and status through a fake Slurm ---------------------------------------------------


class FakeSlurm:
    """sbatch hands out job ids; squeue knows `live` array tasks; scontrol knows `ended` ones; sacct is off."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.next_id = 100
        self.live: dict[str, str] = {}  # "<job>_<index>" or "<job>" -> state
        self.ended: dict[str, str] = {}

    def __call__(self, argv: Sequence[str]) -> tuple[int, str, str]:
        argv = list(argv)
        self.calls.append(argv)
        if argv[0] == "sbatch":
            self.next_id += 1
            return 0, f"{self.next_id}\n", ""
        if argv[0] == "sacct":
            return 1, "", "Slurm accounting storage is disabled"
        job = argv[argv.index("-j") + 1] if "-j" in argv else argv[-1]
        if argv[0] == "squeue":
            if "%K|%T|%i" in argv:
                return 0, "".join(f"{k.split('_')[1]}|{s}|{k}\n" for k, s in self.live.items()
                                  if k.startswith(job + "_")), ""
            return 0, (self.live.get(job, "") + "\n").lstrip(), ""
        lines = [f"JobId=9 ArrayJobId={k.split('_')[0]} ArrayTaskId={k.split('_')[1]} JobState={s} ExitCode=0:0"
                 for k, s in self.ended.items() if k.startswith(job + "_")]
        lines += [f"JobId={job} JobState={self.ended[job]} ExitCode=0:0"] if job in self.ended else []
        return (0, "\n".join(lines) + "\n", "") if lines else (1, "", "slurm_load_jobs error: Invalid job id specified")


def write_shard(s: SlurmSpec, index: int, outcomes: dict[str, str]) -> Path:
    """Shard `index`'s run folder with records of the given outcomes (the selection is the shard's cells)."""
    folder = write_run(s.shard_dir(index) / "random" / f"run{index}", full_protocol(), outcomes, policy="random")
    selection = json.loads((folder / "selection.json").read_text())
    selection.update(cells=list(Shard(index, s.shards, "t").select(CELLS)), unsharded_cells=list(CELLS),
                     shard={"index": index, "count": s.shards, "source": "t"})
    (folder / "selection.json").write_text(json.dumps(selection))
    return folder


def test_submit_writes_the_folder_then_submits_the_array_and_a_merge_after_it(tmp_path):
    slurm, s = FakeSlurm(), spec(tmp_path)
    submission = submit_slurm(s, CELLS, slurm)
    assert slurm.calls == [["sbatch", "--parsable", "--array=0-3", str(s.run_dir / "shards.sbatch")],
                           ["sbatch", "--parsable", "--dependency=afterany:101", str(s.run_dir / "merge.sbatch")]]
    assert (submission.array_job_id, submission.merge_job_id) == ("101", "102")
    state = json.loads((s.run_dir / "submit.json").read_text())
    assert state["cells"] == list(CELLS) and SlurmSpec.from_dict(state["spec"]) == s
    assert (s.run_dir / "shards.sbatch").read_text() == shard_script(s)
    with pytest.raises(ClusterError, match="already holds a submission.*--resume"):
        submit_slurm(s, CELLS, slurm)


def test_without_sbatch_the_error_says_where_to_submit_from(tmp_path):
    with pytest.raises(ClusterError, match="sbatch not found: submit from a Slurm login node"):
        submit_slurm(spec(tmp_path), CELLS, lambda argv: (127, "", f"{argv[0]}: command not found"))


def test_status_then_resume_resubmits_only_shards_with_unattempted_or_errored_cells(tmp_path):
    slurm, s = FakeSlurm(), spec(tmp_path)
    submit_slurm(s, CELLS, slurm)
    # shard 1 (t00, t04) was cancelled after one episode; shard 2 (t01) errored; shard 3 (t02) is running;
    # shard 4 (t03) finished.
    write_shard(s, 1, {"libero_10-t00-s00": "failure"})
    write_shard(s, 2, {"libero_10-t01-s00": "env_error"})
    write_shard(s, 3, {})
    write_shard(s, 4, {"libero_10-t03-s00": "success"})
    slurm.live = {"101_2": "RUNNING", "102": "PENDING"}
    slurm.ended = {"101_0": "CANCELLED", "101_1": "COMPLETED", "101_3": "COMPLETED"}
    report = gather_status(s.run_dir, slurm)
    assert [(x.state, x.job, x.counts) for x in report.shards] == [
        ("CANCELLED", "101_0", {"passed": 0, "failed": 1, "errored": 0, "unattempted": 1}),
        ("COMPLETED", "101_1", {"passed": 0, "failed": 0, "errored": 1, "unattempted": 0}),
        ("RUNNING", "101_2", {"passed": 0, "failed": 0, "errored": 0, "unattempted": 1}),
        ("COMPLETED", "101_3", {"passed": 1, "failed": 0, "errored": 0, "unattempted": 0})]
    assert report.merge_state == "PENDING"
    text = render_status(report)
    assert "CANCELLED (101_0" in text and "runs only those again" not in text  # not while shard 3 runs

    with pytest.raises(ClusterError, match=r"shard 3 \(101_2: RUNNING\), merge job 102 \(PENDING\) may still run"):
        resubmit_slurm(s.run_dir, slurm)
    slurm.live, slurm.ended["101_2"], slurm.ended["102"] = {}, "COMPLETED", "FAILED"
    write_shard(s, 3, {"libero_10-t02-s00": "success"})
    assert "shards with unattempted or errored cells: 1, 2;" in render_status(gather_status(s.run_dir, slurm))
    slurm.calls.clear()
    submission, again = resubmit_slurm(s.run_dir, slurm)
    assert [x.index for x in again] == [1, 2]
    sbatch = [c for c in slurm.calls if c[0] == "sbatch"]
    assert sbatch == [["sbatch", "--parsable", "--array=0-1", str(s.run_dir / "shards.sbatch")],
                      ["sbatch", "--parsable", "--dependency=afterany:103", str(s.run_dir / "merge.sbatch")]]
    # The shards resubmitted are now known under the new array job.
    slurm.ended.update({"103_0": "RUNNING"})
    assert gather_status(s.run_dir, slurm).shards[0].job == "103_0"
    assert len(json.loads((s.run_dir / "submit.json").read_text())["submissions"]) == 2


def test_records_name_their_shard_and_the_slurm_or_kubernetes_job():
    slurm = {"SLURM_JOB_ID": "14", "SLURM_ARRAY_JOB_ID": "12", "SLURM_ARRAY_TASK_ID": "1", "SLURMD_NODENAME": "vm"}
    assert scheduler_fields(Shard(2, 4, "--libero-shard 2/4"), slurm) == {
        "shard": {"index": 2, "count": 4},
        "slurm": {"job_id": "14", "array_job_id": "12", "array_task_id": 1, "node": "vm"}, "kubernetes": None}
    assert scheduler_fields(None, {"JOB_COMPLETION_INDEX": "3", "HOSTNAME": "libero-eval-3-x"}) == {
        "shard": None, "slurm": None, "kubernetes": {"job_completion_index": 3, "pod": "libero-eval-3-x"}}


# -- Kubernetes -----------------------------------------------------------------------------------


def test_the_k8s_manifest_uses_only_batch_v1_job_fields_and_reads_back_as_built():
    s = K8sSpec(shards=8, pytest_args=("--libero-scope", "plan", "-n", "4"), parallelism=4, gpus_per_shard=4)
    manifest = k8s_manifest(s)
    jsonschema.Draft202012Validator(JOB_SCHEMA).validate(manifest)
    assert yaml.safe_load(k8s_text(s)) == manifest
    assert manifest["spec"]["completions"] == 8 and manifest["spec"]["parallelism"] == 4


@pytest.mark.parametrize("path, bad", [
    (("spec", "completionMode"), "indexed"),
    (("spec", "template", "spec", "restartPolicy"), "Always"),
    (("spec", "completion"), 8),
    (("metadata", "name"), "Libero_Eval"),
])
def test_the_job_schema_refuses_what_kubernetes_refuses(path, bad):
    manifest = k8s_manifest(K8sSpec(shards=2, pytest_args=()))
    target = manifest
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = bad
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(JOB_SCHEMA).validate(manifest)


def test_the_k8s_container_runs_its_completion_index_as_shard_index_plus_one(tmp_path):
    s = K8sSpec(shards=3, pytest_args=("--libero-scope", "plan"), mount=str(tmp_path), python=sys.executable)
    container = k8s_manifest(s)["spec"]["template"]["spec"]["containers"][0]
    script = container["args"][0].replace(f"{sys.executable} -m pytest", "printf '%s\\n'")
    done = bash(script, {"JOB_COMPLETION_INDEX": "0"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["-p", "no:cacheprovider", "--libero-shard", "1/3", "--libero-output",
                                        f"{tmp_path}/libero-eval/shard-1", "--libero-scope", "plan"]


def test_yaml_of_nested_lists_and_literal_blocks_reads_back():
    data = {"a": [{"b": 1, "c": ["x", "y z"]}, "two\nlines\n"], "d": {}, "e": "8", "f": None}
    assert yaml.safe_load(to_yaml(data)) == data


@pytest.mark.parametrize("changes, message", [
    ({"name": "Libero_Eval"}, "a Job name is a DNS label"),
    ({"mount": "runs"}, "absolute path"),
    ({"pytest_args": ("--libero-shard-count", "3")}, "'--libero-shard-count' among"),
    ({"parallelism": 0}, "--parallelism 0: give a positive number"),
    ({"image": " "}, "--image is empty"),
])
def test_bad_k8s_settings_name_the_fix(changes, message):
    with pytest.raises(ClusterError, match=message):
        K8sSpec(**dict({"shards": 2, "pytest_args": ()}, **changes))  # type: ignore[arg-type]


# -- the command line -----------------------------------------------------------------------------


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_libero", *args], capture_output=True, text=True, cwd=cwd)


def test_dry_run_prints_both_scripts_for_the_collected_selection_and_submits_nothing(tmp_path):
    done = cli("submit", "slurm", "--shards", "2", "--run-dir", "RUN", "--dry-run", "--", "--libero-scope",
               "development", "--libero-task-ids", "0,1,2", "-n", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "(3 cell(s) in 2 shard(s))" in done.stdout and "#SBATCH --array=0-1" in done.stdout
    assert f'exec {sys.executable} -m pytest_libero merge {tmp_path / "RUN" / "merged"}' in done.stdout
    assert not (tmp_path / "RUN").exists()


@pytest.mark.parametrize("args, message", [
    (("submit", "slurm", "--shards", "3", "--dry-run", "--", "--libero-scope", "development"),
     "--shards 3 for a selection of 2 cell(s)"),
    (("submit", "slurm", "--shards", "2", "--dry-run", "--", "--libero-scope", "nonsense"),
     "select no LIBERO cell"),
    (("submit", "slurm", "--resume", "RUN", "--shards", "2"),
     "takes every setting from its submit.json; drop --shards"),
    (("submit", "slurm", "--resume", "RUN"), "holds no submit.json"),
    (("submit", "k8s", "--shards", "2"), "add --dry-run"),
    (("status", "RUN"), "holds no submit.json"),
])
def test_command_line_mistakes_are_named(tmp_path, args, message):
    done = cli(*args, cwd=tmp_path)
    assert done.returncode == 1 and message in done.stderr, done.stderr


def test_scale_out_page_shows_the_manifest_the_command_prints():
    page = (Path(__file__).resolve().parents[1] / "docs" / "scale-out.md").read_text()
    shown = K8sSpec(shards=8, parallelism=4, gpus_per_shard=4, pytest_args=(
        "-n", "4", "--max-worker-restart", "8", "--libero-scope", "plan", "--libero-policy", "my_policy.py:build"))
    assert f"```yaml\n{k8s_text(shown)}```" in page
