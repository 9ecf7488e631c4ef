"""`replay` and `bench` stopped part way obey the stop at once and write what they measured, marked
interrupted (issue 43 items 3 and 4): each a real process against a real reference server, sent
SIGTERM or SIGINT (Ctrl-C) while it waits for a scheduled turn, while a stream is arriving, or during
the second level of `bench load --concurrency 1,2`.

Before: the CLI's signal handler raised wherever the main thread was, inside the HTTP client's
protocol callback too, where the stop became the request's `TransportError ... (stopped by SIGTERM)`,
blamed on the endpoint, and the run went on (exit 0 or 1); elsewhere the run ended with exit 130 and
nothing written, the finished turns and levels lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from harnesscheck.reports.schema import validate_results
from tests.cli.helpers import processes_with_env
from tests.processes import GroupServer

HEAD = json.dumps({"schema": "harnesscheck.trace", "version": 1})
SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT}


def _health(url: str) -> dict:
    return httpx.get(url + "/health", timeout=5).json()


def _wait(predicate: Callable[[], bool], proc: subprocess.Popen, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"the command ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _start(argv: list[str], cwd: Path) -> tuple[subprocess.Popen, str]:
    mark = f"HC_ASYNC_STOP_TEST={uuid.uuid4().hex}"
    key, value = mark.split("=")
    proc = subprocess.Popen([sys.executable, "-m", "harnesscheck", *argv], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", key: value})
    return proc, mark


def _stop(proc: subprocess.Popen, mark: str, sig: signal.Signals, *, within_s: float = 15) -> tuple[int, str, str]:
    """Send ``sig`` to the command; its exit status, stdout, stderr, once it obeyed within ``within_s``."""
    sent = time.monotonic()
    os.kill(proc.pid, sig)
    try:
        out, err = proc.communicate(timeout=within_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"the stop was not obeyed within {within_s} s:\n{out}\n{err}") from None
    took = time.monotonic() - sent
    assert processes_with_env(mark) == []
    assert "Traceback" not in out + err, out + err
    print(f"\n{sig.name} obeyed in {took:.2f} s")
    return proc.returncode, out, err


def _trace(path: Path, turns: list[tuple[str, float, int]]) -> Path:
    """One turn per session: (session, at_ms, max_tokens)."""
    lines = [HEAD]
    for session, at_ms, max_tokens in turns:
        lines.append(json.dumps({"session": session, "turn": 0, "api": "chat", "timing": {"at_ms": at_ms},
                                 "request": {"model": "", "max_tokens": max_tokens, "stream": True,
                                             "messages": [{"role": "user", "content": f"Hello from {session}"}]}}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def slow_server() -> str:
    """A reference server whose answers stream for a while (50 ms a token)."""
    server = GroupServer(["--decode-ms", "50", "--ttft-base-ms", "0"]).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.parametrize("how", list(SIGNALS))
def test_replay_stopped_while_it_waits_writes_the_finished_turns(how: str, tmp_path: Path,
                                                                  slow_server: str) -> None:
    """Two turns answered, a third scheduled ten minutes later: the stop ends the wait at once."""
    trace = _trace(tmp_path / "t.jsonl", [("a", 0, 8), ("b", 0, 8), ("later", 600_000, 8)])
    before = _health(slow_server)["cache"]["queries"]
    proc, mark = _start(["replay", str(trace), "--endpoint", slow_server, "--no-progress", "--out", "out"], tmp_path)
    try:
        _wait(lambda: (h := _health(slow_server))["cache"]["queries"] >= before + 2 and not h["active_requests"],
              proc, "two turns answered")
        time.sleep(0.3)  # the replay records them as the answers end
        rc, out, err = _stop(proc, mark, SIGNALS[how], within_s=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 130, (out, err)
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert doc["summary"]["interrupted"] is True
    assert sorted((t["session"], t["ok"]) for t in doc["turns"]) == [("a", True), ("b", True)], doc["turns"]
    assert "interrupted" in out and f"stopped by {how}" in err


@pytest.mark.parametrize("how", list(SIGNALS))
def test_replay_stopped_mid_stream_blames_no_turn_on_the_endpoint(how: str, tmp_path: Path,
                                                                   slow_server: str) -> None:
    """A turn streaming when the stop comes: no record says the endpoint failed it; the run ends."""
    trace = _trace(tmp_path / "t.jsonl", [("first", 0, 8), ("long", 0, 2000)])
    server = GroupServer(["--decode-ms", "400", "--ttft-base-ms", "0"]).start()  # a token every 0.4 s
    proc = None
    try:
        url = server.url
        before = _health(url)["cache"]["queries"]
        proc, mark = _start(["replay", str(trace), "--endpoint", url, "--no-progress", "--out", "out",
                             "--concurrency", "1"], tmp_path)
        _wait(lambda: (h := _health(url))["cache"]["queries"] >= before + 2 and h["active_requests"] >= 1,
              proc, "the second turn streaming")
        time.sleep(1.5)  # well into the stream: frames arriving
        rc, out, err = _stop(proc, mark, SIGNALS[how], within_s=10)
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        server.stop()
    assert rc == 130, (out, err)
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert doc["summary"]["interrupted"] is True
    assert [t for t in doc["turns"] if not t["ok"]] == []  # the stop is nobody's failure
    assert "TransportError" not in out + err


def test_bench_load_stopped_in_its_second_level_keeps_the_first(tmp_path: Path, slow_server: str) -> None:
    proc, mark = _start(["bench", "load", "--endpoint", slow_server, "--concurrency", "1,2", "--duration", "2",
                         "--max-tokens", "16", "--no-progress", "--out", "out"], tmp_path)
    try:
        _wait(lambda: _health(slow_server)["active_requests"] >= 2, proc, "the second level (two in flight)")
        rc, out, err = _stop(proc, mark, signal.SIGINT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 130, (out, err)
    doc = validate_results(json.loads((tmp_path / "out" / "bench-load.json").read_text()))
    assert doc["run"]["interrupted"] is True
    ttft = next(b for b in doc["benchmarks"] if b["name"] == "load-concurrency-ttft")
    assert [a["name"] for a in ttft["arms"]] == ["c=1"] and ttft["arms"][0]["samples"]
    assert "interrupted" in out


@pytest.fixture(scope="module")
def bench_server() -> str:
    """A reference server for the benchmarks' stops: 10 ms a token, so the few turns they wait for come in
    seconds, while the runs asked for (200 sessions) go on for minutes."""
    server = GroupServer(["--decode-ms", "10", "--ttft-base-ms", "0"]).start()
    try:
        yield server.url
    finally:
        server.stop()


def _bench_stopped(tmp_path: Path, server: str, bench: str, args: list[str], queries: int, what: str) -> dict:
    """`bench BENCH` against the slow server, SIGTERM once `queries` more cache queries came (some measured):
    exit 130 and its results document, marked interrupted."""
    proc, mark = _start(["bench", bench, "--endpoint", server, "--sessions", "200", "--warmup", "1", *args,
                         "--no-progress", "--out", "out"], tmp_path)
    try:
        before = _health(server)["cache"]["queries"]
        _wait(lambda: _health(server)["cache"]["queries"] >= before + queries, proc, what)
        rc, out, err = _stop(proc, mark, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 130, (out, err)
    doc = validate_results(json.loads((tmp_path / "out" / f"bench-{bench}.json").read_text()))
    assert doc["run"]["interrupted"] is True
    return doc


def test_bench_preamble_stopped_part_way_keeps_its_samples(tmp_path: Path, bench_server: str) -> None:
    doc = _bench_stopped(tmp_path, bench_server, "preamble", ["--system-tokens", "200"], 8, "some rounds measured")
    assert any(arm["samples"] for arm in doc["benchmarks"][0]["arms"])


def test_bench_history_stopped_part_way_keeps_its_sessions(tmp_path: Path, bench_server: str) -> None:
    doc = _bench_stopped(tmp_path, bench_server, "history", ["--system-tokens", "200", "--turn-tokens", "20"], 8,
                         "some sessions measured")
    assert any(arm["samples"] for arm in doc["benchmarks"][0]["arms"])


def test_bench_dispatch_stopped_part_way_keeps_its_turns(tmp_path: Path, bench_server: str) -> None:
    doc = _bench_stopped(tmp_path, bench_server, "dispatch", ["--apis", "chat"], 6, "some turns measured")
    assert doc["benchmarks"] and all(arm["samples"] for b in doc["benchmarks"] for arm in b["arms"])
