"""An interrupted run keeps what it measured, in every mode (issue 31): `check --concurrency 2` and the
pytest plugin under xdist (`pytest -n 2`), each a real process sent SIGTERM once some checks have
passed, write those checks to results.json marked `run.interrupted`, leave no process behind and
print no traceback. (Sequential `check`: tests/cli/test_stop.py.)

Before: `--concurrency` printed "interrupted before any check ran" and wrote nothing (the workers'
results came back only when they finished), and plain pytest died on SIGTERM writing nothing.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from harnesscheck.conformance.runner import PACKAGE
from harnesscheck.reports.schema import validate_results
from tests.cli.helpers import processes_with_env

SEEN = 3  # checks that have passed when the signal is sent


def _passed(text: str) -> int:
    """Checks pytest -q has reported as passed so far (its progress dots)."""
    return text.replace("bringing up nodes...", "").count(".")


def _interrupt(argv: list[str], cwd: Path) -> tuple[int, str, str, int]:
    """Run ``argv``, SIGTERM it once SEEN checks passed; (exit status, stdout, stderr, checks seen)."""
    mark = f"HC_INTERRUPT_TEST={uuid.uuid4().hex}"
    key, value = mark.split("=")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", key: value}
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(iter(lambda: proc.stdout.read(1), "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while _passed("".join(out)) < SEEN:
            assert proc.poll() is None and time.monotonic() < deadline, "".join(out)
            time.sleep(0.05)
        seen = _passed("".join(out))
        os.kill(proc.pid, signal.SIGTERM)  # the process alone, as a supervisor stops a job
        rc = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=10)
    err = proc.stderr.read()
    deadline = time.monotonic() + 15  # the workers and the embedded server are stopped on the way out
    while processes_with_env(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with_env(mark) == []
    return rc, "".join(out), err, seen


def _kept(results: Path, seen: int, text: str) -> dict:
    doc = validate_results(json.loads(results.read_text()))
    assert doc["run"]["interrupted"] is True
    passed = [c["id"] for c in doc["checks"] if c["outcome"] == "pass"]
    assert len(passed) >= seen, (passed, text[-2000:])
    assert all(c["outcome"] for c in doc["checks"])
    return doc


def test_check_with_concurrency_keeps_what_was_measured(tmp_path: Path) -> None:
    rc, out, err, seen = _interrupt([sys.executable, "-m", "harnesscheck", "check", "--apis", "anthropic",
                                     "--concurrency", "2", "--out", "out"], tmp_path)
    assert rc == 130, (out[-2000:], err[-2000:])
    assert "Traceback" not in err and "Traceback" not in out
    assert "interrupted before any check ran" not in out + err
    doc = _kept(tmp_path / "out" / "results.json", seen, out)
    assert "interrupted: the results hold what was measured" in out
    print(f"\ncheck --concurrency 2, SIGTERM after {seen} passes: {len(doc['checks'])} check(s) written, "
          f"marked interrupted")


def test_the_plugin_under_xdist_keeps_what_its_workers_measured(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "pytest", str(PACKAGE), "-c", str(PACKAGE / "pytest.ini"), "--rootdir", str(PACKAGE),
            "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-n", "2", "--hc-apis", "anthropic",
            "--hc-results", str(tmp_path / "results.json")]
    rc, out, err, seen = _interrupt(argv, tmp_path)
    assert rc == pytest.ExitCode.INTERRUPTED, (out[-2000:], err[-2000:])
    doc = _kept(tmp_path / "results.json", seen, out)
    assert doc["run"]["settings"]["workers"] >= 1
    print(f"\npytest -n 2 (plugin), SIGTERM after {seen} passes: {len(doc['checks'])} check(s) written, "
          f"marked interrupted")


_OUTCOME = r"(?:PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)"
# pytest -v's line per test: "[gw0] [ 40%] PASSED path::test" under xdist, "path::test PASSED [ 40%]" without
_PROGRESS = re.compile(rf"^\[gw\d+\] \[\s*\d+%\] {_OUTCOME} |::\S+ {_OUTCOME}\s+\[\s*\d+%\]$", re.M)


@pytest.mark.parametrize(("how", "after_s"), [
    ("SIGTERM to the process, --concurrency 2", 0.5), ("SIGTERM to the process, --concurrency 2", 1.5),
    ("SIGINT to the group, --concurrency 2", 0.5), ("SIGTERM to the process, one at a time", 0.3)])
def test_a_stop_after_the_last_check_keeps_every_result(how: str, after_s: float, tmp_path: Path) -> None:
    """The teardown window (issue 43): the stop comes `after_s` after pytest prints [100%], while xdist
    waits for its workers to end and the fixtures stop their servers. Before, the results writer ran
    after xdist's sessionfinish, the stop raised inside it, and nothing was written (8 of 8 trials
    in the issue; here xdist waited 10 s for workers busy in a last gc pass of 3-4 s each)."""
    mark = f"HC_INTERRUPT_TEST={uuid.uuid4().hex}"
    key, value = mark.split("=")
    argv = [sys.executable, "-m", "harnesscheck", "check", "--apis", "anthropic", "-v", "--out", "out",
            *(["--concurrency", "2"] if "concurrency" in how else [])]
    proc = subprocess.Popen(argv, cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1", key: value},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(iter(lambda: proc.stdout.read(1), "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 300
        while "[100%]" not in "".join(out):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(out)
            time.sleep(0.01)
        time.sleep(after_s)
        alive = proc.poll() is None
        try:
            if how.startswith("SIGINT"):
                os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends on Ctrl-C
            else:
                os.kill(proc.pid, signal.SIGTERM)
        except ProcessLookupError:  # the run ended between the poll and the signal: a finished run's results
            alive = False
        rc = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=10)
    text, err = "".join(out), proc.stderr.read()
    deadline = time.monotonic() + 15
    while processes_with_env(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with_env(mark) == []
    assert "Traceback" not in err and "Traceback" not in text
    doc = validate_results(json.loads((tmp_path / "out" / "results.json").read_text()))
    ran = len(_PROGRESS.findall(text))
    assert ran > 0 and len(doc["checks"]) == ran, (ran, len(doc["checks"]), text[-3000:])
    assert all(c["outcome"] for c in doc["checks"])
    if rc == 130:  # the stop taken: said, and marked
        assert doc["run"]["interrupted"] is True
        assert "interrupted: the results hold what was measured" in text
    else:  # the run had ended (or was leaving Python) when the signal came: a finished run's results
        assert not alive or "results:" in text, (rc, text[-2000:], err[-2000:])
    print(f"\n{how}, stopped {after_s} s after [100%] (alive: {alive}): exit {rc}, {len(doc['checks'])} of "
          f"{ran} checks written")
