"""Tests that hold servers and a suite run, then wait to be interrupted: run only by
tests/test_no_process_left.py, which names this file (pytest collects no `*_probe.py` on its own).

Each writes `HC_PROBE_DIR/ready-<worker>` once everything it started is up."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from tests.processes import http_process


def _ready(what: str) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (Path(os.environ["HC_PROBE_DIR"]) / f"ready-{what}-{worker}-{os.getpid()}").touch()


def test_holds_shared_servers(reference_server, server_factory) -> None:
    server_factory("--no-enable-anthropic-api")
    with http_process(lambda port: [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                      quiet=True):
        _ready("servers")
        time.sleep(300)


def test_holds_a_forked_suite_run(tmp_path) -> None:
    """A fault-matrix style run (a warm zygote, a forked server, a forked suite) slowed to last."""
    import threading

    from harnesscheck.conformance.forked import run_forked
    from harnesscheck.conformance.runner import SuiteOptions

    def announce() -> None:  # once the forked server and suite run (the suite's log grows)
        log = tmp_path / "suite.log"
        while not (log.exists() and log.stat().st_size > 0):
            time.sleep(0.05)
        time.sleep(1.0)
        _ready("suite")

    threading.Thread(target=announce, daemon=True).start()
    run_forked(SuiteOptions(server_args=("--decode-ms", "50"), timeout=60.0, select="test_streams"), tmp_path)
    time.sleep(300)
