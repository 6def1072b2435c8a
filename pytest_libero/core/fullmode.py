"""`--libero-mode full`: the checks of its option values, and the expansion of a selection into
schedule cells.

Full mode runs every released init state the schedule lists for each selected task, in order,
once per run seed: cells `<suite>-tNN-sMM` (plus `-seedS` when --libero-seeds is given). The
schedule supplies the per-suite caps on the horizon budget; a decisions budget
(--libero-budget decisions) replaces them with D x K and is recorded as such, so the two never
share a protocol identity. The schedule is a complete preset: its K and observation track are the
run's unless the command line names others, which makes the run a named variant (preset_protocol).
Bad input is an OptionError naming the value and the fix (the plugin
raises it as a pytest.UsageError; its options live in plugin/options.py).
"""

from __future__ import annotations

from typing import Any

from pytest_libero.core.cells import FAST_SEED, Cell
from pytest_libero.errors import CatalogError, OptionError
from pytest_libero.core.schedules import DEFAULT_SCHEDULE, Schedule, load

MODES = ("fast", "full")


def parse_int_list(flag: str, text: str, what: str) -> tuple[int, ...]:
    """Comma-separated non-negative integers or inclusive ranges A-B, each value once (task ids, seeds,
    init states); OptionError otherwise."""
    values: list[int] = []
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        if not (low.strip().isdecimal() and (not dash or high.strip().isdecimal())):
            raise OptionError(f"{flag} {text!r}: {part!r} is not {what}; give comma-separated "
                              "non-negative integers or ranges such as 0,1,2 or 0-4")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise OptionError(f"{flag} {text!r}: range {part!r} is empty; write it low-high, e.g. {last}-{first}")
        for value in range(first, last + 1):
            if value in values:
                raise OptionError(f"{flag} {text!r}: {value} is listed twice")
            values.append(value)
    return tuple(values)


def resolve_schedule(name: str | None) -> Schedule:
    try:
        return load(name or DEFAULT_SCHEDULE)
    except CatalogError as exc:
        raise OptionError(f"--libero-schedule {name}: {exc}") from None


def check_fast_mode(opt: Any) -> None:
    """Full-mode options given without --libero-mode full are refused, not ignored."""
    for dest, flag in (("libero_schedule", "--libero-schedule"), ("libero_seeds", "--libero-seeds"),
                       ("libero_init_states", "--libero-init-states")):
        if opt(dest) is not None:
            raise OptionError(f"{flag} {opt(dest)} applies only with --libero-mode full (fast mode runs "
                              f"init state 0 once with seed {FAST_SEED}); add --libero-mode full")


def full_mode_settings(opt: Any) -> tuple[Schedule, tuple[int, ...], bool, tuple[int, ...] | None]:
    """(schedule, run seeds, whether ids carry the seed, init-state subset or None)."""
    schedule = resolve_schedule(opt("libero_schedule"))
    given = opt("libero_seeds")
    seeds = parse_int_list("--libero-seeds", given, "a seed") if given is not None else schedule.default_seeds
    subset = opt("libero_init_states")
    init_states = (parse_int_list("--libero-init-states", subset, "an init-state index") if subset is not None
                   else None)
    return schedule, seeds, given is not None or len(seeds) > 1, init_states


def preset_protocol(schedule: Schedule, opt: Any) -> dict[str, Any]:
    """The protocol fields a preset fixes on the policy's side: its K and observation track, unless
    --libero-replan-interval or --libero-track names another value; then the run is a named variant
    of the preset, each difference kept as (setting, preset value, run value) in `overrides` (its
    own protocol identity, named on every record and in the summary). Restating the preset's own
    value changes nothing."""
    preset = {"replan_interval": schedule.replan_interval, "track": schedule.track}
    given = {"replan_interval": opt("libero_replan_interval"), "track": opt("libero_track")}
    overrides = tuple((name, preset[name], value) for name, value in given.items()
                      if value is not None and value != preset[name])
    return {**preset, **{name: run for name, _, run in overrides}, "overrides": overrides}


def expand(selection: tuple[Cell, ...], scope: str | None, schedule: Schedule, seeds: tuple[int, ...],
           tag_seeds: bool, init_states: tuple[int, ...] | None) -> tuple[Cell, ...]:
    """Full-mode cells: per run seed, the selected tasks in native order, each over its init states."""
    if scope is None:
        tasks = [(s, t) for s in schedule.default_suites for t in schedule.plan(s).tasks]
    else:
        tasks = [(cell.suite, cell.task_index) for cell in selection]
    for suite, task in tasks:
        if not schedule.covers(suite):
            raise OptionError(f"--libero-schedule {schedule.name} has no plan for suite {suite}; choose a "
                              f"schedule that does or another suite")
        if task not in schedule.plan(suite).tasks:
            raise OptionError(f"--libero-schedule {schedule.name} does not run {suite} task {task}")
    if init_states is not None:
        for suite in dict.fromkeys(s for s, _ in tasks):
            listed = schedule.plan(suite).init_states
            bad = [i for i in init_states if i not in listed]
            if bad:
                raise OptionError(
                    f"--libero-init-states {','.join(map(str, init_states))}: init state {bad[0]} is not in "
                    f"schedule {schedule.name}'s {suite} plan (init states {listed[0]}-{listed[-1]})")
    cells: list[Cell] = []
    # Cells are built for thousands of items at collection: plain loops, no per-cell lookups.
    for run_seed in seeds:
        tag = run_seed if tag_seeds else None
        for suite, task in tasks:
            plan = schedule.plan(suite)
            wanted = plan.init_states if init_states is None else tuple(i for i in plan.init_states
                                                                        if i in init_states)
            cells.extend(Cell(suite, task, init, seed=schedule.env_seed(run_seed, init), run_seed=tag)
                         for init in wanted)
    return tuple(cells)
