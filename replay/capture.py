"""The capture proxy, and capture -> trace.

``CaptureProxy(upstream=..., out=..., redact_headers=(...))`` is a reverse proxy (aiohttp server
and client) that forwards every request untouched: method, path with its query string, headers
minus the hop-by-hop ones (``Host`` is the upstream's), and the body bytes as received (a zstd or
gzip body stays compressed on the wire; it is decoded for the record only). Responses come back
the same way, streamed chunk by chunk as they arrive, never buffered, never decompressed.

Each exchange becomes one line of the capture file (JSONL, header line first)::

    {"schema": "harnesscheck.capture", "version": 1, "created": ..., "upstream": ...}
    {"exchange": 0, "api": "anthropic", "request": {"encoding": "zstd", "wire_bytes": 812,
     "bytes": 2210}, "transcript": {<protocol.wire.transcript.Transcript.to_dict()>}}

The transcript keeps the request (headers, JSON body), status, response headers, every network
chunk (arrival ns from the request start, size), every SSE frame with its arrival, and the
timings.

Every buffer of outside data is bounded (``Limits``, the ``capture`` command's flags): a request body
over ``max_body_bytes`` (64 MiB) is refused with a 413 that names the limit; a coded body (a request
or a non-streamed response) is decoded for the record within ``max_decoded_bytes`` (64 MiB,
``replay.codings``: a gzip bomb stops there and the record says so in ``decode_error`` /
``response.decode_error``); a response is recorded up to ``max_record_bytes`` (64 MiB of SSE frames
or body, counted as the record holds them: a frame's raw bytes and data, a body's base64 and text)
and forwarded whole, the record saying what it left out (``response.cut``). Each such cut
is also told to ``warn`` (the command prints it on stderr). Secrets are redacted before a line is written: credential headers (API keys, auth,
cookies, and any header named with ``--redact-header``) by ``harnesscheck.protocol.wire.redact``, and the
same secret values (also JSON-escaped, base64, and each cookie value) wherever else they appear.

``load_capture(path)`` reads a capture of format version 1 (``CAPTURE_VERSION``; another version is
refused, naming it) and checks each line's shape; ``ValueError`` with the line for anything else.
``capture_to_trace(path) -> Trace`` groups model requests (POST to /v1/messages, /v1/chat/
completions, /v1/responses) into sessions, in this order of rules:

1. a session header: ``x-claude-code-session-id``, ``x-session-id``, ``session-id``,
   ``session_id``, ``conversation_id``;
2. else the body's ``prompt_cache_key`` (Responses), else ``metadata.user_id`` (Claude Code);
3. else the conversation prefix: the request joins the latest session of the same API whose last
   request has the same first history entry and a shorter history; otherwise it starts a session.

Other requests (``HEAD /``, model lists, count_tokens) are counted in the trace header's
``meta.skipped`` and left out.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from harnesscheck.protocol.wire.redact import redact_headers as _redact_headers
from harnesscheck.protocol.wire.redact import redact_text, redact_url, secrets_from_headers
from harnesscheck.protocol.wire.sse import FrameTooLarge, SSEDecoder
from harnesscheck.protocol.wire.transcript import Chunk, Timings, Transcript

from .client import Fold, StreamResult
from .codings import MAX_DECODED_BYTES, CodingError, decode
from .forms import FORMS, api_for_path, form
from .trace import DEFAULT_PATHS, Timing, Trace, TraceError, TraceTurn, history_key, make_delta, read_file_text

__all__ = ["CAPTURE_SCHEMA", "CAPTURE_VERSION", "CaptureProxy", "Limits", "ProxyThread", "api_for_path",
           "capture_to_trace", "load_capture", "record_transcript", "SESSION_HEADERS", "secret_variants"]

CAPTURE_SCHEMA = "harnesscheck.capture"
CAPTURE_VERSION = 1  # the format load_capture reads; bumped when a record's shape changes
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade", "proxy-connection"})
SESSION_HEADERS = ("x-claude-code-session-id", "x-session-id", "session-id", "session_id", "conversation_id")
# Headers a replay sends again (others: transport, auth, volatile client data).
_REPLAY_HEADERS_DROP = frozenset({"host", "content-length", "content-encoding", "accept-encoding", "accept",
                                  "content-type", "user-agent", "x-stainless-retry-count", "x-stainless-timeout"})


@dataclass(frozen=True, slots=True)
class Limits:
    """The proxy's byte bounds (see the module docstring)."""

    max_body_bytes: int = 64 * 1024 * 1024  # a request body, on the wire
    max_decoded_bytes: int = MAX_DECODED_BYTES  # a coded body, decoded for the record
    max_record_bytes: int = 64 * 1024 * 1024  # a response's SSE frames or body, as the record holds them


