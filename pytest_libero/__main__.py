"""Command line: `python -m pytest_libero report RUN_DIR` rebuilds a run's derived files;
`python -m pytest_libero merge OUT_DIR RUN_DIR...` builds one run from shard folders;
`python -m pytest_libero compare RUN_A RUN_B` compares two runs episode by episode;
`python -m pytest_libero schedule [NAME]` prints a full-mode schedule;
`python -m pytest_libero power --baseline 0.6 --effect 0.1 --discordance 0.2` prints the pairs a
paired comparison needs, fixed-n and sequential (pytest_libero.core.sequential);
`python -m pytest_libero submit slurm|k8s ... -- <pytest options>` and `status RUN` run shards on a
cluster (pytest_libero.results.cluster);
`python -m pytest_libero export RUN_DIR --format csv|parquet` writes one row per episode
(pytest_libero.results.export, docs/sinks-and-export.md);
`python -m pytest_libero doctor` checks this install against the frozen reference
(pytest_libero.runtime.doctor, docs/install-check.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_libero")
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser("report", help="rebuild summary.json and report.html from episode files")
    report.add_argument("run_dir", type=Path, help="a run folder: reports/<profile>/<run-id>")
    merge = commands.add_parser("merge", help="build one run folder from the folders of its shards")
    merge.add_argument("out_dir", type=Path, help="the merged run folder (new, or an earlier merge)")
    merge.add_argument("run_dirs", type=Path, nargs="+", help="shard run folders (reports/<profile>/<run-id>)")
    add_study_commands(commands)
    export = commands.add_parser("export", help="write one row per episode as CSV or parquet "
                                 "(docs/sinks-and-export.md)")
    export.add_argument("run_dir", type=Path, help="a run folder: reports/<profile>/<run-id>")
    export.add_argument("--format", dest="format", default="csv", metavar="csv|parquet",
                        help="csv (default) or parquet (needs pyarrow: pytest-libero[parquet])")
    export.add_argument("--output", type=Path, default=None, metavar="FILE",
                        help="the file to write (default: RUN_DIR/episodes.csv or .parquet)")
    doctor = commands.add_parser("doctor", help="check this install (MuJoCo, robosuite, LIBERO, NumPy, GL) against "
                                 "the frozen reference on a sample of cells (about a minute)")
    doctor.add_argument("--benchmark", default="libero", help="the benchmark (default libero; libero_plus, "
                        "robomemarena: their references' samples, docs/install-check.md)")
    doctor.add_argument("--libero-robomemarena-checkout", default=None, metavar="PATH",
                        help="your RoboMemArena checkout (--benchmark robomemarena; default "
                             "$PYTEST_LIBERO_ROBOMEMARENA)")
    doctor.add_argument("--cells", nargs="+", default=None, metavar="CELL",
                        help="cell ids to check (default: libero_spatial-t00-s00 libero_10-t00-s00; another "
                             "benchmark's: two of its reference's sample)")
    from pytest_libero.cluster_cli import add_cluster_commands, run_cluster_command, split_pytest_args

    add_cluster_commands(commands)
    argv, pytest_args = split_pytest_args(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.command in ("submit", "status"):
        return run_cluster_command(args, pytest_args)
    if pytest_args:
        parser.error(f"`-- {' '.join(pytest_args)}`: only `submit` takes pytest options after `--`")
    if args.command == "merge":
        return _merge(args.out_dir, args.run_dirs)
    if args.command == "power":
        return _power(args)
    if args.command == "doctor":
        return _doctor(args)
    if args.command == "export":
        return _export(args)
    if args.command in ("compare", "schedule"):
        return run_study_command(args)
    run_dir: Path = args.run_dir
    if not (run_dir / "episodes").is_dir() and not (run_dir / "selection.json").is_file():
        parser.error(f"{run_dir} is not a pytest-libero run folder (no episodes/ or selection.json); "
                     "pass reports/<profile>/<run-id>")
    from pytest_libero import benchmarks
    from pytest_libero.errors import LiberoError
    from pytest_libero.results.summary import rebuild

    try:
        summary = rebuild(run_dir, benchmarks.for_run_folder(run_dir))
    except LiberoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    _print_counts(summary)
    for problem in summary["unreadable_records"]:
        print(f"unreadable record: {problem}", file=sys.stderr)
    print(f"wrote {run_dir / 'summary.json'} and {run_dir / 'report.html'}")
    return 0


def _print_counts(summary: dict[str, Any]) -> None:
    o = summary["overall"]
    print(f"selected {o['selected']} = passed {o['passed']} + failed {o['failed']} + errored {o['errored']} "
          f"+ unattempted {o['unattempted']}")


def _merge(out_dir: Path, run_dirs: list[Path]) -> int:
    from pytest_libero import benchmarks
    from pytest_libero.errors import LiberoError
    from pytest_libero.results.merge import merge

    try:
        summary = merge(out_dir, run_dirs, benchmarks.for_run_folder(run_dirs[0]))
    except LiberoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    _print_counts(summary)
    for source in summary["merge"]["sources"]:
        print(f"from {source['folder']} (shard {source['shard']}): {source['records']} record(s)")
    if summary["merge"]["missing_shards"]:
        print(f"missing shards: {summary['merge']['missing_shards']}")
    if summary["unattempted"]:
        print(f"unattempted cells: {' '.join(summary['unattempted'])}")
    print(f"wrote {out_dir / 'summary.json'} and {out_dir / 'report.html'}")
    return 0 if not summary["unattempted"] else 3


def _export(args: Any) -> int:
    from pytest_libero.errors import LiberoError
    from pytest_libero.results.export import export

    try:
        path, count, problems = export(args.run_dir, args.format, args.output)
    except LiberoError as exc:
        print(f"python -m pytest_libero export: error: {exc}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"unreadable record (not exported): {problem}", file=sys.stderr)
    print(f"wrote {path}: {count} episode(s)")
    return 0


def _doctor(args: Any) -> int:
    import os

    from pytest_libero import benchmarks
    from pytest_libero.core.fingerprint import load_references, protocol_key
    from pytest_libero.core.protocol import SETTLE_CONTROLS
    from pytest_libero.errors import LiberoError
    from pytest_libero.runtime.doctor import BENCHMARK_CELLS, BENCHMARK_OPTIONS, run_doctor
    from pytest_libero.runtime.service import BenchService

    try:
        adapter = benchmarks.get(args.benchmark)
    except LiberoError as exc:
        print(f"python -m pytest_libero doctor: error: {exc}", file=sys.stderr)
        return 2
    context = None
    if adapter.name == "robomemarena":  # its service needs the checkout: the selection's context has it
        try:
            context = adapter.select({"libero_robomemarena_checkout": args.libero_robomemarena_checkout}).context
        except LiberoError as exc:
            print(f"python -m pytest_libero doctor: error: {exc}",
                  file=sys.stderr)
            return 2
    os.environ.setdefault("MUJOCO_GL", "egl")
    settle = protocol_key(SETTLE_CONTROLS, adapter.spec.settle_action, BENCHMARK_OPTIONS.get(adapter.name, ()))
    service = BenchService(env=benchmarks.service_env(adapter, context))
    try:
        return run_doctor(service, load_references(adapter.name), args.cells or BENCHMARK_CELLS.get(adapter.name, ()),
                          settle)
    except LiberoError as exc:
        print(f"python -m pytest_libero doctor: error: {exc}", file=sys.stderr)
        return 2
    finally:
        service.close()


def _power(args: Any) -> int:
    from pytest_libero.core import sequential
    from pytest_libero.errors import OptionError

    try:
        model = sequential.PairModel(args.baseline, args.effect, args.discordance)
        print(sequential.power_report(model, args.power, args.alpha, args.min_effect, args.max_pairs, args.runs,
                                      args.seed))
    except OptionError as exc:
        print(f"python -m pytest_libero power: error: {exc}", file=sys.stderr)
        return 2
    return 0


def add_study_commands(commands: Any) -> None:
    compare = commands.add_parser("compare", help="paired comparison of two runs of the same protocol identity")
    compare.add_argument("run_a", type=Path, help="run folder A (reports/<profile>/<run-id>)")
    compare.add_argument("run_b", type=Path, help="run folder B; differences are B - A")
    compare.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the comparison as JSON")
    schedule = commands.add_parser("schedule", help="print a full-mode schedule, suite by suite")
    schedule.add_argument("name", nargs="?", default=None, help="schedule name; omit to list them")
    power = commands.add_parser("power", help="pairs a paired comparison needs: fixed-n and sequential")
    power.add_argument("--baseline", type=float, required=True, help="A's success rate")
    power.add_argument("--effect", type=float, required=True, help="B's rate - A's rate")
    power.add_argument("--discordance", type=float, required=True,
                       help="share of pairs in which exactly one of A and B succeeds")
    power.add_argument("--alpha", type=float, default=0.05, help="false-positive rate (0.05)")
    power.add_argument("--power", type=float, default=0.8, help="power wanted (0.8)")
    power.add_argument("--min-effect", type=float, default=None, help="sequential: smallest effect worth finding "
                       "(|effect|)")
    power.add_argument("--max-pairs", type=int, default=None, help="sequential: cells available (no cap)")
    power.add_argument("--runs", type=int, default=2000, help="simulated sequential comparisons")
    power.add_argument("--seed", type=int, default=0, help="seed of the simulation")


def run_study_command(args: Any) -> int:
    from pytest_libero.errors import LiberoError

    if args.command == "schedule":
        from pytest_libero import benchmarks
        from pytest_libero.core import schedules

        # A benchmark's own presets (optional `schedules()`: name -> (title, description)).
        own = {name: text for adapter in benchmarks.adapters()
               for name, text in getattr(adapter, "schedules", dict)().items()}
        if args.name is None:
            titles = {name: schedules.load(name).title for name in schedules.names()}
            titles.update((name, title) for name, (title, _) in own.items())
            width = max(16, *(len(name) + 2 for name in titles))
            for name, title in titles.items():
                print(f"{name:<{width}}{title}")
            return 0
        if args.name in own:
            print(own[args.name][1])
            return 0
        try:
            print(schedules.describe(args.name))
        except LiberoError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    from pytest_libero import benchmarks
    from pytest_libero.results.compare import compare, render, write

    try:
        result = compare(args.run_a, args.run_b, benchmarks.for_settings)
    except LiberoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render(result))
    if args.json is not None:
        write(result, args.json)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
