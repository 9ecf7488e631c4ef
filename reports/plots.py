"""Benchmark plots for the HTML report, drawn with matplotlib (Agg, no pyplot state) and returned
as `data:image/png;base64,...` URIs so that the report stays one self-contained file.

- `arms_plot(bench)`: one row per arm, a box plot of its samples with the samples jittered over
  it, the median as a dot and the arm's 95% CI as an error bar.
- `ratios_plot(bench)`: one bar per ratio with its 95% CI, and a line at 1 (no difference).
- `sweep_figure(kind, figures)` / `sweep_plot(kind, figures)`: a `bench load` sweep over its levels
  in four panels: request throughput and goodput (req/s) with output tokens/s on a second axis;
  TTFT, ITL and end-to-end latency, each as p50 / p90 / p99 (`bench load` saves the figure as a
  PNG, the report inlines it).
"""

from __future__ import annotations

import base64
import io
import math
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure

__all__ = ["arms_plot", "figure_to_data_uri", "ratios_plot", "sweep_figure", "sweep_plot"]

_INK = "#1f2933"
_MEDIAN = "#c2410c"
_BOX = "#2563eb"
_GRID = "#d8dee4"
# matplotlib 3.10 replaced boxplot(vert=False) by orientation="horizontal"
_HORIZONTAL = (
    {"orientation": "horizontal"}
    if tuple(int(p) for p in matplotlib.__version__.split(".")[:2]) >= (3, 10)
    else {"vert": False}
)


def figure_to_data_uri(fig: Figure, dpi: int = 110) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _finite(values: Any) -> list[float]:
    out = []
    for v in values or []:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out.append(f)
    return out


