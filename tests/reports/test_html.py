import json
import re
from html.parser import HTMLParser

import pytest

from harnesscheck.cli import main
from reports.html import rebase_transcripts, render_report, write_report
from tests.reports import factory
from tests.reports.factory import HOSTILE


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs = []
        self.tags = []
        self.details = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "details":
            self.details += 1
        for name, value in attrs:
            if name in ("src", "href", "srcset", "action", "data", "poster", "background") and value:
                self.refs.append((tag, name, value))


@pytest.fixture(scope="module")
def html():
    return render_report(factory.results(), generated_at="test")


def test_report_is_self_contained(html):
    parser = _Refs()
    parser.feed(html)
    external = [r for r in parser.refs if re.match(r"^\s*(https?:)?//", r[2], re.I)]
    assert external == []
    assert "script" not in parser.tags and "link" not in parser.tags and "iframe" not in parser.tags
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", html)
    assert "@import" not in html
    images = [v for t, n, v in parser.refs if t == "img"]
    assert len(images) == 2 and all(v.startswith("data:image/png;base64,") for v in images)


def test_report_contains_every_check_and_the_failure_details(html):
    doc = factory.results()
    for c in doc["checks"]:
        assert c["id"] in html
    finding = doc["checks"][0]["finding"]
    assert "content_block_delta index must equal the open block&#39;s index" in html
    assert "#7 event: content_block_delta data: {&#34;index&#34;:2}   &lt;-- here" in html
    assert 'href="transcripts/AN-STREAM-001-anthropic.json"' in html
    assert 'id="d-AN-STREAM-001-anthropic"' in html and "<details" in html
    assert finding["expected"] in html
    # header, summary, per-harness verdicts, fault matrix, benchmarks, comparisons
    for text in ("http://127.0.0.1:8123", "scripted/qwen3-coder", "scripted-model", "embedded", "engine scripted",
                 "MUST failures", "would break", "claude-code", "Fault matrix", "Unexpected outcomes (1)",
                 "header/stable", "reasoning-kept-vs-dropped", "0.033"):
        assert text in html, text


def test_hostile_strings_are_escaped():
    doc = factory.results()
    doc["run"]["model"] = HOSTILE
    doc["run"]["endpoint"] = "http://x/" + HOSTILE
    c = doc["checks"][0]
    c["title"] = c["message"] = HOSTILE
    c["finding"]["excerpt"] = HOSTILE
    c["finding"]["observed"] = HOSTILE
    c["clients"] = {HOSTILE: "would break"}  # a verdict is one of the schema's three; a name is free text
    c["transcript"] = 'x" onmouseover="alert(1)'
    doc["benchmarks"][0]["title"] = HOSTILE
    doc["benchmarks"][0]["arms"][0]["name"] = HOSTILE
    doc["benchmarks"][0]["ratios"][0]["denominator"] = HOSTILE  # arm 0 is "stable"
    doc["benchmarks"][0]["ratios"][1]["denominator"] = HOSTILE
    doc["comparisons"][0]["name"] = HOSTILE
    doc["fault_matrix"]["faults"][0]["description"] = HOSTILE
    html = render_report(doc, generated_at="test")
    assert "<script" not in html.lower()
    assert "&lt;script&gt;" in html
    assert 'onmouseover="' not in html


def test_report_without_optional_sections():
    doc = {"schema": "harnesscheck.results", "schema_version": "1.0", "run": factory.run_meta(),
           "checks": [factory.check("AN-STREAM-001", "anthropic")]}
    html = render_report(doc, generated_at="test")
    assert "Every MUST check passed" in html
    assert "Fault matrix" not in html and 'id="benchmarks"' not in html and "<img" not in html


def test_rebase_transcripts(tmp_path):
    doc = factory.results()
    out = rebase_transcripts(doc, tmp_path / "run1" / "results.json", tmp_path / "site" / "report.html")
    assert out["checks"][0]["transcript"] == "../run1/transcripts/AN-STREAM-001-anthropic.json"
    assert doc["checks"][0]["transcript"] == "transcripts/AN-STREAM-001-anthropic.json"
    same = rebase_transcripts(doc, tmp_path / "results.json", tmp_path / "report.html")
    assert same["checks"][0]["transcript"] == "transcripts/AN-STREAM-001-anthropic.json"


def test_report_command_merges_and_writes(tmp_path, capsys):
    a = tmp_path / "a" / "results.json"
    b = tmp_path / "b" / "results.json"
    a.parent.mkdir()
    b.parent.mkdir()
    a.write_text(json.dumps(factory.results()))
    second = factory.clean(factory.results())
    second["run"]["id"] = "run-b"
    b.write_text(json.dumps(second))
    out = tmp_path / "out" / "report.html"
    assert main(["report", str(a), str(b), "--out", str(out)]) == 0
    html = out.read_text()
    assert "Merged from 2 runs" in html and "run-b" in html
    printed = capsys.readouterr().out
    assert "anthropic" in printed and f"report written to {out}" in printed


