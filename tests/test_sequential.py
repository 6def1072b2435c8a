"""The sequential paired test (pytest_libero.core.sequential): its statistics checked by hand and
by their martingale identities, the pair-by-pair state against the vectorised simulation, and
thousands of simulated comparisons at known rates: the false-positive rate, the savings against
the fixed-n McNemar test at equal power, the stratified order, and the `power` command.

Simulation tolerances are three standard errors of the simulated proportion or mean; every
simulation has a fixed seed, so the figures are the same on every run."""

from __future__ import annotations

import json
import math
import random
import re

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import binomtest

from pytest_libero.__main__ import main
from pytest_libero.core import sequential
from pytest_libero.core.sequential import (Decision, Design, PairModel, SequentialError, SequentialTest, decide,
                                           fixed_n_pairs, fixed_n_power, log_e_values, log_futility, simulate,
                                           stratified_order)
from pytest_libero.errors import OptionError

ALPHA = 0.05


def _draw(model: PairModel, runs: int, pairs: int, seed: int) -> np.ndarray:
    """Paired outcomes, +1 only B, -1 only A, 0 concordant, drawn i.i.d. from `model`."""
    u = np.random.default_rng(seed).random((runs, pairs))
    return np.where(u < model.only_b, 1, np.where(u < model.discordance, -1, 0)).astype(np.int8)


# --- the statistics ---------------------------------------------------------------------------------------------

def test_e_values_by_hand():
    # 5 pairs all favouring B: E_B = 2 * int_{1/2}^1 (2p)^5 dp = 63/6; E_A = 2 * int_0^{1/2} (2p)^5 dp = 1/6
    e_b, e_a = log_e_values(5, 0)
    assert math.exp(e_b) == pytest.approx(63 / 6, rel=1e-12)
    assert math.exp(e_a) == pytest.approx(1 / 6, rel=1e-12)
    assert log_e_values(0, 0) == (pytest.approx(0.0, abs=1e-12), pytest.approx(0.0, abs=1e-12))
    for k, m in [(3, 7), (12, 4), (30, 29)]:
        by_quadrature = 2 * integrate.quad(lambda p, k=k, m=m: (2 * p) ** k * (2 - 2 * p) ** m, 0.5, 1)[0]
        assert math.exp(log_e_values(k, m)[0]) == pytest.approx(by_quadrature, rel=1e-9)
        assert log_e_values(m, k)[1] == pytest.approx(log_e_values(k, m)[0], rel=1e-12)


def test_futility_by_hand():
    delta = 0.1
    lams = np.array(sequential.FUTILITY_GRID) / (1 - delta)
    f_b, f_a = log_futility(2, 1, 3, delta)
    by_hand = np.mean((1 - lams * (1 - delta)) ** 2 * (1 + lams * (1 + delta)) * (1 + lams * delta) ** 3)
    assert math.exp(f_b) == pytest.approx(by_hand, rel=1e-12)
    assert f_a == pytest.approx(log_futility(1, 2, 3, delta)[0], rel=1e-12)


def test_e_processes_are_martingales_where_their_guarantees_need_it():
    # Under no difference a discordant pair favours B or A with chance 1/2 each: E_B's mean after it is E_B.
    for k in range(0, 40, 3):
        for m in range(0, 40, 5):
            now = math.exp(log_e_values(k, m)[0])
            after = 0.5 * math.exp(log_e_values(k + 1, m)[0]) + 0.5 * math.exp(log_e_values(k, m + 1)[0])
            assert after == pytest.approx(now, rel=1e-9)
    # At an effect of exactly delta (any discordance), F_B's mean after one more pair is F_B.
    delta = 0.1
    for only_b, only_a in [(0.15, 0.05), (0.5, 0.4), (0.1, 0.0)]:
        assert only_b - only_a == pytest.approx(delta)
        for k, m, c in [(0, 0, 0), (3, 5, 20), (10, 2, 7)]:
            now = math.exp(log_futility(k, m, c, delta)[0])
            after = (only_b * math.exp(log_futility(k + 1, m, c, delta)[0])
                     + only_a * math.exp(log_futility(k, m + 1, c, delta)[0])
                     + (1 - only_b - only_a) * math.exp(log_futility(k, m, c + 1, delta)[0]))
            assert after == pytest.approx(now, rel=1e-9)


