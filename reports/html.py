"""The HTML report: one self-contained file (inline CSS, benchmark plots as base64 PNG, timelines as
inline SVG, no scripts, no external references) rendered from a results document with the Jinja2
template `report.html.jinja` beside this module, autoescape on. As Autobahn|Testsuite's report: an
index (the verdict matrix, one row per check with the APIs it ran on) and a section per case with
its verdict, rule, expected vs observed, timeline (reports.timeline) and numbered wire log
(reports.wirelog), read from the transcripts beside the results; then the fault matrix (a
fault-matrix document, or this run's row when its server had faults on), benchmarks, comparisons.
A failing case opens at its finding's frame: the row is highlighted, the log scrolled to it (CSS
`scroll-initial-target`, no script), the frame shown beside the rule, and the MUST and SHOULD lists
and the matrix link to that row (`frame_anchor`), so a click lands on it.

Public API:
- `render_report(results, *, generated_at=None, transcripts_base=None) -> str`
- `write_report(paths, out) -> dict`: load (files and folders of results documents, fault-matrix
  documents included: reports.merge.read_inputs), rebase transcript links, merge, render, write;
  returns the merged document.
- `rebase_transcripts(results, results_path, out_path) -> dict`: transcript paths made relative to
  the report's folder.
"""

from __future__ import annotations

import copy
import datetime as dt
import os
import re
from pathlib import Path
from typing import Any, Iterable

import jinja2
from markupsafe import Markup

from harnesscheck import __version__
from harnesscheck.reports import timeline, wirelog
from harnesscheck.reports.merge import merge_results, read_inputs
from harnesscheck.reports.schema import OUTCOMES, validate_results
from harnesscheck.reports.summary import api_order, must_failures, should_failures, summarize

__all__ = ["banner", "case_anchor", "frame_anchor", "rebase_transcripts", "render_report", "safe_href", "write_report"]

TEMPLATE = "report.html.jinja"

# A verdict on a client is "bad" when it contains one of these words; the report colours it red.
_BAD_CLIENT_WORDS = ("break", "fail", "error", "hang", "crash", "wrong")
_SEVERITY = {"error": 5, "fail": 4, "inconclusive": 3, "skip": 2, "pass": 1}


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent)),
        autoescape=True,  # every value is escaped, whatever the template file is called
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["interval"] = _interval
    env.filters["pvalue"] = _pvalue
    env.filters["settings"] = _settings_rows
    env.filters["ms"] = lambda v: "–" if v is None else f"{v:.1f}"
    env.filters["link"] = safe_href
    return env


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f]+")


def safe_href(value: Any) -> str | None:
    """`value` as a link target when it is one a report may carry: an http(s) URL or a relative path
    (a transcript beside the results); None for anything else (javascript:, data:, file:, ...), which
    the report then shows as text. Browsers drop tabs, newlines and leading spaces from a URL before
    reading its scheme, so the scheme is read the same way."""
    if not isinstance(value, str) or not value.strip():
        return None
    bare = _INVISIBLE.sub("", value)
    match = _SCHEME.match(bare)
    if match is None:
        return None if bare.startswith(("\\", "/\\")) else value  # no scheme: a relative reference
    return value if match.group(1).lower() in ("http", "https") else None


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    a = abs(value)
    if a >= 1000:
        return f"{value:,.0f}"
    if a >= 100:
        return f"{value:.1f}"
    return f"{value:.{digits}g}" if a < 1 else f"{value:.2f}"


def _interval(ci: Any) -> str:
    if not ci or len(ci) != 2 or ci[0] is None or ci[1] is None:
        return "–"
    return f"[{_num(ci[0])}, {_num(ci[1])}]"


def _pvalue(p: Any) -> str:
    if p is None:
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _client_bad(verdict: str) -> bool:
    v = verdict.lower()
    return any(w in v for w in _BAD_CLIENT_WORDS) and "unaffected" not in v


