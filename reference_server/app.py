"""The reference server's ASGI app: every API's routes (each frontend's `routes`) over one Service.

Each frontend owns its routes and per-API wiring (`frontends/anthropic.py`, `chat.py`,
`responses.py`, `models.py`, `tokenize.py`); the handlers they share (error shapes, SSE) are in
`frontends/http.py`. This module only registers the routes, the error handler for unrouted
requests, and the lifespan.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from harnesscheck.reference_server.config import ServerConfig
from harnesscheck.reference_server.frontends import anthropic, chat, models, responses, tokenize
from harnesscheck.reference_server.frontends.common import ApiError, error_response
from harnesscheck.reference_server.frontends.http import RAW_SEND, ApiContext, api_of
from harnesscheck.reference_server.service import Service, build_service


class _App(Starlette):
    """Starlette that keeps the server's own `send` in the scope (RAW_SEND), for SSEResponse."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if not self.user_middleware:  # a body-rewriting middleware (gzip, ...) must see every chunk
            scope[RAW_SEND] = send
        await super().__call__(scope, receive, send)


def create_app(config: ServerConfig | None = None, *, service: Service | None = None) -> Starlette:
    config = config or ServerConfig()
    if service is None:  # with --model-path, the checkpoint's tokenizer counts everything (service.build_service)
        service = build_service(config)
    ctx = ApiContext(config=config, service=service)
    store = responses.ResponseStore(config.stored_responses, config.responses_store_bytes)
    routes = [*models.routes(ctx, store.stats), *anthropic.routes(ctx), *chat.routes(ctx),
              *responses.routes(ctx, store), *tokenize.routes(ctx)]

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = f"{request.method} {request.url.path}: " + ("no such route" if exc.status_code == 404
                                                                else exc.detail or "not allowed")
        return error_response(ApiError(exc.status_code, message), api_of(request), service.faults)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        service.pool.close()  # a job still running is not waited for

    app = _App(routes=routes, exception_handlers={HTTPException: http_error}, lifespan=lifespan)
    app.state.service = service
    return app
