"""The timed streaming client of replay and benchmarks: ``replay.http1`` on uvloop when installed.

Issue 8 measured the client's own share of TTFT at concurrency 64 on 2 cores: plain httpx +139 ms
median, aiohttp with uvloop +4.5 ms; so timing-critical paths use this client, and httpx stays in
the conformance wire layer, where timing is not the point. Issue 24 then moved it from aiohttp to
``replay.http1``, which folds each network read inside the protocol callback that receives it
instead of waking a task per read (the figures are in that module and in docs/benchmarks.md).

``StreamClient.post(url, body, headers=..., api=...)`` sends one request and returns a
``StreamResult``: status, time to headers, TTFT, the time of every content-bearing event (so
inter-token times), when each tool call was complete ("tool ready"), the end, usage, and the
answer folded into history form (what a next request would carry). All times are ns from the
request start (``time.perf_counter_ns``), taken as each network read returns.

What counts is each API module's (``protocol.apis``): the stream is folded with its pure
``accumulate``; a token is an event ``is_content`` accepts (TTFT: the first); a tool call is ready
when the snapshot's ``_complete`` first names it (Anthropic ``content_block_stop``; Responses
``response.function_call_arguments.done``, else ``output_item.done``; Chat the next tool-call index
or ``finish_reason``), or at the reference server's Chat ``tool_call_dispatch`` frame when it sends
one (``source`` says which); errors are what ``error_of`` names. ``replay.fold`` reads the end, the
usage, the stop reason and the answer from the snapshot.

Each event's data is decoded by ``loads``: orjson, about 4x quicker than ``json.loads`` on a
typical chunk (measured here: 1.2 vs 5.1 µs; with json.loads it was the client's largest
per-event cost after the transport's). What orjson refuses (NaN, a lone surrogate) goes to ``json.loads``, so both
accept and refuse the same data; the one difference is an integer past 64 bits, which orjson reads
as the nearest float (nothing the client times or folds reads a number that size).

SSE is parsed by a minimal fast path (LF-only framing, the common case); any CR or BOM hands the
rest of the stream to ``protocol.wire.sse.SSEDecoder``. ``tests/replay/test_client.py`` checks
that both give the same events; ``parse_events`` is the function under test. Both hold at most
``DEFAULT_MAX_FRAME_BYTES`` (8 MiB) of an unfinished event: a larger one ends the request with an
error (``FrameTooLarge``), as a response body that decodes past ``max_body_bytes`` does
(``replay.http1``, 64 MiB by default).
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

import orjson

from harnesscheck.errors import STOP_REQUESTED, Interrupted
from harnesscheck.protocol import apis
from harnesscheck.protocol.wire.redact import redact_text, secrets_from_headers
from harnesscheck.protocol.wire.sse import DEFAULT_MAX_FRAME_BYTES, FrameTooLarge, SSEDecoder
from harnesscheck.replay.fold import DISPATCH_EVENT, CallWatch, view
from harnesscheck.replay.http1 import (MAX_DECODED_BYTES, BodyError, ConnectError, Pool, ReadTimeout,
                                       Response, TransportError)

__all__ = ["FastSSE", "Fold", "StreamClient", "StreamResult", "ToolReady", "loads", "parse_events", "run_async"]

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on uvloop when it is installed, else on asyncio's default loop.

    In the main thread, SIGINT and SIGTERM are taken by the loop (``loop.add_signal_handler``) for
    the run: a stop cancels the coroutine's task at its next ``await``, never raising inside a
    protocol callback (where a raise became a request's transport error, blamed on the endpoint),
    and the run ends with ``Interrupted("stopped by SIGTERM")``. A coroutine that catches the
    cancellation and returns what it finished has that value in the exception's ``measured``. A
    repeated signal is ignored (the clean-up it started goes on); the handlers the caller had are
    put back afterwards."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is an optional dependency
        factory = None
    else:
        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_stoppable(coro))


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def _stoppable(coro: Coroutine[Any, Any, T]) -> T:
    if threading.current_thread() is not threading.main_thread():
        return await coro
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    got: list[signal.Signals] = []

    def stop(sig: signal.Signals) -> None:
        if got:  # once: the clean-up the first one started goes on
            return
        got.append(sig)
        STOP_REQUESTED.set()  # threads that wait on child processes watch it
        task.cancel(f"stopped by {sig.name}")

    previous = {sig: signal.getsignal(sig) for sig in _STOP_SIGNALS}
    for sig in _STOP_SIGNALS:
        loop.add_signal_handler(sig, stop, sig)
    try:
        value = await coro
    except asyncio.CancelledError:
        if not got:
            raise
        raise Interrupted(f"stopped by {got[0].name}") from None
    finally:
        for sig in _STOP_SIGNALS:
            loop.remove_signal_handler(sig)
            signal.signal(sig, previous[sig])
    if got:  # the coroutine caught the stop and returned what it finished
        raise Interrupted(f"stopped by {got[0].name}", measured=value)
    return value


# -- SSE ---------------------------------------------------------------------------------

def loads(data: str) -> Any:
    """One event's data decoded, quicker than ``json.loads`` (orjson first; what orjson refuses,
    such as NaN or a lone surrogate, goes to ``json.loads``, so both refuse the same data)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


