"""The parts under `check --concurrency N` and the merged results, without a suite run: the
endpoint lock across processes, the transcript budget and index.json, and the CLI's option."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from harnesscheck.conformance import catalog
from harnesscheck.conformance.sharing import EndpointLock
from harnesscheck.conformance.results import TranscriptBudget, write_results

HOLDER = """
import sys, time
from pathlib import Path
from harnesscheck.conformance.sharing import EndpointLock
folder = Path(sys.argv[1])
with EndpointLock(folder).hold(exclusive=sys.argv[2] == "ex"):
    (folder / "held").write_text("1")
    while not (folder / "release").exists():
        time.sleep(0.02)
"""


def _holder(folder: Path, mode: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder), mode])
    deadline = time.monotonic() + 60
    while not (folder / "held").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the holder did not take the lock"
        time.sleep(0.02)
    return proc


def _try(folder: Path, *, exclusive: bool) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """Take the lock in a thread; `got` is set once held, and it is kept until `done` is set."""
    got, done = threading.Event(), threading.Event()

    def take() -> None:
        with EndpointLock(folder).hold(exclusive=exclusive):
            got.set()
            done.wait(30)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread, got, done


def test_shared_holders_overlap_and_an_exclusive_one_waits_for_them(tmp_path: Path) -> None:
    holder = _holder(tmp_path, "sh")  # another process holds the endpoint for an ordinary check
    try:
        _, shared, shared_done = _try(tmp_path, exclusive=False)
        assert shared.wait(10), "two ordinary checks must share the endpoint"
        _, exclusive, exclusive_done = _try(tmp_path, exclusive=True)
        assert not exclusive.wait(0.5), "a timing-sensitive check started while others held the endpoint"
        shared_done.set()
        assert not exclusive.wait(0.5), "... and while the other process still held it"
        (tmp_path / "release").write_text("1")
        assert holder.wait(30) == 0
        assert exclusive.wait(10), "the timing-sensitive check never got the endpoint"
        exclusive_done.set()
    finally:
        (tmp_path / "release").write_text("1")
        holder.wait(30)


def test_a_waiting_exclusive_holder_is_not_overtaken(tmp_path: Path) -> None:
    """While a timing-sensitive check waits for the endpoint, a newly arriving ordinary check waits
    behind it (the turnstile), so a stream of ordinary checks cannot starve it."""
    holder = _holder(tmp_path, "sh")
    try:
        _, exclusive, exclusive_done = _try(tmp_path, exclusive=True)
        time.sleep(0.3)  # it is now waiting for the holder, inside the gate
        _, late, late_done = _try(tmp_path, exclusive=False)
        assert not late.wait(0.5), "an ordinary check overtook the waiting timing-sensitive one"
        (tmp_path / "release").write_text("1")
        assert exclusive.wait(10)
        assert not late.wait(0.3), "an ordinary check ran beside the timing-sensitive one"
        exclusive_done.set()
        assert late.wait(10)
        late_done.set()
    finally:
        (tmp_path / "release").write_text("1")
        holder.wait(30)


def test_timing_sensitive_checks() -> None:
    def timing_sensitive(check_id: str, witness: str) -> bool:
        return catalog.get(check_id).holds_endpoint_alone(witness)

    assert timing_sensitive("AN-PREAMBLE-001", "auto") and timing_sensitive("CH-HIST-002", "auto")
    assert timing_sensitive("RS-HIST-001", "timing")
    assert not timing_sensitive("RS-HIST-001", "tokenize") and not timing_sensitive("AN-HIST-002", "cache")
    assert not timing_sensitive("AN-DISPATCH-001", "auto") and not timing_sensitive("AN-STREAM-001", "auto")
    assert timing_sensitive("AN-PREAMBLE-002", "cache")  # its witness is not --witness's to choose
    assert all(c.timing in catalog.TIMINGS for c in catalog.CHECKS if c.timing)


def _check(check_id: str, outcome: str, size: int | None) -> dict:
    entry = {"id": check_id, "outcome": outcome, "transcript": None}
    return {"entry": entry, "transcript": None if size is None else {"text": "x" * size, "frames": size // 100}}


def test_transcript_budget_keeps_failing_checks_first_and_says_what_it_left_out(tmp_path: Path) -> None:
    """per file 500 bytes, 600 in all. Failing first, then skipped, then passing, catalog order
    within: AN-STREAM-002 (fail, 300) fits; AN-STREAM-003 (skip, 250) fits (550); AN-STREAM-001
    (pass, 200) would make 750 > 600; AN-ROUTE-001 (pass, 600) is over the per-file cap."""
    run = {"id": "r1", "started_at": "2026-01-01T00:00:00+00:00", "settings": {}}
    payloads = [{"run": run, "span": [100.0, 130.0],
                 "checks": [_check("AN-STREAM-001", "pass", 200), _check("AN-ROUTE-001", "pass", 600)]},
                {"run": {**run, "started_at": "2026-01-01T00:00:01+00:00"}, "span": [101.0, 140.5],
                 "checks": [_check("AN-STREAM-002", "fail", 300), _check("AN-STREAM-003", "skip", 250),
                            _check("AN-ERR-002", "pass", None)]}]
    results = tmp_path / "results.json"
    doc = write_results(payloads, results, tmp_path / "transcripts", budget=TranscriptBudget(per_file=500, total=600),
                        settings={"workers": 2})
    assert json.loads(results.read_text()) == doc
    by_id = {c["id"]: c for c in doc["checks"]}
    # catalog order (as catalog.py lists them), whichever worker ran them
    assert list(by_id) == ["AN-STREAM-001", "AN-STREAM-002", "AN-STREAM-003", "AN-ROUTE-001", "AN-ERR-002"]
    assert by_id["AN-STREAM-002"]["transcript"] == "transcripts/AN-STREAM-002.json"
    assert by_id["AN-STREAM-003"]["transcript"] == "transcripts/AN-STREAM-003.json"
    assert by_id["AN-STREAM-001"]["transcript"] is None and "total cap" in by_id["AN-STREAM-001"]["transcript_left_out"]
    assert by_id["AN-ROUTE-001"]["transcript"] is None and "per-file cap" in by_id["AN-ROUTE-001"]["transcript_left_out"]
    assert by_id["AN-ERR-002"]["transcript"] is None and "transcript_left_out" not in by_id["AN-ERR-002"]
    assert (tmp_path / "transcripts" / "AN-STREAM-002.json").read_text() == "x" * 300
    assert sorted(p.name for p in (tmp_path / "transcripts").iterdir()) == [
        "AN-STREAM-002.json", "AN-STREAM-003.json", "index.json"]
    assert doc["run"]["transcripts"] == {"folder": "transcripts", "written": 2, "bytes": 550, "per_file_cap": 500,
                                         "total_cap": 600, "left_out": ["AN-STREAM-001", "AN-ROUTE-001"]}
    assert doc["run"]["checks_wall_s"] == 40.5 and doc["run"]["settings"] == {"workers": 2}
    assert doc["run"]["started_at"] == "2026-01-01T00:00:00+00:00" and doc["run"]["id"] != "r1"
    index = json.loads((tmp_path / "transcripts" / "index.json").read_text())["checks"]
    assert index["AN-STREAM-002"] == {"file": "AN-STREAM-002.json", "outcome": "fail", "frames": 3, "bytes": 300}
    assert index["AN-ROUTE-001"]["file"] is None and index["AN-ROUTE-001"]["bytes"] == 600
    assert set(index) == {"AN-STREAM-001", "AN-STREAM-002", "AN-STREAM-003", "AN-ROUTE-001"}


def test_concurrency_option_is_checked(tmp_path: Path) -> None:
    ran = subprocess.run([sys.executable, "-m", "harnesscheck", "check", "--concurrency", "0", "--out", "out"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 2 and "--concurrency must be 1 or more, got 0" in ran.stdout + ran.stderr


LAZY_IMPACT = """
import json, sys
from harnesscheck.conformance import catalog
from harnesscheck.conformance.outcome import Outcome
from harnesscheck.conformance.results import CheckResult, Collector, write_results
collector = Collector.start(endpoint="e", model="m", apis=["anthropic"], server={"kind": "external"}, settings={},
                            secrets=[])
