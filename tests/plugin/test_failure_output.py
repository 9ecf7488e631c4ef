"""A failed check is said once, with its rule, frame and remedy (issue 45): on the terminal of `check`
and in a CI log, once in the per-check output and once in the MUST list (no `E` line, no
`verdict.py:NN: ...CheckFailed` line, no cut `FAILED ...` line); under plain pytest from another
folder, xdist workers too, the kit's message in place of a traceback; every test id, so every JUnit
name and the live line, carries its check id."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harnesscheck.conformance import catalog
from harnesscheck.conformance.grammar.findings import Finding
from harnesscheck.conformance.verdict import explain

pytest_plugins = ["pytester"]

QUIET = ("-p", "no:cacheprovider", "-p", "no:randomly")
FAULT = "rs-function-tools-only"  # RS-TOOLKIND-001 and -002 fail at once (HTTP 400), with no model turn
MESSAGE = "a request with a custom tool forced: HTTP 400"  # RS-TOOLKIND-002's message starts so
KIT_TRACES = ("verdict.py", "CheckFailed", "Traceback", "raise ", "def test_", "site-packages")


class _Ids:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            marker = item.get_closest_marker("check")
            if marker is not None:
                self.items.append((item.nodeid, marker.args[0]))


def test_every_test_id_carries_its_check_id(pytester: pytest.Pytester) -> None:
    """JUnit names a case by the last part of its node id, the live line finds the id in it, and the
    FAILURES headline is the test's name: each carries the check id, once."""
    probe = _Ids()
    ran = pytester.inline_run("--pyargs", "harnesscheck.conformance", "--collect-only", *QUIET, plugins=[probe])
    assert ran.ret == pytest.ExitCode.OK
    assert len(probe.items) >= 100
    missing = [nodeid for nodeid, check_id in probe.items if nodeid.split("::")[-1].count(check_id) != 1]
    assert not missing, f"{len(missing)} test ids without their check id: {missing[:5]}"
    # `pytest ...::test_custom_tool_call[RS-TOOLKIND-002]`, as the FAILURES headline names it, selects it
    again = _Ids()
    chosen = pytester.inline_run("--pyargs", "harnesscheck.conformance.test_tool_kinds::test_custom_tool_call"
                                 "[RS-TOOLKIND-002]", "--collect-only", *QUIET, plugins=[again])
    assert chosen.ret == pytest.ExitCode.OK
    assert [nodeid.split("::")[-1] for nodeid, _ in again.items] == ["test_custom_tool_call[RS-TOOLKIND-002]"]


def test_check_says_a_failure_once_per_check_and_once_in_the_must_list(tmp_path: Path) -> None:
    """`harnesscheck check` in a CI log (CI=true: pytest would print its FAILED lines uncut): the
    message twice in all, the rule, the remedy and the wire excerpt once, no kit traceback; JUnit
    names the case by its check id and carries the same text."""
    junit = tmp_path / "junit.xml"
    ran = subprocess.run([sys.executable, "-m", "harnesscheck", "check", "--apis", "responses",
                          f"--server-arg=--fault={FAULT}", "-k", "RS-TOOLKIND-002", "--out", str(tmp_path / "out"),
                          "--junit", str(junit)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "CI": "true"})
    out = ran.stdout + ran.stderr
    assert ran.returncode == 1, out
    assert out.count(MESSAGE) == 2, out  # the per-check block, the MUST list
    block = out.split("FAILURES", 1)[1].split("MUST failures", 1)[0]
    assert MESSAGE in block and "MUST failures (1):" in out
    check = catalog.get("RS-TOOLKIND-002")
    assert out.count(f"fix: {check.remedy}") == 1 and f"rule RS-TOOLKIND-002: {check.title}" in block, out
    assert "POST http" in block and "/v1/responses -> 400" in block, out
    assert "FAILED" not in out and not [word for word in KIT_TRACES if word in out], out
    assert "test_custom_tool_call[RS-TOOLKIND-002]" in block  # the headline
    case = ET.parse(junit).getroot().find(".//testcase")
    assert case is not None and case.get("name") == "test_custom_tool_call[RS-TOOLKIND-002]"
    failure = case.find("failure")
    assert failure is not None and failure.get("message", "").startswith(f"RS-TOOLKIND-002 MUST: {MESSAGE}")
    assert f"fix: {check.remedy}" in (failure.text or "") and "CheckFailed" not in (failure.text or "")


def test_plain_pytest_from_another_folder_prints_the_kits_message(pytester: pytest.Pytester) -> None:
    """`pytest --pyargs harnesscheck.conformance` in a folder of the user's, two xdist workers: each
    failure is the kit's block (its report travels from the worker as it is), no traceback through
    the check or verdict.py."""
    ran = pytester.runpytest_subprocess("--pyargs", "harnesscheck.conformance", *QUIET, "-n", "2",
                                        f"--hc-server-arg=--fault={FAULT}", "--hc-apis", "responses",
                                        "-k", "RS-TOOLKIND-001 or RS-TOOLKIND-002", timeout=420)
    out = ran.stdout.str() + ran.stderr.str()
    assert ran.ret == pytest.ExitCode.TESTS_FAILED, out
    ran.assert_outcomes(failed=2)
    for check_id in ("RS-TOOLKIND-001", "RS-TOOLKIND-002"):
        assert out.count(f"{check_id} MUST failed: ") == 1, out
        assert f"fix: {catalog.get(check_id).remedy}" in out
    assert not [word for word in KIT_TRACES if word in out], out


def test_explain_names_the_rule_frame_and_remedy_once() -> None:
    findings = [Finding("AN-GRAMMAR-ONE-OPEN", 24, "block 1 started while block 0 is open", observed="open: [0]",
                        expected="content_block_stop first"),
                Finding("AN-GRAMMAR-BLOCK-UNSTOPPED", 61, "block 0 never stopped")]
    text = explain("AN-STREAM-003", "MUST", "turn 0: block 1 started while block 0 is open", findings=findings,
                   remedy="close each block", excerpt="POST u -> 200\n>> #24 frame")
    assert text.splitlines() == [
        "AN-STREAM-003 MUST failed: turn 0: block 1 started while block 0 is open",
        "  rule AN-GRAMMAR-ONE-OPEN at frame #24",
        "  observed open: [0]; expected content_block_stop first",
        "  also: AN-GRAMMAR-BLOCK-UNSTOPPED at frame #61",
        "  fix: close each block",
        "  POST u -> 200",
        "  >> #24 frame"]
    assert text.count("block 1 started") == 1
    contract = explain("RS-CTX-001", "MUST", "HTTP 500", rule="RS-CTX-001:marker", title="t", remedy="")
    assert contract.splitlines() == ["RS-CTX-001 MUST failed: HTTP 500", "  rule RS-CTX-001:marker"]
    own = explain("RS-TOOLKIND-001", "MUST", "HTTP 400", title="Every tool kind is accepted", remedy="accept them")
    assert own.splitlines() == ["RS-TOOLKIND-001 MUST failed: HTTP 400",
                                "  rule RS-TOOLKIND-001: Every tool kind is accepted", "  fix: accept them"]
