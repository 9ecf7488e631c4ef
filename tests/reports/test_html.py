import json
import re
from html.parser import HTMLParser

import pytest

from harnesscheck.cli.main import main
from harnesscheck.reports.html import rebase_transcripts, render_report, write_report
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
    from harnesscheck.conformance import catalog
    from harnesscheck.conformance.fault_matrix import CLEAN, FaultRun, matrix_json, write

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


# ---- cases: the wire log and timeline of every case whose transcript the run kept ----

def _transcript(event_data):
    frames = [{"index": i, "kind": "event", "event": e, "t_ns": int(t * 1e6), "data": json.dumps(d)}
              for i, (t, e, d) in enumerate(event_data)]
    return {"schema": 1, "api": "anthropic", "method": "POST", "url": "http://127.0.0.1:8123/v1/messages",
            "request_headers": {}, "request_body": {"stream": True}, "status": 200, "response_headers": {},
            "frames": frames, "chunks": [], "body": None, "error": None, "error_kind": None,
            "timings": {"started_at": 0, "start_ns": 0, "headers_ns": 1_000_000, "first_frame_ns": 2_000_000,
                        "end_ns": 9_000_000}}


def _stream_events(text):
    return [(2, "message_start", {"type": "message_start"}),
            (3, "content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text"}}),
            (4.5, "content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": text}}),
            (6, "content_block_stop", {"type": "content_block_stop", "index": 0}),
            (8, "message_stop", {"type": "message_stop"})]


