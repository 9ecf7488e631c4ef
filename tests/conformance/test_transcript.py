"""Transcripts, redaction and the recording clients, over real loopback against a tiny server."""

from __future__ import annotations

import asyncio
import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harnesscheck.protocol.wire import (
    REDACTED,
    SSEFrame,
    Transcript,
    aget,
    astream_request,
    decode_all,
    get,
    post_json,
    redact_headers,
    redact_text,
    redact_url,
    secrets_from_headers,
    stream_request,
)

FIXTURES = Path(__file__).parent / "fixtures"


# -- a tiny raw-socket HTTP server with scripted behaviours -------------------------------

class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            part = sock.recv(65536)
            if not part:
                return
            data += part
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        need = int(headers.get("content-length", "0"))
        while len(body) < need:
            body += sock.recv(65536)
        route = path.split("?")[0].strip("/")
        try:
            getattr(self, "do_" + route.replace("-", "_"))(sock, headers, body)
        except OSError:
            pass

    # helpers
    @staticmethod
    def head(sock: socket.socket, ctype: str = "text/event-stream", status: str = "200 OK", chunked: bool = True) -> None:
        extra = "transfer-encoding: chunked\r\n" if chunked else "connection: close\r\n"
        sock.sendall(f"HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\nset-cookie: s=secretcookie\r\n{extra}\r\n".encode())

    @staticmethod
    def chunk(sock: socket.socket, data: bytes) -> None:
        sock.sendall(b"%x\r\n%s\r\n" % (len(data), data))

    @staticmethod
    def end(sock: socket.socket) -> None:
        sock.sendall(b"0\r\n\r\n")

    # routes
    def do_slow(self, sock, headers, body):  # a fixture, one frame per chunk, 40 ms apart
        self.head(sock)
        for f in decode_all((FIXTURES / "anthropic_text.sse").read_bytes()):
            self.chunk(sock, f.raw)
            time.sleep(0.04)
        self.end(sock)

    def do_trickle(self, sock, headers, body):  # one byte every 50 ms, for up to 6 s
        self.head(sock)
        payload = b"data: " + b"x" * 200 + b"\n\n"
        self.chunk(sock, b"data: first\n\n")
        for i in range(120):
            self.chunk(sock, payload[i % len(payload) : i % len(payload) + 1])
            time.sleep(0.05)

    def do_hang_after_frame(self, sock, headers, body):
        self.head(sock)
        self.chunk(sock, b"data: {\"n\":1}\n\n")
        time.sleep(3)

    def do_hang_before_headers(self, sock, headers, body):
        time.sleep(3)

    def do_reset(self, sock, headers, body):
        self.head(sock)
        self.chunk(sock, b"data: {\"n\":1}\n\n")
        time.sleep(0.05)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()

    def do_cut(self, sock, headers, body):  # closes cleanly but mid-frame, without the last chunk
        self.head(sock)
        self.chunk(sock, b"data: {\"n\":1}\n\ndata: {\"n\":")
        sock.shutdown(socket.SHUT_RDWR)

    def do_big(self, sock, headers, body):
        self.head(sock)
        self.chunk(sock, b"data: " + b"y" * 5000 + b"\n\n")
        self.end(sock)

    last_headers: dict[str, str] = {}

    def do_json(self, sock, headers, body):
        _Handler.last_headers = headers
        self.head(sock, ctype="application/json", chunked=False)
        sock.sendall(json.dumps({"echo_headers": headers, "body": json.loads(body or b"null")}).encode())

    def do_error400(self, sock, headers, body):
        self.head(sock, ctype="application/json", status="400 Bad Request", chunked=False)
        sock.sendall(b'{"type":"error","error":{"type":"invalid_request_error","message":"no"}}')

    def do_sse_as_text(self, sock, headers, body):
        self.head(sock, ctype="text/plain", chunked=False)
        sock.sendall(b"data: {\"n\":1}\n\ndata: [DONE]\n\n")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def timed(fn: Callable[[], Transcript]) -> tuple[Transcript, float]:
    t0 = time.monotonic()
    t = fn()
    return t, time.monotonic() - t0


# -- clients ------------------------------------------------------------------------------