class FastSSE:
    """Incremental SSE framing that yields ``(event_name, data_text)`` per dispatched event.

    Handles LF line ends, comments, multi-line data and ``event``/``id``/``retry`` fields; on the
    first CR or a BOM it hands everything (from that chunk on) to the spec decoder. An unfinished
    event larger than ``max_frame_bytes`` raises ``FrameTooLarge`` (the spec decoder's limit too).
    """

    __slots__ = ("_buf", "_max", "_slow", "_started")

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = b""
        self._max = max_frame_bytes
        self._slow: SSEDecoder | None = None
        self._started = False

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        if self._slow is None and (b"\r" in chunk or (not self._started and chunk.startswith(b"\xef\xbb"))):
            self._slow = SSEDecoder(max_frame_bytes=self._max)
            pending, self._buf = self._buf, b""
            chunk = pending + chunk
        self._started = True
        if self._slow is not None:
            return [(f.event, f.data) for f in self._slow.feed(chunk) if f.kind == "event"]
        if not self._buf and chunk.endswith(b"\n\n") and chunk.count(b"\n") == 2:
            # one event of one line, the usual read of a token stream: no split needed
            if chunk.startswith(b"data: "):
                return [(None, chunk[6:-2].decode("utf-8", "replace"))]
            if chunk.startswith(b"data:"):
                return [(None, chunk[5:-2].decode("utf-8", "replace"))]
        buf = self._buf + chunk if self._buf else chunk
        end = buf.rfind(b"\n\n")
        if end < 0:
            if len(buf) > self._max:
                raise FrameTooLarge(len(buf), self._max, "frame")
            self._buf = buf
            return []
        self._buf = buf[end + 2:]
        if len(self._buf) > self._max:
            raise FrameTooLarge(len(self._buf), self._max, "frame")
        out: list[tuple[str | None, str]] = []
        for block in buf[:end].split(b"\n\n"):
            if not block:
                continue
            event = None
            data: list[str] = []
            for line in block.split(b"\n"):
                if line.startswith(b"data:"):
                    v = line[5:]
                    data.append((v[1:] if v[:1] == b" " else v).decode("utf-8", "replace"))
                elif line.startswith(b"event:"):
                    v = line[6:]
                    event = (v[1:] if v[:1] == b" " else v).decode("utf-8", "replace")
                elif line == b"data":
                    data.append("")
                elif line == b"event":
                    event = ""
            if data:
                out.append((event, "\n".join(data)))
        return out

    def flush(self) -> list[tuple[str | None, str]]:
        if self._slow is not None:
            return [(f.event, f.data) for f in self._slow.flush() if f.kind == "event"]
        return []  # an unterminated block is not dispatched


def parse_events(chunks: list[bytes]) -> list[tuple[str | None, str]]:
    """All events of a chunked stream through the fast path (for the equality test)."""
    p = FastSSE()
    out: list[tuple[str | None, str]] = []
    for c in chunks:
        out += p.feed(c)
    return out + p.flush()


# -- results -------------------------------------------------------------------------------

@dataclass(slots=True)
class ToolReady:
    index: int
    name: str
    t_ns: int
    source: str  # stop | arguments.done | item.done | dispatch | next_index | finish_reason

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "ms": round(self.t_ns / 1e6, 3), "source": self.source}


@dataclass(slots=True)
class StreamResult:
    api: str
    status: int | None = None
    error: str | None = None
    error_kind: str | None = None
    started_at: float = 0.0  # wall clock
    start_ns: int = 0  # perf_counter_ns at the start
    headers_ns: int | None = None
    ttft_ns: int | None = None
    token_ns: list[int] = field(default_factory=list)
    tool_ready: list[ToolReady] = field(default_factory=list)
    end_ns: int | None = None
    events: int = 0
    finished: bool = False  # the API's end event arrived (message_stop, [DONE], response.completed/incomplete)
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    answer: list[Any] | None = None  # history form
    structure: dict[str, Any] = field(default_factory=dict)  # blocks, tool_calls, stop
    body: bytes | None = None  # non-SSE response bodies (errors), capped

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300

    def itl_ms(self) -> list[float]:
        t = self.token_ns
        return [(b - a) / 1e6 for a, b in zip(t, t[1:], strict=False)]


