"""Compare two profiles task by task: the table of the article's catalog-profile experiment.

Inputs are per-task values (tool calls by default) of profile A and profile B, as two mappings task
id -> value (``harnesscheck.agents.counts`` reads them from run folders or CSV files). Tasks present
in both are paired; the others are reported as unpaired and left out of every figure.

The difference is always ``B - A``. A "win" is a task where A's count is larger, a "loss" one where
B's is larger. The table holds: total and mean per task for A and B, the difference row, wins/losses/
ties, the two-sided paired permutation p-value (``harnesscheck.stats.permutation``), the Wilcoxon
signed-rank p-value (``harnesscheck.stats.paired``) and the percentile bootstrap 95% interval of the
mean paired difference (``harnesscheck.stats.bootstrap``).

    comp = compare_counts({"t1": 12, "t2": 9}, {"t1": 7, "t2": 9}, label_a="gpt-5.5", label_b="fallback")
    write_outputs(comp, "out/")   # comparison.json, comparison.md, paired_differences.png
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from harnesscheck.stats.bootstrap import ConfidenceInterval, paired_ci
from harnesscheck.stats.paired import WinsLossesTies, wilcoxon_test, wins_losses_ties
from harnesscheck.stats.permutation import RESAMPLES, PairedTestResult, paired_permutation_test

__all__ = [
    "TaskPair",
    "Comparison",
    "compare_counts",
    "write_outputs",
    "comparison_markdown",
    "plot_differences",
    "format_p",
]


@dataclass(frozen=True, slots=True)
class TaskPair:
    task_id: str
    a: float
    b: float

    @property
    def difference(self) -> float:
        return self.b - self.a


@dataclass(frozen=True, slots=True)
class Comparison:
    """Everything the table, the JSON and the plot show. Differences are B - A."""

    label_a: str
    label_b: str
    metric: str
    pairs: tuple[TaskPair, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    wlt: WinsLossesTies
    permutation: PairedTestResult
    wilcoxon: PairedTestResult
    ci_mean_diff: ConfidenceInterval
    ci_median_diff: ConfidenceInterval

    @property
    def n_tasks(self) -> int:
        return len(self.pairs)

    @property
    def total_a(self) -> float:
        return float(sum(p.a for p in self.pairs))

    @property
    def total_b(self) -> float:
        return float(sum(p.b for p in self.pairs))

    @property
    def mean_a(self) -> float:
        return self.total_a / self.n_tasks

    @property
    def mean_b(self) -> float:
        return self.total_b / self.n_tasks

    @property
    def diff_total(self) -> float:
        return self.total_b - self.total_a

    @property
    def diff_mean(self) -> float:
        return self.diff_total / self.n_tasks

    def to_dict(self) -> dict[str, Any]:
        """The fields of ``comparison.json``."""
        c = self.ci_mean_diff.confidence
        return {
            "metric": self.metric,
            "a": self.label_a,
            "b": self.label_b,
            "n_tasks": self.n_tasks,
            "totals": {"a": _num(self.total_a), "b": _num(self.total_b)},
            "means": {"a": self.mean_a, "b": self.mean_b},
            "difference": {"definition": "b - a", "total": _num(self.diff_total), "mean": self.diff_mean},
            "wins": self.wlt.wins,
            "losses": self.wlt.losses,
            "ties": self.wlt.ties,
            "wins_losses_ties_definition": "wins: a > b; losses: a < b; ties: a == b",
            "p_permutation": self.permutation.p_value,
            "permutation": _test_dict(self.permutation),
            "p_wilcoxon": self.wilcoxon.p_value,
            "wilcoxon": _test_dict(self.wilcoxon),
            "ci95_mean_diff": self.ci_mean_diff.as_list(),
            "ci95_median_diff": self.ci_median_diff.as_list(),
            "median_diff": self.ci_median_diff.estimate,
            "confidence": c,
            "bootstrap_resamples": self.ci_mean_diff.resamples,
            "unpaired": {"a_only": list(self.only_a), "b_only": list(self.only_b)},
            "per_task": [
                {"task_id": p.task_id, "a": _num(p.a), "b": _num(p.b), "difference": _num(p.difference)}
                for p in self.pairs
            ],
        }

    def table_rows(self) -> list[tuple[str, str, str]]:
        """(profile, total, mean per task) rows, difference last, formatted as in the article."""
        return [
            (self.label_a, _fmt_total(self.total_a), f"{self.mean_a:.1f}"),
            (self.label_b, _fmt_total(self.total_b), f"{self.mean_b:.1f}"),
            ("Difference (B - A)", _fmt_total(self.diff_total, signed=True), f"{self.diff_mean:+.1f}"),
        ]

    def summary_lines(self) -> list[str]:
        n = self.n_tasks
        perm = self.permutation
        how = (
            f"exact, {perm.resamples:,} sign assignments"
            if perm.method == "exact"
            else f"Monte Carlo, {perm.resamples:,} sign flips, +1 rule"
        )
        ci, med = self.ci_mean_diff, self.ci_median_diff
        pct = f"{ci.confidence * 100:g}%"
        lines = [
            f"Paired tasks: {n}"
            + (
                f" (unpaired: {len(self.only_a)} only in A, {len(self.only_b)} only in B)"
                if self.only_a or self.only_b
                else ""
            ),
            f"Wins/losses/ties: {self.wlt.wins}/{self.wlt.losses}/{self.wlt.ties} "
            f"(A more on {self.wlt.wins}/{n}, B more on {self.wlt.losses}/{n}, equal on {self.wlt.ties}/{n})",
            f"Permutation test (two-sided, {how}): p {format_p(perm.p_value)}",
            f"Wilcoxon signed-rank ({self.wilcoxon.method.removeprefix('wilcoxon-')}): "
            f"p {format_p(self.wilcoxon.p_value)}",
            f"Bootstrap {pct} CI of the mean difference: [{ci.low:+.2f}, {ci.high:+.2f}] "
            f"({ci.resamples:,} resamples)",
            f"Median difference: {med.estimate:+g}, {pct} CI [{med.low:+.2f}, {med.high:+.2f}]",
        ]
        return lines

    def to_markdown(self) -> str:
        metric = "tool calls" if self.metric == "tool_calls" else self.metric.replace("_", " ")
        out = [
            f"| Profile | Total {metric} | Mean per task |",
            "|---|---:|---:|",
            *(f"| {p} | {t} | {m} |" for p, t, m in self.table_rows()),
            "",
            *(f"- {line}" for line in self.summary_lines()),
        ]
        if self.only_a or self.only_b:
            out.append(
                f"- Only in A: {', '.join(self.only_a) or '-'}; only in B: {', '.join(self.only_b) or '-'}"
            )
        return "\n".join(out) + "\n"

    def rich_table(self) -> Any:
        from rich.table import Table

        metric = "tool calls" if self.metric == "tool_calls" else self.metric.replace("_", " ")
        table = Table(title=f"{self.label_a} (A) vs {self.label_b} (B), {self.n_tasks} paired tasks")
        table.add_column("Profile")
        table.add_column(f"Total {metric}", justify="right")
        table.add_column("Mean per task", justify="right")
        rows = self.table_rows()
        for p, t, m in rows[:-1]:
            table.add_row(p, t, m)
        table.add_section()
        table.add_row(*rows[-1], style="bold")
        return table


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else float(x)


def _fmt_total(x: float, signed: bool = False) -> str:
    if float(x).is_integer():
        return f"{int(x):+,}" if signed else f"{int(x):,}"
    return f"{x:+,.1f}" if signed else f"{x:,.1f}"


def format_p(p: float) -> str:
    """'< 0.001 (1.0e-05)' or '= 0.2183' (with the operator, to follow 'p').

    Four significant digits, trailing zeros dropped, so an exact p such as 1/16 prints as it is
    (0.0625, not a rounded 0.062)."""
    if p < 0.001:
        return f"< 0.001 ({p:.1e})"
    return f"= {p:.4g}"


def _test_dict(t: PairedTestResult) -> dict[str, Any]:
    return {
        "statistic": t.statistic,
        "p_value": t.p_value,
        "n": t.n,
        "method": t.method,
        "resamples": t.resamples,
    }


def compare_counts(
    a: Mapping[str, float],
    b: Mapping[str, float],
    *,
    label_a: str = "A",
    label_b: str = "B",
    metric: str = "tool_calls",
    confidence: float = 0.95,
    permutation_resamples: int = RESAMPLES,
    bootstrap_resamples: int = 10_000,
    seed: int = 0,
) -> Comparison:
    """Pair tasks present in both mappings (sorted by task id) and run every test on ``b - a``."""
    common = sorted(set(a) & set(b))
    if not common:
        raise ValueError("no task is present in both A and B")
    pairs = tuple(TaskPair(t, float(a[t]), float(b[t])) for t in common)
    xa = np.array([p.a for p in pairs])
    xb = np.array([p.b for p in pairs])
    interval = partial(paired_ci, xa, xb, confidence=confidence, resamples=bootstrap_resamples, seed=seed)
    return Comparison(
        label_a=label_a,
        label_b=label_b,
        metric=metric,
        pairs=pairs,
        only_a=tuple(sorted(set(a) - set(b))),
        only_b=tuple(sorted(set(b) - set(a))),
        wlt=wins_losses_ties(xa, xb),
        permutation=paired_permutation_test(xa, xb, resamples=permutation_resamples, seed=seed),
        wilcoxon=wilcoxon_test(xa, xb),
        ci_mean_diff=interval(np.mean),
        ci_median_diff=interval(np.median),
    )


def plot_differences(comp: Comparison, path: str | Path) -> Path:
    """Sorted bars of the per-task differences B - A with a zero line (Agg, no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    diffs = sorted((p.difference, p.task_id) for p in comp.pairs)
    values = [d for d, _ in diffs]
    colors = ["#c0392b" if d < 0 else "#2471a3" if d > 0 else "#7f8c8d" for d in values]
    width = min(14.0, max(6.0, 0.18 * len(values) + 3))
    fig = Figure(figsize=(width, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.bar(range(len(values)), values, color=colors, width=0.8)
    ax.axhline(0.0, color="black", linewidth=0.9)
    ax.axhline(
        comp.diff_mean,
        color="#555555",
        linewidth=0.9,
        linestyle="--",
        label=f"mean {comp.diff_mean:+.2f} "
        f"(95% CI {comp.ci_mean_diff.low:+.1f}..{comp.ci_mean_diff.high:+.1f})",
    )
    metric = "tool calls" if comp.metric == "tool_calls" else comp.metric.replace("_", " ")
    ax.set_ylabel(f"{metric}: B - A")
    ax.set_xlabel(f"tasks, sorted by difference (n = {comp.n_tasks})")
    if len(values) <= 30:
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels([t for _, t in diffs], rotation=70, fontsize=7, ha="right")
    else:
        ax.set_xticks([])
    ax.set_title(
        f"A = {comp.label_a}, B = {comp.label_b}: W/L/T {comp.wlt}, "
        f"permutation p {format_p(comp.permutation.p_value)}",
        fontsize=10,
    )
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out


def comparison_markdown(comp: Comparison) -> str:
    """The Markdown of ``comparison.md`` and ``compare --format md``: a title naming A and B, the table,
    the figures."""
    return f"# {comp.label_a} vs {comp.label_b}\n\n" + comp.to_markdown()


def write_outputs(comp: Comparison, out_dir: str | Path) -> dict[str, Path]:
    """Write comparison.json, comparison.md, paired_differences.png. Returns the paths by kind."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out / "comparison.json",
        "markdown": out / "comparison.md",
        "plot": out / "paired_differences.png",
    }
    data = comp.to_dict()
    paths["json"].write_text(json.dumps(data, indent=2, allow_nan=False, default=_json_default) + "\n")
    paths["markdown"].write_text(comparison_markdown(comp))
    plot_differences(comp, paths["plot"])
    return paths


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        v = float(x)
        return None if math.isnan(v) else v
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")