def secret_variants(values: Iterable[str]) -> set[str]:
    """Each secret as it could appear in text: itself, JSON-escaped, base64 (padded, unpadded, URL-safe)
    and URL-quoted; for a cookie, each name=value and each value too (strings under 6 characters are
    left alone)."""
    out: set[str] = set()
    for v in values:
        if not v:
            continue
        parts = {v}
        if ";" in v or "=" in v:  # cookies: each name=value and each value
            for piece in v.split(";"):
                piece = piece.strip()
                if piece:
                    parts.add(piece)
                    if "=" in piece:
                        parts.add(piece.split("=", 1)[1])
        for p in parts:
            if len(p) < 6:
                continue
            out.add(p)
            out.add(json.dumps(p)[1:-1])
            out.add(base64.b64encode(p.encode()).decode())
            out.add(base64.b64encode(p.encode()).decode().rstrip("="))
            out.add(base64.urlsafe_b64encode(p.encode()).decode().rstrip("="))
            out.add(urllib.parse.quote(p, safe=""))
    return {s for s in out if len(s) >= 6}


class CaptureProxy:
    """The proxy. ``await start()`` / ``await stop()``; ``port`` once started. ``limits``: its byte
    bounds; ``warn(line)`` hears each cut (a body too large, a record left short)."""

    def __init__(self, *, upstream: str, out: str | Path, host: str = "127.0.0.1", port: int = 0,
                 redact_headers: Iterable[str] = (), limits: Limits | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.limits = limits or Limits()
        self.warn = warn or (lambda line: None)
        self.out = Path(out)
        self.host = host
        self.port = port
        self.extra = tuple(h.lower() for h in redact_headers)
        self.secrets: set[str] = set()
        self.count = 0
        self._fh: Any = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._lock = asyncio.Lock()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> CaptureProxy:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.out.open("w", encoding="utf-8")
        head = {"schema": CAPTURE_SCHEMA, "version": CAPTURE_VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "upstream": redact_url(self.upstream)}
        self._fh.write(json.dumps(head) + "\n")
        self._fh.flush()
        self._session = aiohttp.ClientSession(
            auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=None),
            connector=aiohttp.TCPConnector(limit=0),
        )
        app = web.Application(client_max_size=self.limits.max_body_bytes)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, auto_decompress=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        start_ns = time.perf_counter_ns()
        started_at = time.time()
        limits = self.limits
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            why = (f"the request body is over the capture proxy's limit of {limits.max_body_bytes} bytes "
                   "(capture --max-body-bytes); not forwarded")
            self.warn(f"capture: {request.method} {redact_url(request.raw_path)}: {why}")
            return web.json_response({"error": {"type": "proxy_error", "message": why}}, status=413)
        req_headers = list(request.headers.items())
        conn_tokens = {t.strip().lower() for v in request.headers.getall("connection", []) for t in v.split(",")}
        fwd: CIMultiDict[str] = CIMultiDict()
        for k, v in req_headers:
            low = k.lower()
            if low in HOP_BY_HOP or low in conn_tokens or low in ("host", "content-length"):
                continue
            fwd.add(k, v)
        path_qs = request.raw_path
        api = api_for_path(request.path) if request.method == "POST" else None
        t = Transcript(api=api or "other", method=request.method, url=path_qs,
                       timings=Timings(started_at=started_at, start_ns=0))
        decoder: SSEDecoder | None = None
        resp: web.StreamResponse | None = None
        body_buf = bytearray()
        kept = 0  # bytes of frames or body kept for the record
        cut: dict[str, Any] = {}  # what the record left out
        try:
            async with self._session.request(  # type: ignore[union-attr]
                request.method, self.upstream + path_qs, headers=fwd, data=raw if raw else None,
                allow_redirects=False, skip_auto_headers=("Accept-Encoding", "User-Agent", "Content-Type"),
            ) as up:
                t.status = up.status
                t.timings.headers_ns = time.perf_counter_ns() - start_ns
                resp = web.StreamResponse(status=up.status, reason=up.reason)
                back_conn = {tok.strip().lower() for v in up.headers.getall("connection", []) for tok in v.split(",")}
                for k, v in up.headers.items():
                    low = k.lower()
                    if low in HOP_BY_HOP or low in back_conn:
                        continue
                    resp.headers.add(k, v)
                t.response_headers = dict(up.headers.items())
                ctype = up.headers.get("content-type", "").lower()
                if ctype.startswith("text/event-stream") and not up.headers.get("content-encoding"):
                    decoder = SSEDecoder()
                await resp.prepare(request)
                while True:
                    chunk = await up.content.readany()
                    if not chunk:
                        break
                    await resp.write(chunk)  # forward first, then record
                    t_ns = time.perf_counter_ns() - start_ns
                    idx = len(t.chunks)
                    t.chunks.append(Chunk(idx, t_ns, len(chunk)))
                    if decoder is not None:
                        try:
                            frames = decoder.feed(chunk, t_ns=t_ns, chunk_index=idx)
                        except FrameTooLarge as exc:  # forwarded still; not recorded further
                            decoder, frames = None, []
                            cut["reason"] = f"{exc}: the rest of the stream is not recorded"
                        if frames and t.timings.first_frame_ns is None:
                            t.timings.first_frame_ns = t_ns
                        for frame in frames:
                            kept += _recorded_size(frame)
                            if kept <= limits.max_record_bytes:
                                t.frames.append(frame)
                            else:
                                cut["frames"] = cut.get("frames", 0) + 1
                    elif _body_size(len(body_buf) + len(chunk)) <= limits.max_record_bytes:
                        body_buf += chunk
                    else:
                        cut["bytes"] = cut.get("bytes", 0) + len(chunk)
                await resp.write_eof()
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            t.error, t.error_kind = f"{type(exc).__name__}: {exc}", "upstream"
            if resp is None:
                resp = web.json_response({"error": {"type": "proxy_error", "message": f"upstream failed: {exc}"}},
                                         status=502)
        t.timings.end_ns = time.perf_counter_ns() - start_ns
        response: dict[str, Any] = {}
        if decoder is not None:
            try:
                tail = decoder.flush(t_ns=t.timings.end_ns, chunk_index=max(len(t.chunks) - 1, 0))
            except FrameTooLarge as exc:
                tail, cut["reason"] = [], str(exc)
            if kept + sum(_recorded_size(f) for f in tail) <= limits.max_record_bytes:
                t.frames.extend(tail)
        else:
            t.body = bytes(body_buf)
            enc = t.response_headers.get("Content-Encoding") or t.response_headers.get("content-encoding") or ""
            if enc and not cut:
                try:  # the record keeps the encoded bytes when they do not decode
                    t.body = decode(t.body, enc, limits.max_decoded_bytes)
                except CodingError as exc:
                    response["decode_error"] = f"{exc} (capture --max-decoded-bytes)"
                    where = f"{t.method} {redact_url(t.url)}"
                    self.warn(f"capture: {where}: response: {response['decode_error']}")
            t.body, left = _fit_body(t.body, limits.max_record_bytes)  # the decoded body too
            if left:
                cut["bytes"] = cut.get("bytes", 0) + left
        if cut:
            if "reason" not in cut:
                cut["reason"] = (f"the response passed the record's limit of {limits.max_record_bytes} bytes "
                                 "(capture --max-record-bytes); forwarded whole, recorded up to the limit")
            response["cut"] = cut
            self.warn(f"capture: {t.method} {redact_url(t.url)}: {cut['reason']}")
        await self._record(t, req_headers, raw, request.headers.get("content-encoding", ""), response)
        return resp

    async def _record(self, t: Transcript, headers: list[tuple[str, str]], raw: bytes, encoding: str,
                      response: dict[str, Any] | None = None) -> None:
        req_info: dict[str, Any] = {"wire_bytes": len(raw)}
        body_bytes = raw
        if encoding:
            req_info["encoding"] = encoding
            try:
                body_bytes = decode(raw, encoding, self.limits.max_decoded_bytes)
            except CodingError as exc:  # recorded without its body; forwarded as it came
                req_info["decode_error"] = f"{exc} (capture --max-decoded-bytes)"
                body_bytes = b""
                self.warn(f"capture: {t.method} {redact_url(t.url)}: request: {req_info['decode_error']}")
        req_info["bytes"] = len(body_bytes)
        if body_bytes:
            try:
                t.request_body = json.loads(body_bytes)
            except ValueError:
                t.request_body = {"$text": body_bytes.decode("utf-8", "replace")}
        self.secrets |= secret_variants(secrets_from_headers(headers, self.extra))
        self.secrets |= secret_variants(secrets_from_headers(t.response_headers, self.extra))
        t.request_headers = _redact_headers(headers, self.extra)
        t.response_headers = _redact_headers(t.response_headers, self.extra)
        t.url = redact_url(t.url)
        record = {"exchange": self.count, "api": t.api if t.api in FORMS else None, "request": req_info,
                  **({"response": response} if response else {}), "transcript": t.to_dict()}
        text = json.dumps(record, ensure_ascii=False)
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate (a client's "\ud800"): kept as its \u escape
                text = json.dumps(record)
        line = redact_text(text, self.secrets)
        async with self._lock:
            self.count += 1
            if self._fh is not None:
                self._fh.write(line + "\n")
                self._fh.flush()


class ProxyThread:
    """A ``CaptureProxy`` on its own event loop in a daemon thread (tests, embedding)."""

    def __init__(self, **kwargs: Any) -> None:
        self.proxy = CaptureProxy(**kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> CaptureProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self._loop).result(30)
        return self.proxy

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


# -- capture -> trace ----------------------------------------------------------------------

def load_capture(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the exchange records of a capture file; ValueError naming the line for a file
    that is not a capture of format CAPTURE_VERSION."""
    lines = [ln for ln in read_file_text(path).splitlines() if ln.strip()]  # bounded, a regular file
    if not lines:
        raise ValueError(f"{path}: empty capture")
    try:
        head = json.loads(lines[0])
    except (ValueError, RecursionError):
        raise ValueError(f"{path}: line 1 is not JSON (or nested too deeply): not a capture file") from None
    if not isinstance(head, dict) or head.get("schema") != CAPTURE_SCHEMA:
        schema = head.get("schema") if isinstance(head, dict) else None
        raise ValueError(f"{path}: not a capture file (header schema {schema!r})")
    if head.get("version") != CAPTURE_VERSION:
        raise ValueError(f"{path}: capture format version {head.get('version')!r}; this kit reads version "
                         f"{CAPTURE_VERSION} (record it again with `harnesscheck capture`)")
    records = []
    for n, line in enumerate(lines[1:], 2):
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            raise ValueError(f"{path}: line {n} is not JSON (or nested too deeply)") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("transcript"), dict):
            raise ValueError(f"{path}: line {n} is not an exchange record (no transcript object)")
        records.append(rec)
    return head, records


def _recorded_size(frame: Any) -> int:
    """The bytes an SSE frame takes in the record (its raw bytes and its data, as the transcript writes
    them): what the record's limit counts (issue 43: counting the raw bytes alone let a record grow to
    ~2.3 times its limit)."""
    return len(json.dumps(frame.to_dict(), ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _body_size(n: int) -> int:
    """The bytes a body of ``n`` bytes of plain text takes in the record: its base64 and its text (the
    transcript keeps both)."""
    return 4 * -(-n // 3) + n


def _fit_body(body: bytes, limit: int) -> tuple[bytes, int]:
    """``body`` cut so that the record holds at most ``limit`` bytes of it (base64, and the text when it
    is UTF-8, JSON-escaped: ``Transcript.to_dict``), and how many bytes were left out."""
    def size(b: bytes) -> int:
        try:
            text = len(json.dumps(b.decode("utf-8"), ensure_ascii=False).encode("utf-8", "surrogatepass"))
        except UnicodeDecodeError:
            text = 0
        return 4 * -(-len(b) // 3) + text

    n = len(body)
    while n and size(body[:n]) > limit:
        n = min(n - 1, n * limit // max(size(body[:n]), 1))
    return body[:n], len(body) - n


def record_transcript(rec: dict[str, Any]) -> Transcript:
    """A record's transcript. A trimmed record (the shipped client fixtures, tests/clients/make_fixtures.py)
    may leave the transcript's ``api`` out (the record's own ``api`` says the same) and its frames'
    ``index`` (their position). ValueError for a transcript of the wrong shape."""
    d = rec["transcript"]
    if "api" not in d:
        d = {**d, "api": rec.get("api") if isinstance(rec.get("api"), str) else "other"}
    frames = d.get("frames")
    if isinstance(frames, list) and any(isinstance(f, dict) and "index" not in f for f in frames):
        # trimmed frames ({kind, event, data}): their place in the stream is their index
        d = {**d, "frames": [{"index": n, **f} if isinstance(f, dict) else f for n, f in enumerate(frames)]}
    try:
        return Transcript.from_dict(d)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        what = f"{type(exc).__name__}: {exc}"
        raise ValueError(f"exchange {rec.get('exchange')!r}: not a transcript ({what})") from None


def fold_transcript(api: str, t: Transcript) -> StreamResult:
    """Fold a recorded stream as the replay client folds it (offline; times are the recorded ones)."""
    r = StreamResult(api=api, status=t.status)
    fold = Fold(r)
    for f in t.frames:
        if f.kind != "event":
            continue
        if f.done:
            fold.on(f.event, "[DONE]", f.t_ns or 0)
        elif isinstance(f.json, dict):
            fold.on(f.event, f.json, f.t_ns or 0)
    fold.finish()
    fold.answer()
    return r


def _assistant_run(api: str, entries: list[Any], start: int) -> int:
    """How many entries from ``start`` are the model's output (an answer slot)."""
    f = form(api)
    n = 0
    while start + n < len(entries) and f.model_entry(entries[start + n]):
        n += 1
        if f.one_answer_entry:
            break  # one assistant message per answer
    return n


