"""Readers at their edges (issue 43 item 8): a number of 5000 digits in a results file, a path that is
not a regular file (a symlink to /dev/zero, a FIFO, a folder), a trace whose request path HTTP cannot
carry, and a trace's own `Host` header.

The commands run as a user runs them: the non-regular files in a child process under a memory limit
(a reader that reads /dev/zero dies there of MemoryError, exit 3, instead of taking this machine's
memory), the rest through the CLI's own `main` in this process; the Host header against a real
endpoint that records what it received.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harnesscheck.protocol.wire.files import NotReadable, read_bytes, read_text
from tests.reliability.hostile import valid_frames
from tests.reliability.test_readers_fuzz import _cli, _no_kit_bug
from tests.reports import factory

HC = [sys.executable, "-m", "harnesscheck"]
CAPTURE = Path(__file__).parents[1] / "clients" / "fixtures" / "codex-tool.capture.jsonl"


def _results(path: Path, **extra: Any) -> Path:
    path.write_text(json.dumps(factory.results(**extra)), encoding="utf-8")
    return path


# -- a number of 5000 digits ------------------------------------------------------------------------

def test_a_5000_digit_number_in_a_results_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    good = _results(tmp_path / "good.json")
    text = good.read_text().replace('"duration_s": ', '"duration_s": ' + "9" * 5000 + ', "x": ', 1)
    assert text != good.read_text()
    big = tmp_path / "big.json"
    big.write_text(text)
    for argv in (["gate", "--baseline", str(good), "--current", str(big)],
                 ["gate", "--baseline", str(big), "--current", str(good)],
                 ["report", str(big), "--out", str(tmp_path / "r.html"), "-q"]):
        rc, err = _cli(*argv)
        _no_kit_bug(rc, err, allowed=(2,))
        assert "digits" in err and "set_int_max_str_digits" not in err, err


# -- files that are not regular files ---------------------------------------------------------------

def _limited(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`harnesscheck ARGV` in a child allowed 1.5 GiB of address space and 60 s."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))

    return subprocess.run([*HC, *argv], cwd=cwd, capture_output=True, text=True, timeout=60, preexec_fn=limit,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.mark.parametrize("what", ["zero", "fifo"])
def test_a_path_that_is_not_a_regular_file_is_refused_not_read(tmp_path: Path, what: str) -> None:
    odd = tmp_path / "odd.json"
    if what == "zero":
        odd.symlink_to("/dev/zero")
    else:
        os.mkfifo(odd)  # nobody writes: a reader that opens it blocking waits forever
    good = _results(tmp_path / "good.json")
    for argv in (["gate", "--baseline", str(good), "--current", str(odd)],
                 ["report", str(odd), "--out", str(tmp_path / "r.html"), "-q"],
                 ["trace", "from-capture", str(odd), "--out", str(tmp_path / "t.jsonl")],
                 ["trace", "check", str(odd)],
                 ["swebench", "select", "--tasks", str(odd), "--out", str(tmp_path / "s.jsonl"), "--no-datasets"]):
        run = _limited(argv, tmp_path)
        assert run.returncode == 2, (argv, run.returncode, run.stderr[-1500:])
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "not a regular file" in lines[0], (argv, run.stderr[-1500:])


def test_the_shared_reader_bounds_what_it_reads(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_bytes(b"x" * 1000)
    assert read_bytes(plain, limit=1000) == b"x" * 1000
    with pytest.raises(NotReadable, match="more than 999 bytes"):
        read_bytes(plain, limit=999)
    bomb = tmp_path / "bomb.gz"  # 64 MiB of zeros in ~64 kB: stopped at the limit, decompressed
    bomb.write_bytes(gzip.compress(b"\0" * (64 << 20)))
    with pytest.raises(NotReadable, match="once decompressed"):
        read_bytes(bomb, limit=1 << 20, gunzip=True)
    assert read_bytes(bomb, limit=1 << 20) == bomb.read_bytes()  # not gunzipped unless asked
    with pytest.raises(NotReadable, match=r"a folder"):
        read_text(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_text(tmp_path / "missing")
    assert isinstance(NotReadable("p", "why"), OSError) and NotReadable("p", "why").strerror == "why"


# -- trace request paths ------------------------------------------------------------------------------

def _trace(tmp_path: Path, path: str, headers: dict[str, str] | None = None) -> Path:
    head = {"schema": "harnesscheck.trace", "version": 1, "source": "test"}
    turn: dict[str, Any] = {"session": "s0", "turn": 0, "api": "chat", "path": path,
                            "request": {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}}
    if headers:
        turn["headers"] = headers
    file = tmp_path / "t.jsonl"
    file.write_text(json.dumps(head) + "\n" + json.dumps(turn) + "\n", encoding="utf-8")
    return file


@pytest.mark.parametrize("path", ["/v1/chat completions", "/v1/chat/completions\r\nX-Injected: 1",
                                  "/v1/chat/completions\n", "/v1/chat/completions#frag", "/v1/ch\u00e4t",
                                  "/v1/%zz", "//evil.example/v1/chat/completions", "v1/chat/completions",
                                  "/" + "a" * 9000])
def test_trace_check_refuses_a_path_that_is_no_request_target(tmp_path: Path, path: str) -> None:
    rc, err = _cli("trace", "check", str(_trace(tmp_path, path)))
    _no_kit_bug(rc, err, allowed=(2,))
    assert "'path'" in err, err


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages?beta=true", "/a/b%20c;p=1/@x:y~z"])
def test_trace_check_accepts_a_valid_request_target(tmp_path: Path, path: str) -> None:
    rc, err = _cli("trace", "check", str(_trace(tmp_path, path)))
    assert rc == 0, err


# -- Host is never taken from a trace -----------------------------------------------------------------

class _Recorder(BaseHTTPRequestHandler):
    """A Chat endpoint that keeps the headers of every request it gets."""

    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = b"".join(valid_frames("/v1/chat/completions"))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def recorder() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_replay_sends_its_own_host_and_framing_never_the_traces(tmp_path: Path,
                                                                  recorder: tuple[str, list[dict[str, str]]]) -> None:
    url, seen = recorder
    trace = _trace(tmp_path, "/v1/chat/completions",
                   {"Host": "internal.example:8443", "Content-Length": "5", "Connection": "close",
                    "x-kept": "yes"})
    rc, err = _cli("trace", "check", str(trace))
    assert rc == 0, err
    rc, err = _cli("replay", str(trace), "--endpoint", url, "--out", str(tmp_path / "rep"), "--no-progress",
                   "--time-scale", "0", "--timeout", "30", "--model", "m")
    assert rc == 0, err
    assert seen, "the endpoint got no request"
    port = url.rsplit(":", 1)[1]
    for headers in seen:
        assert headers["host"] == f"127.0.0.1:{port}", headers
        assert headers["content-length"] != "5" and headers.get("connection") != "close", headers
        assert headers["x-kept"] == "yes", headers  # the trace's other headers still go


def test_a_capture_that_is_a_symlink_to_a_real_capture_still_converts(tmp_path: Path) -> None:
    link = tmp_path / "c.capture.jsonl"
    link.symlink_to(CAPTURE)  # a symlink is followed: only what it points to must be a regular file
    rc, err = _cli("trace", "from-capture", str(link), "--out", str(tmp_path / "t.jsonl"))
    assert rc == 0, err
