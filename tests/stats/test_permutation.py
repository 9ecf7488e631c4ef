"""Known-answer tests of the paired permutation test, Wilcoxon and win/loss/tie counts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from stats.paired import wilcoxon_test, wins_losses_ties
from stats.permutation import PairedTestResult, paired_permutation_test


def _scipy_exact_p(a: np.ndarray, b: np.ndarray) -> float:
    res = sps.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(y - x, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=np.inf,
        alternative="two-sided",
    )
    return float(res.pvalue)


@pytest.mark.parametrize("seed", range(8))
def test_exact_agrees_with_scipy_permutation_test(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 12))
    a = rng.integers(10, 40, size=n).astype(float)
    # integer counts give ties and zero differences, the awkward cases
    b = a + rng.integers(-6, 9, size=n)
    ours = paired_permutation_test(a, b)
    assert ours.method == "exact"
    assert ours.n == n
    assert ours.statistic == pytest.approx(float(np.mean(b - a)))
    assert ours.p_value == pytest.approx(_scipy_exact_p(a, b), abs=1e-12)


def test_exact_agrees_with_scipy_on_continuous_data() -> None:
    rng = np.random.default_rng(42)
    a = rng.normal(size=10)
    b = a + rng.normal(loc=0.4, size=10)
    assert paired_permutation_test(a, b).p_value == pytest.approx(_scipy_exact_p(a, b), abs=1e-12)


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
    assert paired_permutation_test([1, 2, 3]).p_value == pytest.approx(2 / 8)


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


def test_wilcoxon_matches_scipy() -> None:
    rng = np.random.default_rng(11)
    a = rng.normal(size=20)
    b = a + rng.normal(loc=0.5, size=20)
    ours = wilcoxon_test(a, b)
    ref = sps.wilcoxon(b - a, method="exact")
    assert ours.method == "wilcoxon-exact"
    assert ours.p_value == pytest.approx(float(ref.pvalue))
    assert ours.statistic == pytest.approx(float(ref.statistic))


def test_wilcoxon_with_ties_and_zeros_uses_normal_approximation() -> None:
    a = [10, 12, 9, 14, 10, 11, 13, 12]
    b = [12, 12, 11, 15, 8, 13, 15, 14]
    ours = wilcoxon_test(a, b)
    d = np.subtract(b, a)
    ref = sps.wilcoxon(d[d != 0], method="approx")
    assert ours.method == "wilcoxon-normal"
    assert ours.n == 8
    assert ours.p_value == pytest.approx(float(ref.pvalue))
    assert wilcoxon_test([1, 2], [1, 2]).p_value == 1.0