# -- the fold, timed -------------------------------------------------------------------------

class Fold:
    """One stream folded with its API's pure ``accumulate`` (``protocol.apis``), plus the times:
    a token at each content event, a ``ToolReady`` when a call first counts as complete in the
    snapshot's ``_complete`` (or at the reference server's Chat ``tool_call_dispatch`` frame), the
    first error event. ``finish()`` sets finished, stop reason and usage, ``answer()`` the answer
    (history form) and its structure, each from the snapshot (``replay.fold.VIEWS``)."""

    __slots__ = (
        "_acc",
        "_calls",
        "_done",
        "_error_of",
        "_grown",
        "_is_content",
        "kinds",
        "r",
        "ready",
        "snapshot",
        "view",
    )

    def __init__(self, r: StreamResult) -> None:
        api = apis.get(r.api)
        self.r = r
        self.view = view(r.api)
        self.snapshot: dict[str, Any] | None = None
        self.kinds: list[str] = []  # part kinds in arrival order (for an API whose answer keeps none)
        self.ready: set[int] = set()  # keys of the calls reported ready
        self._acc = api.accumulate
        self._is_content = api.is_content
        self._error_of = api.error_of
        self._grown = self.view.grown
        self._done: Any = None  # the snapshot's last `_complete` (a new object whenever a call completes)
        self._calls = CallWatch(r.api, starts=False)

    def on(self, event: str | None, d: Any, t: int) -> None:
        """One decoded event (a data object, or Chat's "[DONE]") read at ``t`` ns."""
        r = self.r
        if event == DISPATCH_EVENT:
            call = (d.get("tool_call") or {}) if isinstance(d, dict) else {}
            idx = call.get("index", 0)
            if idx not in self.ready:
                self.ready.add(idx)
                r.tool_ready.append(ToolReady(idx, (call.get("function") or {}).get("name", ""), t, "dispatch"))
            return
        if r.error is None and self._error_of(d) is not None:
            r.error, r.error_kind = self.view.error(d), r.error_kind or "error_event"
        before = self.snapshot
        snap = self.snapshot = self._acc(d, before)
        if self._is_content(d):
            r.token_ns.append(t)
            if self._grown is not None:
                self._grown(before, snap, self.kinds)
        if snap is not None and snap.get("_complete") is not self._done:
            self._done = snap.get("_complete")
            for call, source in self._calls.step(snap)[1]:
                if call.key not in self.ready:
                    self.ready.add(call.key)
                    r.tool_ready.append(ToolReady(call.index, call.name, t, source))

    def finish(self) -> None:
        """The stream is over: what the snapshot says of its end, stop reason and usage."""
        r, v, snap = self.r, self.view, self.snapshot
        r.finished = v.ended(snap)
        r.stop_reason = v.stop(snap)
        r.usage = v.usage(snap)

    def answer(self) -> None:
        """The answer in history form and its structure (a 2xx stream's)."""
        self.r.answer = self.view.history(self.snapshot)
        self.r.structure = self.view.structure(self.snapshot, self.kinds)


# -- client ---------------------------------------------------------------------------------

_MAX_ERROR_BODY = 64 * 1024


OnEvent = Callable[[Fold, "str | None", Any, int], None]


