"""Full-mode schedules: named, frozen per-suite episode plans (catalog/schedules/<name>.json).

A schedule says, per suite, which tasks and released init states run (episode i on init state i,
in order), the control cap and where it comes from, the settling controls, and how seeds work:
the run seeds it repeats over by default and how each episode's environment seed follows from
the run seed; and on the policy's side the replan interval K, the observation track and the
duties the pipeline's adapter has (resize, crop, normalization). `standard` is the common
published protocol; `openvla`, `oft`, `openpi`, `lerobot`, `lerobot-docs` and `libero-native`
reproduce those pipelines (docs/schedules-and-compare.md). A schedule's name and content hash are
part of the protocol identity.

Pure data and stdlib only: collection imports this module.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pytest_libero.core.data import CATALOG_DIR, read_json
from pytest_libero.core.cells import parse_cell_id, parse_run_seed
from pytest_libero.core.shards import int_ranges
from pytest_libero.errors import CatalogError

SCHEDULE_DIR = CATALOG_DIR / "schedules"
DEFAULT_SCHEDULE = "standard"
ENV_SEED_RULES = ("fixed", "run_seed", "run_seed_plus_init_index")


@dataclass(frozen=True, slots=True)
class SuitePlan:
    """One suite's part of a schedule."""

    suite: str
    tasks: tuple[int, ...]
    init_states: tuple[int, ...]
    cap: int
    cap_source: str
    settle_controls: int
    settle_action: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Schedule:
    """A loaded schedule (`document(name)` gives its JSON as frozen in the catalog)."""

    name: str
    sha256: str
    title: str
    default_suites: tuple[str, ...]
    default_seeds: tuple[int, ...]
    env_seed_rule: str
    env_seed_value: int | None
    plans: tuple[SuitePlan, ...]
    replan_interval: int  # K: controls executed from each chunk
    track: str  # the observation track (pytest_libero.core.contract.TRACKS)
    adapter_duties: tuple[str, ...]  # what the pipeline's adapter does that the harness does not

    def plan(self, suite: str) -> SuitePlan:
        for plan in self.plans:
            if plan.suite == suite:
                return plan
        raise CatalogError(f"schedule {self.name!r} has no plan for suite {suite}; it covers "
                           f"{', '.join(p.suite for p in self.plans)}")

    def covers(self, suite: str) -> bool:
        return any(plan.suite == suite for plan in self.plans)

    def env_seed(self, run_seed: int, init_index: int) -> int:
        """The env.seed of an episode on `init_index` in the repetition of `run_seed`."""
        return _env_seed(self.env_seed_rule, self.env_seed_value, run_seed, init_index)

    def settling(self) -> tuple[int, tuple[float, ...]]:
        """The settling controls and action (the same for every suite of a schedule)."""
        return self.plans[0].settle_controls, self.plans[0].settle_action

    def identity(self) -> dict[str, Any]:
        """What the protocol identity records: the name, the content hash and the numbers that
        most often differ between harnesses (so that a refusal can name them)."""
        controls, action = self.settling()
        seed_rule: dict[str, Any] = {"rule": self.env_seed_rule}
        if self.env_seed_value is not None:
            seed_rule["value"] = self.env_seed_value
        return {"name": self.name, "sha256": self.sha256, "caps": {p.suite: p.cap for p in self.plans},
                "episodes_per_task": {p.suite: len(p.init_states) for p in self.plans},
                "settle_controls": controls, "settle_action": list(action), "env_seed": seed_rule,
                "replan_interval": self.replan_interval, "track": self.track}


def env_seed_for(settings: dict[str, Any], cell_id: str) -> int | None:
    """The environment seed a full-mode cell had (or would have had), from the protocol settings
    alone: for records of episodes that never reached the service. None in fast mode."""
    schedule, parsed = settings.get("schedule"), parse_cell_id(cell_id)
    if not isinstance(schedule, dict) or parsed is None:
        return None
    run_seed = parse_run_seed(cell_id)
    if run_seed is None:
        run_seed = (settings.get("seeds") or [0])[0]
    rule = schedule["env_seed"]
    return _env_seed(rule["rule"], rule.get("value"), int(run_seed), parsed[2])


