"""A results document as a Markdown summary to paste into an issue or a pull request, or to append to a
CI job's summary (`harnesscheck report RESULTS --format md`, docs/ci.md).

It says what the HTML report's first screen says, in GitHub-flavoured Markdown: the verdict line
(`reports.html.banner`, the same words), the run, the table per API, the MUST and the SHOULD failures
with their rule and frame, the kit errors, one line per real client, the benchmarks' arms and whether
the run judged the endpoint at all. Every text that came from the endpoint (messages, rules, names)
is escaped, so a hostile answer can neither break the table nor add a link or an image.

Public API: `to_markdown(results, *, report_link=None) -> str`, `write_markdown(paths, out) -> dict`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

from harnesscheck.reports.merge import merge_results, read_inputs
from harnesscheck.reports.schema import OUTCOMES, validate_results
from harnesscheck.reports.summary import kit_errors, must_failures, should_failures, summarize

__all__ = ["client_lines", "escape", "to_markdown", "write_markdown"]

MAX_TEXT = 300  # characters of a message shown; the HTML report and results.json have the rest
_SPECIAL = re.compile(r"([\\`*_\[\]<>#!|~&])")  # enough that no link, image, tag or cell can start
_SPACE = re.compile(r"\s+")
# a client's verdict over the failing checks, worst first
_CLIENT_RANK = {"would break": 0, "no measured impact": 1, "unaffected": 2}


def escape(text: Any, limit: int = MAX_TEXT) -> str:
    """`text` on one line, at most `limit` characters, with every character Markdown or HTML could read
    as markup backslash-escaped (safe in a table cell and in running text)."""
    flat = _SPACE.sub(" ", str(text)).strip()
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return _SPECIAL.sub(r"\\\1", flat)


def _code(text: Any) -> str:
    """A short identifier (check id, rule) as inline code; one that could break out of the span is
    shown escaped instead."""
    flat = _SPACE.sub(" ", str(text)).strip()
    return f"`{flat}`" if flat and "`" not in flat and "|" not in flat and len(flat) <= 120 else escape(flat, 120)


def client_lines(results: dict[str, Any]) -> list[str]:
    """Per real client, its verdict over the failing checks that name it (`clients` of each failing check,
    measured only): the worst one (would break, then no measured impact, then unaffected) with the
    checks behind it, in full."""
    per: dict[str, dict[str, list[str]]] = {}
    for c in results.get("checks", []):
        if c["outcome"] != "fail" or c.get("flaky"):
            continue
        for client, verdict in (c.get("clients") or {}).items():
            per.setdefault(str(client), {}).setdefault(str(verdict), [])
            if c["id"] not in per[str(client)][str(verdict)]:
                per[str(client)][str(verdict)].append(c["id"])
    lines = []
    for client in sorted(per):
        verdict = min(per[client], key=lambda v: _CLIENT_RANK.get(v, -1))
        ids = ", ".join(_code(i) for i in per[client][verdict])
        lines.append(f"**{escape(client, 120)}**: {escape(verdict, 120)} ({ids})")
    return lines


def _failure_rows(checks: list[dict[str, Any]]) -> list[str]:
    rows = ["| Check | API | Rule | Frame | Message |", "|---|---|---|---:|---|"]
    for c in checks:
        finding = c.get("finding") or {}
        rule = finding.get("rule") or ((c.get("rules_failed") or [None])[0]) or c["id"]
        frame = finding.get("frame_index")
        flaky = " (flaky)" if c.get("flaky") else ""
        rows.append(f"| {_code(c['id'])}{flaky} | {escape(c['api'], 40)} | {_code(rule)} | "
                    f"{'#' + str(frame) if isinstance(frame, int) else '–'} | "
                    f"{escape(c.get('message') or c.get('title') or '')} |")
    return rows


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "–"
    a = abs(value)
    return f"{value:,.0f}" if a >= 1000 else f"{value:.1f}" if a >= 10 else f"{value:.2f}" if a >= 1 else f"{value:.3g}"


def _benchmark_rows(benchmarks: list[dict[str, Any]]) -> list[str]:
    rows = ["| Benchmark | Arm | n | median | p90 | 95% CI of median |", "|---|---|---:|---:|---:|---|"]
    for b in benchmarks:
        unit = escape(b.get("unit") or "", 20)
        for a in b.get("arms") or []:
            ci = a.get("ci95")
            interval = f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if isinstance(ci, list) and len(ci) == 2 else "–"
            rows.append(f"| {_code(b['name'])} | {escape(a['name'], 60)} | {len(a.get('samples') or [])} | "
                        f"{_fmt(a.get('median'))} {unit} | {_fmt(a.get('p90'))} | {interval} |")
    return rows


def to_markdown(results: dict[str, Any], *, report_link: str | None = None) -> str:
    """The Markdown summary of one (validated or merged) results document (module docstring)."""
    from harnesscheck.reports.html import banner  # the same verdict line as the HTML page

    validate_results(results)
    run = results["run"]
    server = run.get("server") or {}
    where = f"{escape(run.get('model') or '', 120)} at " if run.get("model") else ""
    out = [f"## harnesscheck: {where}{escape(run.get('endpoint') or '', 200)}", ""]
    line = banner(results)
    mark = {"good": "✅", "warn": "⚠️", "bad": "❌"}.get(line["cls"], "")
    out += [f"{mark} **{escape(line['text'], 600)}**", ""]
    verdicts = run.get("verdicts") or {}
    if verdicts.get("outcome") not in (None, "enough"):
        out += [f"⚠️ **No verdict**: {escape(verdicts.get('reason') or verdicts['outcome'])}", ""]
    if run.get("interrupted"):
        out += ["⚠️ The run was interrupted: these are the results measured until then.", ""]
    details = [f"run `{escape(run['id'], 80)}`", f"started {escape(run.get('started_at') or '', 40)}",
               f"kit {escape(run.get('kit_version') or '', 40)}",
               f"server {escape(server.get('kind') or 'unknown', 40)}"
               + (f" ({escape(server['engine'], 80)})" if server.get("engine") else ""),
               f"timing {escape(server.get('timing') or 'unknown', 40)}"]
    if server.get("faults"):
        details.append("faults on: " + ", ".join(_code(f) for f in server["faults"]))
    out += [" · ".join(details), ""]
    if results.get("checks"):
        rows = summarize(results)
        out += ["| API | " + " | ".join(OUTCOMES) + " | MUST failed | total |",
                "|---|" + "---:|" * (len(OUTCOMES) + 2)]
        for api, row in rows.items():
            name = "**total**" if api == "total" else escape(api, 40)
            out.append(f"| {name} | " + " | ".join(str(row[o]) for o in OUTCOMES)
                       + f" | {row['must_fail']} | {row['total']} |")
        out.append("")
    sections = (("MUST failures", "", must_failures(results)),
                ("SHOULD failures", "; shown, never fail the run", should_failures(results)),
                ("Kit errors", "; bugs of the kit, not verdicts on the endpoint", kit_errors(results)))
    for title, note, checks in sections:
        if checks:
            out += [f"### {title} ({len(checks)}{note})", "", *_failure_rows(checks), ""]
    clients = client_lines(results)
    if clients:
        out += ["### Clients (measured with the faults that plant the failing rules)", "",
                *(f"- {c}" for c in clients), ""]
    if results.get("benchmarks"):
        out += ["### Benchmarks", "", *_benchmark_rows(results["benchmarks"]), ""]
    if report_link:
        out += [f"Full report: {escape(report_link, 300)} (the wire log of every case, at its failing frame).", ""]
    return "\n".join(out).rstrip() + "\n"


def write_markdown(paths: Iterable[str | Path], out: str | Path | None, *, report_link: str | None = None
                   ) -> tuple[dict[str, Any], str]:
    """Load and merge the inputs (as `report` does), render the summary and write it to `out` (None:
    only return it). Returns (the merged document, the Markdown). Raises `ResultsError` on a bad input."""
    merged = merge_results([doc for _, doc in read_inputs(paths)])
    text = to_markdown(merged, report_link=report_link)
    if out is not None:
        target = Path(out)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return merged, text
