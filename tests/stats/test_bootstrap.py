"""Bootstrap percentile intervals: coverage on known data, seeding, ratios."""

from __future__ import annotations

import numpy as np
import pytest

from harnesscheck.stats.bootstrap import bootstrap_ci, paired_ci, ratio_ci


def test_mean_interval_covers_and_is_seeded() -> None:
    x = np.random.default_rng(1).normal(loc=5.0, scale=2.0, size=200)
    ci = bootstrap_ci(x, np.mean, resamples=4000, seed=9)
    assert ci.low < ci.estimate < ci.high
    assert 5.0 in ci
    # width about 2 * 1.96 * sigma / sqrt(n) = 0.55
    assert 0.4 < ci.high - ci.low < 0.7
    assert ci == bootstrap_ci(x, np.mean, resamples=4000, seed=9)
    assert ci != bootstrap_ci(x, np.mean, resamples=4000, seed=10)


def test_non_vectorised_statistic() -> None:
    x = np.arange(1.0, 101.0)
    ci = bootstrap_ci(x, lambda v: float(np.percentile(v, 90)), resamples=500, seed=0)
    assert ci.estimate == pytest.approx(90.1)
    assert ci.low <= 90.1 <= ci.high


def test_constant_sample_gives_degenerate_interval() -> None:
    ci = bootstrap_ci([3.0] * 10, resamples=100)
    assert (ci.low, ci.estimate, ci.high) == (3.0, 3.0, 3.0)


def test_paired_intervals() -> None:
    rng = np.random.default_rng(2)
    a = rng.integers(20, 60, size=50).astype(float)
    b = a - 20 + rng.integers(-3, 4, size=50)
    mean_ci = paired_ci(a, b, np.mean, resamples=2000)
    assert mean_ci.high < 0 and -20.0 in mean_ci
    med_ci = paired_ci(a, b, np.median, resamples=2000)
    assert med_ci.low <= -20.0 <= med_ci.high


def test_ratio_of_medians() -> None:
    rng = np.random.default_rng(4)
    fast = rng.lognormal(mean=np.log(100), sigma=0.2, size=300)
    slow = rng.lognormal(mean=np.log(200), sigma=0.2, size=250)
    ci = ratio_ci(fast, slow, resamples=2000, seed=1)
    assert ci.low < ci.estimate < ci.high
    assert 0.45 < ci.low and ci.high < 0.6
    assert ci.estimate == pytest.approx(np.median(fast) / np.median(slow))


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        bootstrap_ci([], resamples=10)
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 2.0], confidence=1.5)
    with pytest.raises(ValueError):
        ratio_ci([1.0], [0.0, 0.0])
