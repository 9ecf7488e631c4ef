"""The picture of one `bench load` sweep (in the style of reports/plots.py: matplotlib Agg, no
pyplot state): four panels over the sweep's levels — request throughput and goodput (req/s) with
output tokens/s on a second axis; TTFT, ITL and end-to-end latency, each as p50 / p90 / p99."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

__all__ = ["sweep_plot"]

_INK = "#1f2933"
_GRID = "#d8dee4"
_LINES = {"p50": "#2563eb", "p90": "#c2410c", "p99": "#7c3aed"}
_AXIS = {"concurrency": "concurrency (requests in flight)", "rate": "request rate (req/s, Poisson)"}


def _style(ax: Any, title: str) -> None:
    ax.set_title(title, fontsize=10, color=_INK, loc="left")
    ax.grid(color=_GRID, linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(colors=_INK, labelsize=8)


def sweep_plot(kind: str, figures: list[dict[str, Any]], path: str, *, title: str = "") -> None:
    """Draw the sweep ``kind`` (``concurrency`` or ``rate``) from its levels' figures into a PNG."""
    xs = [f["level"] for f in figures]
    fig = Figure(figsize=(10, 6.4))
    axes = fig.subplots(2, 2)
    ax = axes[0][0]
    _style(ax, "throughput")
    ax.plot(xs, [f["request_throughput"] for f in figures], marker="o", color="#2563eb", label="requests/s")
    if any(f["request_goodput"] is not None for f in figures):
        ax.plot(xs, [f["request_goodput"] or 0.0 for f in figures], marker="s", color="#16a34a",
                label="goodput (req/s within SLO)")
    ax.set_ylabel("req/s", fontsize=8, color=_INK)
    ax.set_ylim(bottom=0)
    tok = ax.twinx()
    tok.plot(xs, [f["output_throughput"] for f in figures], marker="^", linestyle="--", color="#6b7280",
             label="output tokens/s")
    tok.set_ylabel("output tokens/s", fontsize=8, color=_INK)
    tok.set_ylim(bottom=0)
    tok.tick_params(labelsize=8)
    handles = ax.get_legend_handles_labels()[0] + tok.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize=7, loc="upper left", frameon=False)
    panels = ((axes[0][1], "ttft", "TTFT"), (axes[1][0], "itl", "ITL"), (axes[1][1], "e2el", "E2EL"))
    for ax, key, name in panels:
        _style(ax, f"{name} (ms)")
        for p, color in _LINES.items():
            ax.plot(xs, [f[f"{p}_{key}_ms"] for f in figures], marker="o", color=color, label=p)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, frameon=False)
    for ax in axes[1]:
        ax.set_xlabel(_AXIS.get(kind, kind), fontsize=8, color=_INK)
    log = kind == "concurrency" and bool(xs) and max(xs) / max(min(xs), 1) >= 8
    for row in axes:
        for ax in row:
            if log:
                ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
            ax.minorticks_off()
    if title:
        fig.suptitle(title, fontsize=11, color=_INK, x=0.01, ha="left")
    fig.tight_layout()
    fig.savefig(path, dpi=110, facecolor="white")
