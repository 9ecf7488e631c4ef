"""A small HTTP/1.1 client for the timed streaming path: one asyncio ``Protocol`` per connection,
each response parsed by httptools (llhttp, the parser uvicorn uses) inside ``data_received``,
and every body piece handed to the caller in that same call, with the time of the read.

Why not aiohttp here: aiohttp wakes a waiting task for every network read (its ``StreamReader``),
which is most of what a streamed chunk costs the client. Measured on this machine on the
ground-truth server's 66-chunk streams at c=64, the same fold behind each: 1.1–2.0 ms of client
CPU per request against aiohttp's 1.7–2.5 ms, the margin a 2-core machine needs to keep 256
streams in flight (docs/benchmarks.md, "fidelity").

What it does: ``http`` and ``https`` (the default SSL context); keep-alive connections kept per
(scheme, host, port) and reused; at most ``limit`` connections open at once, idle ones counted (0:
no limit; a request that needs a new connection when the limit is reached closes an idle one of
another host, or waits); request bodies sent with ``content-length``; responses framed by
``content-length``, chunked transfer coding or the connection's close (llhttp); ``gzip``,
``deflate`` and ``zstd`` content codings (and chains of them) decoded within ``max_body_bytes``
decoded bytes per response (default 64 MiB, ``replay.codings``: a gzip bomb stops there with
``BodyTooLarge``), a coded body that does not end (a truncated gzip stream) refused; a total
deadline and a read deadline (the longest silence between two reads). A kept connection that the server closed before a byte of the answer came back is
retried once on a new one (the request was never answered). Interim 1xx answers are skipped.
Not done, on purpose: proxies, redirects, cookies, HTTP/2 — the endpoints under test are spoken
to directly, and a redirect or a proxy would be part of what is measured.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httptools

from harnesscheck import __version__
from harnesscheck.replay.codings import MAX_DECODED_BYTES, CodingError, Decoder

__all__ = ["BodyError", "ConnectError", "MAX_DECODED_BYTES", "Pool", "ReadTimeout", "Response",
           "TransportError"]

_USER_AGENT = f"harnesscheck/{__version__}"


class TransportError(Exception):
    """The connection failed after it was made: closed early, or a reply that is not HTTP/1.1."""


class ConnectError(TransportError):
    """No connection could be made (refused, unresolvable, TLS handshake failed)."""


class ReadTimeout(TransportError):
    """No byte came for longer than the read deadline."""


class BodyError(TransportError):
    """A coded body that does not decode, is truncated, or decodes past ``max_body_bytes``."""


@dataclass(slots=True)
class Response:
    """The status and headers (names lower-cased; a repeated one keeps its last value)."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)


OnHeaders = Callable[[Response, int], None]  # (the response, perf_counter_ns of the read)
OnBody = Callable[[bytes, int], None]  # (a piece of the decoded body, perf_counter_ns of its read)


