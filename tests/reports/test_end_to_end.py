"""Issue 10's proof, end to end: a run against the clean reference server and one against a faulty
one give two reports and a gate verdict naming exactly the newly failing checks; a benchmark slowed
on purpose (the server's timing model) trips the gate, noise at the same settings does not."""

from __future__ import annotations

import json
from pathlib import Path

from harnesscheck.conformance import catalog
from harnesscheck.conformance.runner import SuiteOptions, run_suite
from harnesscheck.replay.benchmarks.preamble import PreambleOptions, run_preamble
from harnesscheck.reports.gate import gate
from harnesscheck.reports.html import write_report

FAULT = "an-block-index-skip"
SELECT = "test_streams or test_sdk"


def test_clean_vs_faulty_reports_and_gate(tmp_path: Path) -> None:
    clean = run_suite(SuiteOptions(select=SELECT), tmp_path / "clean", subprocess_run=True, quiet=True)
    faulty = run_suite(SuiteOptions(select=SELECT, server_args=(f"--fault={FAULT}",)), tmp_path / "faulty",
                       subprocess_run=True, quiet=True)
    for name in ("clean", "faulty"):
        html = write_report([tmp_path / name / "results.json"], tmp_path / name / "report.html")
        assert html["checks"]
        assert (tmp_path / name / "report.html").stat().st_size > 1000
    verdict = gate(clean, faulty)
    ran = {c["id"] for c in clean["checks"]}
    expected = {c.id for c in catalog.checks_for_fault(FAULT) if c.level == catalog.MUST} & ran
    assert expected, "the selection must include a check that catches the fault"
    assert not verdict.passed
    newly = {change.id for change in verdict.newly_failing}
    assert newly == expected


def _bench(tmp_path: Path, name: str, **timing: float) -> dict:
    opts = PreambleOptions(system_tokens=1500, sessions=6, **timing)
    doc = run_preamble(opts)
    (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    return doc


def test_slowed_benchmark_trips_the_gate_and_noise_does_not(tmp_path: Path) -> None:
    settings = {"ttft_base_ms": 20.0, "prefill_us_per_token": 100.0, "decode_ms": 1.0}
    base = _bench(tmp_path, "base", **settings)
    noise = _bench(tmp_path, "noise", **settings)
    slowed = _bench(tmp_path, "slowed", **{**settings, "ttft_base_ms": 120.0})
    assert gate(base, noise, threshold=0.10).passed, "same settings must not trip the gate"
    assert not gate(base, slowed, threshold=0.10).passed, "a 100 ms slower TTFT must trip the gate"