def _session_key(t: Transcript) -> str | None:
    for k, v in t.request_headers.items():
        if k.lower() in SESSION_HEADERS and v and "[REDACTED]" not in v:
            return f"h:{v}"
    body = t.request_body if isinstance(t.request_body, dict) else {}
    if isinstance(body.get("prompt_cache_key"), str) and body["prompt_cache_key"]:
        return f"k:{body['prompt_cache_key']}"
    meta = body.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("user_id"), str) and meta["user_id"]:
        return f"u:{meta['user_id']}"
    return None


def capture_to_trace(path: str | Path) -> Trace:
    head, records = load_capture(path)
    sessions: dict[str, list[Transcript]] = {}
    order: list[str] = []
    skipped = 0
    by_prefix: list[tuple[str, str]] = []  # (session id, api) newest last
    for rec in records:
        t = record_transcript(rec)
        api = rec.get("api")
        if api is None or t.method != "POST" or not isinstance(t.request_body, dict) or "$text" in t.request_body:
            skipped += 1
            continue
        t.api = api
        key = _session_key(t)
        if key is None:
            hist = t.request_body.get(history_key(api))
            first = json.dumps(hist[0], sort_keys=True) if isinstance(hist, list) and hist else None
            for sid, sapi in reversed(by_prefix):
                last = sessions[sid][-1]
                lh = last.request_body.get(history_key(api)) if isinstance(last.request_body, dict) else None
                if (sapi == api and isinstance(lh, list) and isinstance(hist, list) and lh and first is not None
                        and json.dumps(lh[0], sort_keys=True) == first and len(lh) < len(hist)):
                    key = sid
                    break
            if key is None:
                key = f"p:{len(order)}"
        if key not in sessions:
            sessions[key] = []
            order.append(key)
        sessions[key].append(t)
        by_prefix = [x for x in by_prefix if x[0] != key] + [(key, api)]
    turns: list[TraceTurn] = []
    t0 = min((ts[0].timings.started_at for ts in sessions.values()), default=0.0)
    for n, key in enumerate(order):
        sid = f"s{n}"
        ts = sessions[key]
        start = ts[0].timings.started_at
        prev_end: float | None = None
        prev_calls = False
        for i, t in enumerate(ts):
            api = t.api
            folded = fold_transcript(api, t) if t.frames else None
            timing = Timing(at_ms=round((t.timings.started_at - t0) * 1000, 3),
                            offset_ms=round((t.timings.started_at - start) * 1000, 3),
                            duration_ms=None if t.timings.end_ns is None else round(t.timings.end_ns / 1e6, 3))
            if prev_end is not None:
                gap = max(0.0, (t.timings.started_at - prev_end) * 1000)
                if prev_calls:
                    timing.tool_ms = round(gap, 3)
                else:
                    timing.think_ms = round(gap, 3)
            if problems := timing.problems():  # times no replay could wait for (NaN, Infinity, past a day)
                raise TraceError(f"{path}: exchange {t.url or ''} of session {sid} turn {i}: {problems[0]} "
                                 "(from the capture's recorded times)")
            headers = {k.lower(): v for k, v in t.request_headers.items()
                       if k.lower() not in _REPLAY_HEADERS_DROP and "[REDACTED]" not in v
                       and k.lower() not in HOP_BY_HOP}
            turn = TraceTurn(session=sid, turn=i, api=api, path=t.url or DEFAULT_PATHS[api], headers=headers,
                             timing=timing, meta={"status": t.status})
            if folded is not None and folded.structure:
                turn.expect = {k: v for k, v in folded.structure.items() if v is not None}
            body = t.request_body
            if i == 0:
                turn.request = body
            else:
                prev_t = ts[i - 1]
                hist = body.get(history_key(api)) if isinstance(body, dict) else None
                prev_hist = prev_t.request_body.get(history_key(api))
                slot = None
                if isinstance(hist, list) and isinstance(prev_hist, list):
                    n_ans = _assistant_run(api, hist, len(prev_hist))
                    if n_ans:
                        slot = (len(prev_hist), n_ans)
                        turns[-1].response = hist[slot[0]: slot[0] + slot[1]]
                delta = make_delta(prev_t.request_body, body, api, slot)
                if delta is None:
                    turn.request = body
                else:
                    turn.delta = delta
            turns.append(turn)
            prev_end = t.timings.started_at + (t.timings.end_ns or 0) / 1e9
            prev_calls = bool(folded and folded.structure.get("tool_calls"))
    trace = Trace.build(turns, source="capture", meta={"skipped": skipped, "upstream": head.get("upstream"),
                                                        "captured": head.get("created")})
    return trace