def _matrix(results: dict[str, Any], apis: list[str]) -> dict[str, Any]:
    """Rows of the verdict matrix: one per check id with the APIs it ran on (each with its outcome),
    the worst outcome, and the client verdicts aggregated (a "bad" verdict wins)."""
    rows: dict[str, dict[str, Any]] = {}
    for c in results.get("checks", []):
        row = rows.setdefault(
            c["id"],
            {"id": c["id"], "title": c["title"], "level": c["level"], "source": c.get("source", ""),
             "cells": [], "clients": {}, "flaky": False},
        )
        if c["level"] == "MUST":
            row["level"] = "MUST"
        row["flaky"] = row["flaky"] or bool(c.get("flaky"))
        row["cells"].append(c)
        for name, verdict in (c.get("clients") or {}).items():
            prev = row["clients"].get(name)
            if prev is None or (_client_bad(verdict) and not _client_bad(prev)):
                row["clients"][name] = verdict
    for row in rows.values():
        row["cells"].sort(key=lambda c: apis.index(c["api"]) if c["api"] in apis else 99)
        row["worst"] = max((_SEVERITY[c["outcome"]] for c in row["cells"]), default=0)
        row["outcome"] = max(row["cells"], key=lambda c: _SEVERITY[c["outcome"]])["outcome"]
    return {"rows": sorted(rows.values(), key=lambda r: r["id"]),
            "has_clients": any(row["clients"] for row in rows.values())}


def case_anchor(check: dict[str, Any]) -> str:
    """The id of a case's section: one per (check id, API)."""
    return f"d-{check['id']}-{check['api']}"


def frame_anchor(check: dict[str, Any], frame: Any) -> str:
    """The id of a frame's row in a case's wire log."""
    return f"{case_anchor(check)}-f{frame}"


def _cases(results: dict[str, Any], base: Path | None) -> list[dict[str, Any]]:
    """One view per case (check × API): the results entry, its wire log and, for a stream, its timeline;
    `target`, where a link to the case lands: the row of the finding's frame when the wire log shows
    it (the browser scrolls the page and the log to it), else the case."""
    out = []
    for c in sorted(results.get("checks", []), key=lambda c: (c["id"], c["api"])):
        finding = c.get("finding") or {}
        focus = finding.get("frame_index")
        loaded = wirelog.load(c, base)
        log = svg = markers = None
        if loaded.doc is not None:
            log = wirelog.wire_log(loaded.doc, focus)
            tl = timeline.analyse(loaded.doc, focus)
            if tl is not None:
                svg = Markup(timeline.render_svg(tl, title=f"timeline of {c['id']} ({c['api']})"))
                markers = tl.markers
        focused = log is not None and log.focus is not None
        out.append({"c": c, "anchor": case_anchor(c), "missing": loaded.missing, "log": log, "svg": svg,
                    "markers": markers, "target": frame_anchor(c, focus) if focused else case_anchor(c)})
    return out


def _run_fault_matrix(results: dict[str, Any]) -> dict[str, Any] | None:
    """The fault matrix of one run against a server with faults on: a row per fault, a cell per check
    that ran; a check is expected to fail under the faults its catalog entry names (`faults`)."""
    faults = list((results.get("run", {}).get("server") or {}).get("faults") or [])
    checks = results.get("checks", [])
    if not faults or not checks or not all("faults" in c for c in checks):
        return None
    cells = [{"fault": f, "check": c["id"], "api": c["api"], "outcome": c["outcome"],
              "expected_fail": f in c["faults"],
              "explained": any(g in c["faults"] for g in faults if g != f)}
             for f in faults for c in checks]
    return {"faults": [{"name": f, "description": "", "source": ""} for f in faults],
            "checks": list(dict.fromkeys(c["id"] for c in checks)), "cells": cells, "problems": [],
            "from_run": True}


_SETTINGS_DEPTH = 12  # deeper than any setting the kit writes: a crafted document's nesting stops here


