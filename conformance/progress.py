"""The live progress line of `check` and `run`: checks done of all, how many fail so far, the check
running now, redrawn in place on the terminal while the suite runs.

    checks 37/111 · 2 failing · AN-DISPATCH-001

A pytest plugin (`LiveLine`) that `runner.run_suite` adds to an in-process run when stdout is a
terminal and the run is not verbose; with stdout a pipe or a file (CI logs) nothing changes, pytest
prints its dots. On a terminal it takes the dots' place rather than fighting them: it blanks
pytest's one-letter progress (`pytest_report_teststatus`: the letters only; categories, the
"FAILED ..." lines at the end and the final counts are pytest's as ever) and erases its own line
before pytest writes anything else (the last check's progress figure, an interruption, the
summary). Under xdist (`--concurrency`) the controller receives every worker's reports, so the one
line counts them all. "failing" counts what pytest reports as failed: MUST failures and kit errors
(a SHOULD failure is an xfail, an inconclusive check a skip: plugin.py).
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from typing import Any, TextIO

import pytest

__all__ = ["LiveLine"]

# a check id (`AN-STREAM-003`): every check's test id carries its own (plugin.pytest_generate_tests)
_CHECK_ID = re.compile(r"\b[A-Z]{2,3}-[A-Z]+-\d{3}\b")
_ERASE = "\r\x1b[K"
_MIN_INTERVAL_S = 0.05  # redraws at most this often (a fast endpoint finishes dozens of checks a second)


class LiveLine:
    """See the module docstring. `stream`: the terminal (stdout)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.total = 0
        self.done = 0
        self.failing = 0
        self.current = ""
        self.shown = False
        self._drawn_at = 0.0
        self._started: set[str] = set()

    # -- what pytest tells us ------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.total = len(items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.total = max(self.total, len(ids))  # the controller collects nothing itself

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        result = yield
        if isinstance(result, tuple) and len(result) == 3:
            category, _letter, word = result
            return category, "", word  # the dot's place is the live line's
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self._started.add(nodeid)
        found = _CHECK_ID.search(nodeid)
        self.current = found.group(0) if found else nodeid.rsplit("::", 1)[-1]
        self._draw(force=True)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and (report.when == "call" or report.when == "setup"):
            self.failing += 1

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.done += 1
        if self.total and self.done >= self.total:
            self.erase()  # pytest writes its last progress figure next
        else:
            self._draw()

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        self.erase()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.erase()

    @pytest.hookimpl(tryfirst=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.erase()

    # -- the line ------------------------------------------------------------------------------

    def text(self) -> str:
        total = f"/{self.total}" if self.total else ""
        failing = f" · {self.failing} failing" if self.failing else ""
        current = f" · {self.current}" if self.current and self.done < (self.total or self.done + 1) else ""
        return f"checks {self.done}{total}{failing}{current}"

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._drawn_at < _MIN_INTERVAL_S:
            return
        self._drawn_at = now
        width = max(20, shutil.get_terminal_size((80, 24)).columns - 1)
        self._write(_ERASE + self.text()[:width])
        self.shown = True

    def erase(self) -> None:
        if self.shown:
            self._write(_ERASE)
            self.shown = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: nothing to show it on
            pass