def _env_seed(rule: str, value: int | None, run_seed: int, init_index: int) -> int:
    """One of ENV_SEED_RULES: a fixed seed, the run seed, or the run seed plus the init-state index."""
    if rule == "fixed":
        assert value is not None
        return int(value)
    if rule == "run_seed":
        return run_seed
    return run_seed + init_index


def names() -> list[str]:
    """The schedules frozen in the catalog."""
    return sorted(path.stem for path in SCHEDULE_DIR.glob("*.json"))


def document(name: str) -> dict[str, Any]:
    """The schedule's JSON as frozen in the catalog."""
    if not (SCHEDULE_DIR / f"{name}.json").is_file():
        raise CatalogError(f"unknown schedule {name!r}; available: {', '.join(names())}")
    return read_json(f"schedules/{name}.json")


@functools.cache
def load(name: str) -> Schedule:
    """A schedule by name (CatalogError naming the available ones when unknown)."""
    doc = document(name)
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    plans = tuple(
        SuitePlan(suite=suite, tasks=tuple(p["tasks"]), init_states=tuple(p["init_states"]), cap=p["cap"],
                  cap_source=p["cap_source"], settle_controls=p["settle_controls"],
                  settle_action=tuple(float(v) for v in p["settle_action"]))
        for suite, p in doc["suites"].items())
    if len({(p.settle_controls, p.settle_action) for p in plans}) != 1:
        raise CatalogError(f"schedule {name!r}: settling differs between suites; a schedule settles every "
                           "suite the same way")
    seeds = doc["seeds"]
    return Schedule(name=doc["name"], sha256=hashlib.sha256(canonical.encode()).hexdigest(), title=doc["title"],
                    default_suites=tuple(doc["default_suites"]), default_seeds=tuple(seeds["default"]),
                    env_seed_rule=seeds["env_seed"]["rule"], env_seed_value=seeds["env_seed"].get("value"),
                    plans=plans, replan_interval=doc["replan_interval"]["value"],
                    track=doc["observation_track"]["value"], adapter_duties=tuple(doc["adapter_duties"]["items"]))


def describe(name: str) -> str:
    """A plain-text table of the schedule, suite by suite (`python -m pytest_libero schedule NAME`)."""
    schedule, doc = load(name), document(name)
    controls, action = schedule.settling()
    env_seed = doc["seeds"]["env_seed"]
    rule = {"fixed": f"env.seed({env_seed.get('value')}) whatever the run seed",
            "run_seed": "env.seed(run seed)",
            "run_seed_plus_init_index": "env.seed(run seed + init-state index)"}[schedule.env_seed_rule]
    lines = [f"schedule {schedule.name}: {doc['title']}  (sha256 {schedule.sha256[:16]})", doc["description"], "",
             f"seeds: run seeds {', '.join(map(str, schedule.default_seeds))} by default ({doc['seeds']['source']})",
             f"environment seed: {rule} ({env_seed['source']})",
             f"settling: {controls} controls of {[float(v) for v in action]}, not counted against the cap "
             f"({doc['suites'][schedule.plans[0].suite]['settle_source']})",
             f"replan interval K: {schedule.replan_interval} controls per chunk ({doc['replan_interval']['source']})",
             f"observation track: {schedule.track} ({doc['observation_track']['source']})",
             f"adapter duties (the harness does not do these; {doc['adapter_duties']['source']}):",
             *(f"  - {duty}" for duty in schedule.adapter_duties),
             f"default suites (no --libero-scope): {', '.join(schedule.default_suites)}", "",
             f"{'suite':<24}{'tasks':>7}{'init states':>14}{'episodes':>10}{'cap':>6}  cap source"]
    total = 0
    for plan in schedule.plans:
        episodes = len(plan.tasks) * len(plan.init_states)
        if plan.suite in schedule.default_suites:
            total += episodes
        lines.append(f"{plan.suite:<24}{int_ranges(plan.tasks):>7}{int_ranges(plan.init_states):>14}{episodes:>10}"
                     f"{plan.cap:>6}  {plan.cap_source}")
    lines.append("")
    lines.append(f"default suites: {total} episodes per run seed")
    return "\n".join(lines)
