"""The picture of one `bench load` sweep as a PNG file: reports.plots.sweep_figure (the report draws
the same figure inline) saved beside the benchmark's results."""

from __future__ import annotations

from typing import Any

__all__ = ["sweep_plot"]


def sweep_plot(kind: str, figures: list[dict[str, Any]], path: str, *, title: str = "") -> None:
    """Draw the sweep ``kind`` (``concurrency`` or ``rate``) from its levels' figures into a PNG."""
    from harnesscheck.reports.plots import sweep_figure

    sweep_figure(kind, figures, title=title).savefig(path, dpi=110, facecolor="white")
