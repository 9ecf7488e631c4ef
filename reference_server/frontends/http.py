"""What every route shares: the request context, the error-shaping handler, SSE streaming.

A frontend's `routes(ctx)` lists its routes; each handler runs inside `ApiContext.handler`, which
turns bad input into the API's own error shape (4xx), never a 500, and an engine's own stop before
the first frame into the API's 5xx (`common.ENGINE_STOP_STATUS`). Streams are SSE with the engine
slot freed when the client goes away (the generator's `finally`); a stream the engine stops after
the first frame ends with the adapter's own error frame (`Adapter.fail`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from harnesscheck.reference_server.config import ServerConfig
from harnesscheck.reference_server.context import ContextOverflow, Refusal, planted_refusal
from harnesscheck.reference_server.conversation import InvalidConversation
from harnesscheck.reference_server.engines.base import EngineStopped
from harnesscheck.reference_server.faults import Faults
from harnesscheck.reference_server.frontends.common import (Adapter, ApiError, ApiKind, check_auth, engine_stop_error,
                                                            error_response, read_json, step_frames)
from harnesscheck.reference_server.service import LARGE_CHARS, Service, UnknownModel

log = logging.getLogger("harnesscheck.server")
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class ApiContext:
    """What the routes of every API share: the server's settings, its service and faults."""
    config: ServerConfig
    service: Service

    @property
    def faults(self) -> Faults:
        return self.service.faults

    @property
    def stall_after(self) -> int | None:
        """The stall-stream fault: stop sending after this many writes (None: it is off)."""
        return 2 if self.faults.on("stall-stream") else None

    async def body(self, request: Request) -> dict[str, Any]:
        return await read_json(request, limit=self.config.max_body_bytes, faults=self.faults)

    def stream(self, adapter: Adapter, turn: Any, *, then: Callable[[], None] | None = None) -> SSEResponse:
        """A turn streamed by `adapter` (turn: `service.Turn`)."""
        return SSEResponse(adapter, turn.steps(), close=turn.close, then=then, stall_after=self.stall_after)

    def handler(self, api: ApiKind | None, fn: Handler) -> Handler:
        """`fn` with auth and the API's error shapes; api None: the shape follows the client
        (Anthropic when it sends anthropic-version)."""
        faults, api_key = self.faults, self.config.api_key

        async def wrapped(request: Request) -> Response:
            kind: ApiKind = api or api_of(request)
            try:
                check_auth(request, api_key)
                return await fn(request)
            except ApiError as error:
                return error_response(error, kind, faults)
            except InvalidConversation as error:
                return error_response(ApiError(400, str(error)), kind, faults)
            except UnknownModel as error:
                return error_response(ApiError(404, f"model '{error}' not found", param="model",
                                               code="model_not_found"), kind, faults)
            except EngineStopped as stop:  # before the first frame (or not streamed): the API's 5xx
                return error_response(engine_stop_error(stop.reason, str(stop), kind), kind, faults)
            except ContextOverflow as over:  # the prompt does not fit the window: the API's own refusal
                return overflow_response(over, kind, request.url.path, faults)
            except Exception:  # a server bug: still answer in shape, and log it
                log.exception("unhandled error on %s", request.url.path)
                return error_response(ApiError(500, "internal server error"), kind, faults)
        return wrapped


OVERFLOW_CODE = "context_length_exceeded"
RESPONSES_MESSAGE = "Your input exceeds the context window of this model. Please adjust your input and try again."


def own_refusal(over: ContextOverflow, kind: ApiKind, path: str) -> Refusal:
    """The refusal of ``over`` in the form of the route's API (context.py's module doc)."""
    n, m = over.prompt_tokens, over.window
    if kind != "openai":
        return Refusal(400, f"prompt is too long: {n} tokens > {m} maximum")
    if path.rstrip("/").endswith("/responses"):
        return Refusal(400, RESPONSES_MESSAGE, param="input", code=OVERFLOW_CODE)
    if path.rstrip("/").endswith("/chat/completions"):
        return Refusal(400, f"This model's maximum context length is {m} tokens. However, your messages resulted in "
                            f"{n} tokens. Please reduce the length of the messages.",
                       param="messages", code=OVERFLOW_CODE)
    return Refusal(400, f"prompt is too long: {n} tokens > {m} maximum")


def overflow_response(over: ContextOverflow, kind: ApiKind, path: str, faults: Faults) -> Response:
    """The refusal of a prompt longer than the context window, in the form of the route's API
    (`own_refusal`; a planted bad form under the overflow faults: `context.planted_refusal`)."""
    answer = planted_refusal(over, faults) or own_refusal(over, kind, path)
    if answer.raw is not None:
        return JSONResponse(answer.raw, status_code=answer.status)
    return error_response(ApiError(answer.status, answer.message, param=answer.param, code=answer.code), kind,
                          faults)


class SSEResponse(Response):
    """A turn streamed as text/event-stream by a plain ASGI send loop: the adapter's opening frames,
    then one `send` per step with the frames of all its events (`common.step_frames`; no generator
    layers between the engine's steps and the socket), nothing held back, nothing dropped; `then`
    runs after the last frame, before the body ends. A stream the engine stops (`EngineStopped`)
    ends with the adapter's error frames (`Adapter.fail`), and `then` does not run.

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
            try:
                async for step in steps:
                    if self.stall_after is not None and writes >= self.stall_after:
                        await asyncio.Event().wait()  # until the client goes away (the watch cancels us)
                    chunk = step_frames(adapter, step)
                    if chunk:
                        await body_send({"type": "http.response.body", "body": chunk, "more_body": True})
                        writes += 1
            except EngineStopped as stop:  # the API's own error frame ends the stream; nothing is kept
                await body_send({"type": "http.response.body", "body": b"".join(adapter.fail(stop.reason, str(stop))),
                                 "more_body": True})
            else:
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
