"""The frozen evaluation protocol: every setting that makes two runs comparable, and its hash."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pytest_libero.core.cells import FAST_SEED
from pytest_libero.core.contract import MAX_CHUNK_ROWS
from pytest_libero.core.spec import BenchmarkSpec

SETTLE_CONTROLS = 10
DEFAULT_REPLAN_INTERVAL = 5  # openpi's LIBERO example executes 5 actions per chunk
DEFAULT_MAX_POLICY_CALLS = 200  # the common explicit decisions track: D=200, K=5

BudgetMode = Literal["horizon", "decisions"]


@dataclass(frozen=True, slots=True)
class Protocol:
    """Protocol settings of a run. `identity` hashes all of them; runs compare only when equal.

    `spec` is the benchmark's (its adapter's `spec`): its name, cameras, image shape, camera
    transform and reference horizons are settings of the identity, and its settling action is the
    run's unless a selection sets another (a full-mode schedule's).
    """

    scope: str
    budget: BudgetMode
    replan_interval: int
    max_policy_calls: int | None  # decisions budget only
    mode: str = "fast"
    init_index: int = 0
    task_order_index: int = 0
    seed: int = FAST_SEED
    settle_controls: int = SETTLE_CONTROLS
    settle_action: tuple[float, ...] | None = None  # None: the spec's
    track: str = "rgb"
    # Full mode (pytest_libero.core.schedules): the schedule's name, the run seeds it repeats over and,
    # when only some of its init states run, which. None in fast mode.
    schedule: str | None = None
    seeds: tuple[int, ...] | None = None
    init_states: tuple[int, ...] | None = None
    # Full mode: settings the command line set against the schedule's preset, as
    # (setting, preset value, run value). A run with overrides is a named variant of the preset
    # (its own identity; every record and summary names the difference). Empty: left out.
    overrides: tuple[tuple[str, Any, Any], ...] = ()
    # The benchmark adapter's protocol settings (an adapter's Selection.protocol, see core/benchmark.py).
    benchmark_options: tuple[tuple[str, Any], ...] = ()
    # The most rows a returned chunk may have; a longer one is a policy fault. It decides outcomes,
    # so a run with another bound has its own identity; the default is left out of the settings,
    # so every identity made before the bound existed is unchanged.
    max_chunk_rows: int = MAX_CHUNK_ROWS
    spec: BenchmarkSpec = field(kw_only=True)

    def __post_init__(self) -> None:
        if self.settle_action is None:
            object.__setattr__(self, "settle_action", self.spec.settle_action)

    @property
    def benchmark(self) -> str:
        """The benchmark adapter's registered name (the spec's)."""
        return self.spec.name

    @property
    def cameras(self) -> tuple[str, ...]:
        return self.spec.cameras

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return self.spec.image_shape

    def _benchmark_cap(self) -> tuple[int, str] | None:
        """A benchmark's own step cap (its options' control_cap and control_cap_source), if it has one."""
        options = dict(self.benchmark_options)
        if "control_cap" not in options:
            return None
        return int(options["control_cap"]), str(options.get("control_cap_source") or "benchmark step cap")

    def control_cap(self, suite: str) -> int:
        own = self._benchmark_cap()
        if own is not None and self.budget == "horizon":
            return own[0]
        if self.budget == "decisions":
            assert self.max_policy_calls is not None
            return self.max_policy_calls * self.replan_interval
        if self.schedule is not None:
            return int(_schedule(self.schedule).plan(suite).cap)
        return self.spec.horizon(suite)[0]

    def cap_source(self, suite: str) -> str:
        own = self._benchmark_cap()
        if own is not None and self.budget == "horizon":
            return own[1]
        if self.budget == "decisions":
            return f"decisions budget D={self.max_policy_calls} x K={self.replan_interval}"
        if self.schedule is not None:
            plan = _schedule(self.schedule).plan(suite)
            return f"schedule {self.schedule} cap {plan.cap}: {plan.cap_source}"
        horizon, source = self.spec.horizon(suite)
        return f"reference horizon {horizon}: {source}"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["spec"]
        spec = self.spec
        data.update(cameras=spec.cameras, image_shape=spec.image_shape, camera_transform=spec.camera_transform)
        if spec.name_in_identity or self.benchmark_options:
            data["benchmark"] = spec.name
            data["benchmark_options"] = dict(self.benchmark_options)
        else:
            del data["benchmark_options"]
        if spec.horizons:  # a benchmark capped by its own control_cap option has none
            data["horizons"] = spec.horizons_setting()
        if self.max_chunk_rows == MAX_CHUNK_ROWS:
            del data["max_chunk_rows"]
        if self.overrides:
            data["overrides"] = {name: {"preset": preset, "run": run} for name, preset, run in self.overrides}
        else:
            del data["overrides"]
        if self.schedule is None:
            # Fast mode keeps the settings (and so the identities) it had before schedules existed.
            for key in ("schedule", "seeds", "init_states"):
                del data[key]
        else:
            # A schedule fixes init states and seeds per episode: the fast-mode single values go.
            del data["init_index"], data["seed"]
            data["schedule"] = _schedule(self.schedule).identity()
        return data

    def describe_schedule(self) -> str:
        """Which schedule produced the results, in words (summaries, headers)."""
        if self.schedule is None:
            return f"fast mode: init state {self.init_index}, seed {self.seed}, reference horizons"
        seeds = ",".join(map(str, self.seeds or ()))
        subset = "" if self.init_states is None else f", init states {','.join(map(str, self.init_states))} only"
        return f"full mode: schedule {self.schedule}, seeds {seeds}{subset}{describe_overrides(self.as_dict())}"

    @property
    def identity(self) -> str:
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def describe_overrides(settings: dict[str, Any]) -> str:
    """'; a variant of the preset: replan_interval 5 (preset 10)', or '' (protocol settings as recorded)."""
    overrides = settings.get("overrides") or {}
    if not overrides:
        return ""
    parts = [f"{name} {v['run']} (preset {v['preset']})" for name, v in overrides.items()]
    return f"; a variant of the preset: {', '.join(parts)}"


def _schedule(name: str) -> Any:
    from pytest_libero.core.schedules import load

    return load(name)


def setting_differences(a: Any, b: Any, where_a: str, where_b: str, prefix: str = "") -> list[str]:
    """Dotted names of the settings that differ between two protocol (or policy) dicts, with both
    values, e.g. `budget: 'horizon' in RUN_A, 'decisions' in RUN_B` (resume and compare refusals)."""
    if isinstance(a, dict) and isinstance(b, dict):
        found: list[str] = []
        for key in sorted(set(a) | set(b)):
            found.extend(setting_differences(a.get(key), b.get(key), where_a, where_b, f"{prefix}{key}."))
        return found
    return [] if a == b else [f"{prefix.rstrip('.')}: {_short(a)} {where_a}, {_short(b)} {where_b}"]


def _short(value: Any) -> str:
    """A value for a refusal message: a schedule by its name, anything long cut short."""
    if isinstance(value, dict) and "name" in value and "sha256" in value:
        return f"schedule {value['name']!r} (sha256 {str(value['sha256'])[:16]})"
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."

