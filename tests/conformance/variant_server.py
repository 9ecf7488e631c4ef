"""An endpoint full of legal variation, written apart from the reference server's SSE adapters: a
proxy in front of a reference server that rewrites every stream the way other real servers do and
the official references allow (docs/API_FACTS.md, "What the references allow"):

- Anthropic: `ping` events after message_start and between blocks, an unknown event type, the
  final `message_delta` split in two (the first without a stop_reason), and every Nth stream ended
  by an `event: error` (`overloaded_error`) after a 200;
- Responses: no `event:` lines at all, `response.queued` between created and in_progress, an
  unknown event type (sequence numbers renumbered so they still step by one);
- Chat: passed through.

    python -m tests.conformance.variant_server --upstream http://127.0.0.1:PORT --port P
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

_HOP = {"content-length", "transfer-encoding", "connection", "content-encoding", "host"}


def _frame(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(data, separators=(",", ":")) + "\n\n").encode()


def _parse(block: bytes) -> tuple[str | None, Any]:
    event, data = None, []
    for line in block.decode("utf-8", "replace").split("\n"):
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
    text = "\n".join(data)
    try:
        return event, json.loads(text)
    except ValueError:
        return event, text


async def _blocks(upstream: httpx.Response) -> AsyncIterator[bytes]:
    buffer = b""
    async for chunk in upstream.aiter_bytes():
        buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            if block.strip():
                yield block
    if buffer.strip():
        yield buffer


class Variants:
    def __init__(self, error_every: int) -> None:
        self.error_every = error_every
        self.anthropic_streams = itertools.count(1)

    async def anthropic(self, blocks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        fail_this = self.error_every > 0 and next(self.anthropic_streams) % self.error_every == 0
        blocks_seen = 0
        async for block in blocks:
            event, data = _parse(block)
            typ = data.get("type") if isinstance(data, dict) else None
            if typ == "message_delta" and isinstance(data.get("delta"), dict) and data["delta"].get("stop_reason"):
                early = {"type": "message_delta", "delta": {"stop_reason": None, "stop_sequence": None},
                         "usage": dict(data.get("usage") or {"output_tokens": 0})}
                yield _frame("message_delta", early)
            yield block + b"\n\n"
            if typ == "message_start":
                yield _frame("ping", {"type": "ping"})
                yield _frame("harnesscheck_future_event", {"type": "harnesscheck_future_event", "note": "unknown"})
            if typ == "content_block_stop":
                blocks_seen += 1
                yield _frame("ping", {"type": "ping"})
                if fail_this and blocks_seen == 1:
                    yield _frame("error", {"type": "error", "error": {"type": "overloaded_error",
                                                                      "message": "Overloaded (variant server)"}})
                    return

    async def responses(self, blocks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        seq = 0
        async for block in blocks:
            _, data = _parse(block)
            if not isinstance(data, dict):
                yield f"data: {data}\n\n".encode()
                continue
            extra: list[dict[str, Any]] = []
            if data.get("type") == "response.created":
                extra = [{"type": "response.queued", "response": {**data.get("response", {}), "status": "queued"}},
                         {"type": "response.harnesscheck_future_event"}]
            for event in (data, *extra):
                event = {**event, "sequence_number": seq}
                seq += 1
                yield _frame(None, event)


def create_app(upstream: str, *, error_every: int = 7) -> Starlette:
    variants = Variants(error_every)
    client = httpx.AsyncClient(base_url=upstream, timeout=httpx.Timeout(300.0))

    async def proxy(request: Request) -> Response:
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        body = await request.body()
        if request.headers.get("content-encoding"):
            headers["content-encoding"] = request.headers["content-encoding"]
        upstream_req = client.build_request(request.method, path, headers=headers, content=body)
        answer = await client.send(upstream_req, stream=True)
        out_headers = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
        if "text/event-stream" not in answer.headers.get("content-type", ""):
            content = await answer.aread()
            await answer.aclose()
            return Response(content, status_code=answer.status_code, headers=out_headers)
        if request.url.path.startswith("/v1/messages"):
            rewrite = variants.anthropic
        elif request.url.path.startswith("/v1/responses"):
            rewrite = variants.responses
        else:
            async def rewrite(blocks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
                async for block in blocks:
                    yield block + b"\n\n"

        async def body_iter() -> AsyncIterator[bytes]:
            try:
                async for piece in rewrite(_blocks(answer)):
                    yield piece
            finally:
                await answer.aclose()

        return StreamingResponse(body_iter(), status_code=answer.status_code, headers=out_headers)

    return Starlette(routes=[Route("/{path:path}", proxy, methods=["GET", "POST", "HEAD", "DELETE"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--error-every", type=int, default=7, help="end every Nth Anthropic stream with an error")
    args = parser.parse_args()
    uvicorn.run(create_app(args.upstream, error_every=args.error_every), host="127.0.0.1", port=args.port,
                log_level="warning")


if __name__ == "__main__":
    main()
