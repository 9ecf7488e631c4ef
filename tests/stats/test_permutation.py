"""Known-answer tests of the paired permutation test, Wilcoxon and win/loss/tie counts.

Expected values come from brute-force enumeration of every sign assignment in exact rational
arithmetic (each value read as the decimal it prints as, so 0.1 + 0.2 == 0.3 there), or from hand
computation in comments; never from the code under test's own method.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from harnesscheck.stats.paired import EXACT_MAX_N, wilcoxon_test, wins_losses_ties
from harnesscheck.stats.permutation import PairedTestResult, paired_permutation_test


def _enumerated_permutation_p(d: np.ndarray) -> float:
    """#{s in {-1,+1}^n : |sum(s d)| >= |sum(d)|} / 2^n, every assignment, exact arithmetic."""
    exact = [Fraction(repr(float(x))) for x in d]
    observed = abs(sum(exact))
    hits = sum(
        abs(sum(s * x for s, x in zip(signs, exact))) >= observed
        for signs in itertools.product((1, -1), repeat=len(exact))
    )
    return hits / 2 ** len(exact)


def _midranks(values: list[Fraction]) -> list[Fraction]:
    """Rank 1 for the smallest; tied values share the mean of the ranks they span."""
    ordered = sorted(values)
    out = []
    for v in values:
        first = ordered.index(v) + 1
        last = first + ordered.count(v) - 1
        out.append(Fraction(first + last, 2))
    return out


def _enumerated_wilcoxon_p(d: np.ndarray) -> float:
    """Two-sided exact signed-rank p: zeros dropped, midranks, every sign assignment of the ranks."""
    nz = [Fraction(repr(float(x))) for x in d if x != 0]
    ranks = _midranks([abs(x) for x in nz])
    centre = sum(ranks) / 2
    observed = abs(sum(r for r, x in zip(ranks, nz) if x > 0) - centre)
    hits = sum(
        abs(sum(r for r, keep in zip(ranks, signs) if keep) - centre) >= observed
        for signs in itertools.product((True, False), repeat=len(ranks))
    )
    return hits / 2 ** len(ranks)


@pytest.mark.parametrize("seed", range(8))
def test_exact_agrees_with_enumeration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 12))
    a = rng.integers(10, 40, size=n).astype(float)
    # integer counts give ties and zero differences, the awkward cases
    b = a + rng.integers(-6, 9, size=n)
    ours = paired_permutation_test(a, b)
    assert ours.method == "exact"
    assert ours.n == n
    assert ours.statistic == pytest.approx(float(np.mean(b - a)))
    assert ours.p_value == pytest.approx(_enumerated_permutation_p(b - a), abs=1e-12)


def test_exact_agrees_with_enumeration_on_continuous_data() -> None:
    rng = np.random.default_rng(42)
    a = rng.normal(size=10)
    b = a + rng.normal(loc=0.4, size=10)
    assert paired_permutation_test(a, b).p_value == pytest.approx(_enumerated_permutation_p(b - a), abs=1e-12)


def test_hand_computed_case() -> None:
    # d = b - a = [4, -1, 2, 3, 0]; observed sum 8 (mean 1.6). The zero flips to itself, so only the
    # 2^4 = 16 sign assignments of (4, 1, 2, 3) matter. Writing the negated subset's total as s, an
    # assignment's sum is (4+1+2+3) - 2s = 10 - 2s, and |10 - 2s| >= 8 iff s <= 1 or s >= 9:
    #   s <= 1: {} (s=0), {1} (s=1)          -> 2 assignments
    #   s >= 9: {2,3,4} (s=9), {1,2,3,4} (10) -> 2 assignments
    # so p = 4/16 = 0.25.
    a = [10, 11, 5, 7, 9]
    b = [14, 10, 7, 10, 9]
    res = paired_permutation_test(a, b)
    assert res == PairedTestResult(statistic=1.6, p_value=0.25, n=5, method="exact", resamples=16)


def test_differences_alone() -> None:
    # [1, 2, 3]: only all-plus (sum 6) and all-minus (-6) reach |sum| >= 6, so p = 2/8
    assert paired_permutation_test([1, 2, 3]).p_value == pytest.approx(2 / 8)