def test_slow_stream_records_frames_with_increasing_times(server: str) -> None:
    t = stream_request(f"{server}/slow", json_body={"stream": True}, timeout=3, api="anthropic")
    assert t.error is None, t.error
    assert t.status == 200 and t.content_type.startswith("text/event-stream")
    evs = t.events
    expected = [f.data for f in decode_all((FIXTURES / "anthropic_text.sse").read_bytes()) if f.kind == "event"]
    assert [f.data for f in evs] == expected
    times = [f.t_ns for f in evs]
    assert all(b > a for a, b in zip(times, times[1:])), times
    assert len({f.chunk_index for f in evs}) >= len(evs) // 2
    tm = t.timings
    assert 0 < tm.headers_ns <= tm.first_frame_ns <= tm.end_ns  # type: ignore[operator]
    assert t.request_headers["accept"] == "text/event-stream"
    assert t.response_headers["set-cookie"] == REDACTED


def test_trickle_is_cut_at_the_total_deadline(server: str) -> None:
    t, took = timed(lambda: stream_request(f"{server}/trickle", json_body={}, timeout=0.6, read_timeout=5))
    assert t.error_kind == "deadline", t.error
    assert 0.55 < took < 1.2
    assert [f.data for f in t.events] == ["first"]
    assert len(t.chunks) > 3


def test_async_trickle_deadline_is_exact(server: str) -> None:
    async def go() -> Transcript:
        return await astream_request(f"{server}/trickle", json_body={}, timeout=0.5, read_timeout=5)

    t, took = timed(lambda: asyncio.run(go()))
    assert t.error_kind == "deadline", t.error
    assert took < 1.0
    assert [f.data for f in t.events] == ["first"]


def test_idle_read_timeout_keeps_frames(server: str) -> None:
    t, took = timed(lambda: stream_request(f"{server}/hang-after-frame", json_body={}, timeout=2, read_timeout=0.3))
    assert t.error_kind == "read_timeout", t.error
    assert took < 1.0
    assert [f.json for f in t.events] == [{"n": 1}]


def test_hang_before_headers_hits_deadline(server: str) -> None:
    t, took = timed(lambda: stream_request(f"{server}/hang-before-headers", json_body={}, timeout=0.4))
    assert t.error_kind == "deadline" and t.status is None
    assert took < 1.0
    assert "before the response headers" in (t.error or "")


def test_reset_and_cut_keep_frames(server: str) -> None:
    t = stream_request(f"{server}/reset", json_body={}, timeout=2)
    assert t.error_kind in ("reset", "protocol"), (t.error_kind, t.error)
    assert [f.json for f in t.events] == [{"n": 1}]
    t = stream_request(f"{server}/cut", json_body={}, timeout=2)
    assert t.error_kind == "protocol", (t.error_kind, t.error)
    assert [f.json for f in t.events] == [{"n": 1}]
    assert t.truncated and t.frames[-1].raw == b'data: {"n":'


def test_oversize_frame(server: str) -> None:
    t = stream_request(f"{server}/big", json_body={}, timeout=2, max_frame_bytes=1000)
    assert t.error_kind == "too_large" and "1000" in (t.error or "")


def test_wrong_content_type_and_sse_in_disguise(server: str) -> None:
    t = stream_request(f"{server}/json", json_body={"a": 1}, timeout=2)
    assert t.error_kind == "content_type"
    assert t.json_body()["body"] == {"a": 1}
    t = stream_request(f"{server}/sse-as-text", json_body={}, timeout=2)
    assert t.error_kind == "content_type"
    assert [f.done for f in t.events] == [False, True]


def test_post_json_and_error_status(server: str) -> None:
    t = post_json(f"{server}/error400", json_body={"x": 1}, timeout=2, api="anthropic")
    assert t.error is None and t.status == 400 and not t.ok
    assert t.json_body()["error"]["type"] == "invalid_request_error"
    t = get(f"{server}/json", timeout=2)
    assert t.ok and t.method == "GET" and t.json_body()["body"] is None


def test_async_get(server: str) -> None:
    t = asyncio.run(aget(f"{server}/json", timeout=2))
    assert t.ok and t.json_body()["body"] is None