collector.add(CheckResult(check=catalog.get("AN-STREAM-002"), outcome=Outcome.PASS, message="ok", duration_s=0.1))
write_results([collector.payload()], None, None)
print(json.dumps({"read_before_failure": "harnesscheck.conformance.impact" in sys.modules}))
collector.add(CheckResult(check=catalog.get("AN-STREAM-003"), outcome=Outcome.FAIL, message="bad", duration_s=0.1,
                          rules=["AN-GRAMMAR-BLOCK-UNKNOWN"]))
doc = write_results([collector.payload()], None, None)
print(json.dumps({"read_after_failure": "harnesscheck.conformance.impact" in sys.modules,
                  "clients": doc["checks"][-1]["clients"]}))
"""


def test_a_results_write_reads_the_client_measurements_only_for_a_failing_rule() -> None:
    """Passing checks annotate nothing: the measurements (conformance/impact.json) are not even
    imported; a failing rule a fault plants gets the measured verdicts (Claude Code broke under
    an-delta-unstarted-block, docs/clients.md)."""
    ran = subprocess.run([sys.executable, "-c", LAZY_IMPACT], capture_output=True, text=True, timeout=120,
                         check=False)
    assert ran.returncode == 0, ran.stderr
    before, after = (json.loads(line) for line in ran.stdout.splitlines())
    assert before == {"read_before_failure": False}
    assert after["read_after_failure"] is True
    assert after["clients"]["Claude Code 2.1.197"] == "would break"