class StreamClient:
    """The connections shared by all requests of a run (``replay.http1.Pool``).
    ``async with StreamClient() as c``; ``limit`` connections at most (0: no limit); each response
    decoded within ``max_body_bytes``."""

    def __init__(self, *, limit: int = 0, timeout: float = 600.0, read_timeout: float | None = 300.0,
                 max_body_bytes: int = MAX_DECODED_BYTES) -> None:
        self.limit = limit
        self.timeout = timeout
        self.read_timeout = read_timeout
        self.max_body_bytes = max_body_bytes
        self._pool: Pool | None = None

    async def __aenter__(self) -> Self:
        self._pool = Pool(self.limit, max_body_bytes=self.max_body_bytes)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.close()

    async def post(
        self, url: str, body: Any, *, api: str, headers: Mapping[str, str] | None = None,
        data: bytes | None = None, on_event: OnEvent | None = None,
    ) -> StreamResult:
        """POST ``body`` (or raw ``data``) and fold the streamed answer. Never raises for the
        server's faults: they become ``error``/``error_kind``. ``on_event(fold, event, data, t)``
        is called with each event just folded (``data``: the decoded object, or "[DONE]"; ``t``: ns
        from the request start), inside the read that brought it."""
        assert self._pool is not None, "use `async with StreamClient()`"
        hdrs = {"content-type": "application/json", "accept": "text/event-stream", **(headers or {})}
        payload = data if data is not None else json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        r = StreamResult(api=api, started_at=time.time())
        reading = _Reading(r, Fold(r), on_event)
        start = r.start_ns = reading.start = time.perf_counter_ns()
        try:
            async with asyncio.timeout(self.timeout):
                await self._pool.request("POST", url, hdrs, payload, on_headers=reading.headers,
                                         on_body=reading.body, read_timeout=self.read_timeout)
            reading.end()
        except TimeoutError:
            r.error, r.error_kind = f"timed out ({self.timeout:g} s total, {self.read_timeout} s read)", "timeout"
        except ReadTimeout as exc:
            r.error, r.error_kind = f"timed out ({exc}; {self.timeout:g} s total)", "timeout"
        except ConnectError as exc:
            r.error, r.error_kind = f"connection failed: {exc}", "connect"
        except BodyError as exc:
            r.error, r.error_kind = str(exc), "body"
        except (TransportError, OSError) as exc:
            r.error, r.error_kind = f"{type(exc).__name__}: {exc}", "transport"
        r.end_ns = time.perf_counter_ns() - start
        reading.fold.finish()  # (again, for a stream cut by a timeout or a transport error)
        r.ttft_ns = r.token_ns[0] if r.token_ns else None
        if r.status is not None and 200 <= r.status < 300:
            reading.fold.answer()
        if r.error and headers:
            r.error = redact_text(r.error, secrets_from_headers(headers))
        return r


class _Reading:
    """One answer as it arrives (``replay.http1`` calls ``headers`` and ``body`` in each read):
    an SSE stream folded event by event, anything else kept (its first 64 KiB) as the body."""

    __slots__ = ("body_parts", "ctype", "fold", "hook", "kept", "r", "sse", "start", "streaming")

    def __init__(self, r: StreamResult, fold: Fold, hook: OnEvent | None = None) -> None:
        self.r, self.fold, self.sse, self.hook = r, fold, FastSSE(), hook
        self.start = 0
        self.ctype = ""
        self.streaming = False
        self.body_parts: list[bytes] = []
        self.kept = 0

    def headers(self, resp: Response, t: int) -> None:
        r = self.r
        r.status = resp.status
        r.headers_ns = t - self.start
        self.ctype = resp.headers.get("content-type", "")
        self.streaming = self.ctype.startswith("text/event-stream")

    def body(self, data: bytes, t: int) -> None:
        if self.streaming:
            t -= self.start
            try:
                events = self.sse.feed(data)
            except FrameTooLarge as exc:
                raise BodyError(str(exc)) from None
            for event, text in events:
                self.event(event, text, t)
        elif self.kept < _MAX_ERROR_BODY:
            piece = data[:_MAX_ERROR_BODY - self.kept]
            self.body_parts.append(piece)
            self.kept += len(piece)

    def event(self, event: str | None, text: str, t: int) -> None:
        """One SSE event's data, decoded and folded (Chat's "[DONE]" as that string)."""
        r = self.r
        r.events += 1
        if text == "[DONE]":
            d: Any = text
        else:
            try:
                d = loads(text)
            except ValueError:
                r.error = r.error or f"event data is not JSON: {text[:200]!r}"
                r.error_kind = r.error_kind or "bad_json"
                return
            if not isinstance(d, dict):
                return
        self.fold.on(event, d, t)
        if self.hook is not None:
            self.hook(self.fold, event, d, t)

    def end(self) -> None:
        """The answer is complete: what it says of the stream's end, or of the status."""
        r = self.r
        if not self.streaming:
            r.body = b"".join(self.body_parts)
            status = r.status or 0
            if 200 <= status < 300:
                r.error, r.error_kind = f"expected text/event-stream, got {self.ctype or '(none)'}", "content_type"
            else:
                r.error, r.error_kind = f"HTTP {status}: {r.body[:300].decode('utf-8', 'replace')}", "status"
            return
        try:
            tail = self.sse.flush()
        except FrameTooLarge as exc:
            r.error, r.error_kind = str(exc), "body"
            return
        for event, text in tail:
            self.event(event, text, time.perf_counter_ns() - self.start)
        self.fold.finish()
        if r.status is not None and r.status < 300 and not r.finished and r.error is None:
            r.error, r.error_kind = "stream ended without the API's end event", "truncated"
