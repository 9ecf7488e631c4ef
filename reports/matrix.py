"""A compatibility matrix: several results documents side by side, check by check.

`harnesscheck compare RUN_A RUN_B [...]` with results folders or files (two stacks, or two nights of one)
reads each run with `merge.load_merged` and lays them out as one table: a row per check (in the order the
runs list them), a column per run, each cell the outcome with its level (a failure's weight, an
inconclusive check's cause). A row whose cells differ is a change (the terminal marks it with `*`, the
Markdown in bold, the HTML highlighted); the per-client lines of each run follow the table. Pure: the
documents in, text out; the CLI reads and writes the files.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnesscheck.reports import clients
from harnesscheck.reports.merge import load_merged

ABSENT = "—"


@dataclass(frozen=True)
class Run:
    """One column: its label and its (merged) results document."""

    label: str
    doc: dict[str, Any]


@dataclass(frozen=True)
class Row:
    check: str
    api: str
    title: str
    cells: tuple[str, ...]
    changed: bool


@dataclass(frozen=True)
class Matrix:
    runs: tuple[Run, ...]
    rows: tuple[Row, ...]
    clients: tuple[tuple[str, ...], ...] = field(default_factory=tuple)  # per run, its client lines

    @property
    def changes(self) -> list[Row]:
        return [r for r in self.rows if r.changed]


def load_run(spec: str) -> Run:
    """`LABEL=PATH` or `PATH` (a results folder or file): the label defaults to the folder's name, or the file's
    folder's name for a file called results.json. `ResultsError` (from merge) for unreadable input."""
    label, sep, path = spec.partition("=")
    if not sep or not label or "/" in label:
        label, path = "", spec
    p = Path(path)
    if not label:
        label = (p.parent.name if p.is_file() and p.name == "results.json" else p.stem if p.is_file() else p.name) \
            or str(p)
    return Run(label=label, doc=load_merged([p]))


def cell(check: dict[str, Any] | None) -> str:
    """A check's result in a few words: `pass`, `FAIL MUST`, `fail SHOULD`, `inconclusive (timeout)`, `skip`."""
    if check is None:
        return ABSENT
    outcome = str(check.get("outcome", "?"))
    if outcome == "fail":
        level = str(check.get("level") or "")
        return f"FAIL {level}" if level == "MUST" else f"fail {level}".strip()
    if outcome == "inconclusive" and check.get("cause"):
        return f"inconclusive ({check['cause']})"
    return outcome


def client_lines(doc: dict[str, Any]) -> tuple[str, ...]:
    """The run's per-client statements, from the one summariser every output reads (reports/clients.py)."""
    return tuple(clients.client_lines(doc))


def build(runs: Sequence[Run]) -> Matrix:
    order: list[str] = []
    info: dict[str, tuple[str, str]] = {}
    by_run: list[dict[str, dict[str, Any]]] = []
    for run in runs:
        checks = {}
        for c in run.doc.get("checks") or []:
            cid = str(c.get("id"))
            checks[cid] = c
            if cid not in info:
                order.append(cid)
                info[cid] = (str(c.get("api", "")), str(c.get("title", "")))
        by_run.append(checks)
    rows = []
    for cid in order:
        cells = tuple(cell(checks.get(cid)) for checks in by_run)
        rows.append(Row(cid, *info[cid], cells=cells, changed=len(set(cells)) > 1))
    return Matrix(tuple(runs), tuple(rows), tuple(client_lines(r.doc) for r in runs))


def _run_note(run: Run) -> str:
    r = run.doc.get("run") or {}
    bits = [str(r.get("endpoint", "")), str(r.get("model", "")), str(r.get("started_at", ""))[:16]]
    return ", ".join(b for b in bits if b)


def _counts(m: Matrix, i: int) -> str:
    cells = [r.cells[i] for r in m.rows]
    passed = sum(c == "pass" for c in cells)
    must = sum(c.startswith("FAIL") for c in cells)
    should = sum(c.startswith("fail") for c in cells)
    inconclusive = sum(c.startswith("inconclusive") for c in cells)
    return f"{passed} pass, {must} MUST fail, {should} SHOULD fail, {inconclusive} inconclusive"


def to_markdown(m: Matrix, *, only_changes: bool = False) -> str:
    out = ["# Compatibility matrix", ""]
    for i, run in enumerate(m.runs):
        out.append(f"- **{run.label}**: {_run_note(run)} ({_counts(m, i)})")
    out += ["", f"{len(m.changes)} of {len(m.rows)} checks differ between the runs.", ""]
    out.append("| check | API | " + " | ".join(r.label for r in m.runs) + " |")
    out.append("|---|---|" + "---|" * len(m.runs))
    for row in m.rows:
        if only_changes and not row.changed:
            continue
        cid = f"**{row.check}**" if row.changed else row.check
        cells = [f"**{c}**" if row.changed else c for c in row.cells]
        out.append(f"| {cid} | {row.api} | " + " | ".join(cells) + " |")
    if any(m.clients):
        out += ["", "## Per-client lines", ""]
        for run, lines in zip(m.runs, m.clients):
            out.append(f"**{run.label}**")
            out += [f"- {line}" for line in lines] or ["- (none recorded)"]
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def to_text(m: Matrix, *, only_changes: bool = False) -> str:
    """A plain table for the terminal: a changed row starts with `*`."""
    head = ["", "check", *[r.label for r in m.runs]]
    body = [["*" if r.changed else "", r.check, *r.cells] for r in m.rows if r.changed or not only_changes]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(str(x[i]).ljust(widths[i]) for i in range(len(head))).rstrip() for x in [head, *body]]
    lines.append(f"{len(m.changes)} of {len(m.rows)} checks differ (*)")
    for run, client in zip(m.runs, m.clients):
        for line in client:
            lines.append(f"{run.label}: {line}")
    return "\n".join(lines) + "\n"


_CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}tr.changed{background:#fff4cc}
.pass{color:#176b2c}.FAIL{color:#fff;background:#b00020}.fail{color:#8a5a00}.inconclusive{color:#555}
.skip{color:#777}th{background:#f3f3f3;position:sticky;top:0}"""


def to_html(m: Matrix, *, title: str = "harnesscheck compatibility matrix") -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(r.label)}<br><small>{esc(_run_note(r))}</small></th>" for r in m.runs)
    rows = []
    for row in m.rows:
        tds = "".join(f'<td class="{esc(c.split(" ")[0])}">{esc(c)}</td>' for c in row.cells)
        rows.append(f'<tr class="{"changed" if row.changed else ""}"><td>{esc(row.check)}</td>'
                    f'<td>{esc(row.api)}</td><td>{esc(row.title)}</td>{tds}</tr>')
    clients = "".join(
        f"<h3>{esc(run.label)}</h3><ul>" + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul>"
        for run, lines in zip(m.runs, m.clients) if lines)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1>"
            f"<p>{len(m.changes)} of {len(m.rows)} checks differ between the runs (highlighted).</p>"
            f"<table><tr><th>check</th><th>API</th><th>title</th>{head}</tr>{''.join(rows)}</table>"
            + (f"<h2>Per-client lines</h2>{clients}" if clients else "") + "</body></html>\n")
