"""Timings nobody can wait for are refused where they are read (issue 43 item 6): NaN, Infinity, a
negative number or more than a day (`trace.MAX_TIMING_MS`) in a trace's `think_ms` / `at_ms`, an
AIPerf `delay` or `timestamp`, a Mooncake `timestamp`, or a capture's recorded times. `trace check`,
`trace import`, `trace from-capture` and `replay` each exit 2 with one line (real processes).

Before: they all passed the readers; `replay` then exited 3 (OverflowError) on NaN / Infinity, waited
silently on `at_ms: 1e300`, and refused a Mooncake `timestamp: -5` only after `trace import` had
written it into a trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnesscheck.replay.trace import MAX_TIMING_MS, timing_problem
from tests.cli.helpers import harnesscheck

HEAD = json.dumps({"schema": "harnesscheck.trace", "version": 1})
FIXTURES = Path(__file__).resolve().parents[1] / "clients" / "fixtures"
BAD = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity", "1e300": "1e300", "-5": "-5",
       "a day and 1 ms": str(MAX_TIMING_MS + 1)}


def _trace(tmp_path: Path, timing: str) -> Path:
    turn = ('{"session": "s", "turn": 0, "api": "chat", "timing": ' + timing + ', "request": '
            '{"model": "m", "messages": [{"role": "user", "content": "hi"}]}}')
    path = tmp_path / "t.jsonl"
    path.write_text(HEAD + "\n" + turn + "\n")
    return path


def test_the_rule() -> None:
    for fine in (0, 0.5, 1500, MAX_TIMING_MS):
        assert timing_problem(fine) is None
    for bad in (float("nan"), float("inf"), -float("inf"), -5, 1e300, MAX_TIMING_MS + 1, True, "5", None):
        assert timing_problem(bad), bad


@pytest.mark.parametrize("field", ["think_ms", "at_ms"])
@pytest.mark.parametrize("value", list(BAD), ids=list(BAD))
def test_trace_check_and_replay_refuse_a_timing_in_one_line(field: str, value: str, tmp_path: Path) -> None:
    trace = _trace(tmp_path, '{"' + field + '": ' + BAD[value] + "}")
    ran = harnesscheck("trace", "check", str(trace), cwd=tmp_path)
    assert ran.rc == 2, ran
    assert field in ran.one_line()
    # replay reads the trace before it speaks to the endpoint: nothing listens on port 9
    ran = harnesscheck("replay", str(trace), "--endpoint", "http://127.0.0.1:9", "--no-progress",
                       cwd=tmp_path, timeout=60)
    assert ran.rc == 2, ran
    assert field in ran.out + ran.err and ran.seconds < 30


@pytest.mark.parametrize("field", ["delay", "timestamp"])
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-5", "1e300"])
def test_trace_import_refuses_an_aiperf_timing(field: str, value: str, tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"session_id": "s", "text": "hi"}\n{"session_id": "s", "text": "more", "' + field + '": '
                    + value + "}\n")
    ran = harnesscheck("trace", "import", "aiperf", str(path), "--out", str(tmp_path / "t.jsonl"),
                       cwd=tmp_path)
    assert ran.rc == 2, ran
    assert field in ran.one_line()
    assert not (tmp_path / "t.jsonl").exists()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-5", "1e300"])
def test_trace_import_refuses_a_mooncake_timestamp(value: str, tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 4}\n'
                    '{"timestamp": ' + value + ', "input_length": 10, "output_length": 4}\n')
    ran = harnesscheck("trace", "import", "mooncake", str(path), "--out", str(tmp_path / "t.jsonl"),
                       cwd=tmp_path)
    assert ran.rc == 2, ran
    line = ran.one_line()
    assert "timestamp" in line and "line 2" in line, line
    assert not (tmp_path / "t.jsonl").exists()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e300"])
def test_trace_from_capture_refuses_recorded_times_no_replay_can_wait_for(value: str, tmp_path: Path) -> None:
    lines = (FIXTURES / "claude-code-tool.capture.jsonl").read_text().splitlines()
    posts = [n for n, line in enumerate(lines) if '"method": "POST"' in line]
    assert len(posts) >= 2
    last = json.loads(lines[posts[-1]])
    text = json.dumps(last).replace(f'"started_at": {json.dumps(last["transcript"]["timings"]["started_at"])}',
                                    f'"started_at": {value}')
    assert value in text
    lines[posts[-1]] = text
    capture = tmp_path / "c.capture.jsonl"
    capture.write_text("\n".join(lines) + "\n")
    ran = harnesscheck("trace", "from-capture", str(capture), "--out", str(tmp_path / "t.jsonl"), cwd=tmp_path)
    assert ran.rc == 2, ran
    assert "timing" in ran.one_line()
    assert not (tmp_path / "t.jsonl").exists()


def test_a_capture_with_ordinary_times_still_converts(tmp_path: Path) -> None:
    ran = harnesscheck("trace", "from-capture", str(FIXTURES / "claude-code-tool.capture.jsonl"),
                       "--out", str(tmp_path / "t.jsonl"), cwd=tmp_path)
    assert ran.rc == 0, ran
    ran = harnesscheck("trace", "check", str(tmp_path / "t.jsonl"), cwd=tmp_path)
    assert ran.rc == 0, ran