def test_report_command_bad_input_exits_2(tmp_path, capsys):
    bad = tmp_path / "results.json"
    bad.write_text('{"schema": "harnesscheck.results", "schema_version": "1.0"}')
    assert main(["report", str(bad), "--out", str(tmp_path / "r.html")]) == 2
    assert "'run' is a required property" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "none.json"), "--out", str(tmp_path / "r.html")]) == 2


def test_comparison_in_the_shape_stats_compare_writes():
    doc = factory.results()
    doc["comparisons"] = [{
        "name": "kept-vs-dropped", "metric": "resolved", "a": "kept", "b": "dropped", "n_tasks": 40,
        "totals": {"a": 31, "b": 24}, "means": {"a": 0.775, "b": 0.6},
        "difference": {"definition": "b - a", "total": -7, "mean": -0.175},
        "wins": 9, "losses": 2, "ties": 29, "p_permutation": 0.0004, "p_wilcoxon": None,
        "ci95_mean_diff": [-0.325, -0.025],
    }]
    html = render_report(doc, generated_at="test")
    assert "kept-vs-dropped" in html and "0.775" in html and "-0.175" in html and "(b - a)" in html
    assert "&lt; 0.001" in html


# ---- a fault-matrix document (harnesscheck faults --matrix) as the report's fault-matrix section ----

class _Grid(HTMLParser):
    """The fault-matrix cells: (class, title, text) of every <td class="g ...">."""

    def __init__(self):
        super().__init__()
        self.cells = []
        self._open = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "td" and (attrs.get("class") or "").startswith("g "):
            self._open = [attrs["class"].split()[1], attrs.get("title", ""), ""]

    def handle_data(self, data):
        if self._open is not None:
            self._open[2] += data

    def handle_endtag(self, tag):
        if tag == "td" and self._open is not None:
            self.cells.append(tuple(self._open))
            self._open = None


def _fault_matrix_file(tmp_path):
    """fault-matrix.json as `faults --matrix` writes it, from three runs: the clean server, a fault its
    check catches, and a fault whose check did not fail (two problems: it did not fail, and so no
    check failed on a rule the fault plants)."""
    from conformance import catalog
    from conformance.fault_matrix import CLEAN, FaultRun, matrix_json, write

    ids = [c.id for c in catalog.CHECKS]
    clean = FaultRun(CLEAN, {i: "pass" for i in ids})
    caught = FaultRun("preamble-simple-strip", {i: "fail" if i == "AN-PREAMBLE-002" else "pass" for i in ids},
                      rules={"AN-PREAMBLE-002": list(catalog.PLANTED["preamble-simple-strip"])})
    missed = FaultRun("thinking-off-by-default", {i: "pass" for i in ids})
    return write(matrix_json([clean, caught, missed]), tmp_path / "fm"), len(ids)


def test_report_renders_a_fault_matrix_document(tmp_path, capsys):
    path, n_checks = _fault_matrix_file(tmp_path)
    out = tmp_path / "report.html"
    assert main(["report", str(path), "--out", str(out)]) == 0
    html = out.read_text()
    assert 'id="faults"' in html and f"2 faults × {n_checks} checks" in html
    grid = _Grid()
    grid.feed(html)
    assert len(grid.cells) == 2 * n_checks
    marked = sorted(c for c in grid.cells if c[0] not in ("quiet-pass", "none"))
    assert marked == [
        ("caught", "preamble-simple-strip × AN-PREAMBLE-002: anthropic: fail (expected fail)", "●"),
        ("unexpected", "thinking-off-by-default × AN-HIST-003: anthropic: pass (expected fail)", "✗"),
    ]
    assert "Problems the fault matrix found (2)" in html
    assert "<li class=\"mono\">thinking-off-by-default: AN-HIST-003 should fail, got pass</li>" in html
    assert ("<li class=\"mono\">thinking-off-by-default: no check failed on a rule it plants (AN-HIST-003)</li>"
            in html)
    assert "expected to fail, did not" in html  # the unexpected-outcomes table names the cell
    assert "No conformance checks in these results." in html and "Every MUST check passed" not in html
    printed = capsys.readouterr().out
    assert f"report written to {out}" in printed and "MUST failed" not in printed  # no empty check table


def test_report_puts_a_fault_matrix_beside_a_conformance_run(tmp_path):
    path, _ = _fault_matrix_file(tmp_path)
    results = tmp_path / "results.json"
    results.write_text(json.dumps(factory.results(fault_matrix=None)))
    out = tmp_path / "report.html"
    assert main(["report", str(results), str(path), "--out", str(out), "--quiet"]) == 0
    html = out.read_text()
    header = html.split("<nav>")[0]
    assert "http://127.0.0.1:8123" in header and "scripted/qwen3-coder" in header  # the conformance run
    assert 'id="c-AN-STREAM-001"' in html and "thinking-off-by-default: AN-HIST-003 should fail" in html
    assert "Merged from 2 runs" in html and "fault-matrix:fault-matrix.json" in html


def test_report_refuses_other_json(tmp_path, capsys):
    other = tmp_path / "other.json"
    other.write_text('{"faults": [], "cells": []}')
    assert main(["report", str(other), "--out", str(tmp_path / "r.html")]) == 2
    assert "not a harnesscheck results document" in capsys.readouterr().err