class _Connection(asyncio.Protocol):
    """One connection; one request at a time on it."""

    def __init__(self, max_body: int = MAX_DECODED_BYTES) -> None:
        self.transport: asyncio.Transport | None = None
        self.max_body = max_body
        self.closed = False
        self._done: asyncio.Future[None] | None = None
        self._on_headers: OnHeaders | None = None
        self._on_body: OnBody | None = None
        self._parser: Any = None
        self._response = Response()
        self._decode: Decoder | None = None
        self._t = 0
        self._got_bytes = False
        self._framed = False  # the response says where it ends (content-length or chunked)
        self._last_read = 0.0
        self._read_timeout: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.keep_alive = False
        self.used = False

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._t = time.perf_counter_ns()
        self._last_read = time.monotonic()
        if self._parser is None:
            self.close()  # bytes nobody asked for on an idle connection: it is not reused
            return
        self._got_bytes = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:  # a callback's own error (the caller's, or a decoder's)
            cause = exc.__context__
            if isinstance(cause, BaseException) and not isinstance(cause, Exception):
                raise cause from None  # a stop (KeyboardInterrupt) is the kit's, never the endpoint's failure
            self._fail(cause if isinstance(cause, Exception) else TransportError(str(exc)))
        except httptools.HttpParserUpgrade:
            self._fail(TransportError("the server upgraded the connection"))
        except httptools.HttpParserError as exc:
            self._fail(TransportError(f"the answer is not HTTP/1.1: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._parser is not None and self._done is not None and not self._done.done():
            if self._response.status >= 200 and not self._framed and exc is None:
                try:  # a body delimited by the close
                    self._end_body()
                except BodyError as err:
                    self._fail(err)
                else:
                    self._finish()
            else:
                where = "after" if self._got_bytes else "before"
                self._fail(TransportError(f"the server closed the connection {where} the response began"
                                          + (f" ({exc})" if exc else "")))
        self._cancel_timer()

    # -- httptools callbacks --------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._response.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        r = self._response
        r.status = self._parser.get_status_code()
        if r.status < 200:
            return
        h = r.headers
        self._framed = "content-length" in h or "chunked" in h.get("transfer-encoding", "").lower()
        coding = h.get("content-encoding", "").strip().lower()
        if coding and coding != "identity":
            try:
                self._decode = Decoder(coding, self.max_body)
            except CodingError as exc:
                raise BodyError(str(exc)) from None
        if self._on_headers is not None:
            self._on_headers(r, self._t)

    def on_body(self, body: bytes) -> None:
        if self._response.status < 200:
            return
        if self._decode is not None:
            try:
                body = self._decode.feed(body)
            except CodingError as exc:
                raise BodyError(str(exc)) from None
            if not body:
                return
        if self._on_body is not None:
            self._on_body(body, self._t)

    def on_message_complete(self) -> None:
        if self._response.status < 200:  # an interim answer: the real one follows
            self._response = Response()
            return
        self.keep_alive = self._parser.should_keep_alive()
        self._end_body()
        self._finish()

    def _end_body(self) -> None:
        """The body is all there: a coded one must have reached its end (a cut gzip stream has not)."""
        if self._decode is not None:
            try:
                self._decode.finish()
            except CodingError as exc:
                raise BodyError(str(exc)) from None

    # -- one exchange ---------------------------------------------------------------------

    def send(self, request: bytes, on_headers: OnHeaders, on_body: OnBody,
             read_timeout: float | None) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        self._on_headers, self._on_body = on_headers, on_body
        self._parser = httptools.HttpResponseParser(self)
        self._response, self._decode = Response(), None
        self._got_bytes = self._framed = self.keep_alive = False
        self._read_timeout = read_timeout
        self._last_read = time.monotonic()
        if read_timeout is not None:
            self._timer = loop.call_later(read_timeout, self._check_read)
        assert self.transport is not None
        self.transport.write(request)
        return self._done

    def _check_read(self) -> None:
        """The read deadline: one timer, moved on to the remaining time after each read."""
        if self._done is None or self._done.done() or self._read_timeout is None:
            return
        left = self._last_read + self._read_timeout - time.monotonic()
        if left <= 0:
            self._fail(ReadTimeout(f"no data for {self._read_timeout:g} s"))
        else:
            self._timer = asyncio.get_running_loop().call_later(left, self._check_read)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _finish(self) -> None:
        self._cancel_timer()
        self._parser = None
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _fail(self, exc: Exception) -> None:
        self._cancel_timer()
        self._parser = None
        self.keep_alive = False
        self.close()
        if self._done is not None and not self._done.done():
            self._done.set_exception(exc)

    @property
    def answered(self) -> bool:
        """A byte of the answer to the last request came back."""
        return self._got_bytes

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


@dataclass(frozen=True, slots=True)
class _Target:
    scheme: str
    host: str
    port: int
    path: str

    @staticmethod
    def of(url: str) -> _Target:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConnectError(f"not an http(s) URL: {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return _Target(parts.scheme, parts.hostname, port, path)

    @property
    def key(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def _request_bytes(method: str, target: _Target, headers: Mapping[str, str], body: bytes) -> bytes:
    lines = [f"{method} {target.path} HTTP/1.1"]
    names = {k.lower() for k in headers}
    if "host" not in names:
        lines.append(f"host: {target.host_header}")
    if "user-agent" not in names:
        lines.append(f"user-agent: {_USER_AGENT}")
    if "accept-encoding" not in names:
        lines.append("accept-encoding: gzip, deflate")
    for k, v in headers.items():
        if k.lower() in ("content-length", "transfer-encoding", "connection"):
            continue
        if any(c in k or c in str(v) for c in "\r\n\0"):
            raise ValueError(f"header {k!r}: a name or value holds a line break or NUL")
        lines.append(f"{k}: {v}")
    lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Pool:
    """Kept connections per (scheme, host, port); at most ``limit`` open at once, idle ones included
    (0: no limit); each response decoded within ``max_body_bytes``. ``async with Pool() as p`` closes
    them all at the end."""

    def __init__(self, limit: int = 0, *, max_body_bytes: int = MAX_DECODED_BYTES) -> None:
        self.limit = limit
        self.max_body_bytes = max_body_bytes
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._open: list[_Connection] = []  # every connection made and not yet closed
        self._connecting = 0  # connections being made (counted before they exist)
        self._slots = asyncio.Semaphore(limit) if limit > 0 else None  # requests in flight
        self._ssl: ssl.SSLContext | None = None

    @property
    def open_connections(self) -> int:
        self._open = [c for c in self._open if not c.closed]
        return len(self._open)

    async def __aenter__(self) -> Pool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conns in self._idle.values():
            for c in conns:
                c.close()
        self._idle.clear()
        for c in self._open:
            c.close()
        self._open.clear()

    def _make_room(self) -> None:
        """Below ``limit`` open connections before a new one: close idle ones, the oldest first. A
        request holds one of ``limit`` slots while it runs, so when all are open one is idle."""
        while self.limit > 0 and self.open_connections + self._connecting >= self.limit:
            idle = next((conns for conns in self._idle.values() if conns), None)
            if idle is None:  # pragma: no cover - cannot happen while requests hold the slots
                return
            idle.pop(0).close()

    async def request(self, method: str, url: str, headers: Mapping[str, str], body: bytes, *,
                      on_headers: OnHeaders, on_body: OnBody, read_timeout: float | None = None) -> None:
        """Send one request; ``on_headers`` then ``on_body`` (per piece) are called as the answer
        arrives. Returns when it is complete. Raises ConnectError, ReadTimeout or TransportError;
        a caller's deadline (``asyncio.timeout``) closes the connection it cancels."""
        target = _Target.of(url)
        request = _request_bytes(method, target, headers, body)
        if self._slots is not None:
            await self._slots.acquire()
        try:
            for _ in range(2):
                conn = await self._connection(target)
                try:
                    await conn.send(request, on_headers, on_body, read_timeout)
                except ReadTimeout:
                    raise
                except TransportError:
                    if conn.used and not conn.answered:
                        continue  # a kept connection the server had closed: once more on a new one
                    raise
                except BaseException:
                    conn.close()  # cancelled mid-answer: the connection is in no state to reuse
                    raise
                conn.used = True
                if conn.keep_alive and not conn.closed:
                    self._idle.setdefault(target.key, []).append(conn)
                else:
                    conn.close()
                return
            raise TransportError("the server closed two connections before answering")  # pragma: no cover
        finally:
            if self._slots is not None:
                self._slots.release()

    async def _connection(self, target: _Target) -> _Connection:
        idle = self._idle.get(target.key)
        while idle:
            conn = idle.pop()
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
        loop = asyncio.get_running_loop()
        context = None
        if target.scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            context = self._ssl
        self._make_room()
        self._connecting += 1
        try:
            _, conn = await loop.create_connection(lambda: _Connection(self.max_body_bytes), target.host,
                                                   target.port, ssl=context)
        except (OSError, ssl.SSLError) as exc:
            raise ConnectError(f"cannot connect to {target.host_header}: {exc}") from exc
        finally:
            self._connecting -= 1
        self._open.append(conn)
        return conn