def _style(ax: Any) -> None:
    ax.grid(axis="x", color=_GRID, linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(colors=_INK, labelsize=9)


def arms_plot(bench: dict[str, Any], *, title: str = "") -> str | None:
    """Box/strip plot of every arm's samples with median and 95% CI; None if there are no samples.
    ``title`` over it (a PNG file read on its own; the report's page titles each plot itself)."""
    arms = [a for a in bench.get("arms", []) if _finite(a.get("samples"))]
    if not arms:
        return None
    unit = bench.get("unit", "")
    fig = Figure(figsize=(6.4, 0.75 + 0.62 * len(arms)))
    ax = fig.add_subplot(1, 1, 1)
    rng = np.random.default_rng(0)
    labels = []
    for i, arm in enumerate(reversed(arms)):
        xs = np.asarray(_finite(arm["samples"]))
        ax.boxplot(
            xs, positions=[i], widths=0.5, showfliers=False, patch_artist=True,
            boxprops={"facecolor": "#dbeafe", "edgecolor": _BOX, "linewidth": 1},
            medianprops={"color": _BOX, "linewidth": 1}, whiskerprops={"color": _BOX},
            capprops={"color": _BOX}, **_HORIZONTAL,
        )
        ys = i + rng.uniform(-0.17, 0.17, size=len(xs))
        ax.scatter(xs, ys, s=9, color=_INK, alpha=0.35, linewidths=0, zorder=3)
        median = arm.get("median")
        median = float(np.median(xs)) if median is None else float(median)
        ci = _finite(arm.get("ci95"))
        if len(ci) == 2:
            ax.errorbar(
                [median], [i], xerr=[[max(median - ci[0], 0)], [max(ci[1] - median, 0)]], fmt="o",
                color=_MEDIAN, ecolor=_MEDIAN, elinewidth=2.2, capsize=5, markersize=6, zorder=4,
            )
        else:
            ax.plot([median], [i], "o", color=_MEDIAN, markersize=6, zorder=4)
        labels.append(f"{arm['name']}  (n={len(xs)})")
    ax.set_yticks(range(len(arms)))
    ax.set_yticklabels(labels)
    ax.set_ylim(-0.6, len(arms) - 0.4)
    ax.set_xlabel(f"{unit}   (box: quartiles · dots: samples · orange: median with 95% CI)", fontsize=8,
                  color=_INK)
    if title:
        fig.set_figheight(fig.get_figheight() + 0.3)
        ax.set_title(title, fontsize=10, color=_INK, loc="left")
    _style(ax)
    return figure_to_data_uri(fig)


def ratios_plot(bench: dict[str, Any]) -> str | None:
    """Horizontal bars of each ratio with its 95% CI and a reference line at 1; None if none."""
    ratios = [r for r in bench.get("ratios", []) if _finite([r.get("value")])]
    if not ratios:
        return None
    fig = Figure(figsize=(6.4, 0.75 + 0.5 * len(ratios)))
    ax = fig.add_subplot(1, 1, 1)
    for i, r in enumerate(reversed(ratios)):
        value = float(r["value"])
        ci = _finite(r.get("ci95"))
        clear = len(ci) == 2 and (ci[0] > 1 or ci[1] < 1)
        ax.barh([i], [value], height=0.55, color="#fdba74" if clear else "#cbd5e1", edgecolor=_INK,
                linewidth=0.6)
        if len(ci) == 2:
            ax.errorbar([value], [i], xerr=[[max(value - ci[0], 0)], [max(ci[1] - value, 0)]], fmt="none",
                        ecolor=_INK, elinewidth=1.6, capsize=4)
        ax.text(max(value, ci[1] if len(ci) == 2 else value), i, f"  {value:.2f}×", va="center", fontsize=9,
                color=_INK)
    ax.axvline(1.0, color=_MEDIAN, linestyle="--", linewidth=1)
    ax.set_yticks(range(len(ratios)))
    ax.set_yticklabels([r["name"] for r in reversed(ratios)])
    ax.set_ylim(-0.6, len(ratios) - 0.4)
    hi = max(max(_finite(r.get("ci95")) or [float(r["value"])]) for r in ratios)
    ax.set_xlim(0, max(hi, 1.0) * 1.18)
    ax.set_xlabel("ratio of medians (bar: 95% CI; dashed: no difference)", fontsize=8, color=_INK)
    _style(ax)
    return figure_to_data_uri(fig)


_LINES = {"p50": "#2563eb", "p90": "#c2410c", "p99": "#7c3aed"}
_SWEEP_AXIS = {"concurrency": "concurrency (requests in flight)", "rate": "request rate (req/s, Poisson)"}


def _panel(ax: Any, title: str) -> None:
    ax.set_title(title, fontsize=10, color=_INK, loc="left")
    ax.grid(color=_GRID, linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(colors=_INK, labelsize=8)


def _figure_value(f: dict[str, Any], key: str) -> float:
    v = f.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else 0.0


def sweep_figure(kind: str, figures: list[dict[str, Any]], *, title: str = "") -> Figure:
    """The picture of one `bench load` sweep ``kind`` (``concurrency`` or ``rate``) from its levels'
    figures (vLLM's names: request_throughput, request_goodput, output_throughput, pNN_ttft_ms, ...)."""
    xs = [_figure_value(f, "level") for f in figures]
    fig = Figure(figsize=(10, 6.4))
    axes = fig.subplots(2, 2)
    ax = axes[0][0]
    _panel(ax, "throughput")
    ax.plot(xs, [_figure_value(f, "request_throughput") for f in figures], marker="o", color="#2563eb",
            label="requests/s")
    if any(f.get("request_goodput") is not None for f in figures):
        ax.plot(xs, [_figure_value(f, "request_goodput") for f in figures], marker="s", color="#16a34a",
                label="goodput (req/s within SLO)")
    ax.set_ylabel("req/s", fontsize=8, color=_INK)
    ax.set_ylim(bottom=0)
    tok = ax.twinx()
    tok.plot(xs, [_figure_value(f, "output_throughput") for f in figures], marker="^", linestyle="--",
             color="#6b7280", label="output tokens/s")
    tok.set_ylabel("output tokens/s", fontsize=8, color=_INK)
    tok.set_ylim(bottom=0)
    tok.tick_params(labelsize=8)
    handles = ax.get_legend_handles_labels()[0] + tok.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize=7, loc="upper left", frameon=False)
    panels = ((axes[0][1], "ttft", "TTFT"), (axes[1][0], "itl", "ITL"), (axes[1][1], "e2el", "E2EL"))
    for ax, key, name in panels:
        _panel(ax, f"{name} (ms)")
        for p, color in _LINES.items():
            ax.plot(xs, [_figure_value(f, f"{p}_{key}_ms") for f in figures], marker="o", color=color, label=p)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, frameon=False)
    for ax in axes[1]:
        ax.set_xlabel(_SWEEP_AXIS.get(kind, kind), fontsize=8, color=_INK)
    log = kind == "concurrency" and bool(xs) and min(xs) > 0 and max(xs) / min(xs) >= 8
    for row in axes:
        for ax in row:
            if log:
                ax.set_xscale("log", base=2)
            if xs:
                ax.set_xticks(xs, [f"{x:g}" for x in xs])
            ax.minorticks_off()
    if title:
        fig.suptitle(title, fontsize=11, color=_INK, x=0.01, ha="left")
    fig.tight_layout()
    return fig


def sweep_plot(kind: str, figures: list[dict[str, Any]], *, title: str = "") -> str | None:
    """`sweep_figure` as a data URI for the report; None without levels."""
    if not figures:
        return None
    return figure_to_data_uri(sweep_figure(kind, figures, title=title), dpi=90)
