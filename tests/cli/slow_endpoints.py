"""Small real endpoints for the preflight tests, each on a loopback port in a thread of the test
process (real sockets, real HTTP):

- `slow_first_answer(upstream, delay_s)`: a TCP proxy in front of `upstream` that holds back the first
  answer it relays for `delay_s` seconds, then relays everything at once (a gateway that starts
  lazily: LiteLLM took 7.7 s for its first /v1/messages, then 0.25 s);
- `drip()`: answers every request with a valid HTTP 200 sent one byte a second;
- `paged_models(pages)`: `GET /v1/models` in pages (`has_more`, `last_id`, `?after_id=`), as
  Anthropic's model list pages.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@contextmanager
def _loop_server(handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]]
                 ) -> Iterator[str]:
    """An asyncio TCP server on a free loopback port, its loop in a daemon thread; yields its URL. On
    the way out its connections are cancelled and awaited before the loop closes."""
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def main() -> None:
        holder["stop"] = asyncio.Event()
        holder["loop"] = asyncio.get_running_loop()
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        holder["port"] = server.sockets[0].getsockname()[1]
        ready.set()
        await holder["stop"].wait()
        server.close()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the test endpoint did not start")
    try:
        yield f"http://127.0.0.1:{holder['port']}"
    finally:
        holder["loop"].call_soon_threadsafe(holder["stop"].set)
        thread.join(10)


@contextmanager
def slow_first_answer(upstream: str, delay_s: float) -> Iterator[str]:
    """A proxy to `upstream` whose first relayed answer waits `delay_s` seconds before its first byte."""
    host, port = urlsplit(upstream).hostname, urlsplit(upstream).port
    first = {"pending": True}

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hold: bool) -> None:
        try:
            while data := await reader.read(65536):
                if hold and first["pending"]:
                    first["pending"] = False
                    await asyncio.sleep(delay_s)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(host, port)
        await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, True))

    with _loop_server(handle) as url:
        yield url


@contextmanager
def drip(interval_s: float = 1.0) -> Iterator[str]:
    """Every request answered with a valid HTTP 200 JSON answer, one byte every `interval_s` seconds."""
    body = b'{"data": []}'
    answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            for i in range(len(answer)):
                writer.write(answer[i:i + 1])
                await writer.drain()
                await asyncio.sleep(interval_s)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    with _loop_server(handle) as url:
        yield url


@contextmanager
def paged_models(pages: list[list[str]]) -> Iterator[str]:
    """`GET /v1/models` in the given pages (Anthropic's shape: data, has_more, first_id, last_id;
    the next page by `?after_id=` the last id of the one before)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            url = urlsplit(self.path)
            if url.path != "/v1/models":
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "no route"}})
                return
            after = parse_qs(url.query).get("after_id", [None])[0]
            index = next((i + 1 for i, page in enumerate(pages) if page and page[-1] == after), 0) if after else 0
            page = pages[index] if index < len(pages) else []
            self._json(200, {"data": [{"type": "model", "id": m, "display_name": m} for m in page],
                             "has_more": index + 1 < len(pages), "first_id": page[0] if page else None,
                             "last_id": page[-1] if page else None})

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
