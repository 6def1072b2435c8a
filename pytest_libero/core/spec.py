"""What a benchmark delivers to a policy and accepts from it, as one frozen value it declares.

Generic code (the contract's checks, the protocol identity, the rollout engine) reads a
benchmark's cameras, image size, action size and bounds, settling action and reference horizons
from its `BenchmarkSpec` (a member of core.benchmark.BenchmarkAdapter), never from constants of
its own: a benchmark with other cameras or another action space needs no edit outside its package.

Stdlib only: collection and the controller build protocols from it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BenchmarkSpec:
    """A benchmark's observation and action spec and the protocol data that come with it.

    `camera_transform` names what the benchmark does to a native render before delivery (part of
    the protocol identity; contract.images_from_native applies the ones it knows). `horizons`:
    (suite, control cap, where the number comes from) per suite whose horizon budget the benchmark
    defines, and `base_suites` (perturbed suite, base suite) for suites that share their base
    suite's horizon; a benchmark whose episodes are capped by its own `control_cap` option has
    none. `name_in_identity`: False only for a benchmark whose identities were made before the
    registry existed (LIBERO's): its protocol identity leaves its name out while it has no
    benchmark options, so those identities stay as they were.
    """

    name: str
    cameras: tuple[str, ...]
    image_shape: tuple[int, int, int]
    camera_transform: str
    action_size: int
    action_low: float
    action_high: float
    settle_action: tuple[float, ...]
    horizons: tuple[tuple[str, int, str], ...] = ()
    base_suites: tuple[tuple[str, str], ...] = ()
    name_in_identity: bool = True

    def __post_init__(self) -> None:
        where = f"benchmark {self.name!r} declares"
        if not self.cameras or len(set(self.cameras)) != len(self.cameras):
            raise ValueError(f"{where} cameras {self.cameras!r}; they must be one or more distinct names")
        if len(self.image_shape) != 3 or self.image_shape[2] != 3 or min(self.image_shape) < 1:
            raise ValueError(f"{where} image shape {self.image_shape!r}; it must be (height, width, 3)")
        if self.action_size < 1 or not self.action_low < self.action_high:
            raise ValueError(f"{where} {self.action_size} action values in [{self.action_low}, "
                             f"{self.action_high}]; it needs at least one value and low < high")
        if len(self.settle_action) != self.action_size or not all(
                self.action_low <= v <= self.action_high for v in self.settle_action):
            raise ValueError(f"{where} settle action {self.settle_action!r}; it must be one action of "
                             f"{self.action_size} values within [{self.action_low}, {self.action_high}]")
        known = {suite for suite, _, _ in self.horizons}
        bad = [(p, b) for p, b in self.base_suites if b not in known]
        if bad or any(cap < 1 for _, cap, _ in self.horizons):
            raise ValueError(f"{where} horizons {self.horizons!r} and base suites {self.base_suites!r}; "
                             "every cap must be positive and every base suite must have a horizon")

    @property
    def action_shape(self) -> str:
        """The accepted chunk shape in words, for refusals: '(n, 7)'."""
        return f"(n, {self.action_size})"

    def horizon(self, suite: str) -> tuple[int, str]:
        """(cap, source) of a suite's reference horizon, or of the base suite of a perturbed suite."""
        base = dict(self.base_suites).get(suite, suite)
        for name, cap, source in self.horizons:
            if name == base:
                return cap, source
        raise KeyError(f"benchmark {self.name!r} has no reference horizon for suite {suite!r}; "
                       "use --libero-budget decisions")

    def horizons_setting(self) -> dict[str, list[object]]:
        """The horizons as the protocol identity holds them: suite -> [cap, source]."""
        return {suite: [cap, source] for suite, cap, source in self.horizons}
