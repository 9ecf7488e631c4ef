"""Merge several results documents into one.

Rules (documented in docs/results-schema.md):
- checks are keyed by (id, api); a later document overrides an earlier one, keeping the first one's
  position in the list;
- benchmarks and comparisons are keyed by name; a later one with the same name replaces the earlier
  one, new names are appended;
- the fault matrix is the last one present;
- `run` is the last document's run metadata, with `started_at` the earliest, `finished_at` the
  latest, `apis` the union, and `merged_from` listing every source run (nested merges flattened).
"""

from __future__ import annotations

import copy
from typing import Any, Iterable

from reports.schema import SCHEMA_NAME, SCHEMA_VERSION, ResultsError, validate_results

__all__ = ["merge_results"]


def _source_runs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    run = doc["run"]
    if run.get("merged_from"):
        return [copy.deepcopy(r) for r in run["merged_from"]]
    return [{k: copy.deepcopy(v) for k, v in run.items() if k != "merged_from"}]


def _by_name(docs: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    order: list[str] = []
    items: dict[str, dict[str, Any]] = {}
    for doc in docs:
        for item in doc.get(key) or []:
            if item["name"] not in items:
                order.append(item["name"])
            items[item["name"]] = copy.deepcopy(item)
    return [items[n] for n in order]


def merge_results(docs: Iterable[dict[str, Any]], *, validate: bool = True) -> dict[str, Any]:
    """Merge results documents, earliest first; returns a new, valid document.

    One document is returned as a deep copy (without `merged_from`); none raises `ResultsError`.
    """
    docs = list(docs)
    if not docs:
        raise ResultsError("nothing to merge: no results documents given")
    if validate:
        for i, d in enumerate(docs):
            validate_results(d, where=f"results #{i + 1}")
    if len(docs) == 1:
        return copy.deepcopy(docs[0])

    checks: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in docs:
        for check in doc.get("checks") or []:
            checks[(check["id"], check["api"])] = copy.deepcopy(check)

    fault_matrix = None
    for doc in docs:
        if doc.get("fault_matrix"):
            fault_matrix = copy.deepcopy(doc["fault_matrix"])

    sources = [r for doc in docs for r in _source_runs(doc)]
    run = {k: copy.deepcopy(v) for k, v in docs[-1]["run"].items() if k != "merged_from"}
    starts = [r["started_at"] for r in sources if r.get("started_at")]
    ends = [r["finished_at"] for r in sources if r.get("finished_at")]
    if starts:
        run["started_at"] = min(starts)
    if ends:
        run["finished_at"] = max(ends)
    apis: list[str] = []
    for r in sources:
        for api in r.get("apis") or []:
            if api not in apis:
                apis.append(api)
    run["apis"] = apis
    run["id"] = "merge:" + "+".join(r["id"] for r in sources)
    run["merged_from"] = sources

    merged = {
        "schema": SCHEMA_NAME,
        "schema_version": SCHEMA_VERSION,
        "run": run,
        "checks": list(checks.values()),
        "benchmarks": _by_name(docs, "benchmarks"),
        "comparisons": _by_name(docs, "comparisons"),
        "fault_matrix": fault_matrix,
    }
    if validate:
        validate_results(merged, where="merged results")
    return merged
