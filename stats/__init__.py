"""Statistics for paired profile comparisons and benchmark ratios.

Public face (the modules stay importable on their own):
    paired_permutation_test(a, b=None, *, exact_limit, resamples, seed) -> PairedTestResult
    wilcoxon_test(a, b=None) -> PairedTestResult
    wins_losses_ties(a, b) -> WinsLossesTies
    bootstrap_ci(samples, statistic=np.mean, *, confidence, resamples, seed) -> ConfidenceInterval
    paired_mean_ci(a, b, ...), paired_median_ci(a, b, ...), ratio_ci(a, b, statistic=np.median, ...)
    stats.rollouts: tool calls, turns, tokens from Codex / Claude Code logs
    stats.compare: the two-profile comparison table (``harnesscheck compare``)
    stats.swebench: SWE-bench task selection and the two-profile driver
Every paired difference is ``b - a``.
"""

from stats.bootstrap import ConfidenceInterval, bootstrap_ci, paired_mean_ci, paired_median_ci, ratio_ci
from stats.paired import WinsLossesTies, wilcoxon_test, wins_losses_ties
from stats.permutation import PairedTestResult, paired_differences, paired_permutation_test

__all__ = [
    "ConfidenceInterval",
    "PairedTestResult",
    "WinsLossesTies",
    "bootstrap_ci",
    "paired_differences",
    "paired_mean_ci",
    "paired_median_ci",
    "paired_permutation_test",
    "ratio_ci",
    "wilcoxon_test",
    "wins_losses_ties",
]