def _settings_rows(value: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, str]]:
    """A nested settings mapping as (dotted key, value) rows: lists joined, never a Python repr."""
    if depth > _SETTINGS_DEPTH:
        return [(prefix, "…")]
    if isinstance(value, dict):
        rows: list[tuple[str, str]] = []
        for k, v in value.items():
            rows += _settings_rows(v, f"{prefix}.{k}" if prefix else str(k), depth + 1)
        return rows or [(prefix, "–")] if prefix else rows
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return [(prefix, ", ".join(_scalar(v) for v in value) or "–")]
        return [r for n, v in enumerate(value) for r in _settings_rows(v, f"{prefix}[{n}]", depth + 1)]
    return [(prefix, _scalar(value))]


def _scalar(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return _num(value, 4)
    return str(value)


def _fault_grid(fm: dict[str, Any] | None, levels: dict[str, str]) -> dict[str, Any] | None:
    if not fm:
        return None
    checks = list(fm.get("checks") or [])
    for cell in fm.get("cells", []):
        if cell["check"] not in checks:
            checks.append(cell["check"])
    grid: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for cell in fm.get("cells", []):
        grid.setdefault((cell["fault"], cell["check"]), []).append(cell)
    faults = list(fm.get("faults") or [])
    known = {f["name"] for f in faults}
    for cell in fm.get("cells", []):
        if cell["fault"] not in known:
            faults.append({"name": cell["fault"], "description": "", "source": ""})
            known.add(cell["fault"])

    unexpected: list[dict[str, Any]] = []
    rows = []
    for f in faults:
        row_cells = []
        for cid in checks:
            cells = grid.get((f["name"], cid), [])
            if not cells:
                row_cells.append({"cls": "none", "mark": "", "tip": f"{cid}: not run under {f['name']}"})
                continue
            expected = any(c["expected_fail"] for c in cells)
            caught = any(c["outcome"] == "fail" for c in cells)
            stray = [c for c in cells if not c["expected_fail"] and not c.get("explained")
                     and c["outcome"] in ("fail", "error")]
            missed = expected and not caught
            tip = "; ".join(f"{c.get('api', '?')}: {c['outcome']}"
                            + (" (expected fail)" if c["expected_fail"] else "") for c in cells)
            if missed or stray:
                cls, mark = "unexpected", "!" if stray else "✗"
                why = "expected to fail, did not" if missed else "failed, not expected to"
                unexpected.append({"fault": f["name"], "check": cid, "why": why, "outcomes": tip,
                                   "level": levels.get(cid, "")})
            elif expected:
                cls, mark = "caught", "●"
            else:
                worst = max(cells, key=lambda c: _SEVERITY.get(c["outcome"], 0))["outcome"]
                cls, mark = f"quiet-{worst}", {"pass": "", "skip": "s", "inconclusive": "?"}.get(worst, "")
            row_cells.append({"cls": cls, "mark": mark, "tip": f"{f['name']} × {cid}: {tip}"})
        rows.append({"fault": f, "cells": row_cells})
    return {"checks": checks, "rows": rows, "unexpected": unexpected,
            "problems": list(fm.get("problems") or []), "from_run": bool(fm.get("from_run")),
            "n_expected": sum(1 for c in fm.get("cells", []) if c["expected_fail"])}


# A `bench load` level's figures as `vllm bench serve` prints them: (key, label, digits); key None: a heading.
def _sweep_rows() -> list[tuple[str | None, str, int]]:
    rows: list[tuple[str | None, str, int]] = [
        ("completed", "Successful requests", 0), ("failed", "Failed requests", 0),
        ("duration", "Benchmark duration (s)", 2), ("total_input_tokens", "Total input tokens", 0),
        ("total_output_tokens", "Total generated tokens", 0),
        ("request_throughput", "Request throughput (req/s)", 2), ("request_goodput", "Request goodput (req/s)", 2),
        ("output_throughput", "Output token throughput (tok/s)", 2),
        ("max_output_tokens_per_s", "Peak output token throughput (tok/s)", 2),
        ("max_concurrent_requests", "Peak concurrent requests (vLLM: busiest second)", 0),
        ("max_in_flight", "Peak requests in flight (at one instant)", 0),
        ("total_token_throughput", "Total token throughput (tok/s)", 2)]
    for key, name, heading in (("ttft", "TTFT", "Time to First Token"),
                               ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
                               ("itl", "ITL", "Inter-token Latency"), ("e2el", "E2EL", "End-to-end Latency")):
        rows += [(None, heading, 0), (f"mean_{key}_ms", f"Mean {name} (ms)", 2),
                 (f"median_{key}_ms", f"Median {name} (ms)", 2), (f"p90_{key}_ms", f"P90 {name} (ms)", 2),
                 (f"p99_{key}_ms", f"P99 {name} (ms)", 2)]
    return rows


_SWEEP_ROWS = _sweep_rows()


def _sweep(b: dict[str, Any]) -> dict[str, Any] | None:
    """A `bench load` sweep's view: the levels as columns of the vLLM-style table, and its plot."""
    raw = b.get("settings")
    settings: dict[str, Any] = raw if isinstance(raw, dict) else {}
    listed = settings.get("figures")
    figures = [f for f in listed if isinstance(f, dict)] if isinstance(listed, list) else []
    if not figures:
        return None
    from harnesscheck.reports import plots

    kind = str(settings.get("sweep") or "")
    rows: list[dict[str, Any]] = []
    for key, label, digits in _SWEEP_ROWS:
        if key is None:
            rows.append({"heading": label})
        elif any(f.get(key) is not None for f in figures):
            rows.append({"label": label, "values": [_fixed(f.get(key), digits) for f in figures]})
    return {"kind": kind, "levels": [str(f.get("label") or f.get("level", "?")) for f in figures], "rows": rows,
            "png": plots.sweep_plot(kind, figures)}


def _fixed(value: Any, digits: int) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:,.{digits}f}"


