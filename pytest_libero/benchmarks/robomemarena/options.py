"""RoboMemArena's options, cells and selection.

A cell is one episode: task 1-26 at one episode seed, id `robomemarena-tNN-seedS` (the seed is
`seed_start + ep`, which RoboMemArena's runner passes to np.random.seed and env.seed). Fast mode
runs each selected task once at the `robomemarena` preset's first seed (50); full mode runs a
preset's trials (--libero-schedule robomemarena or robomemarena-b175708), optionally only some
seeds (--libero-seeds) or the first N trials (--libero-robomemarena-trials). Bad input is an
OptionError naming the value and the fix.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from pytest_libero.benchmarks.robomemarena import checkout as rc
from pytest_libero.benchmarks.robomemarena import presets
from pytest_libero.core.benchmark import SERVICE_PYTHON_ENV, OptionSpec, Selection
from pytest_libero.core.cells import Cell, bracketed
from pytest_libero.core.spec import BenchmarkSpec
from pytest_libero.errors import OptionError

BENCHMARK = "robomemarena"
SUITE = "robomemarena"
# The bench service learns the checkout from its environment; another interpreter runs it when named.
SERVICE_CHECKOUT_ENV = "PYTEST_LIBERO_ROBOMEMARENA_SERVICE_CHECKOUT"
DEFAULT_TRACK = "openpi-compat"  # RoboMemArena's runner always gives the adapter its 8-d observation/state
# How the service seeds (benchmarks/seeding.py), in the protocol identity since issue 26: runs seeded
# before it (the build left unseeded) have another identity and are never mixed with runs made since.
SEEDING = "cell seed on random and numpy.random before build and reset"
# What the delivered images are: the contract's cameras, made the way RoboMemArena's runner makes
# observation/image and observation/wrist_image (policy_adapter.build_eval26_policy_input),
# mirrored left-right so that the contract's convention (looks upright, image[::-1, ::-1] of the
# render) holds; a RoboMemArena-style adapter gets RoboMemArena's own arrays back.
CAMERA_TRANSFORM = ("robomemarena: render 480x640, np.flipud, cv2.resize to 256x256 INTER_AREA "
                    "(RoboMemArena's observation/image), delivered as [:, ::-1] of that")
# The contract's two camera names, filled with RoboMemArena's observation/image and wrist_image.
CAMERAS = ("agentview", "robot0_eye_in_hand")
# Every preset's resize_size is 256 (presets.py); the spec holds it, so another would be refused
# when its first observation is sealed.
SPEC = BenchmarkSpec(
    name=BENCHMARK, cameras=CAMERAS, image_shape=(256, 256, 3), camera_transform=CAMERA_TRANSFORM,
    action_size=7, action_low=-1.0, action_high=1.0, settle_action=(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0))
_ID = re.compile(r"robomemarena-t(?P<task>\d{2})-seed(?P<seed>\d+)")


@dataclass(frozen=True, slots=True)
class ArenaCell(Cell):
    """One RoboMemArena episode: `task_index` is the task id minus 1, `init_index` the trial (ep),
    `seed` the episode seed (seed_start + ep); `stem` and `memory_type` from the checkout (markers
    and -k keywords)."""

    stem: str = ""
    memory_type: str = ""

    @property
    def id(self) -> str:
        return f"{SUITE}-t{self.task_index + 1:02d}-seed{self.seed}"


def parse(text: str) -> tuple[int, int] | None:
    """(task id, episode seed) of a cell id or node id; None when it is not this grammar."""
    found = _ID.fullmatch(bracketed(text))
    if found is None or int(found.group("task")) not in rc.TASK_IDS:
        return None
    return int(found.group("task")), int(found.group("seed"))


@dataclass(frozen=True, slots=True)
class ArenaSettings:
    """The run's RoboMemArena settings that are not protocol: where the checkout is, and what it holds."""

    checkout: rc.Checkout
    python: str | None  # the bench service's interpreter (None: this one)