# --- the state -----------------------------------------------------------------------------------------------------

def test_state_stops_after_eight_straight_wins_and_counts_errors_apart():
    # E_B after k straight wins is (2^(k+1) - 1)/(k + 1): 255/8 < 40 = 2/alpha <= 511/9.
    state = SequentialTest(Design(alpha=ALPHA))
    for i in range(7):
        state = state.update(True, True, f"both-{i}").update(False, True, f"win-{i}").update(None, True, f"err-{i}")
    assert state.decision is Decision.CONTINUE
    assert (state.pairs, state.steps[-1].errored) == (14, 7)
    assert state.statistic == pytest.approx(math.log(255 / 8))
    state = state.update(False, True, "win-7")
    assert state.decision is Decision.B_BETTER
    assert state.statistic == pytest.approx(math.log(511 / 9)) and state.statistic >= state.design.boundary
    with pytest.raises(SequentialError, match="stopped at cell 22 .B better.; next must not run"):
        state.update(True, False, "next")
    record = json.loads(json.dumps(state.record(), allow_nan=False))
    assert (record["decision"], record["stopped_after"], record["pairs"], record["errored"]) == ("B better", 22, 15, 7)
    assert [s["pair"] for s in record["steps"][:3]] == ["both", "only B", "errored"]
    assert record["steps"][2]["log_e_b"] == record["steps"][1]["log_e_b"]  # an error changes nothing
    assert record["design"]["boundary_log_e"] == pytest.approx(math.log(40))


def test_state_mirrors_for_a_and_honours_the_cap():
    state = SequentialTest(Design())
    for i in range(8):
        state = state.update(True, False, str(i))
    assert state.decision is Decision.A_BETTER
    capped = SequentialTest(Design(max_pairs=3))
    for _ in range(3):
        capped = capped.update(True, True)
    assert capped.decision is Decision.UNDECIDED and capped.pairs == 3


