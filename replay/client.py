"""The timed streaming client of replay and benchmarks: aiohttp (+ uvloop when installed).

Issue 8 measured the client's own share of TTFT at concurrency 64 on 2 cores: plain httpx +139 ms
median, aiohttp with uvloop +4.5 ms; so timing-critical paths use this client, and httpx stays in
the conformance wire layer, where timing is not the point.

``StreamClient.post(url, body, headers=..., api=...)`` sends one request and returns a
``StreamResult``: status, time to headers, TTFT, the time of every content-bearing event (so
inter-token times), when each tool call was complete ("tool ready"), the end, usage, and the
answer folded into history form (what a next request would carry). All times are ns from the
request start (``time.perf_counter_ns``), taken as each network read returns.

What counts, per API:

- TTFT: the first content-bearing event. Anthropic: ``content_block_delta`` with
  ``text_delta``, ``thinking_delta`` or ``input_json_delta`` (not ``signature_delta``). Chat: a
  chunk whose ``choices[0].delta`` has non-empty ``content``, ``reasoning_content``, ``reasoning``
  or ``tool_calls``. Responses: ``response.output_text.delta``, ``response.refusal.delta``,
  ``response.reasoning_text.delta``, ``response.reasoning_summary_text.delta``,
  ``response.function_call_arguments.delta``.
- Tool ready: Anthropic ``content_block_stop`` of a ``tool_use`` block; Responses
  ``response.function_call_arguments.done`` (else ``output_item.done`` of the function_call);
  Chat: the ``tool_call_dispatch`` frame when the server sends one, else the chunk where the next
  tool-call index starts or ``finish_reason`` arrives (``source`` says which).

SSE is parsed by a minimal fast path (LF-only framing, the common case); any CR or BOM hands the
rest of the stream to ``conformance.wire.sse.SSEDecoder``. ``tests/replay/test_client.py`` checks
that both give the same events; ``parse_events`` is the function under test.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp

from harnesscheck.conformance.wire.redact import redact_text, secrets_from_headers
from harnesscheck.conformance.wire.sse import SSEDecoder

__all__ = ["StreamClient", "StreamResult", "ToolReady", "FastSSE", "run_async", "parse_events"]

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on uvloop when it is installed, else on asyncio's default loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is an optional dependency
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


# -- SSE ---------------------------------------------------------------------------------

class FastSSE:
    """Incremental SSE framing that yields ``(event_name, data_text)`` per dispatched event.

    Handles LF line ends, comments, multi-line data and ``event``/``id``/``retry`` fields; on the
    first CR or a BOM it hands everything (from that chunk on) to the spec decoder.
    """

    __slots__ = ("_buf", "_slow", "_started")

    def __init__(self) -> None:
        self._buf = b""
        self._slow: SSEDecoder | None = None
        self._started = False

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        if self._slow is None and (b"\r" in chunk or (not self._started and chunk.startswith(b"\xef\xbb"))):
            self._slow = SSEDecoder()
            pending, self._buf = self._buf, b""
            chunk = pending + chunk
        self._started = True
        if self._slow is not None:
            return [(f.event, f.data) for f in self._slow.feed(chunk) if f.kind == "event"]
        buf = self._buf + chunk if self._buf else chunk
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._buf = buf
            return []
        self._buf = buf[end + 2:]
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


# -- per-API folding ----------------------------------------------------------------------

class _Anthropic:
    def __init__(self, r: StreamResult) -> None:
        self.r = r
        self.blocks: list[dict[str, Any]] = []
        self.partial: dict[int, list[str]] = {}

    def on(self, event: str | None, d: dict[str, Any], t: int) -> None:
        r = self.r
        typ = d.get("type")
        if typ == "content_block_delta":
            delta = d.get("delta") or {}
            dt = delta.get("type")
            idx = d.get("index")
            block = self.blocks[idx] if isinstance(idx, int) and 0 <= idx < len(self.blocks) else None
            if dt == "text_delta":
                r.token_ns.append(t)
                if block is not None:
                    block["text"] = block.get("text", "") + delta.get("text", "")
            elif dt == "thinking_delta":
                r.token_ns.append(t)
                if block is not None:
                    block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dt == "input_json_delta":
                r.token_ns.append(t)
                self.partial.setdefault(idx, []).append(delta.get("partial_json", ""))
            elif dt == "signature_delta" and block is not None:
                block["signature"] = delta.get("signature", "")
        elif typ == "content_block_start":
            block = dict(d.get("content_block") or {})
            if block.get("type") == "tool_use":
                block["input"] = {}
            self.blocks.append(block)
        elif typ == "content_block_stop":
            idx = d.get("index")
            if isinstance(idx, int) and 0 <= idx < len(self.blocks):
                block = self.blocks[idx]
                if block.get("type") == "tool_use":
                    raw = "".join(self.partial.pop(idx, []))
                    try:
                        block["input"] = json.loads(raw) if raw.strip() else {}
                    except ValueError:
                        block["input"] = raw
                    calls = sum(1 for b in self.blocks[: idx] if b.get("type") == "tool_use")
                    r.tool_ready.append(ToolReady(calls, str(block.get("name", "")), t, "stop"))
        elif typ == "message_start":
            r.usage.update((d.get("message") or {}).get("usage") or {})
        elif typ == "message_delta":
            r.stop_reason = (d.get("delta") or {}).get("stop_reason", r.stop_reason)
            r.usage.update({k: v for k, v in (d.get("usage") or {}).items() if v is not None})
        elif typ == "message_stop":
            r.finished = True
        elif typ == "error" or event == "error":
            r.error = r.error or f"error event: {json.dumps(d)[:300]}"
            r.error_kind = r.error_kind or "error_event"

    def finish(self) -> None:
        content = []
        for b in self.blocks:
            kind = b.get("type")
            if kind == "text":
                content.append({"type": "text", "text": b.get("text", "")})
            elif kind == "thinking":
                content.append({"type": "thinking", "thinking": b.get("thinking", ""),
                                "signature": b.get("signature", "")})
            elif kind == "tool_use":
                content.append({"type": "tool_use", "id": b.get("id", ""), "name": b.get("name", ""),
                                "input": b.get("input", {})})
            else:
                content.append({k: v for k, v in b.items() if k not in ("citations",) or v})
        self.r.answer = [{"role": "assistant", "content": content}]
        self.r.structure = {"blocks": [b.get("type") for b in self.blocks],
                            "tool_calls": [b.get("name") for b in self.blocks if b.get("type") == "tool_use"],
                            "stop": self.r.stop_reason}


class _Chat:
    def __init__(self, r: StreamResult) -> None:
        self.r = r
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.ready: set[int] = set()
        self.kinds: list[str] = []

    def _kind(self, k: str) -> None:
        if not self.kinds or self.kinds[-1] != k or k == "tool_call":
            self.kinds.append(k)

    def _ready(self, idx: int, t: int, source: str) -> None:
        if idx in self.ready:
            return
        self.ready.add(idx)
        name = (self.calls.get(idx) or {}).get("function", {}).get("name", "")
        self.r.tool_ready.append(ToolReady(idx, name, t, source))

    def on(self, event: str | None, d: dict[str, Any], t: int) -> None:
        r = self.r
        if event == "tool_call_dispatch":
            call = d.get("tool_call") or {}
            idx = call.get("index", 0)
            if idx not in self.ready:
                self.ready.add(idx)
                name = (call.get("function") or {}).get("name", "")
                r.tool_ready.append(ToolReady(idx, name, t, "dispatch"))
            return
        if "error" in d and "choices" not in d:
            r.error = r.error or f"error chunk: {json.dumps(d)[:300]}"
            r.error_kind = r.error_kind or "error_event"
            return
        if isinstance(d.get("usage"), dict):
            r.usage.update(d["usage"])
        for choice in d.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            content = delta.get("content")
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            tcs = delta.get("tool_calls")
            if content or reasoning or tcs:
                r.token_ns.append(t)
            if reasoning:
                self.reasoning.append(reasoning)
                self._kind("reasoning")
            if content:
                self.text.append(content)
                self._kind("text")
            for tc in tcs or ():
                idx = tc.get("index", 0)
                if idx not in self.calls:
                    for other in self.calls:  # a new index: the earlier calls are complete
                        if other not in self.ready:
                            self._ready(other, t, "next_index")
                    self.calls[idx] = {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                    self._kind("tool_call")
                call = self.calls[idx]
                if tc.get("id"):
                    call["id"] += tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    call["function"]["name"] += fn["name"]
                if fn.get("arguments"):
                    call["function"]["arguments"] += fn["arguments"]
            if choice.get("finish_reason"):
                r.stop_reason = choice["finish_reason"]
                r.finished = True  # [DONE] after it is customary, but no client needs it
                for idx in self.calls:
                    self._ready(idx, t, "finish_reason")

    def done(self) -> None:
        self.r.finished = True

    def finish(self) -> None:
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning:
            msg["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            msg["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        self.r.answer = [msg]
        self.r.structure = {"blocks": list(self.kinds),
                            "tool_calls": [self.calls[i]["function"]["name"] for i in sorted(self.calls)],
                            "stop": self.r.stop_reason}


_RESP_CONTENT = frozenset({"response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta",
                           "response.reasoning_summary_text.delta", "response.function_call_arguments.delta"})


class _Responses:
    def __init__(self, r: StreamResult) -> None:
        self.r = r
        self.items: dict[int, dict[str, Any]] = {}
        self.ready: set[int] = set()

    def on(self, event: str | None, d: dict[str, Any], t: int) -> None:
        r = self.r
        typ = d.get("type") or event
        if typ in _RESP_CONTENT:
            r.token_ns.append(t)
        elif typ == "response.output_item.added":
            self.items[d.get("output_index", len(self.items))] = dict(d.get("item") or {})
        elif typ == "response.function_call_arguments.done":
            oi = d.get("output_index", -1)
            self._ready(oi, t, "arguments.done")
        elif typ == "response.output_item.done":
            oi = d.get("output_index", len(self.items))
            item = dict(d.get("item") or {})
            self.items[oi] = item
            if item.get("type") == "function_call":
                self._ready(oi, t, "item.done")
        elif typ in ("response.completed", "response.incomplete", "response.failed"):
            resp = d.get("response") or {}
            r.usage.update(resp.get("usage") or {})
            r.stop_reason = resp.get("status") or typ.split(".")[-1]
            # response.incomplete (max_output_tokens, content filter) is the stream's end too: a
            # whole stream whose status says why it stopped, not a truncated one.
            r.finished = typ != "response.failed"
            if typ == "response.failed":
                r.error = r.error or f"response.failed: {json.dumps(resp.get('error'))[:300]}"
                r.error_kind = r.error_kind or "error_event"
            for n, item in enumerate(resp.get("output") or ()):
                self.items.setdefault(n, item)
        elif typ == "error":
            r.error = r.error or f"error event: {json.dumps(d)[:300]}"
            r.error_kind = r.error_kind or "error_event"

    def _ready(self, oi: int, t: int, source: str) -> None:
        if oi in self.ready:
            return
        self.ready.add(oi)
        calls_before = sum(1 for k, it in self.items.items() if k < oi and it.get("type") == "function_call")
        self.r.tool_ready.append(ToolReady(calls_before, str((self.items.get(oi) or {}).get("name", "")), t, source))

    def finish(self) -> None:
        items = [self.items[k] for k in sorted(self.items)]
        self.r.answer = items
        self.r.structure = {"blocks": [it.get("type") for it in items],
                            "tool_calls": [it.get("name") for it in items if it.get("type") == "function_call"],
                            "stop": self.r.stop_reason}


_FOLDERS: dict[str, Callable[[StreamResult], Any]] = {"anthropic": _Anthropic, "chat": _Chat, "responses": _Responses}

# -- client ---------------------------------------------------------------------------------

_MAX_ERROR_BODY = 64 * 1024


class StreamClient:
    """One aiohttp session shared by all requests of a run. ``async with StreamClient() as c``."""

    def __init__(self, *, limit: int = 0, timeout: float = 600.0, read_timeout: float | None = 300.0) -> None:
        self.limit = limit
        self.timeout = timeout
        self.read_timeout = read_timeout
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> StreamClient:
        connector = aiohttp.TCPConnector(limit=self.limit, force_close=False, enable_cleanup_closed=True)
        self._session = aiohttp.ClientSession(
            connector=connector, auto_decompress=True,
            timeout=aiohttp.ClientTimeout(total=self.timeout, sock_read=self.read_timeout),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def post(
        self, url: str, body: Any, *, api: str, headers: Mapping[str, str] | None = None,
        data: bytes | None = None,
    ) -> StreamResult:
        """POST ``body`` (or raw ``data``) and fold the streamed answer. Never raises for the
        server's faults: they become ``error``/``error_kind``."""
        assert self._session is not None, "use `async with StreamClient()`"
        hdrs = {"content-type": "application/json", "accept": "text/event-stream", **(headers or {})}
        payload = data if data is not None else json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        r = StreamResult(api=api, started_at=time.time())
        folder = _FOLDERS[api](r)
        sse = FastSSE()
        loads = json.loads
        clock = time.perf_counter_ns
        start = r.start_ns = clock()
        try:
            async with self._session.post(url, data=payload, headers=hdrs) as resp:
                r.status = resp.status
                r.headers_ns = clock() - start
                ctype = resp.headers.get("content-type", "")
                if not ctype.startswith("text/event-stream"):
                    r.body = (await resp.content.read(_MAX_ERROR_BODY))
                    if 200 <= resp.status < 300:
                        r.error, r.error_kind = f"expected text/event-stream, got {ctype or '(none)'}", "content_type"
                    else:
                        r.error, r.error_kind = f"HTTP {resp.status}: {r.body[:300].decode('utf-8', 'replace')}", "status"
                else:
                    content = resp.content
                    while True:
                        chunk = await content.readany()
                        if not chunk:
                            break
                        t = clock() - start
                        for event, text in sse.feed(chunk):
                            self._on(folder, r, event, text, t, loads)
                    for event, text in sse.flush():
                        self._on(folder, r, event, text, clock() - start, loads)
                    if r.status < 300 and not r.finished and r.error is None:
                        r.error, r.error_kind = "stream ended without the API's end event", "truncated"
        except asyncio.TimeoutError:
            r.error, r.error_kind = f"timed out ({self.timeout:g} s total, {self.read_timeout} s read)", "timeout"
        except aiohttp.ClientConnectorError as exc:
            r.error, r.error_kind = f"connection failed: {exc}", "connect"
        except (aiohttp.ClientError, OSError) as exc:
            r.error, r.error_kind = f"{type(exc).__name__}: {exc}", "transport"
        r.end_ns = clock() - start
        r.ttft_ns = r.token_ns[0] if r.token_ns else None
        if r.status is not None and 200 <= r.status < 300:
            folder.finish()
        if r.error and headers:
            r.error = redact_text(r.error, secrets_from_headers(headers))
        return r

    @staticmethod
    def _on(folder: Any, r: StreamResult, event: str | None, text: str, t: int, loads: Callable[[str], Any]) -> None:
        r.events += 1
        if text == "[DONE]":
            if isinstance(folder, _Chat):
                folder.done()
            return
        try:
            d = loads(text)
        except ValueError:
            r.error = r.error or f"event data is not JSON: {text[:200]!r}"
            r.error_kind = r.error_kind or "bad_json"
            return
        if isinstance(d, dict):
            folder.on(event, d, t)
