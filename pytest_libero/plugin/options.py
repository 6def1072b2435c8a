"""Command-line options, their parsing, and the one frozen `LiberoRun` built from them.

Every bad value is a `pytest.UsageError` naming the value and the fix, raised in
pytest_configure: before any worker starts and before anything is collected.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from dataclasses import dataclass
from dataclasses import field as dataclasses_field
from typing import Any, Mapping

import pytest

from pytest_libero import benchmarks
from pytest_libero.core.benchmark import BenchmarkAdapter, OptionSpec, Selection
from pytest_libero.core.cells import FAST_SEED, Cell
from pytest_libero.core.contract import MAX_CHUNK_ROWS, TRACKS
from pytest_libero.core.fullmode import MODES
from pytest_libero.core.policy import PolicySpec, parse_policy_kwargs
from pytest_libero.core.protocol import DEFAULT_MAX_POLICY_CALLS, DEFAULT_REPLAN_INTERVAL, Protocol
from pytest_libero.core.rollout import EpisodeSettings
from pytest_libero.core.schedules import DEFAULT_SCHEDULE
from pytest_libero.core.shards import Shard, resolve_shard
from pytest_libero.errors import OptionError
from pytest_libero.runtime.policies import check_spec
from pytest_libero.runtime.service import DEFAULT_TIMEOUT_S

SCOPES = ("development", "task_coverage", "plan")

# Every option of the "libero" group is a run option: one given a value other than its default
# means "this is a LIBERO run" (the bundled evaluation cases are collected when no path is named).
GROUP = "libero"
# Each option of the group as it was declared (destination -> OptionSpec), for telling given options
# from defaults: pytest offers no public way to list a group's options.
DECLARED: dict[str, OptionSpec] = {}


class _DeclaringGroup:
    """The "libero" option group, noting each option in DECLARED as it is added."""

    def __init__(self, group: pytest.OptionGroup) -> None:
        self._group = group

    def addoption(self, *flags: str, **attrs: Any) -> None:
        spec = OptionSpec(flags, attrs)
        DECLARED[spec.dest] = spec
        self._group.addoption(*flags, **attrs)


def addoptions(parser: pytest.Parser) -> None:
    parser.addini(GROUP, type="bool", default=False,
                  help="A LIBERO run: run the bundled cases when no path is named, as any --libero-* option does")
    group = _DeclaringGroup(parser.getgroup(GROUP, "LIBERO evaluation"))
    group.addoption("--libero-scope", dest="libero_scope", choices=SCOPES, default=None,
                    help="Cells to run: development (LIBERO-10 tasks 0 and 1; --libero-task-ids may pick "
                         "any of 0-4), task_coverage (--libero-suite, optional --libero-task-ids) or plan "
                         "(all 130). Default: LIBERO-10 tasks 0 and 1")
    group.addoption("--libero-suite", dest="libero_suite", choices=all_suites(), default=None,
                    help="Suite for --libero-scope task_coverage: a standard suite or a LIBERO-PRO one "
                         "(<suite>_lan, _object, _swap, _task)")
    group.addoption("--libero-task-ids", dest="libero_task_ids", default=None, metavar="IDS",
                    help="Comma-separated task indices or ranges, e.g. 0,3 or 0-4")
    group.addoption("--libero-budget", dest="libero_budget", choices=("horizon", "decisions"),
                    default="horizon",
                    help="Control cap: the suite's reference horizon (default) or decisions "
                         "(--libero-max-policy-calls x --libero-replan-interval)")
    group.addoption("--libero-max-policy-calls", dest="libero_max_policy_calls", type=int,
                    default=None, metavar="D",
                    help="Policy-call budget D for --libero-budget decisions "
                         f"(default {DEFAULT_MAX_POLICY_CALLS})")
    group.addoption("--libero-replan-interval", dest="libero_replan_interval", type=int,
                    default=None, metavar="K",
                    help="Controls executed from each chunk before a fresh observation (default "
                         f"{DEFAULT_REPLAN_INTERVAL}; in full mode the schedule's K, with robomemarena its preset's: "
                         "another value runs a named variant of the preset)")
    group.addoption("--libero-max-chunk-rows", dest="libero_max_chunk_rows", type=int, default=MAX_CHUNK_ROWS,
                    metavar="N",
                    help="Most rows a policy's chunk may have; a longer chunk is a policy fault, refused from "
                         f"its shape (default {MAX_CHUNK_ROWS}: published policies return 1-50 rows, the longest "
                         "horizon is 520 controls; another value gives the run its own protocol identity)")
    group.addoption("--libero-policy", dest="libero_policy", default=None, metavar="NAME|FILE.py:FACTORY",
                    help="Policy to evaluate: a registered name (built-ins zero, random, demo, replay, openpi, "
                         "openvla-rest, vla-eval; names "
                         "from installed pytest_libero.policies entry points or conftest hooks) or "
                         "path/to/file.py:factory. Default: zero (an infrastructure diagnostic)")
    group.addoption("--libero-policy-kwargs", dest="libero_policy_kwargs", default=None, metavar="JSON",
                    help="JSON object of keyword arguments for the policy factory")
    group.addoption("--libero-track", dest="libero_track", choices=TRACKS, default=None,
                    help="Observation track: rgb (default, except robomemarena's openpi-compat: language + two "
                         "images), rgb+proprio "
                         "(+ 7 joint and 2 gripper encoders) or openpi-compat (+ 8-d eef state; a named "
                         "compatibility track that exposes end-effector state). Part of the protocol identity. "
                         "In full mode the schedule's track: another one runs a named variant of the preset")
    group.addoption("--libero-policy-isolation", dest="libero_policy_isolation",
                    choices=("none", "process", "host"), default="none",
                    help="process: run the policy in its own process too, with a deadline per call "
                         "(--libero-policy-timeout), so a crashing or hanging policy ends one episode; "
                         "host: one policy process per GPU, built once, serving every worker of that GPU "
                         "and batching their requests (docs/policy-host.md)")
    group.addoption("--libero-policy-python", dest="libero_policy_python", default=None, metavar="PATH",
                    help="With --libero-policy-isolation process or host: run the policy's process with this "
                         "Python (the policy's own venv, e.g. /path/venv/bin/python: 3.10+, numpy 1.24+ or 2.x); "
                         "it gets this suite's own modules only (docs/own-python.md)")
    group.addoption("--libero-policy-timeout", dest="libero_policy_timeout", type=float, default=300.0,
                    metavar="SECONDS", help="Deadline per policy call under --libero-policy-isolation process "
                                            "or host (default 300)")
    group.addoption("--libero-allow-source-mismatch", dest="libero_allow_source_mismatch",
                    action="store_true", default=False,
                    help="Run even if installed LIBERO files differ from the frozen inventory "
                         "(a warning is recorded on every result)")
    group.addoption("--libero-require-reference", dest="libero_require_reference", action="store_true",
                    default=False,
                    help="Stop the run when a cell's first observation differs from the install reference "
                         "(catalog/fingerprints; docs/install-check.md) or cannot be checked; without it a "
                         "difference is a warning on the record, the summary, the terminal and the page")
    group.addoption("--libero-output", dest="libero_output", default=None, metavar="DIR",
                    help="Root folder of run outputs (default: reports/ under the rootdir); each run "
                         "writes <root>/<policy profile>/<run id>/")
    group.addoption("--libero-video-rate", dest="libero_video_rate", choices=("delivered", "control"),
                    default="delivered",
                    help="Video frames per delivered observation (default: no extra rendering) or per "
                         "control (smooth, renders every control: several times slower on a CPU)")
    group.addoption("--libero-env-reuse", dest="libero_env_reuse", choices=("on", "off"), default="on",
                    help="Keep the simulator's environment between episodes of one task (default on; "
                         "proven bit-identical to a fresh environment) or build a fresh one every episode")
    group.addoption("--libero-video", dest="libero_video", choices=("all", "failures", "none"), default="all",
                    help="Which episodes keep an MP4 (default all)")
    group.addoption("--libero-service-timeout", dest="libero_service_timeout", type=float,
                    default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                    help=f"Deadline for each bench service reply (default {DEFAULT_TIMEOUT_S:g})")
    # Fail fast on a machine that cannot do the work (plugin/preflight.py, plugin/breaker.py).
    from pytest_libero.plugin.breaker import DEFAULT_LIMIT, limit_of

    group.addoption("--libero-preflight", dest="libero_preflight", choices=("build", "off"), default="build",
                    help="Before any cell, build the run's first cell (one environment, reset, first frame rendered) "
                         "on each GPU (EGL device) or CPU renderer the run uses; a failure stops the run, exit 4, "
                         "every cell recorded not_run (default build; without xdist the first cell reuses it; "
                         "off skips it)")
    group.addoption("--libero-breaker", dest="libero_breaker", type=limit_of, default=DEFAULT_LIMIT, metavar="N",
                    help=f"Stop the run (exit 2; cells not run recorded not_run) when N cells in a row on a worker "
                         f"end env_error with the same cause (default {DEFAULT_LIMIT}; 0: never)")
    from pytest_libero.plugin.policy_host import add_options as add_host_options

    add_host_options(group)
    add_scale_out_options(group)
    add_full_mode_options(group)
    from pytest_libero.plugin.sequential import add_options as add_comparison_options

    add_comparison_options(group)
    from pytest_libero.plugin.results_hook import add_options as add_sink_options

    add_sink_options(group)
    add_benchmark_options(group)


@functools.cache  # a pure function of the registered adapters: options and markers both ask
def all_suites() -> tuple[str, ...]:
    """The suites of every registered benchmark, LIBERO's (standard, then LIBERO-PRO) first."""
    suites: list[str] = []
    for adapter in benchmarks.adapters():
        suites.extend(s for s in adapter.suites() if s not in suites)
    return tuple(suites)


