"""Recording HTTP clients over httpx: every exchange becomes a ``Transcript``; nothing a server
does makes them raise.

- ``stream_request(url, *, headers, json_body, timeout, api, max_frame_bytes, read_timeout)``
  posts and records a streamed response: status, headers, then each network chunk with its
  arrival time, fed to the SSE decoder.
- ``post_json(url, ...)``: the same for a non-streaming call (the body is kept).
- ``get(url, ...)``: a GET.
- ``astream_request`` / ``apost_json`` / ``aget``: async twins.

Two timeouts: ``timeout`` is the total deadline for the whole exchange, ``read_timeout`` the
longest silence allowed between two reads. Both clients enforce the deadline exactly, headers
included: the async client with ``asyncio.wait_for``; the sync client checks it after every chunk
and, for what happens between chunks (a server that trickles its headers or its body a byte at a
time, which no per-read timeout catches), arms a timer that shuts the connection's socket down at
the deadline. (With a caller-supplied ``httpx.Client`` whose pooled connection is reused, that
socket is not seen, and only the per-read timeout bounds the header phase.) Timeouts, refused
or reset connections, a stream cut mid-body, oversize frames and a wrong content type all end up
in ``Transcript.error`` (with ``error_kind``), keeping the frames received so far.

Headers are sent as given and stored redacted; the secret values they carry are also scrubbed
from the stored URL, request body, response body, frames and error texts (a server that echoes a
key back must not get it written to disk).
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypedDict, Unpack

import httpx

from .redact import REDACTED, redact_headers, redact_text, redact_url, secrets_from_headers
from .sse import DEFAULT_MAX_FRAME_BYTES, FrameTooLarge, SSEDecoder, SSEFrame, _parse_data
from .transcript import Chunk, Timings, Transcript


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every client the kit makes: httpx builds a new one per client
    otherwise (loading the CA bundle, ~70 ms of CPU each, dozens per suite run)."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def new_client(**kwargs: Any) -> httpx.Client:
    """An httpx.Client with the shared TLS context (verification as httpx's default)."""
    return httpx.Client(verify=tls_context(), **kwargs)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "aget",
    "apost_json",
    "astream_request",
    "get",
    "post_json",
    "stream_request",
]

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
_SSE_START = (b"data:", b"event:", b":", b"id:", b"retry:", b"\xef\xbb\xbfdata:", b"\xef\xbb\xbfevent:")


class _Deadline(Exception):
    pass