@pytest.mark.parametrize("design", [Design(), Design(futility=0.05, min_effect=0.2), Design(max_pairs=120)])
def test_pair_by_pair_state_and_vectorised_simulation_agree(design):
    outcomes = _draw(PairModel(0.5, 0.05, 0.3), runs=30, pairs=300, seed=7)
    outcomes[outcomes.shape[0] // 2:, ::9] = 9  # errored cells: neither concordant nor discordant
    stops, decisions = decide(design, outcomes)
    for row, stop, decision in zip(outcomes, stops, decisions, strict=True):
        state = SequentialTest(design)
        for x in row:
            state = state.update(*{1: (False, True), -1: (True, False), 0: (True, True), 9: (None, True)}[int(x)])
            if state.decision is not Decision.CONTINUE:
                break
        assert (len(state.steps), state.decision) == (stop, decision)
    assert len(set(decisions)) >= 2  # more than one way of stopping compared


@pytest.mark.parametrize("kwargs, fragment", [
    ({"alpha": 0}, "alpha 0 is not a probability"),
    ({"min_effect": 1.5}, "minimum effect 1.5"),
    ({"futility": 1}, "futility level 1"),
    ({"max_pairs": 0}, "max pairs 0"),
])
def test_bad_designs_are_named(kwargs, fragment):
    with pytest.raises(OptionError, match=re.escape(fragment)):
        Design(**kwargs)


# --- fixed-n McNemar -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_critical_counts_match_scipys_exact_test(alpha):
    discordant = np.arange(0, 70)
    crit = sequential._critical_wins(discordant, alpha)
    for d, c in zip(discordant, crit, strict=True):
        reaching = [k for k in range(d + 1) if k > d / 2 and binomtest(k, d, 0.5).pvalue < alpha]
        if reaching:
            assert c == reaching[0]
        else:
            assert c > d  # no count of d pairs reaches significance


def test_fixed_n_pairs_is_where_the_exact_test_reaches_the_power():
    model = PairModel(0.6, 0.1, 0.2)
    n = fixed_n_pairs(model, 0.8)
    assert fixed_n_power(model, n) >= 0.8 > fixed_n_power(model, n - 1)
    # Monte Carlo with scipy's binomtest, as `compare` applies it (B better when p < alpha and only B > only A).
    outcomes = _draw(model, runs=3000, pairs=n, seed=3)
    b, a = (outcomes == 1).sum(axis=1), (outcomes == -1).sum(axis=1)
    tables = {(int(i), int(j)) for i, j in zip(b, a, strict=True)}
    p_value = {(i, j): binomtest(i, i + j, 0.5).pvalue if i + j else 1.0 for i, j in tables}
    found = np.mean([p_value[int(i), int(j)] < ALPHA and i > j for i, j in zip(b, a, strict=True)])
    expected = fixed_n_power(model, n)
    assert abs(found - expected) <= 3 * math.sqrt(expected * (1 - expected) / 3000)


@pytest.mark.parametrize("args, fragment", [
    (["--baseline", "1.2", "--effect", "0.1", "--discordance", "0.2"], "baseline 1.2 is not a success rate"),
    (["--baseline", "0.6", "--effect", "0.5", "--discordance", "0.5"], "gives B a rate of 1.1"),
    (["--baseline", "0.6", "--effect", "0.1", "--discordance", "0.05"], "discordance 0.05 is impossible"),
    (["--baseline", "0.6", "--effect", "0.1", "--discordance", "0.9"], "at most 0.7"),
    (["--baseline", "0.6", "--effect", "0", "--discordance", "0.2"], "effect 0: no number of pairs"),
    (["--baseline", "0.6", "--effect", "0.1", "--discordance", "0.2", "--power", "1"], "power 1.0 is not"),
    (["--baseline", "0.6", "--effect", "0.1", "--discordance", "0.2", "--alpha", "2"], "alpha 2.0 is not"),
])
def test_power_command_refuses_bad_values(args, fragment, capsys):
    assert main(["power", *args]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "pass" in err


# --- simulations at known rates -----------------------------------------------------------------------------------

@pytest.mark.parametrize("model, runs", [(PairModel(0.6, 0.0, 0.2), 4000), (PairModel(0.7, 0.0, 0.4), 2000)])
def test_false_positive_rate_is_at_most_alpha(model, runs):
    sim = simulate(Design.for_power(0.8, ALPHA, 0.1), model, runs=runs, seed=11)
    false_positives = sim.rate(Decision.B_BETTER) + sim.rate(Decision.A_BETTER)
    print(f"\nno difference, {model}: false positives {false_positives:.4f}, futile {sim.rate(Decision.FUTILE):.4f}, "
          f"mean {sim.mean_pairs:.1f} pairs, p95 {sim.p95_pairs}")
    assert false_positives <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs)


def test_looking_after_every_pair_keeps_alpha_where_mcnemar_does_not():
    # Without futility the test looks after every one of 300 pairs and keeps its false-positive rate;
    # McNemar's exact test looked at as often on the same pairs does not: the simulation can tell.
    runs = 2000
    outcomes = _draw(PairModel(0.6, 0.0, 0.2), runs, 300, seed=12)
    _, decisions = decide(Design(alpha=ALPHA, futility=1e-12), outcomes)
    ours = np.mean([d in (Decision.B_BETTER, Decision.A_BETTER) for d in decisions])
    b, a = np.cumsum(outcomes == 1, axis=1), np.cumsum(outcomes == -1, axis=1)
    crit = sequential._critical_wins(np.arange(301), ALPHA)[b + a]
    peeking = np.mean(((b >= crit) | (a >= crit)).any(axis=1))
    print(f"\nlooking after every pair of 300: false positives {ours:.4f}, McNemar's exact test {peeking:.4f}")
    assert ours <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs)
    assert peeking > 2 * ALPHA


@pytest.mark.parametrize("power", [0.8, 0.9])
def test_sequential_saves_thirty_percent_against_fixed_n_at_equal_power(power):
    model = PairModel(0.6, 0.1, 0.2)
    runs = 4000
    sim = simulate(Design.for_power(power, ALPHA, 0.1), model, runs=runs, seed=21)
    reached = sim.rate(Decision.B_BETTER)
    fixed = fixed_n_pairs(model, reached)
    saving = 1 - sim.mean_pairs / fixed
    print(f"\ndesign power {power}: power {reached:.4f}, wrong direction {sim.rate(Decision.A_BETTER):.4f}, "
          f"mean {sim.mean_pairs:.1f} pairs, p95 {sim.p95_pairs}, fixed-n at that power {fixed}, "
          f"fixed-n at {power} {fixed_n_pairs(model, power)}, saving {100 * saving:.1f}%")
    assert reached >= power - 3 * math.sqrt(power * (1 - power) / runs)  # the design's guarantee: 1 - beta
    assert sim.mean_pairs <= 0.7 * fixed


