"""The per-client lines of whole runs against real server processes (issue 39): a line stands on a
measurement of the same violation or on the client's own recorded session, and the CLI, results.json,
JUnit and the report say the same of each client."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from html import unescape
from pathlib import Path

from harnesscheck.conformance.runner import SuiteOptions, run_suite
from harnesscheck.reference_server.launch import ServerProcess
from harnesscheck.reports.clients import RANK_OF, client_lines, client_verdicts
from harnesscheck.reports.html import render_report
from tests.cli.helpers import harnesscheck
from tests.processes import http_process

ROOT = Path(__file__).resolve().parents[2]
FAST = ("--decode-ms", "0.2", "--ttft-base-ms", "1", "--prefill-us-per-token", "50")


def test_a_gateway_refusing_tool_choice_any_breaks_no_client(tmp_path: Path) -> None:
    """An Anthropic gateway that refuses `tool_choice: {"type": "any"}` with a 400 fails the forced-call
    checks, but neither Claude Code nor OpenClaw sends that choice and both recorded sessions pass: no
    line says "would break" (invalid-tool-json, which plants AN-TOOLS-006 as malformed JSON and broke
    both clients, is a measurement of another violation); the refusal is said to be not measured."""
    with ServerProcess(list(FAST)) as upstream, http_process(
            lambda port: [sys.executable, "-m", "tests.conformance.any_refusing_gateway", "--upstream", upstream.url,
                          "--port", str(port)], "/v1/models", cwd=ROOT, startup_s=30) as url:
        doc = run_suite(SuiteOptions(endpoint=url, apis="anthropic", timeout=30.0,
                                     select="AN-TOOLS-001 or AN-TOOLS-006 or AN-CLIENT-001 or AN-CLIENT-002"),
                        tmp_path, subprocess_run=True, quiet=True)
    outcomes = {c["id"]: c["outcome"] for c in doc["checks"]}
    # one finding per deviation (issue 41): the refusal is AN-TOOLS-001's, which sends the forced choice;
    # AN-TOOLS-006 judges streamed arguments, not the refusal again
    assert outcomes.pop("AN-TOOLS-006") != "fail", doc
    assert outcomes == {"AN-TOOLS-001": "fail", "AN-CLIENT-001": "pass", "AN-CLIENT-002": "pass"}, outcomes
    tools_001 = next(c for c in doc["checks"] if c["id"] == "AN-TOOLS-001")
    assert set(tools_001["violations"].values()) == {"refused"}, tools_001
    lines = client_lines(doc)
    assert len(lines) == 2 and not any("would break" in line for line in lines), lines
    for line in lines:
        assert "not measured for this violation: AN-TOOLS-00" in line and "refused (HTTP 4xx)" in line, line
        assert "invalid-tool-json" not in line, line
    assert doc["clients"] == {v.client: {**doc["clients"][v.client], "line": v.line} for v in client_verdicts(doc)}


def _banner(html: str) -> str:
    found = re.search(r'<div class="banner (\w+)">([^<]*)</div>', html)
    assert found, "no banner"
    return unescape(found.group(2))


def test_an_unstarted_block_says_the_same_of_each_client_everywhere(tmp_path: Path) -> None:
    """`--fault an-delta-unstarted-block`: both Anthropic clients' own sessions fail at the stray delta.
    Claude Code was measured breaking on it: its line says it would break, at that frame. The printed
    lines, results.json's `clients`, JUnit's properties and the report's banner are one statement per
    client, and none says "no measured impact" or that no failure concerns a client."""
    ran = harnesscheck("run", "--apis", "anthropic", "-k", "AN-STREAM-003 or AN-CLIENT-001 or AN-CLIENT-002",
                       "--server-arg=--fault=an-delta-unstarted-block", "--out", "out", "--junit", "out/junit.xml",
                       cwd=tmp_path, timeout=300)
    assert ran.rc == 1, ran.out + ran.err
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    lines = [v["line"] for v in doc["clients"].values()]
    printed = ran.out.split("real clients:\n", 1)[1].splitlines()
    assert [p.strip() for p in printed if p.startswith("  ") and not p.startswith("      ")] == lines, ran.out
    properties = {p.get("name"): p.get("value") for p in ET.parse(tmp_path / "out" / "junit.xml").getroot().iter(
        "property") if (p.get("name") or "").startswith("client ")}
    assert sorted(properties.values()) == sorted(lines), properties
    banner = _banner((tmp_path / "out" / "report.html").read_text())
    assert all(line in banner for line in lines), (banner, lines)
    claude = doc["clients"]["Claude Code 2.1.197"]
    assert claude["verdict"] == "would break" and claude["frame"] == 2, claude
    assert "its own recorded session (AN-CLIENT-001) failed at frame #2" in claude["line"], claude
    assert ">> #2" in ran.out and "would break: Claude Code 2.1.197" in ran.out.splitlines()[-1]
    openclaw = doc["clients"]["OpenClaw 2026.9.6"]
    assert openclaw["verdict"] != "no failure" and "frame #2" in openclaw["line"], openclaw
    assert "no measured impact" not in ran.out


def test_the_banner_and_the_cases_agree(tmp_path: Path) -> None:
    """`--fault chat-repeat-tool-id-name`: OpenClaw's session answers repeat the call's id and name (frame
    13), the stream check fails on the same rule, the SDK oracle on its own. The run's line for OpenClaw is
    the strongest of what the checks' columns say of it (a case never says worse than the banner, and
    the banner never worse than some case), and the banner carries the line."""
    doc = run_suite(SuiteOptions(apis="chat", select="CH-STREAM-001 or CH-CLIENT-001 or CH-SDK-001",
                                 server_args=("--fault=chat-repeat-tool-id-name",)),
                    tmp_path, subprocess_run=True, quiet=True)
    assert {c["id"]: c["outcome"] for c in doc["checks"]} == dict.fromkeys(
        ("CH-STREAM-001", "CH-SDK-001", "CH-CLIENT-001"), "fail")
    session = next(c for c in doc["checks"] if c["id"] == "CH-CLIENT-001")
    assert session["finding"]["frame_index"] is not None and session["client_session"] == "OpenClaw 2026.9.6"
    (verdict,) = client_verdicts(doc)
    columns = [RANK_OF[c["clients"][verdict.client]] for c in doc["checks"] if verdict.client in c.get("clients", {})]
    assert columns and RANK_OF[verdict.verdict] == max(columns), (verdict, [c.get("clients") for c in doc["checks"]])
    banner = _banner(render_report(doc, generated_at="test"))
    assert verdict.line in banner and "no real client was measured" not in banner, banner
