"""Counts of outcomes per API, and the plain-text summary table printed by `report`, `check` and
`run` (so the terminal and the HTML page agree)."""

from __future__ import annotations

from typing import Any

from reports.schema import APIS, OUTCOMES

__all__ = ["api_order", "format_summary", "must_failures", "summarize"]


def api_order(results: dict[str, Any]) -> list[str]:
    """The APIs of a document in a stable order: anthropic, chat, responses, any, then others."""
    present = {c["api"] for c in results.get("checks", [])} | set(results.get("run", {}).get("apis") or [])
    known = [a for a in APIS if a in present]
    return known + sorted(present - set(APIS))


def summarize(results: dict[str, Any]) -> dict[str, dict[str, int]]:
    """`{api: {outcome: count, ..., "must_fail": n, "total": n}}` plus a `"total"` row.

    Every API that appears in the run or in a check gets a row, every outcome a zero default.
    `must_fail` counts MUST checks whose outcome is fail or error.
    """
    rows: dict[str, dict[str, int]] = {}
    for api in api_order(results) + ["total"]:
        rows[api] = {o: 0 for o in OUTCOMES} | {"must_fail": 0, "total": 0}
    for c in results.get("checks", []):
        for key in (c["api"], "total"):
            row = rows[key]
            row[c["outcome"]] += 1
            row["total"] += 1
            if c["level"] == "MUST" and c["outcome"] in ("fail", "error"):
                row["must_fail"] += 1
    return rows


def must_failures(results: dict[str, Any], *, include_flaky: bool = True) -> list[dict[str, Any]]:
    """MUST checks that failed or errored, in document order."""
    return [
        c
        for c in results.get("checks", [])
        if c["level"] == "MUST"
        and c["outcome"] in ("fail", "error")
        and (include_flaky or not c.get("flaky"))
    ]


def format_summary(results: dict[str, Any]) -> str:
    """A fixed-width table: one row per API (and a total), one column per outcome."""
    rows = summarize(results)
    header = ["api", *OUTCOMES, "MUST failed"]
    body = [[api, *(str(r[o]) for o in OUTCOMES), str(r["must_fail"])] for api, r in rows.items()]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out = [line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in body[:-1]]
    out += [line(["-" * w for w in widths]), line(body[-1])]
    fails = must_failures(results)
    if fails:
        out.append("")
        out.append(f"MUST failures ({len(fails)}):")
        out += [f"  {c['id']} [{c['api']}] {c['outcome']}: {c.get('message') or c['title']}" for c in fails]
    return "\n".join(out)