def test_power_command_agrees_with_the_simulation(capsys):
    assert main(["power", "--baseline", "0.6", "--effect", "0.1", "--discordance", "0.2", "--runs", "1000"]) == 0
    out = capsys.readouterr().out
    model = PairModel(0.6, 0.1, 0.2)
    assert re.search(rf"McNemar's exact test \(alpha 0.05, power 0.8\): {fixed_n_pairs(model, 0.8)} pairs", out)
    found = re.search(r"effect \+0.1: mean (\d+) pairs, 95th percentile (\d+); power ([\d.]+)%", out)
    null = re.search(r"no difference: mean (\d+) pairs, 95th percentile (\d+); B better ([\d.]+)%, A better "
                     r"([\d.]+)%", out)
    assert found and null, out
    # An independent simulation (another seed, four times the runs) agrees within sampling error.
    check = simulate(Design.for_power(0.8, ALPHA, 0.1), model, runs=4000, seed=99)
    spread = float(check.pairs.std())
    assert abs(int(found[1]) - check.mean_pairs) <= 3 * spread * math.sqrt(1 / 1000 + 1 / 4000) + 0.5
    assert abs(int(found[2]) - check.p95_pairs) <= 0.15 * check.p95_pairs
    power = check.rate(Decision.B_BETTER)
    assert abs(float(found[3]) / 100 - power) <= 3 * math.sqrt(power * (1 - power) * (1 / 1000 + 1 / 4000)) + 1e-3
    assert float(null[3]) + float(null[4]) <= 100 * ALPHA


# --- the stratified order ---------------------------------------------------------------------------------------------

def _uneven_prefix(order, task_of, totals):
    """The first prefix at which some task with cells left is more than one cell behind another."""
    counts = dict.fromkeys(totals, 0)
    for i, cell in enumerate(order, 1):
        counts[task_of[cell]] += 1
        open_counts = [counts[t] for t in totals if counts[t] < totals[t]]
        if open_counts and max(counts.values()) - min(open_counts) > 1:
            return i
    return None


@pytest.mark.parametrize("sizes", [[50] * 10, [50, 50, 20, 3, 1], [7], [1, 2, 3, 4, 5, 6, 7, 8, 9]])
def test_stratified_order_covers_tasks_evenly_at_every_prefix(sizes):
    cells = [(f"s-t{t:02d}-s{i:02d}", f"task{t}") for t, size in enumerate(sizes) for i in range(size)]
    task_of = dict(cells)
    totals = {f"task{t}": size for t, size in enumerate(sizes)}
    order = stratified_order(cells, seed=5)
    assert sorted(order) == sorted(task_of)
    assert _uneven_prefix(order, task_of, totals) is None
    shuffled = list(cells)
    random.Random(1).shuffle(shuffled)
    assert stratified_order(shuffled, seed=5) == order  # a function of the set, not of its listing
    if len(sizes) > 1:
        assert stratified_order(cells, seed=6) != order
        # The check can fail: a plain shuffle of the same cells is uneven somewhere.
        assert _uneven_prefix([c for c, _ in shuffled], task_of, totals) is not None


def test_stratified_order_shuffles_within_and_across_tasks_and_refuses_duplicates():
    cells = [(f"t{t}-s{i:02d}", f"t{t}") for t in range(10) for i in range(50)]
    order = stratified_order(cells, seed=1)
    first_round = order[:10]
    assert sorted(first_round) != list(first_round)  # task order shuffled
    assert sum(cell.endswith("-s00") for cell in first_round) < 10  # init states shuffled
    assert stratified_order([], seed=1) == ()
    with pytest.raises(SequentialError, match="'t0-s00' is listed twice"):
        stratified_order([("t0-s00", "t0"), ("t0-s00", "t0")], seed=1)


def test_power_command_shows_what_a_cap_costs(capsys):
    assert main(["power", "--baseline", "0.6", "--effect", "0.1", "--discordance", "0.2", "--max-pairs", "5",
                 "--runs", "100"]) == 0
    out = capsys.readouterr().out
    assert "at most 5 pairs" in out and "undecided 100.0%" in out and "power 0.0%: none comparable" in out
