"""Stop when decided: an anytime-valid paired test of policy B against policy A, updated after
each completed pair of episodes, and the stratified order the pairs run in.

A pair is one cell run by both policies. It is discordant when exactly one succeeded: X = +1
when only B did, X = -1 when only A did; a concordant pair (both or neither) is X = 0. A pair in
which either episode errored is not a pair of outcomes at all: it is counted and reported, never
discordant. The effect is d = E[X] = P(only B) - P(only A), the difference of the success rates.
"No difference" is McNemar's null: on every pair, given the pairs before it, only-B and only-A
are equally likely.

Why this test rather than a tuned SPRT or STEP: it needs no guess of the discordance (which no
one knows before B runs, and which fixes the chance p below for a given effect) and no maximum
number of pairs or precomputed boundary table; it stays valid under any stopping rule a run adds
(a cap, Ctrl-C, a resume); its statistics are closed forms of the counts, so the record reads
the same in any order. Its price, a logarithmic regret against the best bet in hindsight, is
measured in docs/schedules-and-compare.md (savings against fixed-n at equal power).

Rejecting "no difference". Two e-processes,
one per direction. E_B mixes, uniformly over the chance p in (1/2, 1] that a discordant pair
favours B, the likelihood ratio of p against 1/2:

    E_B = 2 * int_{1/2}^{1} (2p)^k (2 - 2p)^m dp = 2^(k+m+1) B(k+1, m+1) P(Beta(k+1, m+1) > 1/2)

with k pairs favouring B and m favouring A; E_A is its mirror image. A concordant pair multiplies
both by one. Under the null every factor has mean one given the past, so E_B and E_A are
nonnegative martingales from 1, and Ville's inequality bounds P(E_B ever reaches 2/alpha) by
alpha/2: at any stopping time, however often one looks, whatever the mix of tasks. Verdict
"B better" when E_B >= 2/alpha, "A better" when E_A >= 2/alpha. Under any effect d <= 0 (not
only d = 0) each factor of E_B has mean at most one, so a wrong direction is as unlikely as a
false difference: at most alpha/2 each way.

Futility. Two more e-processes test the minimum effect of interest delta:

    F_B = mean over lambda in a grid of prod_i (1 - lambda (X_i - delta)),   0 < lambda < 1/(1 - delta)

a nonnegative supermartingale when every pair's effect given the past is at least delta (each
factor then has mean 1 - lambda (E[X] - delta) <= 1); F_A tests d <= -delta the same way.
"Futile: no difference of at least delta" when both reach 1/beta. Guarantee: if B is better by
at least delta (or A is), the test stops for futility with probability at most beta. Concordant
pairs are evidence here (a factor 1 + lambda delta each): many of them leave no room for a large
difference. With i.i.d. pairs and no cap, E_B grows without bound whenever d > 0, so a
difference of at least delta is found in the right direction with probability at least
1 - beta - alpha/2 (`Design.for_power` sets beta = 1 - power). A cap on the pairs (the cells A ran) can end
a comparison undecided, which lowers that power; `simulate` measures it.

All four statistics are functions of the counts (k, m, concordant), so the vectorised
simulation (`simulate`, `decide`) and the pair-by-pair state (`SequentialTest`) share one
implementation.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Callable, Iterable

import numpy as np
from numpy.typing import NDArray

from pytest_libero.errors import LiberoError, OptionError

TEST_NAME = ("anytime-valid McNemar: uniform-mixture e-process per direction on the discordant pairs "
             "(Ville's inequality), futility e-processes against |effect| >= delta")
# The futility bets, as fractions of the largest bet 1/(1 - delta) that keeps every factor positive.
FUTILITY_GRID = tuple((j + 0.5) / 10 for j in range(10))


class SequentialError(LiberoError):
    """A sequential comparison used out of turn (a pair after its decision, a bad order input)."""


class Decision(str, Enum):
    """Where a comparison stands after a cell; `undecided`: the cap came first."""

    CONTINUE = "continue"
    B_BETTER = "B better"
    A_BETTER = "A better"
    FUTILE = "futile"
    UNDECIDED = "undecided"

    @property
    def stops(self) -> bool:
        """Whether the test has decided (a verdict, or futility): a run told to stop when decided stops."""
        return self in (Decision.B_BETTER, Decision.A_BETTER, Decision.FUTILE)


_CODES = (Decision.CONTINUE, Decision.B_BETTER, Decision.A_BETTER, Decision.FUTILE, Decision.UNDECIDED)


@dataclass(frozen=True, slots=True)
class Design:
    """What a sequential comparison decides with: its error rates, the effect worth finding, a cap.

    `futility` is beta: if the effect is at least `min_effect` either way, the test stops for
    futility with probability at most beta (so 1 - beta is the design's power). `max_pairs`
    caps the cells run (errored ones included); None: no cap."""

    alpha: float = 0.05
    min_effect: float = 0.1
    futility: float = 0.2
    max_pairs: int | None = None

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise OptionError(f"alpha {self.alpha} is not a probability strictly between 0 and 1; pass e.g. 0.05")
        if not 0 < self.min_effect < 1:
            raise OptionError(f"minimum effect {self.min_effect} is not a difference of success rates strictly "
                              "between 0 and 1; pass e.g. 0.1 for ten percentage points")
        if not 0 < self.futility < 1:
            raise OptionError(f"futility level {self.futility} is not strictly between 0 and 1; pass 1 - power, "
                              "e.g. 0.2 for power 0.8")
        if self.max_pairs is not None and self.max_pairs < 1:
            raise OptionError(f"max pairs {self.max_pairs} is not a positive number of cells; pass None for no cap")

    @classmethod
    def for_power(cls, power: float, alpha: float = 0.05, min_effect: float = 0.1,
                  max_pairs: int | None = None) -> Design:
        """The design whose futility level is 1 - power."""
        if not 0 < power < 1:
            raise OptionError(f"power {power} is not strictly between 0 and 1; pass e.g. 0.8")
        return cls(alpha, min_effect, 1 - power, max_pairs)

    @property
    def boundary(self) -> float:
        """The log e-value at which one direction rejects "no difference": log(2 / alpha)."""
        return math.log(2 / self.alpha)

    @property
    def futility_boundary(self) -> float:
        return math.log(1 / self.futility)

    def as_dict(self) -> dict[str, Any]:
        return {"test": TEST_NAME, "alpha": self.alpha, "min_effect": self.min_effect, "futility": self.futility,
                "max_pairs": self.max_pairs, "boundary_log_e": self.boundary,
                "futility_boundary_log_e": self.futility_boundary}


def log_e_values(b_only: Any, a_only: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """log E_B and log E_A for counts of pairs favouring B and A (arrays or numbers)."""
    from scipy.special import betainc, betaln

    k = np.asarray(b_only, dtype=np.float64)
    m = np.asarray(a_only, dtype=np.float64)
    base = math.log(2) * (k + m + 1) + betaln(k + 1, m + 1)
    tiny = np.finfo(float).tiny
    # P(Beta(k+1, m+1) > 1/2) = I_{1/2}(m+1, k+1); floored so that a hopeless side stays finite.
    log_b = base + np.log(np.maximum(betainc(m + 1, k + 1, 0.5), tiny))
    log_a = base + np.log(np.maximum(betainc(k + 1, m + 1, 0.5), tiny))
    return np.asarray(log_b, dtype=np.float64), np.asarray(log_a, dtype=np.float64)


def log_futility(b_only: Any, a_only: Any, concordant: Any,
                 min_effect: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """log F_B (against effect >= min_effect) and log F_A (against effect <= -min_effect)."""
    from scipy.special import logsumexp

    k = np.asarray(b_only, dtype=np.float64)
    m = np.asarray(a_only, dtype=np.float64)
    c = np.asarray(concordant, dtype=np.float64)
    lams = np.array(FUTILITY_GRID).reshape((-1,) + (1,) * k.ndim) / (1 - min_effect)
    against, toward, still = np.log1p(-lams * (1 - min_effect)), np.log1p(lams * (1 + min_effect)), \
        np.log1p(lams * min_effect)
    log_b = logsumexp(k * against + m * toward + c * still, axis=0) - math.log(len(FUTILITY_GRID))
    log_a = logsumexp(m * against + k * toward + c * still, axis=0) - math.log(len(FUTILITY_GRID))
    return np.asarray(log_b, dtype=np.float64), np.asarray(log_a, dtype=np.float64)


Statistics = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]


def statistics(design: Design, b_only: Any, a_only: Any, concordant: Any) -> Statistics:
    """(log E_B, log E_A, log F_B, log F_A) at the given counts."""
    return (*log_e_values(b_only, a_only), *log_futility(b_only, a_only, concordant, design.min_effect))


def _codes(design: Design, stats: Statistics, cells: NDArray[Any]) -> NDArray[np.int8]:
    """The decision code (index into _CODES) at each set of statistics; `cells` run so far, for the cap."""
    e_b, e_a, f_b, f_a = stats
    futile = (f_b >= design.futility_boundary) & (f_a >= design.futility_boundary)
    capped = np.zeros(e_b.shape, dtype=bool) if design.max_pairs is None else cells >= design.max_pairs
    return np.select([e_b >= design.boundary, e_a >= design.boundary, futile, capped], [1, 2, 3, 4], 0).astype(np.int8)


@dataclass(frozen=True, slots=True)
class Step:
    """One cell of a sequential comparison: what the pair was and the statistics after it."""

    cell: str
    kind: str  # "only B", "only A", "both", "neither" or "errored"
    b_only: int
    a_only: int
    concordant: int
    errored: int
    log_e_b: float
    log_e_a: float
    log_futility_b: float
    log_futility_a: float
    decision: Decision

    def as_dict(self) -> dict[str, Any]:
        return {"cell": self.cell, "pair": self.kind, "only_b": self.b_only, "only_a": self.a_only,
                "concordant": self.concordant, "errored": self.errored, "log_e_b": self.log_e_b,
                "log_e_a": self.log_e_a, "statistic": max(self.log_e_b, self.log_e_a),
                "log_futility_b": self.log_futility_b, "log_futility_a": self.log_futility_a,
                "decision": self.decision.value}


@dataclass(frozen=True, slots=True)
class SequentialTest:
    """The state of a sequential comparison; `update` returns the state after one more cell."""

    design: Design = field(default_factory=Design)
    steps: tuple[Step, ...] = ()

    @property
    def decision(self) -> Decision:
        return self.steps[-1].decision if self.steps else Decision.CONTINUE

    @property
    def statistic(self) -> float:
        """The running statistic: the larger log e-value of the two directions (0 before any pair)."""
        return max(self.steps[-1].log_e_b, self.steps[-1].log_e_a) if self.steps else 0.0

    @property
    def pairs(self) -> int:
        """Completed pairs, errored cells not included."""
        last = self.steps[-1] if self.steps else None
        return 0 if last is None else last.b_only + last.a_only + last.concordant

    def update(self, a_success: bool | None, b_success: bool | None, cell: str = "") -> SequentialTest:
        """The state after one more cell; None for an episode that errored."""
        if self.decision is not Decision.CONTINUE:
            raise SequentialError(f"the comparison stopped at cell {len(self.steps)} ({self.decision.value}); "
                                  f"{cell or 'a further cell'} must not run")
        last = self.steps[-1] if self.steps else None
        k, m, c, e = (0, 0, 0, 0) if last is None else (last.b_only, last.a_only, last.concordant, last.errored)
        if a_success is None or b_success is None:
            kind, e = "errored", e + 1
        elif a_success == b_success:
            kind, c = ("both" if a_success else "neither"), c + 1
        elif b_success:
            kind, k = "only B", k + 1
        else:
            kind, m = "only A", m + 1
        stats = statistics(self.design, k, m, c)
        code = int(_codes(self.design, stats, np.asarray(len(self.steps) + 1)))
        e_b, e_a, f_b, f_a = (float(v) for v in stats)
        step = Step(cell, kind, k, m, c, e, e_b, e_a, f_b, f_a, _CODES[code])
        return replace(self, steps=self.steps + (step,))

    def record(self) -> dict[str, Any]:
        """The whole comparison as plain data: the design, every step, the stopping point, the verdict."""
        last = self.steps[-1] if self.steps else None
        return {"design": self.design.as_dict(), "decision": self.decision.value,
                "stopped_after": len(self.steps) if self.decision is not Decision.CONTINUE else None,
                "cells": len(self.steps), "pairs": self.pairs, "errored": last.errored if last else 0,
                "statistic": self.statistic,
                "steps": [step.as_dict() for step in self.steps]}


def decide(design: Design, outcomes: NDArray[np.int8]) -> tuple[NDArray[np.int64], list[Decision]]:
    """Where each row of paired outcomes (+1 only B, -1 only A, 0 concordant, any other value an
    errored cell) stops, after how many cells, and how. Rows that do not stop within their
    columns (and below the cap) are `continue`."""
    rows, width = outcomes.shape
    return _run(design, rows, lambda active, start, span: outcomes[active, start:start + span], width)


def _run(design: Design, rows: int, draw: Callable[[NDArray[np.int64], int, int], NDArray[Any]],
         limit: int) -> tuple[NDArray[np.int64], list[Decision]]:
    """Run `rows` comparisons block by block, only those still undecided; `draw` gives their next pairs."""
    limit = limit if design.max_pairs is None else min(limit, design.max_pairs)
    counts = np.zeros((rows, 3), dtype=np.int64)
    stops = np.full(rows, limit, dtype=np.int64)
    codes = np.zeros(rows, dtype=np.int8)
    active = np.arange(rows)
    start = 0
    while active.size and start < limit:
        span = min(max(32, start), 1024, limit - start)  # short blocks first: most rows stop early
        x = draw(active, start, span)
        k = counts[active, 0:1] + np.cumsum(x == 1, axis=1)
        m = counts[active, 1:2] + np.cumsum(x == -1, axis=1)
        c = counts[active, 2:3] + np.cumsum(x == 0, axis=1)
        block = _codes(design, statistics(design, k, m, c), start + 1 + np.arange(span)[None, :])
        stopped = (block != 0).any(axis=1)
        first = (block != 0).argmax(axis=1)
        stops[active[stopped]] = start + 1 + first[stopped]
        codes[active[stopped]] = block[stopped, first[stopped]]
        counts[active, 0], counts[active, 1], counts[active, 2] = k[:, -1], m[:, -1], c[:, -1]
        active = active[~stopped]
        start += span
    return stops, [_CODES[code] for code in codes]


@dataclass(frozen=True, slots=True)
class PairModel:
    """The joint distribution of one pair, from A's rate, the effect B - A, and the discordance.

    The discordance is P(exactly one of A and B succeeds); with the effect d it fixes
    P(only B) = (discordance + d) / 2 and P(only A) = (discordance - d) / 2, and A's rate the rest."""

    baseline: float
    effect: float
    discordance: float

    def __post_init__(self) -> None:
        if not 0 <= self.baseline <= 1:
            raise OptionError(f"baseline {self.baseline} is not a success rate in [0, 1]; pass e.g. 0.6")
        rate_b = self.baseline + self.effect
        if not 0 <= rate_b <= 1:
            raise OptionError(f"effect {self.effect:+g} with baseline {self.baseline:g} gives B a rate of "
                              f"{rate_b:g}, outside [0, 1]; pass an effect between {-self.baseline:+g} and "
                              f"{1 - self.baseline:+g}")
        top = min(2 * self.baseline + self.effect, 2 - 2 * self.baseline - self.effect)
        if not abs(self.effect) <= self.discordance <= top + 1e-12 or self.discordance <= 0:
            raise OptionError(
                f"discordance {self.discordance:g} is impossible with baseline {self.baseline:g} and effect "
                f"{self.effect:+g}: the share of pairs where exactly one run succeeds is at least |effect| and at "
                f"most {top:g} (else P(both) or P(neither) would be negative); pass a discordance in "
                f"[{max(abs(self.effect), 1e-9):g}, {top:g}]")

    @property
    def only_b(self) -> float:
        return (self.discordance + self.effect) / 2

    @property
    def only_a(self) -> float:
        return (self.discordance - self.effect) / 2

    def cells(self) -> dict[str, float]:
        return {"both": self.baseline - self.only_a, "only_a": self.only_a, "only_b": self.only_b,
                "neither": 1 - self.baseline - self.only_b}


def _critical_wins(discordant: NDArray[np.int64], alpha: float) -> NDArray[np.int64]:
    """Fewest pairs favouring one side for McNemar's exact two-sided p to be < alpha, per discordant count.

    For k > D/2 that p is 2 P(Bin(D, 1/2) >= k) (scipy's binomtest gives the same): so k - 1 is
    the first count whose cdf exceeds 1 - alpha/2. Where none exists the result exceeds D."""
    from scipy.stats import binom

    q = 1 - alpha / 2
    first = binom.ppf(q, discordant, 0.5)
    crit = np.where(binom.cdf(first, discordant, 0.5) > q, first + 1, first + 2)
    return np.asarray(crit, dtype=np.int64)


def fixed_n_power(model: PairModel, pairs: int, alpha: float = 0.05) -> float:
    """Power of McNemar's exact test (p < alpha, in the effect's direction) with `pairs` pairs."""
    from scipy.stats import binom

    discordant = np.arange(pairs + 1)
    favoured = max(model.only_b, model.only_a) / model.discordance
    reach = binom.sf(_critical_wins(discordant, alpha) - 1, discordant, favoured)
    return float(np.sum(binom.pmf(discordant, pairs, model.discordance) * reach))


def fixed_n_pairs(model: PairModel, power: float, alpha: float = 0.05) -> int:
    """The fewest pairs with which McNemar's exact test reaches `power` at `alpha`.

    The exact test's power is a sawtooth in n: this bisects to a crossing, then steps down
    while the power stays reached."""
    if model.effect == 0:
        raise OptionError("effect 0: no number of pairs gives power against no difference; pass a nonzero effect")
    if not 0 < power < 1:
        raise OptionError(f"power {power} is not strictly between 0 and 1; pass e.g. 0.8")
    high = 8
    while fixed_n_power(model, high, alpha) < power:
        high *= 2
        if high > 10**7:
            raise OptionError(f"effect {model.effect:+g} needs more than 10^7 pairs; pass a larger effect")
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if fixed_n_power(model, mid, alpha) >= power else (mid, high)
    while high > 1 and fixed_n_power(model, high - 1, alpha) >= power:
        high -= 1
    return high


@dataclass(frozen=True, slots=True)
class Simulation:
    """Simulated sequential comparisons: the pairs each ran and its decision."""

    pairs: NDArray[np.int64]
    decisions: tuple[Decision, ...]

    def rate(self, decision: Decision) -> float:
        return sum(d is decision for d in self.decisions) / len(self.decisions)

    @property
    def mean_pairs(self) -> float:
        return float(self.pairs.mean())

    @property
    def p95_pairs(self) -> int:
        return int(np.quantile(self.pairs, 0.95, method="higher"))


def simulate(design: Design, model: PairModel, runs: int = 2000, seed: int = 0,
             limit: int = 1_000_000) -> Simulation:
    """`runs` sequential comparisons of i.i.d. pairs drawn from `model` (seeded numpy generator).

    Comparisons still undecided after `limit` pairs (or the design's cap) are `undecided`."""
    rng = np.random.default_rng(seed)
    only_b, discordance = model.only_b, model.discordance

    def draw(active: NDArray[np.int64], start: int, span: int) -> NDArray[np.int8]:
        u = rng.random((active.size, span))
        return np.where(u < only_b, 1, np.where(u < discordance, -1, 0)).astype(np.int8)

    stops, decisions = _run(design, runs, draw, limit)
    return Simulation(stops, tuple(Decision.UNDECIDED if d is Decision.CONTINUE else d for d in decisions))


def stratified_order(cells: Iterable[tuple[str, str]], seed: int) -> tuple[str, ...]:
    """Cell ids (given with their task labels) in a shuffled order that covers the tasks evenly.

    Round r takes the r-th cell of every task that has one, tasks in a shuffled order: after any
    prefix, the counts of tasks that still have cells differ by at most one. Shuffles sort by
    sha256 of (seed, name), so the order is a pure function of the input set and the seed, the
    same on every Python and numpy."""
    tasks: dict[str, list[str]] = {}
    seen: set[str] = set()
    for cell, task in cells:
        if cell in seen:
            raise SequentialError(f"cell {cell!r} is listed twice; each cell pairs once")
        seen.add(cell)
        tasks.setdefault(task, []).append(cell)

    def key(*parts: object) -> str:
        return hashlib.sha256(":".join(str(p) for p in (seed, *parts)).encode()).hexdigest()

    queues = {task: sorted(ids, key=lambda cell: key("cell", cell)) for task, ids in tasks.items()}
    order: list[str] = []
    for r in range(max((len(q) for q in queues.values()), default=0)):
        ready = [task for task, q in queues.items() if len(q) > r]
        order.extend(queues[task][r] for task in sorted(ready, key=lambda task: key("round", r, task)))
    return tuple(order)


def power_report(model: PairModel, power: float = 0.8, alpha: float = 0.05, min_effect: float | None = None,
                 max_pairs: int | None = None, runs: int = 2000, seed: int = 0) -> str:
    """The `power` command's text: the fixed-n pairs, and the sequential test's by simulation.

    The sequential design is `Design.for_power`, its minimum effect |effect| unless given."""
    if model.effect == 0:
        raise OptionError("effect 0: no number of pairs gives power against no difference; pass a nonzero effect")
    if runs < 100:
        raise OptionError(f"runs {runs} is too few simulated comparisons for a 95th percentile; pass at least 100")
    design = Design.for_power(power, alpha, abs(model.effect) if min_effect is None else min_effect, max_pairs)
    fixed = fixed_n_pairs(model, power, design.alpha)
    found = simulate(design, model, runs, seed)
    null = simulate(design, PairModel(model.baseline, 0.0, model.discordance), runs, seed + 1)
    right = Decision.B_BETTER if model.effect > 0 else Decision.A_BETTER
    reached = found.rate(right)
    # Sizing fixed-n to a simulated power of 0 or 1 has no answer (0 pairs; infinitely many).
    same_power = (f"{fixed_n_pairs(model, reached, design.alpha)} pairs" if 0.001 <= reached <= 0.999
                  else "none comparable")
    joint = ", ".join(f"{name} {p:.3f}" for name, p in model.cells().items())
    cap = "no cap" if design.max_pairs is None else f"at most {design.max_pairs} pairs"

    def verdicts(sim: Simulation) -> str:
        return ", ".join(f"{d.value} {100 * sim.rate(d):.1f}%" for d in _CODES[1:])

    return "\n".join([
        f"pairs of A (rate {model.baseline:g}) and B (rate {model.baseline + model.effect:g}), discordance "
        f"{model.discordance:g}: {joint}",
        f"fixed-n, McNemar's exact test (alpha {design.alpha:g}, power {power:g}): {fixed} pairs",
        f"sequential, {TEST_NAME}",
        f"  alpha {design.alpha:g}, futility {design.futility:g} at |effect| >= {design.min_effect:g}, {cap}; "
        f"{runs} simulated comparisons, seed {seed}:",
        f"  effect {model.effect:+g}: mean {found.mean_pairs:.0f} pairs, 95th percentile {found.p95_pairs}; "
        f"power {100 * reached:.1f}% ({verdicts(found)})",
        f"  no difference: mean {null.mean_pairs:.0f} pairs, 95th percentile {null.p95_pairs}; {verdicts(null)}",
        f"  fixed-n at the sequential test's power {100 * reached:.1f}%: {same_power}",
    ])