class _Recording:
    """Builds a Transcript while the exchange runs."""

    def __init__(
        self,
        *,
        api: str,
        method: str,
        url: str,
        headers: Mapping[str, str] | None,
        json_body: Any,
        timeout: float,
        max_frame_bytes: int,
        max_body_bytes: int,
        expect_stream: bool,
        secret_headers: Iterable[str],
    ) -> None:
        self.secrets = secrets_from_headers(headers, secret_headers)
        self._secret_bytes = [s.encode("utf-8", "replace") for s in self.secrets]
        self.raw_url = url
        self.safe_url = redact_text(redact_url(url), self.secrets)
        body = json_body
        if body is not None and self.secrets:
            text = json.dumps(body)
            if redact_text(text, self.secrets) != text:
                body = json.loads(redact_text(text, self.secrets))
        self.start_ns = time.monotonic_ns()
        self.deadline_ns = self.start_ns + int(timeout * 1e9)
        self.timeout = timeout
        self.expect_stream = expect_stream
        self.max_body_bytes = max_body_bytes
        self.t = Transcript(
            api=api,
            method=method,
            url=self.safe_url,
            request_headers=redact_headers(headers or {}, secret_headers),
            request_body=body,
            timings=Timings(started_at=time.time(), start_ns=self.start_ns),
        )
        self.decoder: SSEDecoder | None = None
        self.max_frame_bytes = max_frame_bytes
        self._body = bytearray()
        self._sse = False

    def now(self) -> int:
        return time.monotonic_ns() - self.start_ns

    def remaining(self) -> float:
        return max(0.0, (self.deadline_ns - time.monotonic_ns()) / 1e9)

    def on_headers(self, resp: httpx.Response) -> None:
        self.t.status = resp.status_code
        self.t.response_headers = redact_headers(resp.headers.multi_items())
        self.t.timings.headers_ns = self.now()
        ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
        self._sse = ctype == "text/event-stream"
        if self._sse:
            self.decoder = SSEDecoder(max_frame_bytes=self.max_frame_bytes)

    def on_chunk(self, data: bytes) -> None:
        t_ns = self.now()
        idx = len(self.t.chunks)
        self.t.chunks.append(Chunk(idx, t_ns, len(data)))
        if self.decoder is not None:
            self._add_frames(self.decoder.feed(data, t_ns=t_ns, chunk_index=idx))
        else:
            self._body += data
            if len(self._body) > self.max_body_bytes:
                raise FrameTooLarge(len(self._body), self.max_body_bytes, "body")
        if time.monotonic_ns() >= self.deadline_ns:
            raise _Deadline()

    def has_first_frames(self, wanted: int | None) -> bool:
        """The answer is a 2xx event stream holding at least ``wanted`` event frames."""
        if wanted is None or not self._sse or not 200 <= (self.t.status or 0) < 300:
            return False
        return sum(1 for f in self.t.frames if f.kind == "event") >= wanted

    def _add_frames(self, frames: list[SSEFrame]) -> None:
        if not frames:
            return
        if self._secret_bytes:
            frames = [self._scrub_frame(f) for f in frames]
        if self.t.timings.first_frame_ns is None:
            for f in frames:
                if f.kind == "event":
                    self.t.timings.first_frame_ns = f.t_ns
                    break
        self.t.frames.extend(frames)

    def _scrub_frame(self, f: SSEFrame) -> SSEFrame:
        if not any(s in f.raw for s in self._secret_bytes):
            return f
        data = redact_text(f.data, self.secrets)
        parsed, err, done = (_parse_data(data, f.utf8_error) if f.kind == "event"
                             else (None, f.json_error, False))
        return replace(f, raw=self._scrub(f.raw), data=data, json=parsed, json_error=err, done=done,
                       comment=None if f.comment is None else redact_text(f.comment, self.secrets))

    def _scrub(self, data: bytes) -> bytes:
        for s in self._secret_bytes:
            data = data.replace(s, REDACTED.encode())
        return data

    def fail(self, kind: str, message: str) -> None:
        if self.t.error is None:
            msg = redact_text(message.replace(self.raw_url, self.safe_url), self.secrets)
            self.t.error_kind = kind
            self.t.error = msg

    def fail_exc(self, exc: BaseException) -> None:
        kind, what = _classify(exc, self)
        self.fail(kind, what)

    def finish(self) -> Transcript:
        t_ns = self.now()
        if self.decoder is not None:
            try:
                self._add_frames(self.decoder.flush(t_ns=t_ns, chunk_index=max(len(self.t.chunks) - 1, 0)))
            except Exception as exc:  # pragma: no cover - flush only raises on misuse
                self.fail("kit", repr(exc))
        elif self.t.status is not None:
            self.t.body = self._scrub(bytes(self._body))
            if self.expect_stream and 200 <= self.t.status < 300:
                ctype = self.t.content_type or "(none)"
                self.fail("content_type", f"expected text/event-stream, got content-type {ctype}")
                if self.t.body.lstrip().startswith(_SSE_START):
                    dec = SSEDecoder(max_frame_bytes=self.max_frame_bytes)
                    try:
                        frames = dec.feed(self.t.body) + dec.flush()
                    except FrameTooLarge:
                        frames = []
                    self._add_frames(frames)
        self.t.timings.end_ns = t_ns
        return self.t