def add_benchmark_options(group: _DeclaringGroup) -> None:
    """--libero-benchmark, and every registered adapter's own options."""
    names = benchmarks.names()
    group.addoption("--libero-benchmark", dest="libero_benchmark", choices=names, default=None,
                    help=f"Benchmark adapter: {', '.join(names)} (default libero: the bundled LIBERO suites; "
                         "libero_plus: LIBERO-plus's 10,030 perturbed variants, needs --libero-plus-classification)")
    for adapter in benchmarks.adapters():
        for spec in adapter.options():
            group.addoption(*spec.flags, **spec.kwargs)


# Default whole-episode deadline: a setup allowance (service start, env build, settling) plus a
# generous allowance per control (simulation, rendering and a large policy's share of a call).
EPISODE_SETUP_ALLOWANCE_S = 600.0
EPISODE_PER_CONTROL_S = 5.0


def default_episode_timeout_s(control_cap: int) -> float:
    """600 s + 5 s x the episode's control cap (LIBERO-10 horizon 520: 3,200 s)."""
    return EPISODE_SETUP_ALLOWANCE_S + EPISODE_PER_CONTROL_S * control_cap


def add_scale_out_options(group: _DeclaringGroup) -> None:
    """GPU pinning, the whole-episode deadline, resume and shards (docs/scale-out.md)."""
    group.addoption("--libero-gpus", dest="libero_gpus", default=None, metavar="IDS",
                    help="GPUs for the xdist workers, round-robin, e.g. 0,1,2,3 (CUDA indices in nvidia-smi "
                         "order, or UUIDs). Default: CUDA_VISIBLE_DEVICES, else nvidia-smi; none found: CPU")
    group.addoption("--libero-episode-timeout", dest="libero_episode_timeout", type=float, default=None,
                    metavar="SECONDS",
                    help="Deadline for a whole episode; past it the episode ends as an error (simulator) or "
                         "a policy fault (policy call), and the worker goes on. Default: "
                         f"{EPISODE_SETUP_ALLOWANCE_S:g} + {EPISODE_PER_CONTROL_S:g} x the control cap")
    group.addoption("--libero-resume", dest="libero_resume", default=None, metavar="RUN_DIR",
                    help="Continue the run in RUN_DIR: skip cells with a complete record of the same protocol "
                         "and policy, re-run errored and unattempted ones")
    group.addoption("--libero-resume-keep-errors", dest="libero_resume_keep_errors", action="store_true",
                    default=False, help="With --libero-resume, keep errored records instead of re-running them")
    group.addoption("--libero-shard", dest="libero_shard", default=None, metavar="K/N",
                    help="Run shard K of N (1-based stride of the selected cells in native order). Also read "
                         "from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT and JOB_COMPLETION_INDEX")
    group.addoption("--libero-shard-count", dest="libero_shard_count", type=int, default=None, metavar="N",
                    help="Number of shards of a Kubernetes Indexed Job (default: LIBERO_SHARD_COUNT)")


