"""A gateway in front of a reference server that refuses what an Anthropic-to-Chat gateway forwarding
`tool_choice` untranslated refuses (issue 39): a Messages request with `tool_choice: {"type": "any"}`
gets a 400 in Anthropic's error shape; everything else passes through unchanged, streams included.
Neither Claude Code nor OpenClaw sends `tool_choice: any`, so their recorded sessions pass here.

    python -m tests.conformance.any_refusing_gateway --upstream http://127.0.0.1:PORT --port P
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.conformance.variant_server import _HOP

REFUSAL = {"type": "error", "error": {"type": "invalid_request_error",
                                      "message": "tool_choice.type: Input should be 'auto', 'required', 'none' or "
                                                 "'function' (got 'any')"}}


def _forces_any(body: bytes) -> bool:
    try:
        choice = json.loads(body).get("tool_choice")
    except (ValueError, AttributeError):
        return False
    return isinstance(choice, dict) and choice.get("type") == "any"


def create_app(upstream: str) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=httpx.Timeout(300.0))

    async def proxy(request: Request) -> Response:
        body = await request.body()
        if request.method == "POST" and request.url.path == "/v1/messages" and _forces_any(body):
            return JSONResponse(REFUSAL, status_code=400)
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        answer = await client.send(client.build_request(request.method, path, headers=headers, content=body),
                                   stream=True)
        out_headers = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}

        async def passed() -> AsyncIterator[bytes]:
            try:
                async for chunk in answer.aiter_bytes():
                    yield chunk
            finally:
                await answer.aclose()

        return StreamingResponse(passed(), status_code=answer.status_code, headers=out_headers)

    return Starlette(routes=[Route("/{path:path}", proxy, methods=["GET", "POST", "HEAD", "DELETE"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(create_app(args.upstream), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
