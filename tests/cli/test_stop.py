"""Ctrl-C and SIGTERM stop a `harnesscheck check` run cleanly: no process of the run is left (the
embedded reference server included), what was measured is written and marked interrupted, the
exit status is 130, and nothing prints a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from harnesscheck.reports.schema import validate_results
from tests.cli.helpers import processes_with_env


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["SIGTERM to the check process", "Ctrl-C to the process group"])
def test_stopped_run_leaves_no_process_and_keeps_what_was_measured(tmp_path, how):
    mark = f"HC_STOP_TEST={uuid.uuid4().hex}"  # inherited by every process of the run
    key, value = mark.split("=")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", key: value}
    # modelled time (200 ms to each first token): the run is still going when the signal comes (the embedded
    # server has none, and 49 checks without it can end before the signal does)
    proc = subprocess.Popen([sys.executable, "-m", "harnesscheck", "check", "--apis", "anthropic", "--out", "out",
                             "--server-arg=--ttft-base-ms=200"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(iter(lambda: proc.stdout.read(1), "")), daemon=True)
    reader.start()
    try:
        _wait_for(lambda: "." in "".join(out), 120, "the first check to pass")  # pytest -q progress
        running = processes_with_env(mark)
        assert len(running) >= 2, running  # the check and its embedded server
        if how.startswith("SIGTERM"):
            os.kill(proc.pid, signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends on Ctrl-C
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=10)
    err = proc.stderr.read()
    assert rc == 130, ("".join(out), err)
    assert processes_with_env(mark) == []
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # nothing left in the run's process group either
    assert "Traceback" not in err and "Traceback" not in "".join(out)
    doc = validate_results(json.loads((tmp_path / "out" / "results.json").read_text()))
    assert doc["run"]["interrupted"] is True
    assert doc["checks"] and all(c["outcome"] for c in doc["checks"])
    assert "interrupted" in "".join(out)


_IN_FINALISER = r"""
import os, signal, sys, time, weakref
from harnesscheck.cli.main import _stop_on_signals
from harnesscheck.errors import Interrupted

class Holder:
    def __del__(self):  # the signal lands while the collector runs this finaliser in the main thread
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)

members = weakref.WeakSet()
try:
    with _stop_on_signals():
        started = time.monotonic()
        member = Holder()
        members.add(member)
        del member  # __del__, then WeakSet's _remove callback
        while time.monotonic() - started < 5:
            pass
    print("the stop was lost")
except Interrupted as stop:
    print(f"raised: {stop}")
"""


def test_a_stop_landing_in_a_finaliser_is_raised_afterwards_not_lost():
    """CI, 2026-12-07: SIGTERM landed in WeakSet's weakref callback; Python printed the Interrupted
    as an unraisable exception with a traceback and dropped it, and the run went on."""
    proc = subprocess.run([sys.executable, "-c", _IN_FINALISER], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "raised: stopped by SIGTERM", (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "ignored" not in proc.stderr, proc.stderr
