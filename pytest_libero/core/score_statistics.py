"""Statistics of a bounded score per episode (goal progress, in [0, 1]): the mean with a Student t
interval, and the exact paired sign-flip (permutation) test of two runs' scores.

Why these: progress takes few values (0, 1/2, 1 for a two-predicate goal), with many ties and
zeros, so rank tests (Wilcoxon's signed-rank) have to drop or split the ties and test a median-like
shift, not the mean. The sign-flip test tests the very quantity reported, the mean paired
difference: under the null hypothesis that A and B are exchangeable within each pair, every
difference is as likely with either sign, and the p-value is the share of the 2^n sign patterns
whose |sum| is at least the observed one. Scores in [0, 1] are bounded, so no distribution is
assumed; the distribution is enumerated exactly (not sampled), so the p-value is reproducible.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Sequence

# Student t 0.975 quantiles for 1..9 degrees of freedom (scipy.stats.t.ppf(0.975, df)); from 10 on,
# the Cornish-Fisher expansion in 1/df (Abramowitz and Stegun 26.7.5) is within 1e-5 of scipy's
# (tests/test_score_statistics.py checks it): a summary of thousands of groups never imports scipy.
_T975_SMALL = (12.706204736174694, 4.302652729749462, 3.1824463052837078, 2.7764451051977934, 2.5705818356363146,
               2.4469118511449786, 2.364624251592784, 2.306004135204166, 2.262157162798205)
_Z975 = 1.959963984540054


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` >= 1 degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom {df}: need at least 1")
    if df <= len(_T975_SMALL):
        return _T975_SMALL[df - 1]
    z = _Z975
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def mean_t_interval(values: Sequence[float]) -> dict[str, Any]:
    """{mean, ci95, n} of scores in [0, 1]: the Student t 95% interval of the mean, clipped to [0, 1]
    (None with fewer than two values). When every value is the same the interval has no width: it
    says the episodes agreed, not that the mean is known exactly."""
    n = len(values)
    if n == 0:
        return {"mean": None, "ci95": None, "n": 0}
    mean = math.fsum(values) / n
    if n < 2:
        return {"mean": mean, "ci95": None, "n": n}
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = t975(n - 1) * math.sqrt(variance / n)
    return {"mean": mean, "ci95": [max(0.0, mean - half), min(1.0, mean + half)], "n": n}


def sign_flip_p(differences: Sequence[Fraction]) -> float:
    """The exact two-sided p-value of the paired sign-flip test of `differences` (B - A per pair,
    exact fractions): P(|sum of randomly signed differences| >= |observed sum|) over all 2^n
    patterns. Zero differences are the same under either sign. 1.0 when all are zero."""
    nonzero = [d for d in differences if d != 0]
    if not nonzero:
        return 1.0
    scale = math.lcm(*(d.denominator for d in nonzero))
    units = [abs(int(d * scale)) for d in nonzero]
    observed = abs(sum(int(d * scale) for d in nonzero))
    import numpy as np
    from scipy.stats import binom

    # The sum's distribution on the integer lattice, offset by its lowest value (-total): each
    # distinct magnitude v, met c times, adds v * (2j - c) with j ~ Binomial(c, 1/2).
    total = sum(units)
    pmf = np.zeros(2 * total + 1)
    pmf[0] = 1.0  # index i holds the value i - total once every magnitude is added
    counts: dict[int, int] = {}
    for v in units:
        counts[v] = counts.get(v, 0) + 1
    span = 0  # highest index in use
    for v, c in counts.items():
        weights = binom.pmf(np.arange(c + 1), c, 0.5)
        grown = np.zeros_like(pmf)
        for j, w in enumerate(weights):  # shift by 2 v j: the index of the value -v c + 2 v j
            shift = 2 * v * j
            grown[shift:shift + span + 1] += w * pmf[:span + 1]
        pmf, span = grown, span + 2 * v * c
    values = np.arange(2 * total + 1) - total
    return float(min(1.0, pmf[np.abs(values) >= observed].sum()))
