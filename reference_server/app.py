"""The reference server's ASGI app: routes per API over one Service.

Every handler turns bad input into the API's own error shape (4xx), never a 500; streams are
SSE with the engine slot freed when the client goes away (the generator's `finally`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from harnesscheck.reference_server.config import ServerConfig
from harnesscheck.reference_server.frontends import anthropic, chat, models, responses, tokenize
from harnesscheck.reference_server.frontends.common import (Adapter, ApiError, ApiKind, check_auth, error_response, read_json,
                                               step_frames)
from harnesscheck.reference_server.conversation import InvalidConversation
from harnesscheck.reference_server.service import LARGE_CHARS, Service, UnknownModel, build_service

log = logging.getLogger("harnesscheck.server")
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


class SSEResponse(Response):
    """A turn streamed as text/event-stream by a plain ASGI send loop: the adapter's opening frames,
    then one `send` per step with the frames of all its events (`common.step_frames`; no generator
    layers between the engine's steps and the socket), nothing held back, nothing dropped; `then`
    runs after the last frame, before the body ends.

    The client going away (``http.disconnect``) cancels the loop; the steps are closed and `close`
    (the turn's) frees the engine slot, also when no step was taken yet; an error inside the loop
    propagates (the connection is cut mid-stream, as with Starlette's StreamingResponse).
    """

    media_type = "text/event-stream"

    def __init__(self, adapter: Adapter, steps: AsyncGenerator[list[Any], None], *,
                 close: Callable[[], Awaitable[None]], then: Callable[[], None] | None = None,
                 stall_after: int | None = None) -> None:
        self.adapter = adapter
        self.stall_after = stall_after  # fault stall-stream: stop sending after this many writes, never end
        self.steps = steps
        self.close = close  # frees the engine slot even when the steps never started
        self.then = then
        self.status_code = 200
        self.background = None
        self.init_headers(SSE_HEADERS)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # The start goes through the middleware's send (it records that the response started); the
        # body chunks go straight to the server's (the wrappers only pass them on).
        pump = asyncio.ensure_future(self._pump(send, scope.get(RAW_SEND, send)))
        watch = asyncio.ensure_future(_until_disconnect(receive))
        try:
            await asyncio.wait((pump, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not pump.done():
                pump.cancel()
            # Wait for the loop to unwind, so the steps' finally has run when the request ends.
            await asyncio.gather(pump, watch, return_exceptions=True)
        if not pump.cancelled() and pump.exception() is not None:
            raise pump.exception()  # type: ignore[misc]

    async def _pump(self, send: Any, body_send: Any) -> None:
        adapter, steps = self.adapter, self.steps
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            opening = b"".join(adapter.start())
            writes = 0
            if opening:
                await body_send({"type": "http.response.body", "body": opening, "more_body": True})
                writes += 1
            async for step in steps:
                if self.stall_after is not None and writes >= self.stall_after:
                    await asyncio.Event().wait()  # until the client goes away (the watch cancels us)
                chunk = step_frames(adapter, step)
                if chunk:
                    await body_send({"type": "http.response.body", "body": chunk, "more_body": True})
                    writes += 1
            if self.then is not None:
                self.then()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            try:
                await steps.aclose()
            finally:
                await self.close()


async def _until_disconnect(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


RAW_SEND = "harnesscheck.server_send"


class _App(Starlette):
    """Starlette that keeps the server's own `send` in the scope (RAW_SEND), for SSEResponse."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if not self.user_middleware:  # a body-rewriting middleware (gzip, ...) must see every chunk
            scope[RAW_SEND] = send
        await super().__call__(scope, receive, send)


def api_of(request: Request) -> ApiKind:
    """Whose error shape a request gets when its route does not decide it."""
    if request.url.path.startswith("/v1/messages") or "anthropic-version" in request.headers:
        return "anthropic"
    return "openai"


_BODY_FAULTS = (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError)


def parse(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a frontend's conversion of a request body. What escapes its validation (a field of a
    type it did not expect, say) was caused by the body: a 400 that names it, not a 500; logged
    with the traceback, since it means a validation gap in the frontend."""
    try:
        return fn(*args, **kwargs)
    except (ApiError, InvalidConversation, UnknownModel):
        raise
    except _BODY_FAULTS as exc:
        log.warning("a malformed body got past %s's validation; answering 400", getattr(fn, "__qualname__", fn),
                    exc_info=True)
        raise ApiError(400, f"malformed request body ({type(exc).__name__}: {exc})") from exc


_SLICE = 8192
_dumps = functools.partial(json.dumps, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def json_bytes(content: dict[str, Any]) -> bytes:
    """`content` as JSONResponse renders it, long lists a slice at a time: one json.dumps call
    holds the GIL throughout (~250 ms for the 700K ids of a 2 MB /tokenize answer), slices give it
    back to the event loop in between. For a worker thread (`CpuPool`)."""
    fields = []
    for key, value in content.items():
        if isinstance(value, list) and len(value) > _SLICE:
            items = ",".join(_dumps(value[i:i + _SLICE])[1:-1] for i in range(0, len(value), _SLICE))
            fields.append(f"{_dumps(key)}:[{items}]")
        else:
            fields.append(f"{_dumps(key)}:{_dumps(value)}")
    return ("{" + ",".join(fields) + "}").encode("utf-8")


def large_body(request: Request) -> bool:
    """Whether a request's body is large enough for the pool's large lane (a body of unknown
    length counts as large)."""
    declared = request.headers.get("content-length", "")
    return not declared.isdigit() or int(declared) > LARGE_CHARS


def create_app(config: ServerConfig | None = None, *, service: Service | None = None) -> Starlette:
    config = config or ServerConfig()
    if service is None:  # with --model-path, the checkpoint's tokenizer counts everything (service.build_service)
        service = build_service(config)
    store = responses.ResponseStore(config.stored_responses, config.responses_store_bytes)
    serial = itertools.count()  # with the clock, a chat completion id unique per request
    faults = service.faults
    stall = 2 if faults.on("stall-stream") else None

    def handler(api: ApiKind | None, fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """api None: the shape follows the client (Anthropic when it sends anthropic-version)."""
        async def wrapped(request: Request) -> Response:
            kind: ApiKind = api or api_of(request)
            try:
                check_auth(request, config.api_key)
                return await fn(request)
            except ApiError as error:
                return error_response(error, kind, faults)
            except InvalidConversation as error:
                return error_response(ApiError(400, str(error)), kind, faults)
            except UnknownModel as error:
                return error_response(ApiError(404, f"model '{error}' not found", param="model",
                                               code="model_not_found"), kind, faults)
            except Exception:  # a server bug: still answer in shape, and log it
                log.exception("unhandled error on %s", request.url.path)
                return error_response(ApiError(500, "internal server error"), kind, faults)
        return wrapped

    async def body_of(request: Request) -> dict[str, Any]:
        return await read_json(request, limit=config.max_body_bytes, faults=faults)

    async def messages(request: Request) -> Response:
        if not config.enable_anthropic_api:
            raise ApiError(404, "the Anthropic Messages API is not enabled (--enable-anthropic-api)")
        body = await body_of(request)
        conv = parse(anthropic.to_conversation, body, faults, betas=request.headers.get("anthropic-beta", ""))
        turn = await service.start_turn(conv, id_prefix="toolu_")
        adapter = anthropic.AnthropicStream(message_id=anthropic.message_id(), model=conv.model,
                                            prompt_tokens=turn.prompt_tokens, cached_tokens=turn.cached_tokens,
                                            faults=faults)
        if body.get("stream"):
            return SSEResponse(adapter, turn.steps(), close=turn.close, stall_after=stall)
        adapter.start()
        async for event in turn.events():
            adapter.feed(event)
        return JSONResponse(adapter.message())

    async def count_tokens(request: Request) -> Response:
        if not config.enable_anthropic_api:
            raise ApiError(404, "the Anthropic Messages API is not enabled (--enable-anthropic-api)")
        conv = parse(anthropic.to_conversation, await body_of(request), faults, count_only=True,
                     betas=request.headers.get("anthropic-beta", ""))
        count = await service.count_tokens(conv)  # on the pool's workers: seconds for a large prompt
        if faults.on("count-tokens-mismatch"):
            count = count + 7
        return JSONResponse({"input_tokens": count})

    async def chat_completions(request: Request) -> Response:
        body = await body_of(request)
        conv = parse(chat.to_conversation, body, faults)
        turn = await service.start_turn(conv, id_prefix="call_")
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        adapter = chat.ChatStream(completion_id=f"chatcmpl-{time.time_ns():x}{next(serial):04x}",
                                  model=conv.model, include_usage=include_usage,
                                  dispatch=config.enable_streaming_tool_dispatch, faults=faults)
        if body.get("stream"):
            return SSEResponse(adapter, turn.steps(), close=turn.close, stall_after=stall)
        async for event in turn.events():
            adapter.feed(event)
        return JSONResponse(adapter.completion())

    async def create_response(request: Request) -> Response:
        body = await body_of(request)
        conv = parse(responses.to_conversation, body, store, faults)
        turn = await service.start_turn(conv, id_prefix="call_")
        adapter = responses.ResponsesStream(response_id=responses.response_id(), body=body, faults=faults)

        def remember() -> None:
            if body.get("store", True) is not False:
                history = conv.messages + [responses.Message(role="assistant", parts=adapter.parts)]
                store.put(adapter.id, history, parent=body.get("previous_response_id"))

        if body.get("stream"):
            return SSEResponse(adapter, turn.steps(), close=turn.close, then=remember, stall_after=stall)
        adapter.start()
        async for event in turn.events():
            adapter.feed(event)
        remember()
        return JSONResponse(adapter.response())

    async def responses_get(request: Request) -> Response:
        # Codex tries a WebSocket upgrade first. Measured with Codex 0.171.0 (docs/clients.md): 426
        # makes it fall back to POST at once (one GET, ~0.4 s); 404/405/403/501 make it retry with
        # backoff for ~6.5 s; 400 fails the turn. A proxy drops the hop-by-hop Upgrade header, so the
        # WebSocket handshake is also recognised by Sec-WebSocket-Key or openai-beta responses_websockets.
        h = request.headers
        if ("websocket" in h.get("upgrade", "").lower() or "sec-websocket-key" in h
                or "responses_websockets" in h.get("openai-beta", "")):
            raise ApiError(426, "GET /v1/responses: no WebSocket transport on this server; use POST /v1/responses")
        raise ApiError(405, "GET /v1/responses: use POST (no WebSocket transport on this server)")

    async def responses_websocket(websocket: WebSocket) -> None:
        # A direct connection: uvicorn turns the upgrade into a WebSocket scope before any HTTP route
        # sees it; deny it with the same 426 (a bare close would answer 403, which Codex retries ~6.5 s).
        body = error_response(ApiError(426, "GET /v1/responses: no WebSocket transport on this server; "
                                            "use POST /v1/responses"), "openai", faults)
        try:
            await websocket.send_denial_response(body)
        except RuntimeError:  # the server lacks the websocket.http.response extension
            await websocket.close()

    def with_template(entry: dict[str, Any]) -> dict[str, Any]:
        """A model entry with its chat template and the reasoning-history decision (metadata.chat_template)."""
        if isinstance(entry.get("metadata"), dict) and entry.get("id") in service.profiles:
            entry["metadata"]["chat_template"] = service.template_metadata(entry["id"])
        return entry

    async def list_models(request: Request) -> Response:
        listing = models.list_models(service, request)
        listing["data"] = [with_template(entry) for entry in listing["data"]]
        return JSONResponse(listing)

    async def get_model(request: Request) -> Response:
        return JSONResponse(with_template(models.get_model(service, request)))

    async def tokenize_route(request: Request) -> Response:
        body = await body_of(request)
        # Rendering, tokenizing and writing the answer (one id per token) all run on a worker.
        content = await service.pool.run(lambda: json_bytes(parse(tokenize.tokenize, service, body)),
                                         large=large_body(request))
        return Response(content, media_type="application/json")

    async def detokenize_route(request: Request) -> Response:
        return JSONResponse(parse(tokenize.detokenize, service, await body_of(request)))

    async def root(request: Request) -> Response:
        if request.method == "HEAD":
            return Response(status_code=200)
        return JSONResponse({"name": "harnesscheck reference server", "models": list(service.profiles),
                             "engine": service.engine.describe(), "faults": sorted(faults.names)})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "active_requests": service.engine.active_requests(),
                             "cache": service.engine.cache_stats(), "cpu_pool": service.pool.stats(),
                             "responses_store": store.stats()})

    routes = [
        Route("/", root, methods=["GET", "HEAD"]),
        Route("/health", health, methods=["GET"]),
        Route("/v1/messages", handler("anthropic", messages), methods=["POST"]),
        Route("/v1/messages/count_tokens", handler("anthropic", count_tokens), methods=["POST"]),
        Route("/v1/chat/completions", handler("openai", chat_completions), methods=["POST"]),
        Route("/v1/responses", handler("openai", create_response), methods=["POST"]),
        Route("/v1/responses", handler("openai", responses_get), methods=["GET"]),
        WebSocketRoute("/v1/responses", responses_websocket),
        Route("/v1/models", handler(None, list_models), methods=["GET"]),
        Route("/v1/models/{model_id:path}", handler(None, get_model), methods=["GET"]),
    ]
    for prefix in ("", "/v1"):
        routes.append(Route(f"{prefix}/tokenize", handler("openai", tokenize_route), methods=["POST"]))
        routes.append(Route(f"{prefix}/detokenize", handler("openai", detokenize_route), methods=["POST"]))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        api = api_of(request)
        message = f"{request.method} {request.url.path}: " + ("no such route" if exc.status_code == 404
                                                                else exc.detail or "not allowed")
        return error_response(ApiError(exc.status_code, message), api, faults)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        service.pool.close()  # a job still running is not waited for

    app = _App(routes=routes, exception_handlers={HTTPException: http_error}, lifespan=lifespan)
    app.state.service = service
    return app


