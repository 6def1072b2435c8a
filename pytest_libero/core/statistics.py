"""Statistics of success rates: Wilson score intervals, McNemar's exact test, and Newcombe's
paired-difference interval (method 10; Newcombe, Statistics in Medicine 17:2635-2650, 1998).

scipy provides the binomial test; the Wilson limits are its closed form (`wilson`); Newcombe's method 10 is written here
because no maintained library offers it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping

# The two-sided 95% normal quantile, scipy.special.ndtri(0.975), as a constant: the Wilson interval is
# a closed form (Newcombe 1998, method 3), computed here in the same steps as scipy's
# `binomtest(k, n).proportion_ci(method="wilson")` so the limits are the same floats (tests check it),
# without importing scipy or building a test result per group (a 10,000-episode report has thousands).
Z95 = 1.959963984540054


@functools.lru_cache(maxsize=65536)
def _wilson_limits(successes: int, trials: int) -> tuple[float, float]:
    p = successes / trials
    z2 = Z95**2
    denom = 2 * (trials + z2)
    center = (2 * trials * p + z2) / denom
    delta = Z95 / denom * math.sqrt(4 * trials * p * (1 - p) + z2)
    low = 0.0 if successes == 0 else center - delta
    high = 1.0 if successes == trials else center + delta
    return float(low), float(high)


def wilson(successes: int, trials: int) -> dict[str, Any]:
    """Rate with a 95% Wilson score interval (scipy's formula and steps; see Z95)."""
    if trials == 0:
        return {"rate": None, "ci95": None, "successes": 0, "trials": 0}
    low, high = _wilson_limits(successes, trials)
    return {"rate": successes / trials, "ci95": [low, high], "successes": successes, "trials": trials}


ALPHA = 0.05


@dataclass(frozen=True, slots=True)
class Paired:
    """Paired outcomes: both succeeded, only A, only B, neither."""

    both: int
    only_a: int
    only_b: int
    neither: int

    @property
    def n(self) -> int:
        return self.both + self.only_a + self.only_b + self.neither

    @property
    def discordant(self) -> int:
        return self.only_a + self.only_b


def mcnemar_exact_p(paired: Paired) -> float:
    """Two-sided exact McNemar p-value: binomial test of the discordant pairs against 1/2."""
    if paired.discordant == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(paired.only_b, paired.discordant, 0.5).pvalue)


def min_discordant_for_significance(alpha: float = ALPHA) -> int:
    """Fewest discordant pairs with which the two-sided exact test can reach p < alpha.

    The smallest p-value k discordant pairs allow (all on one side) is 2 * 0.5**k.
    """
    k = 1
    while 2 * 0.5**k >= alpha:
        k += 1
    return k


def newcombe_paired_ci(paired: Paired) -> tuple[float, float]:
    """95% CI of rate_B - rate_A by Newcombe's method 10 (score interval for paired proportions)."""
    e, f, g, h, n = paired.both, paired.only_b, paired.only_a, paired.neither, paired.n
    # In Newcombe's notation p1 is B's rate and p2 A's, so the interval is for B - A.
    p1, p2 = (e + f) / n, (e + g) / n
    l1, u1 = wilson(e + f, n)["ci95"]  # n > 0: analyse pairs at least one cell
    l2, u2 = wilson(e + g, n)["ci95"]
    denominator = (e + f) * (g + h) * (e + g) * (f + h)
    phi = 0.0
    if denominator > 0:
        cross = e * h - f * g
        # Newcombe's correction of the phi coefficient: shrink a positive association by n/2.
        corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
        phi = corrected / math.sqrt(denominator)
    difference = p1 - p2
    delta = math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    epsilon = math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0))
    return max(-1.0, difference - delta), min(1.0, difference + epsilon)


def verdict(paired: Paired, p_value: float, alpha: float = ALPHA) -> str:
    if paired.discordant < min_discordant_for_significance(alpha):
        return "underpowered"
    if p_value < alpha:
        return "better" if paired.only_b > paired.only_a else "worse"
    return "no detectable difference"


def analyse(paired: Paired) -> dict[str, Any]:
    """The row of one group: table, rates, difference B - A with its CI, McNemar p, verdict."""
    if paired.n == 0:
        return {"pairs": 0, "verdict": "no common cells"}
    p_value = mcnemar_exact_p(paired)
    low, high = newcombe_paired_ci(paired)
    return {"pairs": paired.n, "both": paired.both, "only_a": paired.only_a, "only_b": paired.only_b,
            "neither": paired.neither, "rate_a": (paired.both + paired.only_a) / paired.n,
            "rate_b": (paired.both + paired.only_b) / paired.n,
            "difference": (paired.only_b - paired.only_a) / paired.n, "ci95": [low, high],
            "mcnemar_exact_p": p_value, "verdict": verdict(paired, p_value)}


def holm_adjust(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm's step-down adjusted p-values of a family of tests (Holm, Scandinavian Journal of
    Statistics 6:65-70, 1979): sorted ascending, the i-th of m (from 0) is max over j <= i of
    min(1, (m - j) p_(j)). Rejecting where the adjusted p < alpha keeps the chance of any false
    rejection in the family at most alpha, whatever the dependence between the tests."""
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    m, running, adjusted = len(ordered), 0.0, {}
    for j, (name, p_value) in enumerate(ordered):
        # The running maximum keeps the adjusted values in the order of the raw ones.
        running = max(running, min(1.0, (m - j) * p_value))
        adjusted[name] = running
    return adjusted


def rate_text(stat: Mapping[str, Any]) -> str:
    """A Wilson rate as text: `62.5% [30.6, 86.3] (n=8)`; '-' without trials."""
    if stat["rate"] is None:
        return "-"
    low, high = stat["ci95"]
    return f"{100 * stat['rate']:.1f}% [{100 * low:.1f}, {100 * high:.1f}] (n={stat['trials']})"


# -- independent proportions: a perturbation's drop against a control arm --------------------

def wilson_limits(rate: float, trials: float) -> tuple[float, float]:
    """95% Wilson score limits of a rate observed over `trials` (> 0), which may be an effective
    number of trials (kish_effective_n) rather than a count: the score interval's formula holds for
    any n, and with an integer n it gives wilson()'s limits."""
    z2 = Z95**2
    denom = 2 * (trials + z2)
    center = (2 * trials * rate + z2) / denom
    delta = Z95 / denom * math.sqrt(max(4 * trials * rate * (1 - rate) + z2, 0.0))
    low = 0.0 if rate <= 0 else max(0.0, center - delta)
    high = 1.0 if rate >= 1 else min(1.0, center + delta)
    return low, high


def kish_effective_n(weights: list[float]) -> float:
    """Kish's effective sample size (sum w)^2 / sum w^2 of a weighted mean of 0/1 outcomes: the
    number of equally weighted trials that would estimate a rate as precisely. Equal weights give
    the count itself."""
    total = sum(weights)
    return total * total / sum(w * w for w in weights)


def newcombe_difference_ci(p1: float, n1: float, p2: float, n2: float) -> tuple[float, float]:
    """95% CI of p1 - p2 for two independent proportions by Newcombe's hybrid score interval
    (method 10; Newcombe, Statistics in Medicine 17:873-890, 1998): each rate's Wilson limits,
    combined as the square root of the sum of squared distances on the side each bound needs."""
    l1, u1 = wilson_limits(p1, n1)
    l2, u2 = wilson_limits(p2, n2)
    difference = p1 - p2
    low = difference - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = difference + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, low), min(1.0, high)
