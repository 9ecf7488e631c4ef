"""Direction counts and the Wilcoxon signed-rank test for paired samples.

Convention shared by all of ``stats``: the paired difference is ``b - a``. A "win" is a pair in
which ``a`` is larger (the article: "the gpt-5.5 profile used more tools on 50/50 tasks"), a "loss"
one in which ``b`` is larger, a tie one in which they are equal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harnesscheck.stats.permutation import PairedTestResult, paired_differences

__all__ = ["EXACT_MAX_N", "WinsLossesTies", "wins_losses_ties", "wilcoxon_test"]


@dataclass(frozen=True, slots=True)
class WinsLossesTies:
    """wins: pairs with a > b; losses: a < b; ties: a == b."""

    wins: int
    losses: int
    ties: int

    @property
    def n(self) -> int:
        return self.wins + self.losses + self.ties

    def __str__(self) -> str:
        return f"{self.wins}/{self.losses}/{self.ties}"


def wins_losses_ties(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, tolerance: float = 0.0
) -> WinsLossesTies:
    """Count pairs where ``a > b`` (wins), ``a < b`` (losses) and ``|a - b| <= tolerance`` (ties)."""
    d = paired_differences(a, b)
    ties = int(np.count_nonzero(np.abs(d) <= tolerance))
    wins = int(np.count_nonzero(d < -tolerance))
    losses = int(np.count_nonzero(d > tolerance))
    return WinsLossesTies(wins=wins, losses=losses, ties=ties)


#: the exact null distribution is used up to this many non-zero differences, the normal approximation above
EXACT_MAX_N = 50


def _doubled_midranks(x: np.ndarray) -> np.ndarray:
    """Twice the midrank of each value of ``x`` (ties share the average of their ranks), as int64.

    A value with ``below`` smaller values and ``up_to`` values at most itself has midrank
    ``(below + up_to + 1) / 2``; doubling makes every midrank an integer."""
    ordered = np.sort(x)
    below = np.searchsorted(ordered, x, side="left")
    up_to = np.searchsorted(ordered, x, side="right")
    return (below + up_to + 1).astype(np.int64)


def _signed_rank_counts(doubled_ranks: np.ndarray) -> np.ndarray:
    """``counts[s]``: how many of the ``2^k`` sign assignments give positive doubled ranks summing to s.

    Each rank is in W+ or not with equal weight under the null, so the distribution is built one rank
    at a time (the counts convolved with {0, r}). Every count is below ``2^k``: exact in int64, and
    exact as a float64 for k <= 53."""
    counts = np.zeros(int(doubled_ranks.sum()) + 1, dtype=np.int64)
    counts[0] = 1
    top = 0
    for r in doubled_ranks:
        counts[r : top + r + 1] += counts[: top + 1].copy()
        top += int(r)
    return counts


def wilcoxon_test(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray | None = None
) -> PairedTestResult:
    """Two-sided Wilcoxon signed-rank test of the differences ``b - a`` (or of ``a`` alone).

    Zero differences are dropped first (Wilcoxon's zero method, scipy's ``zero_method="wilcox"``);
    the k that remain are ranked by ``|d|`` with midranks for ties (exact equality). W+ is the sum of
    the ranks of the positive differences. Up to ``EXACT_MAX_N`` non-zero differences, ties or not, the
    p-value is exact: the null distribution of W+ over all ``2^k`` sign assignments is counted and
    ``p = #{|W+(s) - T/2| >= |W+ - T/2|} / 2^k`` with ``T`` the sum of the ranks ("wilcoxon-exact").
    Above it, the normal approximation with the tie correction and no continuity correction
    ("wilcoxon-normal"). ``statistic`` is min(W+, W-); ``resamples`` is ``2^k`` when exact, else 0.
    All differences zero gives p = 1.
    """
    d = paired_differences(np.zeros(len(a)), a) if b is None else paired_differences(a, b)
    n = int(d.size)
    if n == 0:
        raise ValueError("no pairs")
    nz = d[d != 0.0]
    k = int(nz.size)
    if k == 0:
        return PairedTestResult(statistic=0.0, p_value=1.0, n=n, method="wilcoxon-exact", resamples=1)
    ranks2 = _doubled_midranks(np.abs(nz))
    total2 = int(ranks2.sum())  # = k (k + 1), twice the sum of the ranks
    w_plus2 = int(ranks2[nz > 0].sum())
    statistic = min(w_plus2, total2 - w_plus2) / 2.0
    if k <= EXACT_MAX_N:
        counts = _signed_rank_counts(ranks2)
        sums2 = np.arange(counts.size)
        # |W+(s) - T/2| >= |W+ - T/2|, in doubled units times two so that it stays in integers
        extreme = counts[np.abs(2 * sums2 - total2) >= abs(2 * w_plus2 - total2)]
        p = int(extreme.sum()) / 2**k
        return PairedTestResult(statistic=statistic, p_value=min(1.0, p), n=n, method="wilcoxon-exact",
                                resamples=2**k)
    _, tie_sizes = np.unique(np.abs(nz), return_counts=True)
    variance = k * (k + 1) * (2 * k + 1) / 24.0 - float(np.sum(tie_sizes**3 - tie_sizes)) / 48.0
    z = (w_plus2 - total2 / 2.0) / 2.0 / math.sqrt(variance)
    p = math.erfc(abs(z) / math.sqrt(2.0))
    return PairedTestResult(statistic=statistic, p_value=min(1.0, p), n=n, method="wilcoxon-normal",
                            resamples=0)
