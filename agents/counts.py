"""A comparison's inputs from an agent's runs: per-task values of one metric (tool calls by default)
from a run folder (``RUN/PROFILE/TASK/*.jsonl``, counted by ``harnesscheck.agents.rollouts``) or a CSV
file with columns ``task_id`` and the metric; then ``harnesscheck.stats.compare`` on two of them.

    comp = compare_sources("runs/r1/gpt-5.5", "runs/r1/fallback")
    write_comparison(comp, "out/", usages_a=..., usages_b=...)  # stats' files plus tasks_a.csv / tasks_b.csv
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from harnesscheck.agents.rollouts import TaskUsage, load_run_dir, write_usage_csv
from harnesscheck.stats.compare import Comparison, compare_counts, write_outputs

__all__ = ["compare_sources", "load_counts", "write_comparison"]


def _read_csv_counts(path: Path, metric: str) -> tuple[dict[str, float], str | None]:
    counts: dict[str, float] = {}
    profiles: set[str] = set()
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        fields = reader.fieldnames or []
        if "task_id" not in fields or metric not in fields:
            raise ValueError(f"{path}: needs columns task_id and {metric}, has {fields}")
        for row in reader:
            tid = (row.get("task_id") or "").strip()
            raw = (row.get(metric) or "").strip()
            if not tid or not raw:
                continue
            if tid in counts:
                raise ValueError(f"{path}: task {tid!r} appears twice")
            counts[tid] = float(raw)
            if row.get("profile"):
                profiles.add(row["profile"])
    label = profiles.pop() if len(profiles) == 1 else None
    return counts, label


def load_counts(
    source: str | Path, metric: str = "tool_calls"
) -> tuple[dict[str, float], str, list[TaskUsage] | None]:
    """Per-task values of ``metric`` from a run folder or a CSV.

    Returns (counts by task id, a default label, the per-task usage rows when read from rollouts).
    The label is the CSV's single ``profile`` value, else the file stem or folder name.
    """
    path = Path(source)
    if path.is_dir():
        usages = load_run_dir(path)
        counts: dict[str, float] = {}
        for u in usages:
            value = getattr(u, metric, None)
            if value is None:
                continue
            counts[u.task_id] = float(value)
        return counts, path.name, usages
    if path.is_file():
        counts, label = _read_csv_counts(path, metric)
        return counts, label or path.stem, None
    raise FileNotFoundError(f"no such run folder or CSV: {path}")


def compare_sources(
    source_a: str | Path,
    source_b: str | Path,
    *,
    label_a: str | None = None,
    label_b: str | None = None,
    metric: str = "tool_calls",
    **kwargs: Any,
) -> Comparison:
    """``compare_counts`` on two run folders or CSVs (see ``load_counts``)."""
    ca, la, _ = load_counts(source_a, metric)
    cb, lb, _ = load_counts(source_b, metric)
    if label_a is None and label_b is None and la == lb:
        la, lb = f"{la} (A)", f"{lb} (B)"
    return compare_counts(ca, cb, label_a=label_a or la, label_b=label_b or lb, metric=metric, **kwargs)


def write_comparison(comp: Comparison, out_dir: str | Path, *, usages_a: list[TaskUsage] | None = None,
                     usages_b: list[TaskUsage] | None = None) -> dict[str, Path]:
    """``stats.compare.write_outputs`` (comparison.json, comparison.md, paired_differences.png) and the
    per-task tables of rollout inputs as tasks_a.csv / tasks_b.csv. Returns the paths by kind."""
    paths = write_outputs(comp, out_dir)
    out = Path(out_dir)
    if usages_a is not None:
        paths["tasks_a"] = write_usage_csv(usages_a, out / "tasks_a.csv")
    if usages_b is not None:
        paths["tasks_b"] = write_usage_csv(usages_b, out / "tasks_b.csv")
    return paths
