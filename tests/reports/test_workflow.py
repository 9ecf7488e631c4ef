"""The nightly GitHub Actions workflow: its shape, and its own step scripts run here, night after
night, against the reference server, proving that the gate gates a benchmark.

`_Night` plays a GitHub Actions runner for the job's `run:` steps (bash -eo pipefail, `${{ }}`
expressions, step conditions, step outputs), in a folder that stands for the checkout: `baseline/`
survives from night to night as the committed baseline does, `results/` does not. Each night gets a
fresh reference server, its scripted timing model at the usual speed or slowed down.

Lean, and steady on a loaded machine: the nights are manual runs whose inputs ask for 8 benchmark
sessions and a 25 % threshold (the server's own work per request, about 30 to 100 ms here depending
on the load, moves between nights; the modelled 300 ms dominates it, and the slowed night's 900 ms
is twice the threshold away); PYTEST_ADDOPTS narrows the conformance step to the stream-grammar
checks, in the environment of the step, as a CI user can (the whole suite is the conformance tests').
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import yaml

from harnesscheck.cli.main import main
from harnesscheck.reference_server.launch import ServerProcess
from tests.reports import factory

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "nightly.yml"
INSTALL_STEP = "Install harnesscheck"  # the one run step not replayed: this environment is the install
USUAL = ("--ttft-base-ms", "300", "--prefill-us-per-token", "100", "--decode-ms", "1")
SLOWED = ("--ttft-base-ms", "900", "--prefill-us-per-token", "100", "--decode-ms", "1")
INPUTS = {"sessions": "8", "threshold": "0.25"}
SUITE = {"PYTEST_ADDOPTS": "-k test_stream_grammar"}
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_LITERAL = re.compile(r"'([^']*)'")
# three nights, each a server, a check, a benchmark, a gate and a report (~80 s of modelled time): the slow
# tier, which CI runs after the README's command (tests/conftest.py)
def NIGHTS(test):  # noqa: N802 - a decorator named like the marks it applies
    return pytest.mark.slow(pytest.mark.timeout(600)(test))


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def test_nightly_workflow_shape():
    wf = _workflow()
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as True
    assert "schedule" in triggers and triggers["schedule"][0]["cron"]
    assert "workflow_dispatch" in triggers
    job = wf["jobs"]["nightly"]
    steps = job["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/checkout@") for u in uses)
    setup = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"]["python-version"] == "3.11"
    install = next(s for s in steps if s.get("name") == INSTALL_STEP)
    assert "pip install -e '.[test]'" in install["run"]
    assert job["env"]["HARNESSCHECK_API_KEY"] == "${{ secrets.HARNESSCHECK_API_KEY }}"
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")
                  and s["with"]["path"] == "results/")
    assert upload["if"] == "always()"
    report = next(s for s in steps if "harnesscheck report" in s.get("run", ""))
    assert report["if"].startswith("always()")
    new_baseline = next(s for s in steps if s.get("with", {}).get("name") == "baseline")
    assert new_baseline["with"]["path"].startswith("baseline/")


# ---- a GitHub Actions runner for the job's run steps --------------------------------------------

@dataclass
class _Night:
    """One night of the workflow's job in `checkout`, against `url`, with workflow_dispatch `inputs`
    (none for a scheduled night): each run step's output and exit status (None: skipped)."""

    checkout: Path
    url: str
    model: str
    inputs: dict[str, str] = field(default_factory=dict)
    rc: dict[str, int | None] = field(default_factory=dict)
    log: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def value(self, expression: str) -> str:
        """A `${{ }}` expression: names, `'literals'` and `a || b`, as the workflow uses them."""
        for term in (t.strip() for t in expression.split("||")):
            if m := _LITERAL.fullmatch(term):
                found = m.group(1)
            elif term.startswith("secrets."):
                found = {"HARNESSCHECK_ENDPOINT": self.url, "HARNESSCHECK_MODEL": self.model,
                         "HARNESSCHECK_API_KEY": ""}[term.removeprefix("secrets.")]
            elif term.startswith("github.event.inputs."):
                found = self.inputs.get(term.removeprefix("github.event.inputs."), "")
            elif term.startswith("steps."):
                found = self.outputs.get(term, "")
            else:
                raise AssertionError(f"nightly.yml uses ${{{{ {expression} }}}}, unknown to this test")
            if found:
                return found
        return ""

    def expand(self, text: str) -> str:
        return _EXPRESSION.sub(lambda m: self.value(m.group(1)), text)

    def should_run(self, condition: str | None, failed: bool) -> bool:
        """GitHub's step condition: success() unless a status function says otherwise."""
        terms = [t.strip() for t in (condition or "").split("&&") if t.strip()]
        status = not failed
        for term in terms:
            if term == "always()":
                status = True
            elif term == "success()":
                status = not failed
            elif m := re.fullmatch(r"hashFiles\('([^']+)'\) != ''", term):
                if not any(self.checkout.glob(m.group(1))):
                    return False
            else:
                raise AssertionError(f"nightly.yml step condition {term!r} is unknown to this test")
        return status

    def run(self, job: dict) -> _Night:
        self.checkout.mkdir(parents=True, exist_ok=True)
        summary = self.checkout / "step-summary.md"
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               "GITHUB_STEP_SUMMARY": str(summary), "PYTHONUNBUFFERED": "1", **SUITE}
        env |= {k: self.expand(str(v)) for k, v in job["env"].items()}
        failed = False
        for i, step in enumerate(job["steps"]):
            if "run" not in step or step["name"] == INSTALL_STEP:
                continue
            if not self.should_run(step.get("if"), failed):
                self.rc[step["name"]] = None
                continue
            output = self.checkout / f"github-output-{i}"
            output.write_text("")
            script = self.checkout / f"step-{i}.sh"
            script.write_text(self.expand(step["run"]))
            started = time.monotonic()
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                                  cwd=self.checkout, env=env | {"GITHUB_OUTPUT": str(output)},
                                  capture_output=True, text=True, timeout=240)
            self.rc[step["name"]], self.log[step["name"]] = proc.returncode, proc.stdout + proc.stderr
            self.seconds[step["name"]] = round(time.monotonic() - started, 1)
            failed = failed or proc.returncode != 0
            for line in output.read_text().splitlines():
                key, _, value = line.partition("=")
                if step.get("id"):
                    self.outputs[f"steps.{step['id']}.outputs.{key}"] = value
        return self