@pytest.mark.parametrize("scale", [1e-12, 1e12])
def test_p_is_invariant_to_the_data_scale(scale: float) -> None:
    # d = 1..10, all one way: only the all-plus and all-minus assignments reach |sum| = 55, p = 2/2^10
    ten = np.arange(1.0, 11.0)
    assert paired_permutation_test(ten * scale).p_value == 2 / 1024
    rng = np.random.default_rng(9)
    cases = [
        ten,
        np.array([1, 1, -1, 2, 2, -2, 3, 0], dtype=float),  # ties and a zero: many tied assignments
        rng.normal(loc=0.3, size=12),
        np.array([0.1, 0.2, -0.3, 0.4, -0.1, 0.7]),  # sums that tie only up to rounding
    ]
    for d in cases:
        at_one = paired_permutation_test(d).p_value
        assert at_one == pytest.approx(_enumerated_permutation_p(d), abs=1e-12)
        assert paired_permutation_test(d * scale).p_value == at_one, (d, scale)
        # Monte Carlo too: the same seed draws the same signs, so the same count must come out
        mc = paired_permutation_test(d, exact_limit=1, resamples=2_000, seed=4).p_value
        assert paired_permutation_test(d * scale, exact_limit=1, resamples=2_000, seed=4).p_value == mc


def test_symmetric_differences_give_p_near_one() -> None:
    d = np.array([1, -1, 2, -2, 3, -3, 5, -5, 8, -8, 13, -13], dtype=float)
    assert paired_permutation_test(d).p_value == pytest.approx(1.0)
    # large n: Monte Carlo, still p = 1 since every assignment is as extreme as a zero mean
    big = np.concatenate([np.arange(1, 31), -np.arange(1, 31)]).astype(float)
    res = paired_permutation_test(big)
    assert res.method == "monte-carlo"
    assert res.p_value == pytest.approx(1.0)
    # near-symmetric: one pair off by one, p stays high
    near = d.copy()
    near[0] = 2
    assert paired_permutation_test(near).p_value > 0.9


def test_fifty_tasks_all_one_way() -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(30, 55, size=50).astype(float)
    b = a - rng.integers(5, 30, size=50)
    res = paired_permutation_test(a, b)
    assert res.method == "monte-carlo"
    assert res.p_value < 0.001
    # +1 rule: never zero, exactly 1/(1+R) when no draw is as extreme
    assert res.p_value == pytest.approx(1 / (1 + res.resamples))


def test_monte_carlo_is_seeded_and_close_to_exact() -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(size=16)
    b = a + rng.normal(loc=0.3, size=16)
    exact = paired_permutation_test(a, b)
    mc1 = paired_permutation_test(a, b, exact_limit=1, resamples=20_000, seed=5)
    mc2 = paired_permutation_test(a, b, exact_limit=1, resamples=20_000, seed=5)
    assert exact.method == "exact" and mc1.method == "monte-carlo"
    assert mc1 == mc2
    assert mc1.p_value == pytest.approx(exact.p_value, abs=0.015)


def test_all_zero_differences() -> None:
    res = paired_permutation_test([3, 4, 5], [3, 4, 5])
    assert res.p_value == 1.0 and res.statistic == 0.0


def test_bad_input() -> None:
    with pytest.raises(ValueError):
        paired_permutation_test([1, 2], [1, 2, 3])
    with pytest.raises(ValueError):
        paired_permutation_test([], [])


def test_wins_losses_ties() -> None:
    wlt = wins_losses_ties([5, 4, 3, 3], [1, 6, 3, 2])
    assert (wlt.wins, wlt.losses, wlt.ties) == (2, 1, 1)
    assert wlt.n == 4 and str(wlt) == "2/1/1"