def test_connection_refused() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t = stream_request(f"http://127.0.0.1:{port}/x", json_body={}, timeout=2)
    assert t.error_kind == "connect" and t.status is None and t.frames == []


def test_secrets_sent_but_stored_redacted(server: str) -> None:
    key = "sk-ant-very-secret-123"
    t = post_json(
        f"{server}/json?key={key}&beta=true",
        headers={"x-api-key": key, "authorization": f"Bearer {key}", "x-custom": "visible"},
        json_body={"note": f"contains {key}"},
        timeout=2,
    )
    echoed = _Handler.last_headers
    assert echoed["x-api-key"] == key and echoed["authorization"] == f"Bearer {key}"  # sent unredacted
    assert t.request_headers["x-api-key"] == REDACTED
    assert t.request_headers["authorization"] == f"Bearer {REDACTED}"
    assert t.request_headers["x-custom"] == "visible"
    assert key not in t.url and "beta=true" in t.url
    assert key not in json.dumps(t.request_body)
    assert key not in t.to_json() and REDACTED in t.text_body()  # even the echo is scrubbed


# -- redaction ----------------------------------------------------------------------------

def test_redact_helpers() -> None:
    h = redact_headers({"Authorization": "Basic abc", "Cookie": "a=b", "X-Trace": "1", "X-Mine": "s3cret"}, extra=["x-mine"])
    assert h == {"Authorization": f"Basic {REDACTED}", "Cookie": REDACTED, "X-Trace": "1", "X-Mine": REDACTED}
    assert redact_headers([("set-cookie", "a"), ("set-cookie", "b")]) == {"set-cookie": f"{REDACTED}, {REDACTED}"}
    assert redact_url("https://u:p@h/x?api_key=1&q=2&token=3") == f"https://{REDACTED}@h/x?api_key={REDACTED}&q=2&token={REDACTED}"
    assert redact_url("http://h/v1/messages?beta=true") == "http://h/v1/messages?beta=true"
    assert redact_url("http://h/x?sess=9", extra_params=["sess"]).endswith(f"sess={REDACTED}")
    assert redact_text("a sk-123456 b sk-123456", ["sk-123456", None, "a"]) == f"a {REDACTED} b {REDACTED}"
    assert secrets_from_headers({"authorization": "Bearer tok-abcdef"}) == ["Bearer tok-abcdef", "tok-abcdef"]


# -- transcripts --------------------------------------------------------------------------

def _sample() -> Transcript:
    frames = decode_all(b": ping\n\nevent: a\ndata: {\"x\":1}\n\ndata: caf\xe9\n\ndata: [DONE]\n\ndata: cut")
    frames = [SSEFrame.from_dict({**f.to_dict(), "t_ns": 1_000_000 * (i + 1), "chunk_index": i}) for i, f in enumerate(frames)]
    t = Transcript(api="chat", method="POST", url="http://h/v1/chat/completions", request_body={"stream": True},
                   status=200, response_headers={"content-type": "text/event-stream"}, frames=frames,
                   body=b"\x00\xff", error="connection reset", error_kind="reset")
    return t


def test_json_round_trip() -> None:
    t = _sample()
    back = Transcript.from_json(t.to_json())
    assert back.to_dict() == t.to_dict()
    assert back.body == b"\x00\xff"
    assert [f.raw for f in back.frames] == [f.raw for f in t.frames]
    assert back.frames[2].utf8_error and back.frames[1].json == {"x": 1} and back.frames[3].done
    assert back.frames[-1].kind == "truncated"


def test_excerpt_marks_the_frame_with_times() -> None:
    t = _sample()
    text = t.excerpt(2, context=1)
    lines = text.splitlines()
    assert lines[0].startswith("POST http://h/v1/chat/completions -> 200")
    marked = [ln for ln in lines if ln.startswith(">>")]
    assert len(marked) == 1 and "#2" in marked[0] and "3.0 ms" in marked[0]
    assert "1 earlier frame(s)" in text and "1 later frame(s)" in text
    assert "error (reset): connection reset" in text
    tail = t.excerpt(None, context=0)
    assert "[truncated] data: cut" in tail and ">>" not in tail