def _night(checkout: Path, server_args: tuple[str, ...], **inputs: str) -> _Night:
    """A night in `checkout` against a fresh server: `results/` starts empty, `baseline/` is kept."""
    results = checkout / "results"
    if results.exists():
        subprocess.run(["rm", "-rf", str(results)], check=True)
    with ServerProcess(server_args) as server:
        model = httpx.get(server.url + "/v1/models", timeout=10).json()["data"][0]["id"]
        return _Night(checkout, server.url, model, INPUTS | inputs).run(_workflow()["jobs"]["nightly"])


def _baseline(checkout: Path) -> dict[str, str]:
    """The baseline folder's documents: file name -> the run id inside."""
    files = sorted((checkout / "baseline").glob("*.json"))
    return {p.name: json.loads(p.read_text())["run"]["id"] for p in files}


def _gate_verdict(night: _Night) -> dict:
    return json.loads((night.checkout / "results" / "gate.json").read_text())


@pytest.fixture(scope="module")
def nights(tmp_path_factory) -> dict[str, _Night]:
    """The first night (run by hand with update_baseline: it creates baseline/), then a scheduled
    night at the same speed, then a scheduled night with the server slowed down."""
    checkout = tmp_path_factory.mktemp("checkout")
    first = _night(checkout, USUAL, update_baseline="true")
    baseline = _baseline(checkout)
    unchanged = _night(checkout, USUAL)
    unchanged_verdict = _gate_verdict(unchanged)
    slowed = _night(checkout, SLOWED)
    return {"first": first, "baseline": baseline, "unchanged": unchanged,
            "unchanged_verdict": unchanged_verdict, "slowed": slowed}


@NIGHTS
def test_first_night_writes_the_baseline_folder(nights):
    first = nights["first"]
    assert first.rc["Conformance checks"] == 0, first.log["Conformance checks"]
    assert first.rc["Benchmark (preamble)"] == 0, first.log["Benchmark (preamble)"]
    assert first.rc["Regression gate"] == 0, first.log["Regression gate"]
    assert "wrote the current results as the baseline" in first.log["Regression gate"]
    assert sorted(nights["baseline"]) == ["bench-preamble.json", "results.json"]


@NIGHTS
def test_unchanged_night_passes_the_gate_having_compared_the_benchmark(nights):
    night, verdict = nights["unchanged"], nights["unchanged_verdict"]
    assert night.rc["Regression gate"] == 0, night.log["Regression gate"]
    assert verdict["passed"] is True
    arms = {(b["benchmark"], b["arm"]): b for b in verdict["benchmarks"]}
    assert set(arms) == {("preamble-ttft", "stable"), ("preamble-ttft", "header")}, verdict["benchmarks"]
    for arm in arms.values():
        assert arm["n_baseline"] == arm["n_current"] == int(INPUTS["sessions"]) and arm["ci95"] is not None
        assert not arm["gating"]
    assert "no benchmark in common" not in night.log["Regression gate"]
    assert night.rc["HTML report"] == 0 and night.rc["Job summary"] == 0