def _classify(exc: BaseException, rec: _Recording) -> tuple[str, str]:
    where = "before the response headers" if rec.t.status is None else "while reading the body"
    if isinstance(exc, _Deadline):
        return "deadline", f"total deadline of {rec.timeout:g} s exceeded {where}"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "deadline", f"total deadline of {rec.timeout:g} s exceeded {where}"
    if isinstance(exc, FrameTooLarge):
        return "too_large", str(exc)
    if isinstance(exc, httpx.TransportError | OSError) and time.monotonic_ns() >= rec.deadline_ns:
        return "deadline", f"total deadline of {rec.timeout:g} s exceeded {where}"
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect_timeout", f"connect timed out: {exc}"
    if isinstance(exc, httpx.ReadTimeout):
        kind = "deadline" if time.monotonic_ns() >= rec.deadline_ns - 5_000_000 else "read_timeout"
        if kind == "deadline":
            return kind, f"total deadline of {rec.timeout:g} s exceeded {where}"
        return kind, f"no data for the read timeout {where}"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout", f"{type(exc).__name__} {where}: {exc}"
    if isinstance(exc, httpx.ConnectError):
        return "connect", f"connection failed: {exc}"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "protocol", f"connection closed or protocol error {where}: {exc}"
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return "reset", f"connection reset {where}: {exc}"
    if isinstance(exc, httpx.HTTPError):
        return "transport", f"{type(exc).__name__} {where}: {exc}"
    if isinstance(exc, OSError):
        return "reset", f"{type(exc).__name__} {where}: {exc}"
    return "kit", f"{type(exc).__name__}: {exc}"


def _httpx_timeout(timeout: float, read_timeout: float | None) -> httpx.Timeout:
    read = timeout if read_timeout is None else min(read_timeout, timeout)
    return httpx.Timeout(connect=min(10.0, timeout), read=read, write=min(30.0, timeout), pool=min(10.0, timeout))


def _prepare_headers(headers: Mapping[str, str] | None, expect_stream: bool) -> dict[str, str]:
    out = dict(headers or {})
    if expect_stream and not any(k.lower() == "accept" for k in out):
        out["accept"] = "text/event-stream"
    return out


_RECOVERABLE = (httpx.HTTPError, FrameTooLarge, _Deadline, OSError, asyncio.TimeoutError)


class RequestOptions(TypedDict, total=False):
    """What every recording call takes besides the URL and the client (defaults: ``_Request``'s)."""

    headers: Mapping[str, str] | None
    json_body: Any
    content: bytes | None
    timeout: float
    read_timeout: float | None
    api: str
    method: str
    max_frame_bytes: int
    max_body_bytes: int
    secret_headers: Iterable[str]
    first_frames: int | None


@dataclass(frozen=True)
class _Request:
    """One exchange to make and record: the request and the limits its recording keeps to."""

    url: str
    expect_stream: bool
    method: str
    timeout: float
    headers: Mapping[str, str] | None = None
    json_body: Any = None
    content: bytes | None = None
    read_timeout: float | None = None
    api: str = ""
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    secret_headers: Iterable[str] = ()
    # Stop reading a 2xx event stream once it holds this many event frames (an acceptance is known at the
    # status line and the first frames: a slow or endless answer cannot hide it). None: read to the end.
    first_frames: int | None = None


_STREAM: dict[str, Any] = {"expect_stream": True, "method": "POST", "timeout": 60.0}
_POST: dict[str, Any] = {"expect_stream": False, "method": "POST", "timeout": 60.0}
_GET: dict[str, Any] = {"expect_stream": False, "method": "GET", "timeout": 30.0}


def _request(url: str, kind: dict[str, Any], options: RequestOptions) -> _Request:
    """The exchange a public call asks for: its kind's defaults, overridden by the caller's options."""
    return _Request(url=url, **{**kind, **options})


def _start(req: _Request) -> tuple[_Recording, dict[str, Any]]:
    """The recording both clients begin an exchange with, and the arguments for httpx's ``stream``."""
    hdrs = _prepare_headers(req.headers, req.expect_stream)
    rec = _Recording(
        api=req.api, method=req.method, url=req.url, headers=hdrs, json_body=req.json_body,
        timeout=req.timeout, max_frame_bytes=req.max_frame_bytes, max_body_bytes=req.max_body_bytes,
        expect_stream=req.expect_stream, secret_headers=req.secret_headers,
    )
    kwargs: dict[str, Any] = {"headers": hdrs, "timeout": _httpx_timeout(req.timeout, req.read_timeout)}
    if req.content is not None:
        kwargs["content"] = req.content
    elif req.json_body is not None:
        kwargs["json"] = req.json_body
    return rec, kwargs


