"""The pytest plugin as pytest users run it (pytester, real pytest sessions): its options under one
prefix, `-k CHECK-ID`, xdist workers merged into one results.json with one embedded server, every
check's transcript with index.json, JUnit properties, and the Done-when line of issue 20:
`pytest --pyargs harnesscheck.conformance --hc-endpoint URL -k AN-DISPATCH-001 -n 2` against a real server."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from harnesscheck.conformance import catalog
from harnesscheck.conformance.options import EMBEDDED_SERVER_ARGS
from harnesscheck.reference_server.launch import ServerProcess

pytest_plugins = ["pytester"]

QUIET = ("-p", "no:cacheprovider", "-p", "no:randomly")


def _results(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_options_are_prefixed_and_bare_names_are_not_added(pytester: pytest.Pytester) -> None:
    ran = pytester.runpytest_inprocess("--help", *QUIET)
    text = ran.stdout.str()
    for name in ("endpoint", "model", "api-key", "apis", "tries", "timeout", "transcripts", "results", "expect",
                 "witness", "server-arg", "no-preflight"):
        assert re.search(rf"^\s+--hc-{name}\b", text, re.M), f"--hc-{name} missing from pytest --help"
    for bare in ("endpoint", "model", "results", "tries", "apis", "transcripts"):
        assert not re.search(rf"^\s+--{bare}\b", text, re.M), f"the plugin still adds bare --{bare}"
    # a bare name is now an unknown option to pytest, not one of ours
    refused = pytester.runpytest_inprocess("--results", "r.json", "--collect-only", *QUIET)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR


class _KeywordProbe:
    """After collection (and the plugin's keywords), which items `-k ID` would select, per check id,
    by pytest's own -k matcher."""

    def __init__(self) -> None:
        self.selected: dict[str, list[str]] = {}
        self.marked: dict[str, str] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        from _pytest.mark import KeywordMatcher
        from _pytest.mark.expression import Expression

        for item in items:
            marker = item.get_closest_marker("check")
            if marker is not None:
                self.marked[item.nodeid] = marker.args[0]
        for check in catalog.CHECKS:
            expr = Expression.compile(check.id)
            self.selected[check.id] = [i.nodeid for i in items if expr.evaluate(KeywordMatcher.from_item(i))]


def test_every_check_id_selects_its_test_with_k(pytester: pytest.Pytester) -> None:
    probe = _KeywordProbe()
    ran = pytester.inline_run("--pyargs", "harnesscheck.conformance", "--collect-only", *QUIET, plugins=[probe])
    assert ran.ret == pytest.ExitCode.OK
    assert len(probe.marked) >= 50, probe.marked
    tested = set(probe.marked.values())
    for check_id in sorted(tested):
        own = [nodeid for nodeid, cid in probe.marked.items() if cid == check_id]
        chosen = probe.selected[check_id]
        assert set(own) <= set(chosen), f"-k {check_id} selects {chosen}, not its test {own}"
        others = [n for n in chosen if probe.marked.get(n) != check_id and not probe.marked[n].startswith(check_id)]
        assert not others, f"-k {check_id} also selects {others}"


def test_xdist_merges_every_worker_into_one_results_json(pytester: pytest.Pytester) -> None:
    """-n 2 over four checks: both workers run some, results.json holds all four (not the last
    worker's), their transcripts sit in one folder with index.json, all sent to one embedded server
    (the controller's: one port in every transcript), and JUnit carries each check's properties."""
    selected = ["AN-ROUTE-001", "AN-ROUTE-002", "AN-ROUTE-003", "AN-ERR-002"]
    ran = pytester.runpytest_subprocess(
        "--pyargs", "harnesscheck.conformance", *QUIET, "-n", "2", "-v", "--hc-apis", "anthropic", "-k", " or ".join(selected),
        "--hc-results", "out/results.json", "--junitxml", "out/junit.xml", timeout=420)
    out = ran.stdout.str()
    assert ran.ret == pytest.ExitCode.OK, out + ran.stderr.str()
    assert "[gw0]" in out and "[gw1]" in out, "both workers should have run checks"
    doc = _results(pytester.path / "out" / "results.json")
    assert sorted(c["id"] for c in doc["checks"]) == sorted(selected)
    assert {c["outcome"] for c in doc["checks"]} == {"pass"}
    assert doc["run"]["settings"]["workers"] == 2 and doc["run"]["endpoint"] == "embedded reference server"
    index = _results(pytester.path / "out" / "transcripts" / "index.json")
    assert sorted(index["checks"]) == sorted(selected)
    ports = set()
    for check in doc["checks"]:
        row = index["checks"][check["id"]]
        path = pytester.path / "out" / check["transcript"]
        assert path.name == row["file"] == f"{check['id']}.json" and path.stat().st_size == row["bytes"]
        assert row["outcome"] == "pass"
        ports.add(urlsplit(json.loads(path.read_text(encoding="utf-8"))["url"]).port)
    assert len(ports) == 1, f"the workers talked to {len(ports)} servers, not the controller's one"
    cases = ET.parse(pytester.path / "out" / "junit.xml").getroot().findall(".//testcase")
    props = [{p.get("name"): p.get("value") for p in case.iter("property")} for case in cases]
    assert sorted(p["check_id"] for p in props) == sorted(selected)
    for p in props:
        level = str(catalog.get(p["check_id"]).level)
        assert (p["check_level"], p["level"], p["outcome"]) == (level, level, "pass"), p


@pytest.fixture(scope="module")
def reference_server():
    with ServerProcess(list(EMBEDDED_SERVER_ARGS)) as server:
        yield server


def test_done_when_k_check_id_with_two_workers(pytester: pytest.Pytester, reference_server: ServerProcess) -> None:
    """Issue 20's Done-when line, exactly: `pytest --pyargs harnesscheck.conformance --hc-endpoint URL -k
    AN-DISPATCH-001 -n 2` selects that check, and results.json holds it."""
    ran = pytester.runpytest_subprocess(
        "--pyargs", "harnesscheck.conformance", "--hc-endpoint", reference_server.url, "-k", "AN-DISPATCH-001", "-n", "2",
        "--hc-results", "results.json", *QUIET, timeout=300)
    assert ran.ret == pytest.ExitCode.OK, ran.stdout.str()
    ran.assert_outcomes(passed=1)
    doc = _results(pytester.path / "results.json")
    assert [(c["id"], c["outcome"]) for c in doc["checks"]] == [("AN-DISPATCH-001", "pass")]
    assert doc["run"]["endpoint"] == reference_server.url


def test_check_selects_by_id_and_leaves_no_stray_folder(tmp_path: Path) -> None:
    """`harnesscheck check -k ID` runs that check (the CLI's pytest command line, its own config) and
    leaves only its output folder behind: no .benchmarks/ (pytest-benchmark's storage) or caches."""
    import subprocess
    import sys

    ran = subprocess.run([sys.executable, "-m", "harnesscheck", "check", "--apis", "anthropic", "-k", "AN-ROUTE-002",
                          "--out", "out"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    doc = _results(tmp_path / "out" / "results.json")
    assert [(c["id"], c["outcome"]) for c in doc["checks"]] == [("AN-ROUTE-002", "pass")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["results.json", "transcripts"]