def add_full_mode_options(group: _DeclaringGroup) -> None:
    """--libero-mode full and its schedule options (docs/schedules-and-compare.md)."""
    group.addoption("--libero-mode", dest="libero_mode", choices=MODES, default=None,
                    help=f"fast (default): each selected task once, init state 0, seed {FAST_SEED}. full: every "
                         "released init state of each selected task under a named schedule (--libero-schedule); "
                         "with no --libero-scope the schedule's default suites (4 x 10 x 50 = 2,000 episodes)")
    group.addoption("--libero-schedule", dest="libero_schedule", default=None, metavar="NAME",
                    help=f"Full-mode schedule (default {DEFAULT_SCHEDULE}): standard, openvla, oft, openpi, lerobot, "
                         "lerobot-docs or libero-native, each a complete preset (caps, settling, seeds, K, "
                         "track); `python -m pytest_libero schedule NAME` prints one")
    group.addoption("--libero-seeds", dest="libero_seeds", default=None, metavar="SEEDS",
                    help="Full mode: run the schedule once per seed, e.g. 7,8,9 (cell ids get -seedN); the "
                         "summary reports each seed and their mean and spread. Default: the schedule's seeds")
    group.addoption("--libero-init-states", dest="libero_init_states", default=None, metavar="IDS",
                    help="Full mode: run only these of the schedule's init states, e.g. 0,1,2 (a partial "
                         "schedule: the summary never calls it the full protocol)")