@NIGHTS
def test_slowed_night_fails_the_gate_on_the_benchmark_alone(nights):
    night = nights["slowed"]
    assert night.rc["Conformance checks"] == 0, night.log["Conformance checks"]
    assert night.rc["Regression gate"] == 1, night.log["Regression gate"]
    verdict = _gate_verdict(night)
    assert verdict["passed"] is False and verdict["newly_failing_ids"] == []
    log = night.log["Regression gate"]
    # every arm's median moved past the threshold; the arms whose interval clears it gate (a load
    # spike among a night's 8 samples can leave one arm's interval too wide to clear it)
    limit = 1 + float(INPUTS["threshold"])
    arms = {b["arm"]: b for b in verdict["benchmarks"] if b["benchmark"] == "preamble-ttft"}
    assert set(arms) == {"stable", "header"} and all(b["ratio"] > limit for b in arms.values()), log
    assert verdict["regressions"] and all(b["benchmark"] == "preamble-ttft" and b["ci95"][0] > limit
                                          for b in verdict["regressions"]), log
    assert "harnesscheck gate: FAIL:" in log and "benchmark regression" in log and "REGRESSION" in log
    # the job goes on: the report (checks and benchmark, from results/) and the summary are written
    assert night.rc["HTML report"] == 0, night.log["HTML report"]
    html = (night.checkout / "results" / "report.html").read_text()
    assert 'id="benchmarks"' in html and "preamble-ttft" in html and 'id="c-AN-STREAM-001"' in html
    summary = (night.checkout / "step-summary.md").read_text()
    assert "check exit status: 0" in summary and "benchmark regression" in summary
    # a failing gate leaves the baseline as it was
    assert _baseline(night.checkout) == nights["baseline"]


# ---- gate and report over folders (no server) ----------------------------------------------------

def _bench_doc(run_id: str, started_at: str, scale: float = 1.0) -> dict:
    doc = factory.results(benchmarks=[factory.benchmark(scale=scale)], checks=[], comparisons=[],
                          fault_matrix=None)
    doc["run"] = factory.run_meta(id=run_id, started_at=started_at, apis=["anthropic"])
    return doc


def _folder(path: Path, docs: dict[str, dict]) -> str:
    path.mkdir(parents=True, exist_ok=True)
    for name, doc in docs.items():
        (path / name).write_text(json.dumps(doc))
    return str(path)


def _conformance(run_id: str, started_at: str) -> dict:
    doc = factory.clean(factory.results(benchmarks=[], comparisons=[], fault_matrix=None))
    doc["run"] = factory.run_meta(id=run_id, started_at=started_at)
    return doc


def test_gate_reads_folders_checks_and_benchmarks_together(tmp_path, capsys):
    base = _folder(tmp_path / "baseline", {
        "results.json": _conformance("base-check", "2024-06-01T02:00:00+00:00"),
        "bench-preamble.json": _bench_doc("base-bench", "2024-06-01T02:10:00+00:00")})
    slow = _folder(tmp_path / "slow", {
        "results.json": _conformance("cur-check", "2024-06-02T02:00:00+00:00"),
        "bench-preamble.json": _bench_doc("cur-bench", "2024-06-02T02:10:00+00:00", scale=1.5),
        "gate.json": {"passed": True}})  # another tool's JSON in the folder is passed over
    (tmp_path / "slow" / "transcripts").mkdir()
    (tmp_path / "slow" / "transcripts" / "x.json").write_text("{not json")  # subfolders are not read
    out = tmp_path / "verdict" / "gate.json"
    assert main(["gate", "--baseline", base, "--current", slow, "--out", str(out.parent)]) == 1
    verdict = json.loads(out.read_text())
    assert verdict["newly_failing_ids"] == []
    assert {b["arm"] for b in verdict["regressions"]} == {"stable", "header", "stripped"}
    assert verdict["current_run"] == "merge:cur-check+cur-bench"  # results.json started first
    assert "3 benchmark regressions" in capsys.readouterr().out

    # a new MUST failure in the folder's results.json gates too
    failing = _conformance("cur-check", "2024-06-02T02:00:00+00:00")
    failing["checks"][0]["outcome"] = "fail"
    bench = _bench_doc("b", "2024-06-02T02:10:00+00:00")
    same = _folder(tmp_path / "failing", {"results.json": failing, "bench-preamble.json": bench})
    assert main(["gate", "--baseline", base, "--current", same, "--out", str(out.parent)]) == 1
    verdict = json.loads(out.read_text())
    assert verdict["newly_failing_ids"] == ["AN-STREAM-001 [anthropic]"] and verdict["regressions"] == []


