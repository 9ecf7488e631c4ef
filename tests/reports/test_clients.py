"""The one summariser of a run's per-client verdicts (reports/clients.py): what it says of each client, in
which order of evidence, and that the CLI, the report, JUnit and results.json say exactly that."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

from harnesscheck.cli.commands.check import client_summary
from harnesscheck.reports import clients
from harnesscheck.reports.html import render_report
from harnesscheck.reports.schema import validate_results
from harnesscheck.reports.summary import final_line
from tests.reports import factory

CC, CX, OC = "Claude Code 2.1.197", "Codex 0.171.0", "OpenClaw 2026.9.6"
EXCERPT = ("POST http://127.0.0.1:9/v1/messages -> 200\n   #6   1.0 ms event: message_start  data: {}\n"
           ">> #7   2.0 ms event: content_block_delta  data: {\"index\":0}\n")


def _session(cid: str, api: str, label: str, outcome: str, **over: Any) -> dict[str, Any]:
    return factory.check(cid, api, outcome, client_session=label, **over)


def _doc() -> dict[str, Any]:
    """Claude Code: its own session failed at frame 7 (and a check measured it breaking); Codex: a failure
    never measured in its form; OpenClaw: a failure measured and coped with, its session passed."""
    failed_session = _session("AN-CLIENT-001", "anthropic", CC, "fail",
                              message=f"{CC} (claude-code) request 2 of 3: the answer breaks AN-GRAMMAR-X at frame #7: "
                                      "delta for a block never started",
                              finding={**factory.failing_finding(EXCERPT), "rule": "AN-CLIENT-001:grammar"},
                              rules_failed=["AN-CLIENT-001:grammar", "AN-GRAMMAR-X"],
                              clients={CC: "would break"}, client_evidence={CC: "its own recorded session ..."})
    checks = [
        failed_session,
        _session("AN-CLIENT-002", "anthropic", OC, "pass"),
        factory.check("AN-STREAM-003", "anthropic", "fail", rules_failed=["AN-GRAMMAR-X"],
                      clients={CC: "unaffected", OC: "unaffected"},
                      client_evidence={CC: "AN-GRAMMAR-X: measured with fault f, turns completed",
                                       OC: "AN-GRAMMAR-X: measured with fault f, turns completed"}),
        factory.check("RS-TOOLS-006", "responses", "fail", rules_failed=["RS-TOOLS-006"],
                      clients={CX: "not measured"},
                      client_evidence={CX: "not measured for this violation: RS-TOOLS-006: a request refused (HTTP "
                                           "4xx) (HTTP 400: tool_choice)"}),
        factory.check("RS-STREAM-001", "responses", "fail", level="SHOULD", clients={CX: "unaffected"}),
        factory.check("CH-STREAM-001", "chat", "pass"),
    ]
    return clients.reconcile(factory.results(checks=checks, benchmarks=[], comparisons=[], fault_matrix=None))


def test_each_client_gets_the_strongest_evidence_there_is() -> None:
    by = {v.client: v for v in clients.client_verdicts(_doc())}
    assert list(by) == [CC, CX, OC]
    assert by[CC].verdict == clients.WOULD_BREAK and by[CC].frame == 7 and by[CC].checks == ("AN-CLIENT-001",)
    assert by[CC].line.startswith(f"{CC}: would break: its own recorded session (AN-CLIENT-001) failed at frame #7: "
                                  "request 2 of 3: the answer breaks AN-GRAMMAR-X"), by[CC].line
    assert by[CC].frame_text.startswith(">> #7"), by[CC].frame_text
    assert by[CX].line == f"{CX}: not measured for this violation: RS-TOOLS-006: a request refused (HTTP 4xx) " \
                          "(HTTP 400: tool_choice)"
    assert by[OC].verdict == clients.UNAFFECTED and "AN-STREAM-003" in by[OC].line
    assert by[OC].verdict != clients.WOULD_BREAK


def test_a_failed_session_makes_the_checks_on_its_rule_say_so() -> None:
    doc = _doc()
    stream = next(c for c in doc["checks"] if c["id"] == "AN-STREAM-003")
    assert stream["clients"] == {CC: "would break", OC: "unaffected"}  # OpenClaw's own session passed
    assert "its own recorded session (AN-CLIENT-001) failed on this rule at frame #7" in stream["client_evidence"][CC]


def test_a_session_measured_coping_names_its_frame_and_is_no_break() -> None:
    doc = factory.results(checks=[_session("CH-CLIENT-001", "chat", OC, "fail", finding=factory.failing_finding(),
                                           rules_failed=["CH-CLIENT-001:grammar", "CH-GRAMMAR-TOOL-REPEAT"],
                                           clients={OC: "unaffected"},
                                           client_evidence={OC: "its own recorded session (CH-CLIENT-001) failed at "
                                                                "frame #7: ...; a violation it was measured to cope "
                                                                "with (CH-GRAMMAR-TOOL-REPEAT: measured with fault "
                                                                "chat-repeat-tool-id-name, turns completed)"})],
                          benchmarks=[], comparisons=[], fault_matrix=None)
    (v,) = clients.client_verdicts(clients.reconcile(doc))
    assert v.verdict == clients.UNAFFECTED and v.frame == 7 and "frame #7" in v.line and "cope" in v.line, v


def test_no_failure_and_an_older_documents_words() -> None:
    clean = factory.results(checks=[_session("RS-CLIENT-001", "responses", CX, "pass"),
                                    _session("RS-CLIENT-002", "responses", CX, "pass")],
                            benchmarks=[], comparisons=[], fault_matrix=None)
    assert clients.client_lines(clean) == [f"{CX}: no failing check concerns it: its own recorded sessions "
                                           "(RS-CLIENT-001, RS-CLIENT-002) passed"]
    assert clients.inferred(clean) == {CX: "unaffected"}  # the comparison's word for it
    old = factory.results(checks=[factory.check("AN-STREAM-001", "anthropic", "fail",
                                                clients={CC: "no measured impact"})],
                          benchmarks=[], comparisons=[], fault_matrix=None)
    assert clients.client_verdicts(old)[0].verdict == clients.NOT_MEASURED


def test_a_measurement_against_the_endpoint_is_said_beside_the_inference() -> None:
    doc = _doc()
    doc["client_verification"] = {
        "endpoint": "http://127.0.0.1:9", "model": "m", "apis": ["anthropic", "responses"],
        "clients": {"codex": {"label": CX, "api": "responses", "turns": {}, "measured": "breaks", "skipped": ""},
                    "openclaw": {"label": OC, "api": "anthropic", "turns": {}, "measured": "",
                                 "skipped": "not installed"}},
        "comparison": [{"client": CX, "inferred": "not measured", "measured": "breaks", "agrees": True,
                        "by_api": {"responses": "breaks"}}]}
    by = {v.client: v.line for v in clients.client_verdicts(validate_results(doc))}
    assert by[CX].endswith("; measured against this endpoint: breaks (responses breaks)"), by[CX]
    assert by[OC].endswith("; not run (not installed, over anthropic)"), by[OC]


def test_one_document_gives_the_same_lines_to_the_cli_the_report_junit_and_results() -> None:
    """The same per-client lines, whoever reads the document: the CLI's (and its last line), the report's
    banner, JUnit's properties and results.json's `clients`."""
    doc = _doc()
    lines = clients.client_lines(doc)
    cli = client_summary(doc)
    assert [line.strip() for line in cli if line.startswith("  ") and not line.startswith("      ")] == lines
    assert any(line.strip().startswith(">> #7") for line in cli)  # the frame the failed session names
    assert final_line(doc).endswith(f"would break: {CC}"), final_line(doc)
    banner = unescape(re.search(r'<div class="banner \w+">([^<]*)</div>', render_report(doc, generated_at="t"))[1])
    assert all(line in banner for line in lines), (banner, lines)
    assert [value for _, value in clients.junit_properties(doc)] == lines
    summary = clients.summary(doc)
    assert [s["line"] for s in summary.values()] == lines
    validate_results({**doc, "clients": summary})
