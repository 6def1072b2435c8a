"""An anytime-valid interval for the effect of a sequential comparison: a confidence sequence for
d = E[X], the mean of the paired differences X (+1 only B succeeded, -1 only A, 0 concordant),
valid at any stopping time, the sequential test's own stop included.

Why not the fixed-n interval: Newcombe's paired interval (compare's) covers d with 95% for a
number of pairs fixed in advance. A run that stops when decided stops because its pairs looked
extreme, so at the stop that interval covers d less often than it says (`coverage` measures by how
much). A confidence sequence covers d at every number of pairs at once, with probability 1 - alpha,
so it covers it at whatever time a stopping rule chose.

Which one: a betting confidence sequence (Waudby-Smith and Ramdas, "Estimating means of bounded
random variables by betting", JRSS B 86:1-27, 2024), with constant bets mixed uniformly. For a
candidate effect mu, the upward capital

    K_up(mu) = mean over g in a grid of prod_i (1 + g (X_i - mu) / (1 + mu)),   g in (0, 1)

bets that the pairs favour B more than mu says (1 + mu is the largest loss X_i - mu can bring, so
every factor stays positive); K_down(mu) bets the other way, with 1 - mu. If E[X_i | past] = mu
each product is a nonnegative martingale from 1, so is their mean, and Ville's inequality bounds
P(K_up(mu) ever reaches 2/alpha) by alpha/2; likewise K_down. The confidence sequence is every mu
that neither capital rejects. Each factor of K_up falls as mu rises (and each of K_down rises), so
that set is an interval [lower, upper], found by bisection.

Why this one rather than the normal-mixture (Robbins) boundary: X is bounded in [-1, 1], and the
normal mixture uses only that bound, so its width does not shrink when few pairs are discordant
(the usual case: most pairs are concordant); at 300 pairs it is 35 pp wide at any discordance,
this one 24, 17 and 12 pp at discordance 0.4, 0.2 and 0.1. It needs no tuning constant fixed
before the run either (the mixing over bets is the whole choice, and it is fixed here). Since X takes three values, the
capitals are closed forms of the counts (k only-B, m only-A, c concordant): the interval reads the
same in any order of the pairs, as the test's statistics do. And it agrees with the test: at mu = 0
the concordant factor is one and K_up(0) = int_0^1 (1 + g)^k (1 - g)^m dg, which is the test's
E_B exactly (core.sequential, its uniform mixture written in g = 2p - 1); the grid's midpoint rule
gives it to within 3e-5 in log near the boundary 2/alpha (tests/test_confidence.py checks every count
up to 300 each way; far from the boundary, where no decision is near, the error can be larger). So
the lower end is above 0 when, and only when, the test decided "B better" (and the upper end below 0
for "A better"), but for a statistic within that distance of the boundary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pytest_libero.core.sequential import Design, PairModel, decide
from pytest_libero.core.statistics import Paired, newcombe_paired_ci
from pytest_libero.errors import OptionError

# The bets, as fractions g of the largest one that keeps every factor positive: the midpoints of
# 256 equal parts of (0, 1). A uniform mixture over any fixed set of bets is valid (the grid only
# changes how close the mixture is to the test's uniform one: within the precision quoted above).
GRID = (np.arange(256) + 0.5) / 256
METHOD = ("betting confidence sequence (Waudby-Smith and Ramdas, JRSS B 86:1-27, 2024): for each candidate "
          "effect mu, the capital of constant bets on the pairs' differences against mu, mixed uniformly over "
          "256 bet sizes, one capital per direction at alpha/2 (Ville's inequality); the interval is every mu "
          "neither rejects, valid at any stopping time")
FIXED_N_METHOD = ("Newcombe (1998) method 10, score interval for paired proportions, as compare's: valid for a "
                  "number of pairs fixed in advance, not at a stop the data chose")


def log_capital_up(mu: Any, b_only: Any, a_only: Any, concordant: Any) -> NDArray[np.float64]:
    """log K_up(mu) at the given counts (numbers or arrays that broadcast with mu): the evidence
    that the effect is above mu."""
    mu = np.asarray(mu, dtype=np.float64)
    if not np.all((-1 < mu) & (mu < 1)):
        raise OptionError(f"effect {mu} is not a difference of success rates strictly between -1 and 1")
    k, m, c, mu = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (b_only, a_only, concordant)), mu)
    ratio = mu / (1 + mu)
    # Per bet, the log factor of a pair of each kind: X = +1 gains g (1 - mu) / (1 + mu) = g (1 - 2 ratio),
    # X = -1 loses g, X = 0 loses g mu / (1 + mu); each bet's log capital is their sum over the pairs.
    if ratio.ndim == 0 or np.all(ratio == ratio.flat[0]):  # one effect for all counts: one matrix product
        r = float(ratio.flat[0]) if ratio.size else 0.0
        factors = np.log1p(np.stack([GRID * (1 - 2 * r), -GRID, -GRID * r]))
        terms = np.stack([k, m, c], axis=-1) @ factors
    else:
        r = ratio[..., None]
        terms = (k[..., None] * np.log1p(GRID * (1 - 2 * r)) + m[..., None] * np.log1p(-GRID)
                 + c[..., None] * np.log1p(-GRID * r))
    top = terms.max(axis=-1)
    return np.asarray(top + np.log(np.exp(terms - top[..., None]).sum(axis=-1)) - math.log(GRID.size),
                      dtype=np.float64)


def log_capital_down(mu: Any, b_only: Any, a_only: Any, concordant: Any) -> NDArray[np.float64]:
    """log K_down(mu): the evidence that the effect is below mu (K_up with the runs' roles swapped)."""
    return log_capital_up(-np.asarray(mu, dtype=np.float64), a_only, b_only, concordant)


def covers(mu: Any, b_only: Any, a_only: Any, concordant: Any, alpha: float) -> NDArray[np.bool_]:
    """Whether the confidence sequence at the given counts contains mu (no bisection: by monotonicity
    it holds mu exactly when neither capital has reached 2/alpha)."""
    bound = math.log(2 / alpha)
    return np.asarray((log_capital_up(mu, b_only, a_only, concordant) < bound)
                      & (log_capital_down(mu, b_only, a_only, concordant) < bound))


def _upper(b_only: Any, a_only: Any, concordant: Any, alpha: float) -> NDArray[np.float64]:
    """The largest effect K_down does not reject, per set of counts (arrays of one shape), by
    bisection. K_down never passes 1 at the sample mean (each factor is at most exp(-lambda
    (X_i - mean))), and grows without bound towards 1 unless every pair favoured B."""
    k, m, c = np.broadcast_arrays(*(np.asarray(v, dtype=np.int64) for v in (b_only, a_only, concordant)))
    n = np.maximum(k + m + c, 1)
    bound = math.log(2 / alpha)
    low, high = (k - m) / n, np.ones(k.shape)
    for _ in range(40):  # to 2^-40 of the starting interval, far below the digits shown
        mid = np.minimum((low + high) / 2, np.nextafter(1.0, 0.0))
        rejected = log_capital_down(mid, k, m, c) >= bound
        low, high = np.where(rejected, low, mid), np.where(rejected, mid, high)
    # Every pair only-B (or none at all): K_down stays at most one, nothing below 1 is rejected.
    return np.where(m + c == 0, 1.0, low)


def confidence_sequence(b_only: int, a_only: int, concordant: int, alpha: float = 0.05) -> tuple[float, float]:
    """The (1 - alpha) confidence sequence for the effect B - A after k only-B, m only-A and c
    concordant pairs (errored pairs count nowhere): [lower, upper]; [-1, 1] before any pair."""
    low, high = confidence_sequences(b_only, a_only, concordant, alpha)
    return float(low), float(high)


def confidence_sequences(b_only: Any, a_only: Any, concordant: Any,
                         alpha: float = 0.05) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """`confidence_sequence` for arrays of counts at once: (lower ends, upper ends)."""
    if not 0 < alpha < 1:
        raise OptionError(f"alpha {alpha} is not a probability strictly between 0 and 1; pass e.g. 0.05")
    if min(np.min(b_only), np.min(a_only), np.min(concordant)) < 0:
        raise OptionError(f"pair counts {b_only}, {a_only}, {concordant} include a negative one; pass counts of pairs")
    return -_upper(a_only, b_only, concordant, alpha), _upper(b_only, a_only, concordant, alpha)


def effect(both: int, only_a: int, only_b: int, neither: int, alpha: float = 0.05) -> dict[str, Any]:
    """summary.json's `sequential.effect`: the estimate of B - A over the pairs consumed, its
    anytime-valid interval (the one to quote after a stop) and the fixed-n one beside it."""
    paired = Paired(both, only_a, only_b, neither)
    if paired.n == 0:
        return {"pairs": 0, "estimate": None, "anytime_valid": None, "fixed_n": None}
    low, high = confidence_sequence(only_b, only_a, both + neither, alpha)
    return {"pairs": paired.n, "estimate": (only_b - only_a) / paired.n,
            "anytime_valid": {"interval": [low, high], "level": round(1 - alpha, 12), "method": METHOD},
            "fixed_n": {"ci95": list(newcombe_paired_ci(paired)), "level": 0.95, "method": FIXED_N_METHOD}}


# -- coverage by simulation --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Coverage:
    """How often each interval held the true effect over simulated comparisons under optional stopping.

    `peek`: stopped at the first look at which the fixed-n interval excluded 0 (else at the last
    look); `test`: stopped where the sequential test decided (else at its cap); `always`: the
    confidence sequence held the effect at every one of the pairs, start to cap."""

    effect: float
    runs: int
    peek_fixed: float
    peek_anytime: float
    test_fixed: float
    test_anytime: float
    always_anytime: float
    mean_width_fixed: float  # at the cap, all pairs in: what the anytime validity costs
    mean_width_anytime: float


def coverage(model: PairModel, alpha: float = 0.05, runs: int = 1000, pairs: int = 300, looks: int = 15,
             seed: int = 0) -> Coverage:
    """Simulate `runs` comparisons of i.i.d. pairs drawn from `model` (seeded numpy generator), each
    up to `pairs` pairs, under the three stopping rules of `Coverage`; `looks` evenly spaced looks
    for the peeking rule. The sequential test is core.sequential's at alpha, power 0.8 against
    |effect| (0.1 when the effect is 0), capped at `pairs`."""
    if runs < 1 or pairs < looks or looks < 1:
        raise OptionError(f"runs {runs}, pairs {pairs}, looks {looks}: pass at least one run and 1 <= looks <= pairs")
    rng = np.random.default_rng(seed)
    cells = model.cells()
    edges = np.cumsum([cells["both"], cells["only_a"], cells["only_b"]])
    kind = np.searchsorted(edges, rng.random((runs, pairs)), side="right")  # 0 both, 1 only A, 2 only B, 3 neither
    counts = np.cumsum(np.eye(4, dtype=np.int64)[kind], axis=1)  # runs x pairs x (both, only A, only B, neither)
    truth = model.effect

    def fixed_holds(row: NDArray[np.int64]) -> bool:
        low, high = newcombe_paired_ci(Paired(*(int(v) for v in row)))
        return low <= truth <= high

    def anytime_holds(rows: NDArray[np.int64]) -> NDArray[np.bool_]:
        return covers(truth, rows[..., 2], rows[..., 1], rows[..., 0] + rows[..., 3], alpha)

    # Peeking: the fixed-n interval looked at `looks` times, stopping the first time it excludes 0.
    at = np.linspace(pairs / looks, pairs, looks).round().astype(np.int64) - 1
    stop_peek = np.full(runs, at[-1])
    for run in range(runs):
        for index in at:
            low, high = newcombe_paired_ci(Paired(*(int(v) for v in counts[run, index])))
            if low > 0 or high < 0:
                stop_peek[run] = index
                break
    # The sequential test's own stop.
    design = Design.for_power(0.8, alpha, abs(truth) if truth else 0.1, pairs)
    stops, _ = decide(design, np.select([kind == 2, kind == 1], [1, -1], 0).astype(np.int8))
    stop_test = stops - 1
    rows = np.arange(runs)
    always = np.ones(runs, dtype=bool)
    for start in range(0, runs, 64):  # 64 runs at a time: pairs x 256 bets each
        always[start:start + 64] = anytime_holds(counts[start:start + 64]).all(axis=1)
    last = counts[:, -1]
    lower, upper = confidence_sequences(last[:, 2], last[:, 1], last[:, 0] + last[:, 3], alpha)
    fixed_final = [newcombe_paired_ci(Paired(*(int(v) for v in r))) for r in last]
    return Coverage(
        effect=truth, runs=runs,
        peek_fixed=float(np.mean([fixed_holds(counts[r, stop_peek[r]]) for r in rows])),
        peek_anytime=float(anytime_holds(counts[rows, stop_peek]).mean()),
        test_fixed=float(np.mean([fixed_holds(counts[r, stop_test[r]]) for r in rows])),
        test_anytime=float(anytime_holds(counts[rows, stop_test]).mean()),
        always_anytime=float(always.mean()),
        mean_width_fixed=float(np.mean([high - low for low, high in fixed_final])),
        mean_width_anytime=float(np.mean(upper - lower)))
