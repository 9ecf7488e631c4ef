"""Counts of outcomes per API, and the plain-text summary table printed by `report`, `check` and
`run` (so the terminal and the HTML page agree).

`is_must_failure` is the one definition of "a MUST check failed": the exit status of `check` and
`run`, the table's "MUST failed" column, the report's banner and list all use it. A check's
`level` is the level of the rule that failed, so a check that failed one of its SHOULD rules is a
SHOULD failure. An `error` outcome is a kit bug, never a verdict on the endpoint, so it is no MUST
failure; it is listed apart (`kit_errors`) and makes `check` exit 3 when nothing else failed.
"""

from __future__ import annotations

from typing import Any

from harnesscheck.reports.schema import OUTCOMES, api_names

__all__ = ["EXIT_KIT_ERROR", "EXIT_MUST_FAILED", "EXIT_OK", "api_order", "exit_status", "final_line",
           "format_summary", "is_must_failure", "kit_errors", "must_failures", "should_failures", "summarize"]

EXIT_OK, EXIT_MUST_FAILED, EXIT_KIT_ERROR = 0, 1, 3


def api_order(results: dict[str, Any]) -> list[str]:
    """The APIs of a document in a stable order: anthropic, chat, responses, any, then others."""
    present = {c["api"] for c in results.get("checks", [])} | set(results.get("run", {}).get("apis") or [])
    order = api_names()
    known = [a for a in order if a in present]
    return known + sorted(present - set(order))


def summarize(results: dict[str, Any]) -> dict[str, dict[str, int]]:
    """`{api: {outcome: count, ..., "must_fail": n, "total": n}}` plus a `"total"` row.

    Every API that appears in the run or in a check gets a row, every outcome a zero default.
    `must_fail` counts the checks `is_must_failure` names.
    """
    rows: dict[str, dict[str, int]] = {}
    for api in api_order(results) + ["total"]:
        rows[api] = {o: 0 for o in OUTCOMES} | {"must_fail": 0, "total": 0}
    for c in results.get("checks", []):
        for key in (c["api"], "total"):
            row = rows[key]
            row[c["outcome"]] += 1
            row["total"] += 1
            if is_must_failure(c):
                row["must_fail"] += 1
    return rows


def is_must_failure(check: dict[str, Any]) -> bool:
    """A check that failed (outcome `fail`) on a MUST rule (`level` MUST)."""
    return bool(check["level"] == "MUST" and check["outcome"] == "fail")


def must_failures(results: dict[str, Any], *, include_flaky: bool = True) -> list[dict[str, Any]]:
    """The checks `is_must_failure` names, in document order; flaky ones left out on request."""
    checks = results.get("checks", [])
    return [c for c in checks if is_must_failure(c) and (include_flaky or not c.get("flaky"))]


def should_failures(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Checks that failed on a SHOULD rule: reported, never failing the run."""
    return [c for c in results.get("checks", []) if c["level"] == "SHOULD" and c["outcome"] == "fail"]


def kit_errors(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Checks the kit itself could not judge (outcome `error`): kit bugs, not verdicts."""
    return [c for c in results.get("checks", []) if c["outcome"] == "error"]


def exit_status(results: dict[str, Any]) -> int:
    """1 when a MUST check failed (flaky ones aside), else 3 when a check ended in a kit error, else 0."""
    if must_failures(results, include_flaky=False):
        return EXIT_MUST_FAILED
    return EXIT_KIT_ERROR if kit_errors(results) else EXIT_OK


def final_line(results: dict[str, Any]) -> str:
    """The last line `check` and `run` print: the MUST failures, whether the run judged the endpoint at
    all (results.json `run.verdicts`: a stalled endpoint or too few verdicts is no pass, exit 4), and the
    real clients that would break (reports.clients, the one per-client statement)."""
    failed = must_failures(results)
    verdicts = (results.get("run") or {}).get("verdicts") or {}
    parts = []
    if failed:
        parts.append(f"{len(failed)} MUST check(s) failed: {', '.join(c['id'] for c in failed)}")
    if verdicts.get("outcome") not in (None, "enough"):
        parts.append(f"NO VERDICT: {verdicts.get('reason', verdicts['outcome'])}")
    from harnesscheck.reports.clients import WOULD_BREAK, client_verdicts

    breaks = [v.client for v in client_verdicts(results) if v.verdict == WOULD_BREAK]
    if breaks:  # the same statement as the per-client lines (reports.clients)
        parts.append(f"would break: {', '.join(breaks)}")
    if not failed and verdicts.get("outcome") in (None, "enough"):
        judged = f" ({verdicts['reason']})" if verdicts.get("reason") else ""
        return "; ".join([f"no MUST check failed{judged}", *parts])
    return "; ".join(parts)


def exercised_rules(results: dict[str, Any]) -> tuple[int, int]:
    """(path-dependent rules that saw a path of theirs, path-dependent rules judged), over every check."""
    rules = [paths for c in results.get("checks", []) for paths in (c.get("exercised") or {}).values()]
    return sum(1 for paths in rules if paths), len(rules)


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
    seen, judged = exercised_rules(results)
    if judged:
        out += ["", f"rules that need a model path (parallel calls, interleaving, ...): {seen} of {judged} "
                    "exercised"]
    sections = (("MUST failures", must_failures(results)), ("SHOULD failures", should_failures(results)),
                ("kit errors (bugs of the kit, not verdicts on the endpoint)", kit_errors(results)))
    for title, checks in sections:
        if checks:
            out += ["", f"{title} ({len(checks)}):"]
            out += [f"  {c['id']} [{c['api']}]{' (flaky)' if c.get('flaky') else ''}: "
                    f"{c.get('message') or c['title']}" for c in checks]
    return "\n".join(out)
