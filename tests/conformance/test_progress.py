"""The live progress line of `check` and `run` (conformance/progress.py): on a terminal one line
redrawn in place (checks done of all, failing so far, the check running), in place of pytest's dots,
erased before pytest's own last lines; with stdout piped, no line and pytest's dots as before."""

from __future__ import annotations

import re
import subprocess
import sys

from harnesscheck.conformance.progress import LiveLine
from tests.terminal import on_a_terminal

# AN-ROUTE-001's test is a plain function (test_models_list_anthropic_shape): its id is in its test id too
SELECT = "AN-STREAM-001 or AN-STREAM-002 or AN-TOOLS-001 or AN-ROUTE-001"


def test_check_shows_a_live_line_on_a_terminal_and_dots_in_a_pipe(reference_server, tmp_path) -> None:
    cmd = [sys.executable, "-m", "harnesscheck", "check", "--endpoint", reference_server, "-k", SELECT,
           "--apis", "anthropic", "--out", str(tmp_path / "tty")]
    rc, seen = on_a_terminal(cmd)
    text = seen.decode("utf-8", "replace")
    assert rc == 0, text
    assert "\r\x1b[Kchecks 0/4 · AN-ROUTE-001" in text and "checks 2/4 · AN-STREAM-002" in text, text
    assert "test_models_list" not in text, text
    assert re.search(r"\r\x1b\[K(\x1b\[3\dm)? +\[100%\]", text), text  # erased before pytest's [100%]
    assert "warnings summary" not in text, text
    assert "..." not in text.split("api ")[0]  # no dots
    assert "4 passed" in text
    piped = subprocess.run([*cmd[:-1], str(tmp_path / "pipe")], capture_output=True, text=True, timeout=180)
    assert piped.returncode == 0, piped.stdout + piped.stderr
    assert "checks 0/4" not in piped.stdout + piped.stderr and "\x1b[K" not in piped.stdout
    assert "..." in piped.stdout  # pytest's own dots


def test_the_line_counts_failures_and_names_the_current_check() -> None:
    class Sink:
        def __init__(self) -> None:
            self.text = ""

        def write(self, s: str) -> None:
            self.text += s

        def flush(self) -> None:
            pass

    sink = Sink()
    line = LiveLine(sink)  # type: ignore[arg-type]
    line.total = 3
    line.pytest_runtest_logstart("conformance/test_streams.py::test_stream_grammar[AN-STREAM-003]", None)
    assert sink.text.endswith("checks 0/3 · AN-STREAM-003")

    class Report:
        failed, when = True, "call"

    line.pytest_runtest_logreport(Report())  # type: ignore[arg-type]
    line.pytest_runtest_logfinish("x", None)
    line.pytest_runtest_logstart("conformance/test_usage.py::test_message_start_usage", None)
    assert sink.text.endswith("checks 1/3 · 1 failing · test_message_start_usage")
    line.pytest_runtest_logfinish("y", None)
    line.pytest_runtest_logstart("z::AN-TOOLS-001", None)
    line.pytest_runtest_logfinish("z", None)
    assert sink.text.endswith("\r\x1b[K") and not line.shown  # erased after the last one
