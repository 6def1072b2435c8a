"""`python -m pytest_libero submit ...` and `status RUN`: argument parsing and printing around
pytest_libero.results.cluster (which holds the logic and the scripts)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from pytest_libero.results.cluster.jobs import ClusterError
from pytest_libero.results.cluster.k8s import K8sSpec, k8s_text
from pytest_libero.results.cluster.slurm import (SlurmSpec, check_shard_count, collect_cells, merge_script,
                                                 shard_script, submit_slurm)
from pytest_libero.results.cluster.status import gather_status, render_status, resubmit_slurm


def split_pytest_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """`submit ... -- <pytest options>`: the pytest options are everything after the first `--`."""
    if "--" not in argv:
        return argv, []
    at = argv.index("--")
    return argv[:at], argv[at + 1:]


def add_cluster_commands(commands: Any) -> None:
    submit = commands.add_parser("submit", help="run a selection as shards on a cluster, then merge them")
    where = submit.add_subparsers(dest="scheduler", required=True)
    slurm = where.add_parser("slurm", help="a Slurm array job of N shards and a merge job after it",
                             usage="python -m pytest_libero submit slurm (--shards N | --resume RUN) [options] "
                                   "[-- <pytest options>]")
    slurm.add_argument("--shards", type=int, default=None, metavar="N", help="number of shards (array tasks)")
    slurm.add_argument("--resume", type=Path, default=None, metavar="RUN",
                       help="submit again only the shards of RUN with unattempted or errored cells, then merge")
    slurm.add_argument("--run-dir", type=Path, default=None, metavar="RUN",
                       help="the folder for scripts, logs, shard runs and the merge (default reports/slurm/<run-id>)")
    slurm.add_argument("--sbatch-option", action="append", default=[], metavar="OPTION",
                       help="an sbatch option for both jobs, e.g. --sbatch-option=--partition=gpu (repeatable)")
    slurm.add_argument("--gpus-per-shard", type=int, default=None, metavar="G", help="request --gres=gpu:G per shard")
    slurm.add_argument("--max-parallel", type=int, default=None, metavar="M", help="run at most M shards at once")
    slurm.add_argument("--dry-run", action="store_true", help="print the two sbatch scripts; submit nothing")
    k8s = where.add_parser("k8s", help="print a Kubernetes Indexed Job manifest of N shards",
                           usage="python -m pytest_libero submit k8s --shards N --dry-run [options] "
                                 "[-- <pytest options>]")
    k8s.add_argument("--shards", type=int, required=True, metavar="N", help="number of shards (completions)")
    k8s.add_argument("--image", default=K8sSpec.image, help="container image with pytest-libero installed")
    k8s.add_argument("--name", default=K8sSpec.name, help="the Job's name (also the folder on the volume)")
    k8s.add_argument("--parallelism", type=int, default=None, metavar="M", help="shards at once (default: all)")
    k8s.add_argument("--gpus-per-shard", type=int, default=None, metavar="G", help="nvidia.com/gpu limit per pod")
    k8s.add_argument("--claim", default=K8sSpec.claim, help="PersistentVolumeClaim holding the run folders")
    k8s.add_argument("--mount", default=K8sSpec.mount, help="where the claim is mounted in the container")
    k8s.add_argument("--dry-run", action="store_true", help="print the manifest (the only mode: apply it yourself)")
    status = commands.add_parser("status", help="per shard: Slurm state and record accounting of a submitted run")
    status.add_argument("run_dir", type=Path, help="the folder `submit slurm` printed")
    status.add_argument("--json", action="store_true", help="print the status as JSON")


def run_cluster_command(args: argparse.Namespace, pytest_args: list[str]) -> int:
    try:
        if args.command == "status":
            report = gather_status(args.run_dir.resolve())
            print(json.dumps(report.as_dict(), indent=1) if args.json else render_status(report))
            return 0
        if args.scheduler == "k8s":
            return _k8s(args, pytest_args)
        if args.resume is not None:
            return _resume(args, pytest_args)
        return _submit(args, pytest_args)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _k8s(args: argparse.Namespace, pytest_args: list[str]) -> int:
    if not args.dry_run:
        raise ClusterError("submit k8s only prints the manifest: add --dry-run, then `kubectl apply -f` the output")
    print(k8s_text(K8sSpec(shards=args.shards, pytest_args=tuple(pytest_args), image=args.image, name=args.name,
                           parallelism=args.parallelism, gpus_per_shard=args.gpus_per_shard, claim=args.claim,
                           mount=args.mount)), end="")
    return 0


def _submit(args: argparse.Namespace, pytest_args: list[str]) -> int:
    from pytest_libero.results.records import new_run_id

    if args.shards is None:
        raise ClusterError("give --shards N for a new submission, or --resume RUN to continue one")
    run_dir = (args.run_dir or Path("reports") / "slurm" / new_run_id()).resolve()
    spec = SlurmSpec(run_dir=run_dir, shards=args.shards, pytest_args=tuple(pytest_args), python=sys.executable,
                     workdir=Path(os.getcwd()), sbatch_options=tuple(args.sbatch_option),
                     gpus_per_shard=args.gpus_per_shard, max_parallel=args.max_parallel)
    cells = collect_cells(spec.python, spec.pytest_args)
    check_shard_count(spec.shards, cells)
    if args.dry_run:
        print(f"# {run_dir / 'shards.sbatch'} ({len(cells)} cell(s) in {spec.shards} shard(s))")
        print(shard_script(spec))
        print(f"# {run_dir / 'merge.sbatch'} (submitted with --dependency=afterany:<array job id>)")
        print(merge_script(spec), end="")
        return 0
    submission = submit_slurm(spec, cells)
    print(f"submitted array job {submission.array_job_id} ({spec.shards} shard(s), {len(cells)} cell(s)) and merge "
          f"job {submission.merge_job_id} (afterany:{submission.array_job_id})")
    print(f"run folder: {run_dir}")
    print(f"watch: python -m pytest_libero status {run_dir}")
    return 0


def _resume(args: argparse.Namespace, pytest_args: list[str]) -> int:
    settings = (("--shards", args.shards), ("--run-dir", args.run_dir), ("--sbatch-option", args.sbatch_option),
                ("--gpus-per-shard", args.gpus_per_shard), ("--max-parallel", args.max_parallel),
                ("pytest options", pytest_args), ("--dry-run", args.dry_run))
    given = [name for name, value in settings if value]
    if given:
        raise ClusterError(f"--resume {args.resume} takes every setting from its submit.json; drop "
                           f"{', '.join(given)}")
    run_dir = args.resume.resolve()
    submission, again = resubmit_slurm(run_dir)
    if submission.array_job_id:
        print(f"resubmitted shard(s) {', '.join(str(s.index) for s in again)} as array job "
              f"{submission.array_job_id} (--array={','.join(map(str, submission.array_indices))}); merge job "
              f"{submission.merge_job_id} (afterany:{submission.array_job_id})")
    else:
        print(f"no shard has unattempted or errored cells; merge job {submission.merge_job_id} merges again")
    print(f"run folder: {run_dir}")
    return 0