def _exchange(req: _Request, client: httpx.Client | None) -> Transcript:
    rec, kwargs = _start(req)
    own = client is None
    c = client if client is not None else new_client()
    guard = _SocketDeadline(rec.remaining())
    try:
        kwargs["extensions"] = {"trace": guard.trace}
        with c.stream(req.method, req.url, **kwargs) as resp:
            rec.on_headers(resp)
            for chunk in resp.iter_bytes():
                rec.on_chunk(chunk)
                if rec.has_first_frames(req.first_frames):
                    break  # closing the stream ends the exchange: what came is the transcript
        if guard.fired:  # a close-delimited body just ends when its socket is shut down
            raise _Deadline()
    except _RECOVERABLE as exc:
        rec.fail_exc(exc)
    finally:
        guard.cancel()
        if own:
            c.close()
    return rec.finish()


class _SocketDeadline:
    """Shuts the exchange's socket down when the total deadline passes (sync client).

    A blocking read that keeps getting a byte now and then never hits its read timeout; shutting
    the socket down from a timer thread makes that read return at once, and the exchange ends
    with an error that ``_classify`` files as the deadline. The socket comes from httpcore's trace
    hook when the connection is opened.
    """

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._done = False
        self.fired = False
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                with self._lock:
                    self._sock = sock

    def _fire(self) -> None:
        with self._lock:
            if self._done or self._sock is None:
                return
            self.fired = True
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()


async def _aexchange(req: _Request, client: httpx.AsyncClient | None) -> Transcript:
    rec, kwargs = _start(req)
    own = client is None
    c = client if client is not None else httpx.AsyncClient(verify=tls_context())

    async def run() -> None:
        async with c.stream(req.method, req.url, **kwargs) as resp:
            rec.on_headers(resp)
            async for chunk in resp.aiter_bytes():
                rec.on_chunk(chunk)
                if rec.has_first_frames(req.first_frames):
                    break

    try:
        await asyncio.wait_for(run(), timeout=req.timeout)
    except _RECOVERABLE as exc:
        rec.fail_exc(exc)
    finally:
        if own:
            await c.aclose()
    return rec.finish()


def stream_request(
    url: str, *, client: httpx.Client | None = None, **options: Unpack[RequestOptions]
) -> Transcript:
    """Send a request (POST unless ``method``) whose answer should be ``text/event-stream``; record it."""
    return _exchange(_request(url, _STREAM, options), client)


def post_json(
    url: str, *, client: httpx.Client | None = None, **options: Unpack[RequestOptions]
) -> Transcript:
    """A non-streaming POST; the body is kept in ``Transcript.body`` (frames if the server streams)."""
    return _exchange(_request(url, _POST, options), client)


def get(url: str, *, client: httpx.Client | None = None, **options: Unpack[RequestOptions]) -> Transcript:
    """A GET (or another body-less method such as HEAD) recorded as a Transcript (deadline 30 s)."""
    return _exchange(_request(url, _GET, options), client)


async def astream_request(
    url: str, *, client: httpx.AsyncClient | None = None, **options: Unpack[RequestOptions]
) -> Transcript:
    """Async twin of ``stream_request`` (the deadline is exact)."""
    return await _aexchange(_request(url, _STREAM, options), client)


async def apost_json(
    url: str, *, client: httpx.AsyncClient | None = None, **options: Unpack[RequestOptions]
) -> Transcript:
    """Async twin of ``post_json``."""
    return await _aexchange(_request(url, _POST, options), client)


async def aget(
    url: str, *, client: httpx.AsyncClient | None = None, **options: Unpack[RequestOptions]
) -> Transcript:
    """Async twin of ``get``."""
    return await _aexchange(_request(url, _GET, options), client)
