"""Statistics for paired profile comparisons and benchmark ratios: pure functions over numbers.

Public face (the modules stay importable on their own):
    paired_permutation_test(a, b=None, *, exact_limit, resamples, seed) -> PairedTestResult
    wilcoxon_test(a, b=None) -> PairedTestResult
    wins_losses_ties(a, b) -> WinsLossesTies
    bootstrap_ci(samples, statistic=np.mean, *, confidence, resamples, seed) -> ConfidenceInterval
    paired_ci(a, b, statistic=np.mean, ...), ratio_ci(a, b, statistic=np.median, ...)
    stats.compare: the two-profile comparison table of per-task values (``harnesscheck compare``)
Every paired difference is ``b - a``. What runs the agents whose runs are compared (the toy agent, the
SWE-bench driver, reading their rollouts) is ``harnesscheck.agents``.

Names are imported on first use (PEP 562), so that importing the package, or one light module of it,
does not load numpy and scipy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harnesscheck.lazy import lazy_exports

if TYPE_CHECKING:
    from harnesscheck.stats.bootstrap import ConfidenceInterval, bootstrap_ci, paired_ci, ratio_ci
    from harnesscheck.stats.paired import WinsLossesTies, wilcoxon_test, wins_losses_ties
    from harnesscheck.stats.permutation import PairedTestResult, paired_differences, paired_permutation_test

_EXPORTS = {
    "ConfidenceInterval": "harnesscheck.stats.bootstrap",
    "bootstrap_ci": "harnesscheck.stats.bootstrap",
    "paired_ci": "harnesscheck.stats.bootstrap",
    "ratio_ci": "harnesscheck.stats.bootstrap",
    "WinsLossesTies": "harnesscheck.stats.paired",
    "wilcoxon_test": "harnesscheck.stats.paired",
    "wins_losses_ties": "harnesscheck.stats.paired",
    "PairedTestResult": "harnesscheck.stats.permutation",
    "paired_differences": "harnesscheck.stats.permutation",
    "paired_permutation_test": "harnesscheck.stats.permutation",
}

__all__ = [
    "ConfidenceInterval",
    "PairedTestResult",
    "WinsLossesTies",
    "bootstrap_ci",
    "paired_ci",
    "paired_differences",
    "paired_permutation_test",
    "ratio_ci",
    "wilcoxon_test",
    "wins_losses_ties",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