def test_wilcoxon_exact_with_ties_hand_computed() -> None:
    # d = [1, 1, 1, 1, 1]: all five tie, midrank 3 each, W+ = 15, W- = 0, T = 15 (centre 7.5).
    # W+ = 3 * (number of plus signs); |W+ - 7.5| >= 7.5 only for all plus or all minus: 2/32.
    res = wilcoxon_test([1, 1, 1, 1, 1])
    assert (res.p_value, res.statistic, res.method, res.resamples) == (0.0625, 0.0, "wilcoxon-exact", 32)
    # d = [3, 3, -3, 1, 2, 2, 0, 0]: zeros dropped, k = 6. |d| ranks: 1 -> 1; 2, 2 -> 2.5 each;
    # 3, 3, 3 -> 5 each. W+ = 5 + 5 + 1 + 2.5 + 2.5 = 16, W- = 5, T = 21 (centre 10.5), |16 - 10.5| = 5.5.
    # By symmetry p = 2 * #{subsets of the ranks (5, 5, 5, 1, 2.5, 2.5) summing to <= 5} / 64; those are
    # {} , {1}, {2.5} x2, {1, 2.5} x2, {2.5, 2.5}, {5} x3 = 10 subsets, so p = 20/64 = 0.3125.
    res = wilcoxon_test([3, 3, -3, 1, 2, 2, 0, 0])
    assert (res.p_value, res.statistic, res.n, res.method) == (0.3125, 5.0, 8, "wilcoxon-exact")


@pytest.mark.parametrize("seed", range(6))
def test_wilcoxon_exact_agrees_with_enumeration(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(4, 14))
    # small integers: many ties in |d| and some zeros
    d = rng.integers(-4, 6, size=n).astype(float)
    res = wilcoxon_test(d)
    assert res.method == "wilcoxon-exact"
    assert res.p_value == pytest.approx(_enumerated_wilcoxon_p(d), abs=1e-12)


def test_wilcoxon_exact_without_ties_agrees_with_enumeration() -> None:
    rng = np.random.default_rng(11)
    a = rng.normal(size=12)
    b = a + rng.normal(loc=0.5, size=12)
    ours = wilcoxon_test(a, b)
    assert ours.method == "wilcoxon-exact"
    assert ours.p_value == pytest.approx(_enumerated_wilcoxon_p(b - a), abs=1e-12)


def test_wilcoxon_exact_up_to_the_documented_n_then_normal() -> None:
    rng = np.random.default_rng(5)
    d = rng.integers(-3, 8, size=EXACT_MAX_N + 20).astype(float)
    d[d == 0] = 1.0
    assert wilcoxon_test(d[:EXACT_MAX_N]).method == "wilcoxon-exact"
    above = wilcoxon_test(d[: EXACT_MAX_N + 1])
    assert above.method == "wilcoxon-normal" and above.resamples == 0
    # normal approximation with the tie correction, no continuity correction: scipy's own
    # implementation as an independent cross-check (the code does not call it)
    ref = sps.wilcoxon(d[: EXACT_MAX_N + 1], method="approx", correction=False)
    assert above.p_value == pytest.approx(float(ref.pvalue), rel=1e-9)


def test_wilcoxon_normal_variance_hand_computed() -> None:
    # 51 differences all +1: every rank ties at 26, W+ = 51 * 26 = 1326, centre 663. Each rank is in W+
    # with probability 1/2, so Var(W+) = 51 * 26^2 / 4 = 8619 (the tie-corrected formula gives the same:
    # 51*52*103/24 - (51^3 - 51)/48 = 11381.5 - 2762.5). z = 663 / sqrt(8619), p = erfc(z / sqrt 2).
    res = wilcoxon_test([1.0] * 51)
    assert res.method == "wilcoxon-normal"
    assert res.p_value == pytest.approx(math.erfc(663 / math.sqrt(8619) / math.sqrt(2)), rel=1e-9)


def test_wilcoxon_zeros_are_dropped() -> None:
    # the zero method: zeros are removed before ranking, n still counts them
    with_zeros = wilcoxon_test([2, -1, 3, 0, 0, 4])
    assert with_zeros.n == 6
    assert with_zeros.p_value == wilcoxon_test([2, -1, 3, 4]).p_value
    assert wilcoxon_test([1, 2], [1, 2]).p_value == 1.0
