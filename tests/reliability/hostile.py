"""A corpus of broken servers: raw asyncio HTTP/1.1 servers on 127.0.0.1:0 that misbehave on
purpose, for the kit to be pointed at.

``HostileServer(name)`` serves every request (any method, any path) with the misbehaviour named
``name`` (see ``CASES``), each connection closed after one answer. Valid-looking stream content is
chosen by path: Anthropic frames for ``/v1/messages``, Chat chunks for ``/v1/chat/completions``,
Responses events for ``/v1/responses``. Every connection handler is bounded (``max_seconds``), and
``stop()`` ends them all, so no test can hang on a server from here.

    with HostileServer("trickle") as server:
        stream_request(server.url + "/v1/messages", json_body=..., timeout=3)
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from typing import Any

__all__ = ["CASES", "HostileServer", "valid_frames"]

# name -> what it does (and what the kit must make of it)
CASES: dict[str, str] = {
    "truncated": "SSE headers, two frames, then half a frame and the connection closes mid-chunk",
    "never_ends": "SSE headers, the first frame, then keep-alive comments forever",
    "trickle": "a valid stream sent one byte a second",
    "huge_frame": "one data line that never ends (64 MiB cap): the kit's max frame size must stop it",
    "invalid_utf8": "a valid stream whose text deltas carry bytes that are not UTF-8",
    "wrong_content_type": "HTTP 200 with content-type text/html and an HTML page",
    "http500_mid_stream": "SSE headers 200, one frame, then an `HTTP/1.1 500` status line (garbage) and close",
    "reset": "reads the request, then resets the connection (RST) before any byte of the answer",
    "reset_mid_stream": "SSE headers and one frame, then a connection reset",
    "non_json": "SSE frames whose data lines are plain text, not JSON",
    "no_done": "a stream without its end (no [DONE], message_stop or response.completed), closed cleanly",
    "slow_headers": "the status line, then the headers one byte every half second, never finished",
}


def _sse(event: str | None, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def valid_frames(path: str, text: str = "ok") -> list[bytes]:
    """A short, correct stream for the API of ``path`` (its last frame is the end marker)."""
    if "/chat/completions" in path:
        base = {"id": "chatcmpl-h", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        return [
            _sse(None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                             "finish_reason": None}]}),
            _sse(None, {**base, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}),
            _sse(None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            _sse(None, "[DONE]"),
        ]
    if "/responses" in path:
        resp = {"id": "resp_h", "object": "response", "created_at": 1, "model": "m", "status": "in_progress",
                "output": []}
        item = {"id": "msg_h", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        done_item = {**item, "status": "completed", "content": [{**part, "text": text}]}
        events = [
            ("response.created", {"response": resp}),
            ("response.in_progress", {"response": resp}),
            ("response.output_item.added", {"output_index": 0, "item": item}),
            ("response.content_part.added", {"item_id": "msg_h", "output_index": 0, "content_index": 0, "part": part}),
            ("response.output_text.delta", {"item_id": "msg_h", "output_index": 0, "content_index": 0, "delta": text}),
            ("response.output_text.done", {"item_id": "msg_h", "output_index": 0, "content_index": 0, "text": text}),
            ("response.content_part.done", {"item_id": "msg_h", "output_index": 0, "content_index": 0,
                                            "part": {**part, "text": text}}),
            ("response.output_item.done", {"output_index": 0, "item": done_item}),
            ("response.completed", {"response": {**resp, "status": "completed", "output": [done_item],
                                                 "usage": {"input_tokens": 3, "output_tokens": 1,
                                                           "total_tokens": 4}}}),
        ]
        return [_sse(name, {"type": name, "sequence_number": n, **data}) for n, (name, data) in enumerate(events)]
    message = {"id": "msg_h", "type": "message", "role": "assistant", "model": "m", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}}
    events = [
        ("message_start", {"message": message}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {}),
    ]
    return [_sse(name, {"type": name, **data}) for name, data in events]


SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n")
RAW_SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class HostileServer:
    """One misbehaving server in a background thread (its own event loop)."""

    def __init__(self, name: str | dict[str, str], *, max_seconds: float = 30.0,
                 huge_cap: int = 64 * 1024 * 1024) -> None:
        # One case for every route, or a case per API: {"anthropic": .., "chat": .., "responses": ..,
        # "other": ..} (paths that are none of the three streaming routes get "other").
        cases = {"anthropic": name, "chat": name, "responses": name, "other": name} if isinstance(name, str) \
            else dict(name)
        for case in cases.values():
            if case not in CASES:
                raise ValueError(f"unknown hostile case {case!r}; known: {sorted(CASES)}")
        self.cases = cases
        self.name = name if isinstance(name, str) else "+".join(sorted(set(cases.values())))
        self.max_seconds = max_seconds
        self.huge_cap = huge_cap
        self.url = ""
        self.connections = 0
        self.bytes_sent = 0
        self.most_bytes_on_one_connection = 0
        self._sent: dict[int, int] = {}
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # (method, path, headers)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._main: asyncio.Task[None]

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> HostileServer:
        self._thread = threading.Thread(target=self._run, name=f"hostile-{self.name}", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("hostile server did not start")
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop

        async def main() -> None:
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
            port = self._server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}"
            self._ready.set()
            async with self._server:
                try:
                    await self._server.serve_forever()
                except asyncio.CancelledError:
                    pass

        self._main = loop.create_task(main())
        try:
            loop.run_until_complete(self._main)
        except asyncio.CancelledError:
            pass
        finally:
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                loop.run_until_complete(asyncio.gather(*self._tasks, return_exceptions=True))
            loop.close()

    def stop(self) -> None:
        loop, server = self._loop, self._server
        if loop is None or server is None or loop.is_closed():
            return

        def shut() -> None:
            server.close()
            for task in list(self._tasks):
                task.cancel()
            self._main.cancel()

        try:
            loop.call_soon_threadsafe(shut)
        except RuntimeError:
            return
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def case_for(self, path: str) -> str:
        if path.startswith("/v1/messages"):
            return self.cases["anthropic"]
        if path.startswith("/v1/chat/completions"):
            return self.cases["chat"]
        if path.startswith("/v1/responses"):
            return self.cases["responses"]
        return self.cases.get("other", self.cases["chat"])

    # -- one connection ------------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        self.connections += 1
        try:
            await asyncio.wait_for(self._serve(reader, writer), timeout=self.max_seconds)
        except (asyncio.TimeoutError, asyncio.CancelledError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError, OSError, ValueError):
            pass
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            self._sent.pop(id(task), None)
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the socket may already be gone
                pass

    async def _read_request(self, reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str]]:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = (lines[0].split(" ") + ["", ""])[:3]
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        length = min(int(headers.get("content-length", "0") or 0), 16 * 1024 * 1024)
        if length:
            await reader.readexactly(length)
        self.requests.append((method, path, headers))
        return method, path, headers

    async def _send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        self.bytes_sent += len(data)
        key = id(asyncio.current_task())
        self._sent[key] = self._sent.get(key, 0) + len(data)
        self.most_bytes_on_one_connection = max(self.most_bytes_on_one_connection, self._sent[key])
        await writer.drain()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _method, path, _headers = await self._read_request(reader)
        frames = valid_frames(path)
        body = b"".join(frames)
        name = self.case_for(path)
        if name == "truncated":
            await self._send(writer, SSE_HEAD + _chunk(frames[0] + frames[1]))
            half = frames[2][: len(frames[2]) // 2]
            await self._send(writer, b"%x\r\n" % len(frames[2]) + half)  # a chunk that never completes
        elif name == "never_ends":
            await self._send(writer, SSE_HEAD + _chunk(frames[0]))
            while True:
                await asyncio.sleep(0.1)
                await self._send(writer, _chunk(b": keep-alive\n\n"))
        elif name == "trickle":
            await self._send(writer, RAW_SSE_HEAD)
            for i in range(len(body)):
                await self._send(writer, body[i : i + 1])
                await asyncio.sleep(1.0)
        elif name == "huge_frame":
            await self._send(writer, RAW_SSE_HEAD + b"data: ")
            piece = b"A" * (1024 * 1024)
            sent = 0
            while sent < self.huge_cap:
                await self._send(writer, piece)
                sent += len(piece)
            await self._send(writer, b"\n\n")
        elif name == "invalid_utf8":
            bad = [f.replace(b'"ok"', b'"o\xff\xfek"').replace(b'"text":""', b'"text":"\xc3"') for f in frames]
            await self._send(writer, SSE_HEAD + _chunk(b"".join(bad)) + b"0\r\n\r\n")
        elif name == "wrong_content_type":
            page = b"<html><body><h1>It works!</h1></body></html>"
            await self._send(writer, b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: %d\r\n"
                             b"connection: close\r\n\r\n%s" % (len(page), page))
        elif name == "http500_mid_stream":
            await self._send(writer, SSE_HEAD + _chunk(frames[0]))
            await self._send(writer, b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 21\r\n\r\n"
                             b"Internal Server Error")
        elif name in ("reset", "reset_mid_stream"):
            if name == "reset_mid_stream":
                await self._send(writer, SSE_HEAD + _chunk(frames[0]))
                await asyncio.sleep(0.05)
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        elif name == "non_json":
            junk = b"".join(b"data: hello world, this is not JSON %d\n\n" % i for i in range(3))
            await self._send(writer, SSE_HEAD + _chunk(junk) + b"0\r\n\r\n")
        elif name == "no_done":
            await self._send(writer, SSE_HEAD + _chunk(b"".join(frames[:-1])) + b"0\r\n\r\n")
        elif name == "slow_headers":
            await self._send(writer, b"HTTP/1.1 200 OK\r\n")
            for b in b"x-slow: " + b"z" * 10_000:
                await self._send(writer, bytes([b]))
                await asyncio.sleep(0.5)
        else:  # pragma: no cover - guarded in __init__
            raise AssertionError(name)
        await asyncio.sleep(0)


def wait_idle(server: HostileServer, timeout: float = 5.0) -> bool:
    """True once no connection handler of ``server`` is running (the kit hung up on all of them)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server._tasks:
            return True
        time.sleep(0.05)
    return not server._tasks
