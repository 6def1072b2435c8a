"""LIBERO-plus control arms (--libero-plus-control): the drop per group and its interval (CPU)."""

from __future__ import annotations

import pytest

from pytest_libero.core.statistics import kish_effective_n, newcombe_difference_ci, wilson, wilson_limits


# -- statistics ---------------------------------------------------------------------------------

# Newcombe (Statistics in Medicine 17:873-890, 1998), Table II, method 10: the published limits of
# p1 - p2 for eight pairs of independent proportions, to four decimals.
NEWCOMBE_TABLE_II = [((56, 70), (48, 80), (0.0524, 0.3339)), ((9, 10), (3, 10), (0.1705, 0.8090)),
                     ((6, 7), (2, 7), (0.0582, 0.8062)), ((5, 56), (0, 29), (-0.0381, 0.1926)),
                     ((0, 10), (0, 20), (-0.1611, 0.2775)), ((0, 10), (0, 10), (-0.2775, 0.2775)),
                     ((10, 10), (0, 20), (0.6791, 1.0000)), ((10, 10), (0, 10), (0.6075, 1.0000))]


@pytest.mark.parametrize(("first", "second", "limits"), NEWCOMBE_TABLE_II)
def test_newcombe_hybrid_score_interval_matches_the_published_table(first, second, limits):
    low, high = newcombe_difference_ci(first[0] / first[1], first[1], second[0] / second[1], second[1])
    assert (round(low, 4), round(high, 4)) == limits


def test_wilson_limits_of_a_count_are_scipys_and_equal_weights_keep_the_count():
    for successes, trials in ((0, 5), (3, 7), (7, 7), (13, 40)):
        assert list(wilson_limits(successes / trials, trials)) == wilson(successes, trials)["ci95"]
    assert kish_effective_n([0.25] * 8) == pytest.approx(8)
    assert kish_effective_n([3, 1]) == pytest.approx(16 / 10)
