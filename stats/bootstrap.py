"""Seeded percentile bootstrap confidence intervals.

A bootstrap resample draws ``n`` values with replacement from the ``n`` observed ones; the statistic
is computed on each of ``R`` resamples and the interval is the ``(1-c)/2`` and ``(1+c)/2`` quantiles
of those ``R`` values (percentile method, numpy's default linear interpolation). The generator is
``numpy.random.default_rng(seed)``, so the same call gives the same interval.

Functions other parts of the kit call:
    bootstrap_ci(samples, statistic=np.mean, confidence=0.95, resamples=10_000, seed=0)
    paired_ci(a, b, statistic=np.mean, ...)   interval of statistic(b - a) (np.median: of the median)
    ratio_ci(a, b, statistic=np.median, ...)   interval of statistic(a) / statistic(b), two
                                               independent samples resampled separately
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from harnesscheck.stats.permutation import paired_differences

__all__ = ["ConfidenceInterval", "bootstrap_ci", "paired_ci", "ratio_ci"]

RESAMPLES = 10_000
#: values drawn at once (bounds memory at about this many floats per chunk)
CHUNK_ELEMENTS = 2_000_000

Statistic = Callable[..., float]


@dataclass(frozen=True, slots=True)
class ConfidenceInterval:
    """estimate: the statistic on the observed data; low/high: the interval bounds."""

    estimate: float
    low: float
    high: float
    confidence: float
    resamples: int
    method: str = "percentile"

    def as_list(self) -> list[float]:
        return [self.low, self.high]

    def __contains__(self, value: float) -> bool:
        return self.low <= value <= self.high


def _as_sample(samples: Sequence[float] | np.ndarray, name: str = "samples") -> np.ndarray:
    x = np.asarray(samples, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains a non-finite value")
    return x


def _check(confidence: float, resamples: int) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be between 0 and 1")
    if resamples < 1:
        raise ValueError("resamples must be at least 1")


def _resampled_stats(
    x: np.ndarray, statistic: Statistic, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """statistic on each of `resamples` bootstrap resamples of x (vectorised along axis=1 if it can)."""
    n = x.size
    out = np.empty(resamples, dtype=float)
    rows = max(1, CHUNK_ELEMENTS // n)
    vectorised: bool | None = None
    done = 0
    while done < resamples:
        m = min(rows, resamples - done)
        draws = x[rng.integers(0, n, size=(m, n))]
        if vectorised is not False:
            try:
                vals = np.asarray(statistic(draws, axis=1), dtype=float)
                vectorised = vals.shape == (m,)
            except TypeError:
                vectorised = False
        if vectorised:
            out[done : done + m] = vals
        else:
            out[done : done + m] = [float(statistic(row)) for row in draws]
        done += m
    return out


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(values, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def bootstrap_ci(
    samples: Sequence[float] | np.ndarray,
    statistic: Statistic = np.mean,
    *,
    confidence: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> ConfidenceInterval:
    """Percentile bootstrap interval of ``statistic(samples)``.

    ``statistic`` takes a 1-D array and returns a number; if it also accepts ``axis=`` (numpy
    reductions do) the resamples are computed in one vectorised call per chunk.
    """
    _check(confidence, resamples)
    x = _as_sample(samples)
    estimate = float(statistic(x))
    values = _resampled_stats(x, statistic, resamples, np.random.default_rng(seed))
    lo, hi = _interval(values, confidence)
    return ConfidenceInterval(estimate=estimate, low=lo, high=hi, confidence=confidence, resamples=resamples)


def paired_ci(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    statistic: Statistic = np.mean,
    *,
    confidence: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> ConfidenceInterval:
    """Percentile bootstrap interval of ``statistic(b - a)`` over the paired differences (pairs
    resampled together): ``np.mean`` for the mean paired difference, ``np.median`` for the median."""
    return bootstrap_ci(
        paired_differences(a, b), statistic, confidence=confidence, resamples=resamples, seed=seed
    )


def ratio_ci(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    statistic: Statistic = np.median,
    *,
    confidence: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> ConfidenceInterval:
    """Percentile bootstrap interval of ``statistic(a) / statistic(b)`` for two independent samples.

    Default statistic: the median, so the interval is of the ratio of medians (e.g. TTFT of arm A
    over arm B: below 1 means A is faster). ``a`` and ``b`` may differ in length; each is resampled on
    its own from one generator. Raises ValueError if ``statistic(b)`` is 0; resamples whose
    denominator is 0 are dropped (the count kept is in ``resamples``).
    """
    _check(confidence, resamples)
    xa = _as_sample(a, "a")
    xb = _as_sample(b, "b")
    den = float(statistic(xb))
    if den == 0.0:
        raise ValueError("statistic(b) is 0: the ratio is undefined")
    estimate = float(statistic(xa)) / den
    rng = np.random.default_rng(seed)
    num_vals = _resampled_stats(xa, statistic, resamples, rng)
    den_vals = _resampled_stats(xb, statistic, resamples, rng)
    keep = den_vals != 0.0
    ratios = num_vals[keep] / den_vals[keep]
    lo, hi = _interval(ratios, confidence)
    return ConfidenceInterval(
        estimate=estimate, low=lo, high=hi, confidence=confidence, resamples=int(ratios.size)
    )
