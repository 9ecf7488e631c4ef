"""Paired permutation test by sign flips of the paired differences.

Under the null hypothesis "A and B are exchangeable within each task" every paired difference
``d_i = b_i - a_i`` is as likely to be ``+d_i`` as ``-d_i``. The test statistic is the mean
difference; the two-sided p-value is the share of sign assignments whose mean is at least as far
from zero as the observed one:

    p = #{s in {-1,+1}^n : |mean(s * d)| >= |mean(d)|} / 2^n

When ``2^n`` (counting only the non-zero differences: a zero flips to itself) is at most
``exact_limit`` every assignment is enumerated; otherwise ``resamples`` random assignments are drawn
with a fixed seed and the p-value uses the +1 rule, which counts the observed assignment as one of
the draws so that a Monte Carlo p-value is never 0 and stays valid:

    p = (1 + #{r : |mean(s_r * d)| >= |mean(d)|}) / (1 + R)

"At least as far" allows for rounding: an assignment counts when its |sum| is at least the observed
|sum| minus ``TIE_TOLERANCE * sum |d|``, a tolerance relative to the data's scale, so that p does not
change when the data are rescaled (times 1e-12 or 1e12).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PairedTestResult", "paired_permutation_test", "paired_differences"]

#: enumerate every sign assignment when 2^(non-zero pairs) is at most this
EXACT_LIMIT = 2**20
#: Monte Carlo draws when enumeration is too large (p-values resolve down to 1e-5)
RESAMPLES = 99_999
#: assignments whose |sum| is within this fraction of sum |d| below the observed one count as ties
TIE_TOLERANCE = 1e-9
#: rows of sign assignments handled at once (bounds memory at about CHUNK_ELEMENTS floats)
CHUNK_ELEMENTS = 4_000_000


@dataclass(frozen=True, slots=True)
class PairedTestResult:
    """Result of a paired test.

    statistic: the test's statistic (mean difference b - a for the permutation test; the smaller
        of the signed-rank sums for Wilcoxon).
    p_value: two-sided p-value.
    n: number of pairs (zeros included).
    method: how the p-value was found ("exact", "monte-carlo", "wilcoxon-exact", ...).
    resamples: sign assignments counted (2^n' when exact, R for Monte Carlo, 0 for a formula).
    """

    statistic: float
    p_value: float
    n: int
    method: str
    resamples: int


def paired_differences(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    """``b - a`` as a float array; raises ValueError if the lengths differ or a value is not finite."""
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.ndim != 1 or xb.ndim != 1 or xa.shape != xb.shape:
        raise ValueError(f"paired samples must be 1-D and of equal length, got {xa.shape} and {xb.shape}")
    d: np.ndarray = xb - xa
    if not np.all(np.isfinite(d)):
        raise ValueError("paired samples contain a non-finite value")
    return d


def _count_extreme(signs: np.ndarray, d: np.ndarray, threshold: float) -> int:
    sums = signs @ d
    return int(np.count_nonzero(np.abs(sums) >= threshold))


def paired_permutation_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray | None = None,
    *,
    exact_limit: int = EXACT_LIMIT,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> PairedTestResult:
    """Two-sided paired permutation (sign-flip) test of the mean difference ``b - a``.

    Pass two paired samples ``a`` and ``b``, or the differences alone as ``a`` (``b=None``).
    The statistic is ``mean(b - a)``. Exact enumeration when ``2^k <= exact_limit`` (``k`` = number
    of non-zero differences), else Monte Carlo with ``resamples`` draws from
    ``numpy.random.default_rng(seed)`` and ``p = (1 + extreme) / (1 + resamples)``.
    """
    d = paired_differences(np.zeros(len(a)), a) if b is None else paired_differences(a, b)
    n = int(d.size)
    if n == 0:
        raise ValueError("no pairs")
    observed = float(d.mean())
    nz = d[d != 0.0]
    k = int(nz.size)
    if k == 0:
        return PairedTestResult(statistic=0.0, p_value=1.0, n=n, method="exact", resamples=1)
    # Compare sums, not means (same ordering). A tolerance relative to the data's scale (sum |d|, the
    # largest attainable |sum|) keeps assignments that tie with the observed one in exact arithmetic
    # from being lost to rounding, and scales with the data, so rescaling them leaves p unchanged.
    obs_sum = float(np.abs(nz.sum()))
    threshold = obs_sum - TIE_TOLERANCE * float(np.abs(nz).sum())
    chunk_rows = max(1, CHUNK_ELEMENTS // k)

    if 2**k <= exact_limit:
        total = 2**k
        extreme = 0
        bits = np.arange(k, dtype=np.int64)
        for start in range(0, total, chunk_rows):
            codes = np.arange(start, min(total, start + chunk_rows), dtype=np.int64)
            signs = 1.0 - 2.0 * ((codes[:, None] >> bits) & 1)
            extreme += _count_extreme(signs, nz, threshold)
        return PairedTestResult(
            statistic=observed, p_value=extreme / total, n=n, method="exact", resamples=total
        )

    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    rng = np.random.default_rng(seed)
    extreme = 0
    done = 0
    while done < resamples:
        rows = min(chunk_rows, resamples - done)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(rows, k))
        extreme += _count_extreme(signs, nz, threshold)
        done += rows
    p = (1 + extreme) / (1 + resamples)
    return PairedTestResult(statistic=observed, p_value=p, n=n, method="monte-carlo", resamples=resamples)