def _benchmarks(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per benchmark: what a person reads first (a sweep's vLLM-style table and plot; the arms'
    plot and table), then its settings, folded (a sweep's per-level figures are the table, not
    settings rows). A `bench load` benchmark without the figures (the sweep's other metrics) is
    folded whole under its sweep's."""
    if not results.get("benchmarks"):
        return []
    from harnesscheck.reports import plots  # matplotlib takes seconds to import: only for a report with benchmarks

    out = []
    for b in results.get("benchmarks") or []:
        ratios = []
        for r in b.get("ratios") or []:
            ci = r.get("ci95")
            if ci and len(ci) == 2 and ci[0] is not None and ci[1] is not None:
                verdict = "higher" if ci[0] > 1 else "lower" if ci[1] < 1 else "no clear difference"
            else:
                verdict = "no interval"
            ratios.append(r | {"verdict": verdict})
        settings = b.get("settings") if isinstance(b.get("settings"), dict) else {}
        sweep = _sweep(b)
        out.append(b | {
            "ratios_view": ratios,
            "arms_png": plots.arms_plot(b),
            "ratios_png": plots.ratios_plot(b),
            "sweep": sweep,
            "folded": sweep is None and "sweep" in settings,
            "settings_rows": _settings_rows({k: v for k, v in settings.items() if k != "figures"}),
        })
    return out


def banner(results: dict[str, Any]) -> dict[str, str]:
    """The report's verdict line, `{"cls": good|warn|bad, "text": ...}`: the failing MUST checks, then the
    run's one statement per real client (reports.clients: the lines the CLI prints and JUnit carries)."""
    if not results.get("checks"):
        return {"cls": "warn", "text": "No conformance checks in these results."}
    from harnesscheck.reports.clients import WOULD_BREAK, client_verdicts  # the one per-client statement

    verdicts = client_verdicts(results)
    breaks = " · ".join(v.line for v in verdicts if v.verdict == WOULD_BREAK)
    fails = must_failures(results)
    gating = [c for c in fails if not c.get("flaky")]
    if not fails:
        text = "Every MUST check passed (or was skipped / inconclusive)."
        return {"cls": "warn", "text": f"{text} {breaks}"} if breaks else {"cls": "good", "text": text}
    if not gating:
        return {"cls": "warn", "text": f"Only checks marked flaky failed among the MUST checks ({len(fails)})."
                                      + (f" {breaks}" if breaks else "")}
    n = len(gating)
    head = f"{n} MUST check{'s' if n != 1 else ''} failed"
    if verdicts:
        return {"cls": "bad", "text": f"{head}. " + " · ".join(v.line for v in verdicts)}
    return {"cls": "bad", "text": f"{head}: the endpoint breaks rules that the API reference, an official SDK or "
                                  "a real client requires."}


def render_report(results: dict[str, Any], *, generated_at: str | None = None,
                  transcripts_base: str | Path | None = None) -> str:
    """Render one (validated or merged) results document to a self-contained HTML page; the cases'
    transcripts are read from `transcripts_base` (the folder their paths are relative to: the
    report's), and without it each case says its transcript was not read."""
    validate_results(results)
    apis = api_order(results)
    run = results["run"]
    levels = {c["id"]: c["level"] for c in results.get("checks", [])}
    fails = must_failures(results)
    cases = _cases(results, None if transcripts_base is None else Path(transcripts_base))
    targets = {k["anchor"]: k["target"] for k in cases}
    context = {
        "run": run,
        "server": run.get("server") or {},
        "machine": run.get("machine") or {},
        "apis": apis,
        "outcomes": OUTCOMES,
        "summary": summarize(results),
        "must_failures": fails,
        "must_failures_gating": [c for c in fails if not c.get("flaky")],
        "should_failures": should_failures(results),
        "banner": banner(results),
        "matrix": _matrix(results, apis),
        "fault": _fault_grid(results.get("fault_matrix") or _run_fault_matrix(results), levels),
        "cases": cases,
        "settings": _settings_rows(run.get("settings") or {}),
        "engine_settings": _settings_rows((run.get("server") or {}).get("engine_settings") or {}),
        "benchmarks": _benchmarks(results),
        "comparisons": results.get("comparisons") or [],
        "sources": run.get("merged_from") or [],
        "kit_version": __version__,
        "generated_at": generated_at or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "client_bad": _client_bad,
        "case_anchor": case_anchor,
        "case_target": lambda c: targets.get(case_anchor(c), case_anchor(c)),
    }
    return _env().get_template(TEMPLATE).render(**context)


def rebase_transcripts(results: dict[str, Any], results_path: str | Path, out_path: str | Path) -> dict[str, Any]:
    """A copy whose relative transcript paths (relative to the results file) are made relative to
    the folder of `out_path`, so the report's links work wherever it is written."""
    doc = copy.deepcopy(results)
    src_dir = Path(results_path).resolve().parent
    out_dir = Path(out_path).resolve().parent
    for c in doc.get("checks", []):
        t = c.get("transcript")
        if not t or "://" in t or os.path.isabs(t):
            continue
        c["transcript"] = Path(os.path.relpath(src_dir / t, out_dir)).as_posix()
    return doc


def write_report(paths: Iterable[str | Path], out: str | Path) -> dict[str, Any]:
    """Load each input (a results or fault-matrix file, or a folder of them), merge them (later
    documents override earlier), write the HTML to `out`.

    Returns the merged document. Raises `ResultsError` on a bad input.
    """
    out = Path(out)
    docs = [rebase_transcripts(doc, p, out) for p, doc in read_inputs(paths)]
    merged = merge_results(docs)
    html = render_report(merged, transcripts_base=out.resolve().parent)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return merged