@contextlib.contextmanager
def usage_errors() -> Iterator[None]:
    """A bad value found below the plugin (an OptionError, or the ValueError of a parser) reaches the
    user as a pytest.UsageError: the one place the two become one."""
    try:
        yield
    except (OptionError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class LiberoRun:
    """Everything a run needs, decided once from the command line."""

    protocol: Protocol
    cells: tuple[Cell, ...]
    policy: PolicySpec
    allow_source_mismatch: bool
    service_timeout_s: float
    output_root: str | None
    video: str
    video_rate: str = "delivered"
    reuse_env: bool = True
    isolation: str = "none"
    policy_python: Any = None  # --libero-policy-python, checked (runtime.interpreter.PolicyPython); None: this one
    policy_timeout_s: float = 300.0
    gpus: str | None = None  # --libero-gpus as given
    episode_timeout_s: float | None = None  # None: default_episode_timeout_s(cap) per cell
    resume: str | None = None
    resume_keep_errors: bool = False
    shard: Shard | None = None
    all_cells: tuple[Cell, ...] = ()  # the selection before sharding (cells when not sharded)
    adapter: BenchmarkAdapter = dataclasses_field(default_factory=benchmarks.get)  # the benchmark
    context: Any = None  # the adapter's own run settings (its Selection's context)
    run_fields: Mapping[str, Any] = dataclasses_field(default_factory=dict)  # its Selection's, for run.json
    comparison: Any = None  # --libero-against: run A's side (results.sequential.Against); cells in its order
    require_reference: bool = False  # --libero-require-reference

    @property
    def benchmark(self) -> str:
        return self.adapter.name

    def episode_deadline_s(self, suite: str) -> float:
        """The whole-episode deadline of a cell of `suite`."""
        if self.episode_timeout_s is not None:
            return self.episode_timeout_s
        return default_episode_timeout_s(self.protocol.control_cap(suite))

    def episode_settings(self, suite: str) -> EpisodeSettings:
        """How the engine runs an episode of `suite` under these options."""
        return EpisodeSettings(allow_source_mismatch=self.allow_source_mismatch,
                               deadline_s=self.episode_deadline_s(suite),
                               # a process or host policy keeps its own deadline
                               interrupt_policy=self.isolation == "none",
                               video_rate=self.video_rate, reuse_env=self.reuse_env)


def build_run(config: pytest.Config) -> LiberoRun:
    opt = config.getoption
    scope = opt("libero_scope")
    with usage_errors():
        adapter = benchmarks.get(opt("libero_benchmark"))
        _refuse_other_adapters_options(config, adapter)
        selection = _select(config, adapter)
    cells = selection.cells
    budget = opt("libero_budget")
    replan = opt("libero_replan_interval")  # None: the default, or a full-mode preset's K
    calls = opt("libero_max_policy_calls")
    if replan is not None and replan < 1:
        raise pytest.UsageError(f"--libero-replan-interval {replan}: must be at least 1")
    max_rows = opt("libero_max_chunk_rows")
    if max_rows < 1:
        raise pytest.UsageError(f"--libero-max-chunk-rows {max_rows}: must be at least 1 (default {MAX_CHUNK_ROWS})")
    if budget == "horizon" and calls is not None:
        raise pytest.UsageError(f"--libero-max-policy-calls {calls} applies only with --libero-budget decisions")
    if budget == "decisions":
        calls = DEFAULT_MAX_POLICY_CALLS if calls is None else calls
        if calls < 1:
            raise pytest.UsageError(f"--libero-max-policy-calls {calls}: must be at least 1")
    timeout = opt("libero_service_timeout")
    if not timeout > 0:
        raise pytest.UsageError(f"--libero-service-timeout {timeout}: must be a positive number of seconds")
    policy_python = _policy_python(config)
    with usage_errors():
        spec = PolicySpec(opt("libero_policy") or "zero", parse_policy_kwargs(opt("libero_policy_kwargs")))
        # A name only the policy's own interpreter provides (its entry points) is checked there.
        check_spec(spec, extra_names=hook_names(config),
                   other_makers=has_policy_makers(config) or policy_python is not None)
    policy_timeout = opt("libero_policy_timeout")
    if not policy_timeout > 0:
        raise pytest.UsageError(f"--libero-policy-timeout {policy_timeout}: must be a positive number of seconds")
    if opt("libero_policy_isolation") == "host":
        from pytest_libero.plugin.policy_host import settings as host_settings

        host_settings(config, policy_timeout)  # a bad batch size or wait is a usage error now
    # A full-mode preset's K and track (and any command-line variant of them) come with the selection.
    policy_side = {"replan_interval": DEFAULT_REPLAN_INTERVAL if replan is None else replan,
                   "track": opt("libero_track") or "rgb"}
    protocol = Protocol(scope=scope or "default", budget=budget, max_policy_calls=calls, max_chunk_rows=max_rows,
                        spec=adapter.spec, **{**policy_side, **selection.protocol})
    episode_timeout = opt("libero_episode_timeout")
    if episode_timeout is not None and not episode_timeout > 0:
        raise pytest.UsageError(f"--libero-episode-timeout {episode_timeout}: must be a positive number of seconds")
    with usage_errors():
        shard = resolve_shard(opt("libero_shard"), opt("libero_shard_count"), os.environ)
    if opt("libero_resume_keep_errors") and opt("libero_resume") is None:
        raise pytest.UsageError("--libero-resume-keep-errors applies only with --libero-resume RUN_DIR")
    from pytest_libero.plugin.sequential import prepare

    with usage_errors():
        comparison, cells = prepare(config, protocol, cells, adapter, shard, opt("libero_resume"))
    # A comparison's errored pairs were counted: a resume keeps them, so no pair runs twice.
    keep_errors = opt("libero_resume_keep_errors") or comparison is not None
    return LiberoRun(protocol=protocol, cells=shard.select(cells) if shard else cells, policy=spec,
                     allow_source_mismatch=opt("libero_allow_source_mismatch"), service_timeout_s=timeout,
                     output_root=opt("libero_output"), video=opt("libero_video"),
                     video_rate=opt("libero_video_rate"), reuse_env=opt("libero_env_reuse") == "on",
                     isolation=opt("libero_policy_isolation"), policy_python=policy_python,
                     policy_timeout_s=policy_timeout,
                     gpus=opt("libero_gpus"), episode_timeout_s=episode_timeout, resume=opt("libero_resume"),
                     resume_keep_errors=keep_errors, shard=shard, all_cells=cells,
                     adapter=adapter, context=selection.context, run_fields=selection.run_fields,
                     comparison=comparison, require_reference=opt("libero_require_reference"))


def _policy_python(config: pytest.Config) -> Any:
    """--libero-policy-python, checked (it runs: a Python new enough, with a numpy the wire supports)."""
    path = config.getoption("libero_policy_python")
    if path is None:
        return None
    isolation = config.getoption("libero_policy_isolation")
    if isolation == "none":
        raise pytest.UsageError(f"--libero-policy-python {path}: the policy runs in this process under "
                                "--libero-policy-isolation none; add --libero-policy-isolation process (or host)")
    from pytest_libero.runtime.interpreter import probe

    with usage_errors():
        return probe(path)


def _select(config: pytest.Config, adapter: BenchmarkAdapter) -> Selection:
    """The adapter's selection; a warning it gives (a setting that hides what a suite tests, say)
    is shown as a configuration-time warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        selection = adapter.select(_settings(config))
    for warning in caught:
        config.issue_config_time_warning(warning.message, stacklevel=2)  # type: ignore[arg-type]
    return selection


def _settings(config: pytest.Config) -> dict[str, Any]:
    """Every option's value by dest: what an adapter's selection reads."""
    return {dest: value for dest, value in vars(config.option).items() if dest.startswith("libero_")}


def _refuse_other_adapters_options(config: pytest.Config, chosen: BenchmarkAdapter) -> None:
    """An option of another benchmark adapter, given a value, is a usage error naming both."""
    mine = {spec.dest for spec in chosen.options()}
    for adapter in benchmarks.adapters():
        if adapter.name == chosen.name:
            continue
        for spec in adapter.options():
            if spec.dest not in mine and config.getoption(spec.dest) != spec.default:
                raise OptionError(f"{spec.flags[0]} applies only with --libero-benchmark {adapter.name}")


def has_policy_makers(config: pytest.Config) -> bool:
    """Whether a conftest or plugin other than this one implements pytest_libero_make_policy (it may
    serve any name: an unknown one is then refused only when no hook builds it)."""
    impls = config.pluginmanager.hook.pytest_libero_make_policy.get_hookimpls()
    return any(getattr(impl.plugin, "__name__", None) != "pytest_libero.plugin" for impl in impls)


def hook_names(config: pytest.Config) -> list[str]:
    names: list[str] = []
    for result in config.hook.pytest_libero_policy_names(config=config):
        names.extend(result)
    return names


def given_options(config: pytest.Config) -> list[str]:
    """The --libero-* options given a value other than their default (command line, addopts or ini)."""
    return [spec.flags[0] for dest, spec in DECLARED.items() if config.getoption(dest, None) != spec.default]


def with_recorded_options(args: list[str]) -> list[str]:
    """`pytest --libero-resume RUN` given no other --libero-* option continues RUN with the
    --libero-* options its run.json recorded: those options are appended to `args` (returned)."""
    names = [arg.split("=", 1)[0] for arg in args if arg.startswith("--libero-")]
    if "--libero-resume" not in names or set(names) - {"--libero-resume", "--libero-resume-keep-errors"}:
        return []
    at = next(i for i, arg in enumerate(args) if arg.split("=", 1)[0] == "--libero-resume")
    run_dir = args[at].split("=", 1)[1] if "=" in args[at] else (args[at + 1] if at + 1 < len(args) else None)
    if run_dir is None:
        return []
    from pytest_libero.results.resume import recorded_options

    flags = frozenset(spec.flags[0] for spec in DECLARED.values()
                      if spec.kwargs.get("action") in ("store_true", "store_false"))
    return recorded_options(Path(run_dir), flags)


def is_libero_run(config: pytest.Config) -> bool:
    """A LIBERO run: any --libero-* option given a value other than its default, the `libero` ini
    setting, or a -m expression that selects LIBERO cells (`-m libero`, `-m libero_goal`)."""
    return bool(given_options(config)) or bool(config.getini(GROUP)) or marks_select_cells(config)


MARK_WORDS = frozenset({"and", "or", "not"})


def marks_select_cells(config: pytest.Config) -> bool:
    """Whether the -m expression names a marker of LIBERO cells and is true for such a cell (the
    markers of cells true, every other marker false): `-m 'not libero'` does not ask for a run."""
    expression = getattr(config.option, "markexpr", "") or ""
    tokens = re.findall(r"\(|\)|[^\s()]+", expression)
    cell_marks = {GROUP, *all_suites(), *cell_markers()}
    if not set(tokens) & cell_marks:
        return False
    words = [t if t in MARK_WORDS or t in "()" else str(t in cell_marks) for t in tokens]
    try:  # only True/False/and/or/not/parentheses reach eval: built above from a whitelist
        return bool(eval(" ".join(words), {"__builtins__": {}}, {}))  # noqa: S307
    except SyntaxError:
        return False  # pytest reports a malformed expression itself


def cell_markers() -> tuple[str, ...]:
    """The markers registered benchmarks give their cells besides the suite (RoboMemArena's memory types)."""
    return tuple(name for adapter in benchmarks.adapters() for name in getattr(adapter, "marker_help", {}))


def no_case_line(config: pytest.Config, cells: int) -> str:
    """Why a LIBERO run whose header selects `cells` collected no LIBERO case, and the fix."""
    paths = " ".join(config.args) or "(none)"
    return (f"libero: the header selects {cells} cell(s), but the paths collected ({paths}) hold no LIBERO "
            "case (a test taking libero_cell); name no path to run the bundled cases, or add the path of "
            "pytest_libero/cases (python -c 'import pytest_libero.cases as c; print(c.__path__[0])')")