def _flag(name: str) -> str:
    return "--libero-robomemarena-" + name


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec((_flag("checkout"),), dict(
        dest="libero_robomemarena_checkout", default=None, metavar="PATH",
        help=f"Your RoboMemArena checkout (the folder holding evaluation_benchmark/; default ${rc.CHECKOUT_ENV}). "
             "Its LIBERO fork builds the scenes and its scorer scores them; nothing of it ships with this suite")),
    OptionSpec((_flag("python"),), dict(
        dest="libero_robomemarena_python", default=None, metavar="PYTHON",
        help="The interpreter that runs RoboMemArena's bench service (default: this one); it needs the "
             "checkout's dependencies (robosuite, mujoco, numpy, opencv) importable")),
    OptionSpec((_flag("tasks"),), dict(
        dest="libero_robomemarena_tasks", default=None, metavar="IDS",
        help="Task ids 1-26, comma-separated, ranges allowed (e.g. 1,4,6-8). Default: all 26")),
    OptionSpec((_flag("trials"),), dict(
        dest="libero_robomemarena_trials", type=int, default=None, metavar="N",
        help="Full mode: only the preset's first N trials per task")),
    OptionSpec((_flag("max-steps"),), dict(
        dest="libero_robomemarena_max_steps", type=int, default=None, metavar="N",
        help="Step cap after settling (default: the preset's, 3000); another value is part of the protocol identity")),
    OptionSpec((_flag("post-goal-steps"),), dict(
        dest="libero_robomemarena_post_goal_steps", type=int, default=None, metavar="N",
        help="Controls run on once the BDDL goal first holds (default: the preset's, 200); part of the protocol "
             "identity")),
)


def task_ids(text: str | None) -> tuple[int, ...]:
    """Task ids from `1,4,6-8`; every one in 1-26, each once."""
    if text is None:
        return rc.TASK_IDS
    flag = _flag("tasks")
    ids: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdecimal() or (high and not high.isdecimal()):
            raise OptionError(f"{flag} {text!r}: {part.strip()!r} is not a task id or range; give ids 1-26 such "
                              "as 1,4,6-8")
        span = range(int(low), int(high or low) + 1)
        for task in span:
            if task not in rc.TASK_IDS:
                raise OptionError(f"{flag} {text!r}: task {task} does not exist; RoboMemArena's tasks are 1-26")
            if task in ids:
                raise OptionError(f"{flag} {text!r}: task {task} is listed twice")
            ids.append(task)
        if not span:
            raise OptionError(f"{flag} {text!r}: the range {part.strip()!r} is empty")
    return tuple(ids)


def _positive(settings: Mapping[str, Any], name: str, minimum: int) -> int | None:
    value = settings.get(f"libero_robomemarena_{name.replace('-', '_')}")
    if value is not None and value < minimum:
        raise OptionError(f"{_flag(name)} {value}: must be at least {minimum}")
    return value  # type: ignore[no-any-return]


def _episode_seeds(settings: Mapping[str, Any], preset: presets.Preset) -> tuple[int, ...]:
    """The episode seeds to run: the preset's (full mode) or its first (fast mode), narrowed."""
    full = settings.get("libero_mode") == "full"
    trials = _positive(settings, "trials", 1)
    given = settings.get("libero_seeds")
    if not full:
        for flag, value in (("--libero-seeds", given), (_flag("trials"), trials),
                            ("--libero-schedule", settings.get("libero_schedule"))):
            if value is not None:
                raise OptionError(f"{flag} applies only with --libero-mode full (fast mode runs each task once at "
                                  f"seed {preset.seed_start})")
        return (preset.seed_start,)
    seeds = tuple(range(preset.seed_start, preset.seed_start + preset.trials))
    if trials is not None:
        if trials > preset.trials:
            raise OptionError(f"{_flag('trials')} {trials}: preset {preset.name} has {preset.trials} trials")
        seeds = seeds[:trials]
    if given is not None:
        from pytest_libero.core.fullmode import parse_int_list

        chosen = parse_int_list("--libero-seeds", given, "an episode seed")
        outside = [s for s in chosen if s not in seeds]
        if outside:
            raise OptionError(f"--libero-seeds {given}: {', '.join(map(str, outside))} not among preset "
                              f"{preset.name}'s episode seeds {seeds[0]}..{seeds[-1]}")
        seeds = tuple(s for s in seeds if s in chosen)
    return seeds