def test_cases_show_wire_logs_of_failing_and_passing_cases_and_say_when_none_was_kept(tmp_path):
    doc = factory.results()
    doc["checks"][0]["transcript"] = "transcripts/AN-STREAM-001.json"  # fail, finding at frame 7: not in it
    doc["checks"][0]["finding"]["frame_index"] = 2
    doc["checks"][1]["transcript"] = "transcripts/AN-STREAM-002.json"  # pass
    doc["checks"][2]["transcript"] = None  # pass, left out by the budget
    doc["checks"][2]["transcript_left_out"] = "9999 bytes, over the per-file cap of 10"
    doc["checks"][3]["transcript"] = None  # pass, a run that kept failing checks' transcripts only
    (tmp_path / "transcripts").mkdir()
    for name, text in (("AN-STREAM-001", HOSTILE), ("AN-STREAM-002", "hi")):
        (tmp_path / "transcripts" / f"{name}.json").write_text(json.dumps(_transcript(_stream_events(text))))
    (tmp_path / "results.json").write_text(json.dumps(doc))
    write_report([tmp_path / "results.json"], tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    case = r'<details class="case" id="([^"]+)"(.*?)</details>\s*(?=<details class="case"|</section>)'
    sections = {m.group(1): m.group(2) for m in re.finditer(case, html, re.S)}
    assert len(sections) == len(doc["checks"])
    failing, passing = sections["d-AN-STREAM-001-anthropic"], sections["d-AN-STREAM-002-anthropic"]
    for body in (failing, passing):
        assert '<table class="wirelog">' in body and '<svg class="timeline"' in body
        assert re.search(r'<td class="num">0</td><td class="num">2\.0</td>', body)  # frame #0 at 2.0 ms
        assert re.search(r'<td class="num">4</td><td class="num">8\.0</td>', body)
        assert "first token: <b>4.5 ms</b>" in body and "end of stream: <b>8.0 ms</b>" in body
    assert 'class="content_block_delta focus"' not in failing and 'class="event focus"' in failing  # frame #2
    assert "finding at #2: <b>4.5 ms</b>" in failing
    assert 'class="event focus"' not in passing
    assert "&lt;script&gt;" in failing and "<script" not in html.lower()
    assert ("Transcript not kept: 9999 bytes, over the per-file cap of 10."
            in sections["d-AN-USAGE-001-anthropic"])
    assert ("Transcript not kept (this run kept transcripts for failing checks only)."
            in sections["d-CH-TOOL-001-chat"])
    assert " open>" in failing.split(">")[0] + ">" and " open" not in passing.split(">")[0]


def test_the_verdict_matrix_has_one_row_per_check_with_the_apis_it_ran_on():
    doc = factory.results()
    doc["checks"].append(factory.check("AN-STREAM-001", "chat", "pass"))  # one id on two APIs
    html = render_report(doc, generated_at="test")
    matrix = html.split('<table class="matrix">')[1].split("</table>\n  ")[0]
    rows = re.findall(r'<tr id="c-([^"]+)"', matrix)
    assert rows == sorted({c["id"] for c in doc["checks"]})
    row = matrix.split('id="c-AN-STREAM-001"')[1].split('<tr id="c-')[0]
    assert re.findall(r'<span class="api-name">(\w+)</span>', row) == ["anthropic", "chat"]
    assert re.findall(r'<a class="badge o-(\w+)" href="#d-AN-STREAM-001-(\w+)"', row) == [
        ("fail", "anthropic"), ("pass", "chat")]
    # the per-client verdicts: a small table whose cells clip, with the whole text as their title
    assert ('<td class="cname" title="claude-code">claude-code</td>'
            '<td class="client bad" title="would break">') in row


def test_settings_are_tables_never_python_reprs():
    doc = factory.results()
    doc["benchmarks"][0]["settings"] = {"turns": 8, "timing_model": {"base_ms": 1.5, "decode_ms": 0.2},
                                        "arms": ["stable", "header"], "strip": True, "extra": None}
    doc["run"]["server"]["engine_settings"] = {"engine": "scripted", "timing_model": {"tokens_per_chunk": 1}}
    html = render_report(doc, generated_at="test")
    assert "{&#39;" not in html and "{'" not in html and "[&#39;" not in html
    for key, value in (("turns", "8"), ("timing_model.base_ms", "1.50"), ("timing_model.decode_ms", "0.2"),
                       ("arms", "stable, header"), ("strip", "yes"), ("extra", "–"), ("tries", "3"),
                       ("timing_model.tokens_per_chunk", "1")):
        assert f'<td class="mono">{key}</td><td class="mono">{value}</td>' in html, key


def test_a_run_with_a_fault_on_shows_its_row_of_the_fault_matrix():
    doc = factory.results(fault_matrix=None)
    doc["run"]["server"]["faults"] = ["an-block-index-skip"]
    for c in doc["checks"]:
        c["faults"] = ["an-block-index-skip"] if c["id"] == "AN-STREAM-001" else ["other-fault"]
    html = render_report(doc, generated_at="test")
    assert 'id="faults"' in html and "1 fault × 8 checks" in html
    assert "This run's server had 1 fault on" in html
    grid = _Grid()
    grid.feed(html)
    marked = sorted(c for c in grid.cells if c[0] not in ("quiet-pass",))
    assert marked[0] == ("caught", "an-block-index-skip × AN-STREAM-001: anthropic: fail (expected fail)",
                         "●")
    # CH-TOOL-002 failed (SHOULD) and MD-ROUTE-001 errored without the fault explaining it
    unexpected = [c[:1] + c[2:] for c in marked if c[0] == "unexpected"]
    assert unexpected == [("unexpected", "!"), ("unexpected", "!")]
    assert "Unexpected outcomes (2)" in html
    del doc["checks"][0]["faults"]  # results written before checks named their faults: no section
    assert 'id="faults"' not in render_report(doc, generated_at="test")


# ---- issue 31: links carry only http(s) URLs; issue 33: the banner, the load section -------------

@pytest.mark.parametrize("target", [
    "javascript:alert(document.domain)", " JavaScript:alert(1)", "java\tscript:alert(1)", "java\nscript:x",
    "\x01javascript:alert(1)", "data:text/html;base64,PHNjcmlwdD4=", "vbscript:msgbox(1)", "file:///etc/passwd",
    "\\\\evil.example\\share", "/\\evil.example/x",
])
def test_a_crafted_transcript_path_never_becomes_a_link(target):
    doc = factory.results(benchmarks=[])
    doc["checks"][0]["transcript"] = target
    html = render_report(doc, generated_at="test")
    parser = _Refs()
    parser.feed(html)
    hrefs = [v for t, n, v in parser.refs if n == "href"]
    assert all(h.startswith("#") or h.startswith("transcripts/") for h in hrefs), hrefs
    assert "Transcript file" in html  # still shown, as text


@pytest.mark.parametrize("target", ["transcripts/AN-STREAM-001-anthropic.json", "../run 2/t.json",
                                    "https://ci.example/artifacts/t.json", "HTTP://ci.example/t.json"])
def test_relative_paths_and_http_urls_stay_links(target):
    from harnesscheck.reports.html import safe_href

    assert safe_href(target) == target
    doc = factory.results(benchmarks=[])
    doc["checks"][0]["transcript"] = target
    assert 'href="' + target.replace(" ", " ") in render_report(doc, generated_at="test")


def _with_clients(*verdicts: dict) -> dict:
    doc = factory.results(benchmarks=[])
    doc["checks"][1]["outcome"] = "fail"  # AN-STREAM-002 beside AN-STREAM-001: two MUST failures
    fails = [c for c in doc["checks"] if c["level"] == "MUST" and c["outcome"] == "fail"]
    for c in doc["checks"]:
        c.pop("clients", None)
    for c, v in zip(fails, verdicts):
        c["clients"] = v
    return doc


@pytest.mark.parametrize(("verdicts", "says", "never"), [
    (({"Codex 0.171.0": "unaffected", "Claude Code 2.1.197": "unaffected"}, {}),
     "2 MUST checks failed. Claude Code 2.1.197: unaffected: each failure was measured with it and it coped "
     "(AN-STREAM-001) · Codex 0.171.0: unaffected", "break"),
    (({"Codex 0.171.0": "unaffected", "Claude Code 2.1.197": "would break"}, {"Codex 0.171.0": "unaffected"}),
     "2 MUST checks failed. Claude Code 2.1.197: would break: AN-STREAM-001", "not measured"),
    # an older document's "no measured impact" reads as not measured: never a break, never a pass
    (({"Codex 0.171.0": "no measured impact"}, {}), "Codex 0.171.0: not measured for this violation: AN-STREAM-001",
     "would break"),
    (({}, {}), "2 MUST checks failed: the endpoint breaks rules that the API reference, an official SDK or "
               "a real client requires.", "would break"),
])
def test_the_banner_says_the_runs_per_client_lines(verdicts, says, never):
    from harnesscheck.reports.clients import client_lines

    doc = _with_clients(*verdicts)
    html = render_report(doc, generated_at="test")
    banner = re.search(r'<div class="banner (\w+)">([^<]*)</div>', html)
    text = __import__("html").unescape(banner.group(2))
    assert banner.group(1) == "bad" and says in text and never not in text, text
    assert all(line in text for line in client_lines(doc)), (client_lines(doc), text)


def test_banner_of_clean_flaky_and_empty_runs():
    from harnesscheck.reports.html import banner

    assert banner(factory.clean(factory.results()))["cls"] == "good"
    assert banner(factory.results(checks=[]))["text"] == "No conformance checks in these results."
    flaky = factory.results()
    for c in flaky["checks"]:
        c["flaky"] = True
    assert banner(flaky)["cls"] == "warn"


@pytest.fixture(scope="module")
def load_doc():
    return factory.load_results()


def test_a_load_report_shows_the_vllm_table_and_the_sweep_plot_before_any_setting(load_doc):
    html = render_report(load_doc, generated_at="test")
    assert "figures[" not in html  # 234 rows of flattened settings before
    for kind in ("concurrency", "rate"):
        section = html.split(f'id="b-load-{kind}-ttft"')[1].split('id="b-')[0]
        table, plot = section.index('<table class="vllm'), section.index(f'alt="{kind} sweep:')
        settings = section.index("<details")
        assert plot < settings and table < settings
        for label in ("Request throughput (req/s)", "Request goodput (req/s)", "Peak concurrent requests",
                      "Peak requests in flight", "Median TTFT (ms)", "P99 E2EL (ms)"):
            assert label in section
        assert re.search(r"<th>\w+ level</th>(<th class=\"num\">[^<]+</th>){3}", section)
        # the sweep's other metrics are folded under it, whole
        for metric in ("tpot", "e2el", "throughput", "output-throughput", "goodput"):
            assert f'<details class="bench folded" id="b-load-{kind}-{metric}">' in html


def test_failures_link_to_their_frame_which_the_case_shows_highlighted_and_should_failures_are_listed(tmp_path):
    # issue 45: the case view opened at frame 0 while the failure was at frame #67; no SHOULD list
    doc = factory.results()
    doc["checks"][0]["transcript"] = "transcripts/AN-STREAM-001.json"
    doc["checks"][0]["finding"]["frame_index"] = 2
    (tmp_path / "transcripts").mkdir()
    (tmp_path / "transcripts" / "AN-STREAM-001.json").write_text(json.dumps(_transcript(_stream_events("hi"))))
    (tmp_path / "results.json").write_text(json.dumps(doc))
    write_report([tmp_path / "results.json"], tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    summary = html[html.index('<section id="summary">'):html.index('<section id="checks">')]
    must = summary[summary.index('class="summary-fails must-list"'):summary.index("SHOULD failures")]
    should = summary[summary.index('class="summary-fails should-list"'):]
    target = "d-AN-STREAM-001-anthropic-f2"
    # the MUST list and the matrix lead to the failing frame's row, naming the rule and the frame
    assert f'href="#{target}">fail</a>' in must
    assert f'<a class="mono" href="#{target}">content_block_delta index must equal the open block&#39;s index at ' \
           "frame #2</a>" in must
    assert html.count(f'href="#{target}"') >= 4  # MUST list (2), matrix id and verdict, the case's own links
    # that row is the highlighted one, the log opens at it, and the finding shows the frame itself
    assert f'<tr id="{target}" class="event focus">' in html
    assert "scroll-initial-target: nearest" in html
    case = html[html.index('id="d-AN-STREAM-001-anthropic"'):html.index('id="d-AN-STREAM-002-anthropic"')]
    assert f'opened at <a href="#{target}">frame #2</a>' in case
    focus = case[case.index('<div class="focus-frame">'):]
    assert focus.startswith('<div class="focus-frame"><b>content_block_delta</b> {&#34;type&#34;: '
                            '&#34;content_block_delta&#34;, &#34;index&#34;: 0')
    # SHOULD failures: listed apart, with their rule and frame (no transcript: the link goes to the case)
    assert "SHOULD failures (1; shown, never fail the run)" in summary
    assert '<b class="mono">CH-TOOL-002</b>' in should and "CH-TOOL-002" not in must
    assert '<a class="mono" href="#d-CH-TOOL-002-chat">id once per index at frame #3</a>' in should
