"""Direction counts and the Wilcoxon signed-rank test for paired samples.

Convention shared by all of ``stats``: the paired difference is ``b - a``. A "win" is a pair in
which ``a`` is larger (the article: "the gpt-5.5 profile used more tools on 50/50 tasks"), a "loss"
one in which ``b`` is larger, a tie one in which they are equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _sps

from stats.permutation import PairedTestResult, paired_differences

__all__ = ["WinsLossesTies", "wins_losses_ties", "wilcoxon_test"]


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


def wilcoxon_test(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray | None = None
) -> PairedTestResult:
    """Two-sided Wilcoxon signed-rank test of the differences ``b - a`` (``scipy.stats.wilcoxon``).

    Zero differences are dropped (``zero_method="wilcox"``). The exact null distribution is used when
    at most 50 non-zero differences remain and their absolute values have no ties; otherwise the
    normal approximation with tie correction (no continuity correction). ``statistic`` is scipy's
    (the smaller of the positive- and negative-rank sums). All differences zero gives p = 1.
    """
    d = paired_differences(np.zeros(len(a)), a) if b is None else paired_differences(a, b)
    n = int(d.size)
    if n == 0:
        raise ValueError("no pairs")
    nz = d[d != 0.0]
    if nz.size == 0:
        return PairedTestResult(statistic=0.0, p_value=1.0, n=n, method="wilcoxon-exact", resamples=0)
    abs_nz = np.abs(nz)
    exact = nz.size <= 50 and np.unique(abs_nz).size == abs_nz.size
    method = "exact" if exact else "approx"
    res = _sps.wilcoxon(nz, zero_method="wilcox", alternative="two-sided", method=method)
    return PairedTestResult(
        statistic=float(res.statistic),
        p_value=float(min(1.0, res.pvalue)),
        n=n,
        method="wilcoxon-exact" if exact else "wilcoxon-normal",
        resamples=0,
    )