def _refuse_libero_selection(settings: Mapping[str, Any]) -> None:
    for flag, name, hint in (("--libero-scope", "libero_scope", "select tasks with " + _flag("tasks")),
                             ("--libero-task-ids", "libero_task_ids", "select tasks with " + _flag("tasks")),
                             ("--libero-init-states", "libero_init_states", "RoboMemArena has no init states; "
                                                                             "episodes are seeded"),
                             ("--libero-max-policy-calls", "libero_max_policy_calls",
                              "RoboMemArena's budget is its step cap: " + _flag("max-steps"))):
        if settings.get(name) is not None:
            raise OptionError(f"{flag} does not apply to --libero-benchmark robomemarena; {hint}")
    if settings.get("libero_budget") not in (None, "horizon"):
        raise OptionError("--libero-budget decisions does not apply to --libero-benchmark robomemarena: its "
                          "episodes run to the step cap or to the goal plus the post-goal steps; set the cap with "
                          + _flag("max-steps"))
    suite = settings.get("libero_suite")
    if suite not in (None, SUITE):
        raise OptionError(f"--libero-suite {suite}: RoboMemArena has one suite, {SUITE}; select tasks with "
                          + _flag("tasks"))


def select(settings: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> Selection:
    """The selected episodes (task order, then seed) and the protocol; OptionError on bad input."""
    _refuse_libero_selection(settings)
    try:
        checkout = rc.load(rc.resolve_root(settings.get("libero_robomemarena_checkout"), dict(environ)))
    except rc.CheckoutError as exc:
        raise OptionError(str(exc)) from None
    python = settings.get("libero_robomemarena_python")
    if python is not None and not os.access(python, os.X_OK):
        raise OptionError(f"{_flag('python')} {python}: not an executable file; pass the interpreter of the "
                          "environment that has RoboMemArena's dependencies (e.g. /path/venv/bin/python)")
    full = settings.get("libero_mode") == "full"
    preset = presets.get(settings.get("libero_schedule") if full else None)
    seeds = _episode_seeds(settings, preset)
    # The preset's values unless the command line names others: then the run is a named variant of
    # the preset (its own identity, each difference in `overrides`), as for LIBERO's presets.
    given = {"replan_interval": settings.get("libero_replan_interval"), "track": settings.get("libero_track"),
             "max_steps": _positive(settings, "max-steps", 1),
             "post_goal_steps": _positive(settings, "post-goal-steps", 0)}
    preset_values = {"replan_interval": preset.replan_steps, "track": DEFAULT_TRACK, "max_steps": preset.max_steps,
                     "post_goal_steps": preset.post_goal_steps}
    overrides = tuple((name, preset_values[name], value) for name, value in given.items()
                      if value is not None and value != preset_values[name])
    run = {**preset_values, **{name: value for name, _, value in overrides}}
    max_steps, post_goal, replan = run["max_steps"], run["post_goal_steps"], run["replan_interval"]
    cells = tuple(ArenaCell(SUITE, task - 1, init_index=seed - preset.seed_start, seed=seed,
                            stem=checkout.task(task).stem, memory_type=checkout.task(task).memory_type)
                  for task in task_ids(settings.get("libero_robomemarena_tasks")) for seed in seeds)
    cap_source = f"RoboMemArena max_steps {max_steps} (" + (
        "preset " + preset.name if max_steps == preset.max_steps else _flag("max-steps")) + ")"
    options: list[tuple[str, Any]] = [
        ("preset", preset.name), ("trials", preset.trials), ("seed_start", preset.seed_start),
        ("max_steps", max_steps), ("post_goal_steps", post_goal), ("resize_size", preset.resize_size),
        ("control_cap", max_steps), ("control_cap_source", cap_source),
        ("bddl_sha256", checkout.bddl_digest()),
        # Every generator seeded from the cell before the build and the reset (benchmarks/seeding.py): a
        # cell's scene no longer depends on the episodes before it, so runs made before this differ in
        # identity and are never mixed with runs made since (docs/robomemarena.md, "Seeding").
        ("seeding", SEEDING),
        *((f"scorer_sha256:{name}", digest) for name, digest in checkout.scorer_sha256),
    ]
    protocol = {"benchmark_options": tuple(options), "mode": "full" if full else "fast",
                "seed": preset.seed_start, "settle_controls": preset.settle_controls, "replan_interval": replan,
                "track": run["track"], "overrides": overrides}
    return Selection(cells, protocol, ArenaSettings(checkout=checkout, python=python))


def service_env(context: ArenaSettings | None) -> dict[str, str]:
    """The bench service's environment: the checkout, and the interpreter when another one runs it."""
    if context is None:
        return {}
    env = {SERVICE_CHECKOUT_ENV: context.checkout.root}
    if context.python is not None and Path(context.python).resolve() != Path(sys.executable).resolve():
        # The other interpreter imports this package from where this one does.
        package_root = str(Path(__file__).resolve().parents[3])
        env[SERVICE_PYTHON_ENV] = context.python
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    return env