def test_gate_folder_input_errors(tmp_path, capsys):
    good = _folder(tmp_path / "good", {"results.json": _conformance("a", "2024-06-01T02:00:00+00:00")})
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.json").write_text('{"note": 1}')
    assert main(["gate", "--baseline", good, "--current", str(empty)]) == 2
    assert "no harnesscheck results document in this folder" in capsys.readouterr().err
    truncated = _folder(tmp_path / "truncated", {})
    (Path(truncated) / "results.json").write_text('{"schema": "harnesscheck.results", "run"')
    assert main(["gate", "--baseline", good, "--current", truncated]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["gate", "--baseline", str(empty), "--current", good]) == 2
    assert "baseline not found" in capsys.readouterr().err


def test_update_baseline_folder_mirrors_the_current_documents(tmp_path):
    baseline = tmp_path / "baseline"
    current = _folder(tmp_path / "results", {
        "results.json": _conformance("c1", "2024-06-01T02:00:00+00:00"),
        "bench-preamble.json": _bench_doc("b1", "2024-06-01T02:10:00+00:00"),
        "gate.json": {"passed": True}})
    assert main(["gate", "--baseline", f"{baseline}/", "--current", current, "--update-baseline"]) == 0
    assert sorted(p.name for p in baseline.iterdir()) == ["bench-preamble.json", "results.json"]
    (baseline / "flaky.txt").write_text("AN-STREAM-001\n")
    stale = _bench_doc("old", "2024-05-01T02:10:00+00:00")
    stale["benchmarks"][0]["name"] = "history"
    (baseline / "bench-history.json").write_text(json.dumps(stale))

    later = _conformance("c2", "2024-06-02T02:00:00+00:00")
    _folder(Path(current), {"results.json": later})
    # the benchmarks the current run no longer has fail the gate (nothing measured them: issue 43), so
    # accepting the narrower run takes --force
    assert main(["gate", "--baseline", str(baseline), "--current", current, "--update-baseline"]) == 1
    assert sorted(p.name for p in baseline.iterdir()) == ["bench-history.json", "bench-preamble.json", "flaky.txt",
                                                        "results.json"]
    assert main(["gate", "--baseline", str(baseline), "--current", current, "--update-baseline", "--force"]) == 1
    assert sorted(p.name for p in baseline.iterdir()) == ["bench-preamble.json", "flaky.txt", "results.json"]
    assert json.loads((baseline / "results.json").read_text())["run"]["id"] == "c2"

    # a folder's documents into a baseline file: the merged document
    single = tmp_path / "single" / "baseline.json"
    assert main(["gate", "--baseline", str(single), "--current", current, "--update-baseline"]) == 0
    merged = json.loads(single.read_text())
    assert merged["run"]["id"] == "merge:b1+c2"  # in the order the runs started
    assert merged["benchmarks"][0]["name"] == "preamble" and merged["checks"]
    assert main(["gate", "--baseline", str(single), "--current", current]) == 0


def test_report_reads_a_folder(tmp_path, capsys):
    results = _conformance("check-run", "2024-06-01T02:00:00+00:00")
    results["checks"][0] |= {"outcome": "fail", "finding": factory.failing_finding()}
    bench = _bench_doc("bench-run", "2024-06-01T02:10:00+00:00")
    bench["run"]["endpoint"] = "http://bench.example:9"
    folder = _folder(tmp_path / "results", {"results.json": results, "bench-preamble.json": bench,
                                            "gate.json": {"passed": True}})
    out = tmp_path / "site" / "report.html"
    assert main(["report", folder, "--out", str(out), "--quiet"]) == 0
    html = out.read_text()
    assert 'id="benchmarks"' in html and "header/stable" in html  # the benchmark document
    assert 'id="c-AN-STREAM-001"' in html and "Merged from 2 runs" in html  # and the checks
    # a transcript link is relative to its own results file, rebased to the report's folder
    assert 'href="../results/transcripts/AN-STREAM-001-anthropic.json"' in html
    # the header describes the conformance run, though the benchmark ran later
    header = html.split("<nav>")[0]
    assert results["run"]["endpoint"] in header and "http://bench.example:9" not in header
    assert f"report written to {out}" in capsys.readouterr().out
    empty = tmp_path / "none"
    empty.mkdir()
    assert main(["report", str(empty), "--out", str(out)]) == 2
    assert "no harnesscheck results document in this folder" in capsys.readouterr().err
