"""GET /v1/models and /v1/models/{model_id}: ids with '/' work raw and as %2F; also the server's / and /health.

Anthropic's shape when the client sends `anthropic-version`, OpenAI's list shape otherwise (as
Dynamo does). Each entry carries the engine, its device and settings, and the faults turned on
(`--fault`: the bugs it reproduces on purpose; also in / and /health) as metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from harnesscheck.reference_server.frontends.common import ApiError, openai_error_body
from harnesscheck.reference_server.frontends.http import ApiContext
from harnesscheck.reference_server.service import Service

CREATED = 1767225600  # 2026-01-01, fixed so answers are stable


def _entry(service: Service, model_id: str, anthropic: bool) -> dict[str, Any]:
    profile = service.profiles[model_id]
    meta = {"family": profile.family.name, "reasoning_parser": profile.reasoning_parser,
            "tool_call_parser": profile.tool_parser, "engine": service.engine.describe(),
            "faults": sorted(service.faults.names)}  # the known bugs it reproduces on purpose (--fault)
    # the context window as vLLM and SGLang announce it (max_model_len); absent when there is none
    window = {"max_model_len": service.config.context_window} \
        if service.config.context_window > 0 and service.config.announce_window else {}
    if anthropic:
        return {"id": model_id, "type": "model", "display_name": model_id.rsplit("/", 1)[-1],
                "created_at": "2026-01-01T00:00:00Z", **window, "metadata": meta}
    return {"id": model_id, "object": "model", "created": CREATED, "owned_by": "harnesscheck", **window,
            "metadata": meta}


def wants_anthropic(request: Request) -> bool:
    service: Service = request.app.state.service
    return "anthropic-version" in request.headers and not service.faults.on("anthropic-models-shape-ignored")


def list_models(service: Service, request: Request) -> dict[str, Any]:
    anthropic = wants_anthropic(request)
    data = [_entry(service, m, anthropic) for m in service.profiles]
    if anthropic:
        return {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}
    if service.faults.on("openai-models-bare-entries"):  # a bare listing: ids (and metadata) only
        return {"data": [{k: v for k, v in e.items() if k not in ("object", "created", "owned_by")} for e in data]}
    return {"object": "list", "data": data}


def get_model(service: Service, request: Request) -> dict[str, Any]:
    raw_path = request.scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0]
    prefix = "/v1/models/"
    raw_id = raw_path[raw_path.index(prefix) + len(prefix):] if prefix in raw_path else request.path_params["model_id"]
    model_id = raw_id if service.faults.on("model-percent-2f-not-decoded") else unquote(raw_id)
    if service.faults.on("model-slash-404") and "/" in model_id:
        raise ApiError(404, f"model '{model_id}' not found")
    if model_id not in service.profiles:
        raise ApiError(404, f"model '{model_id}' not found")
    return _entry(service, model_id, wants_anthropic(request))


def with_template(service: Service, entry: dict[str, Any]) -> dict[str, Any]:
    """A model entry with its chat template and the reasoning-history decision (metadata.chat_template)."""
    if isinstance(entry.get("metadata"), dict) and entry.get("id") in service.profiles:
        entry["metadata"]["chat_template"] = service.template_metadata(entry["id"])
    return entry


def routes(ctx: ApiContext, store_stats: Callable[[], dict[str, int]]) -> list[BaseRoute]:
    """GET /v1/models and /v1/models/{id} (the client's shape), and the server's own / and /health
    (`store_stats`: the Responses store's figures)."""
    service, faults = ctx.service, ctx.faults

    async def list_route(request: Request) -> Response:
        listing = list_models(service, request)
        listing["data"] = [with_template(service, entry) for entry in listing["data"]]
        return JSONResponse(listing)

    async def get_route(request: Request) -> Response:
        try:
            return JSONResponse(with_template(service, get_model(service, request)))
        except ApiError as error:  # fault unknown-model-openai-shape: OpenAI's shape whoever asks
            if error.status != 404 or not faults.on("unknown-model-openai-shape"):
                raise
            return JSONResponse(openai_error_body(error, 404), status_code=404)

    async def root(request: Request) -> Response:
        if request.method == "HEAD":
            return Response(status_code=200)
        return JSONResponse({"name": "harnesscheck reference server", "models": list(service.profiles),
                             "engine": service.engine.describe(), "faults": sorted(faults.names)})

    config = ctx.config
    # every byte bound on data from outside, as `serve --help` states them
    limits = {"max_body_bytes": config.max_body_bytes, "max_concurrency": config.max_concurrency,
              "max_output_tokens": config.max_output_tokens, "prefix_cache_bytes": config.prefix_cache_bytes,
              "prefix_cache_blocks": config.cache_blocks,
              "responses_store_bytes": config.responses_store_bytes, "stored_responses": config.stored_responses}

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "faults": sorted(faults.names),
                             "active_requests": service.engine.active_requests(),
                             "cache": service.engine.cache_stats(), "cpu_pool": service.pool.stats(),
                             "responses_store": store_stats(), "limits": limits})

    return [Route("/", root, methods=["GET", "HEAD"]),
            Route("/health", health, methods=["GET"]),
            Route("/v1/models", ctx.handler(None, list_route), methods=["GET"]),
            Route("/v1/models/{model_id:path}", ctx.handler(None, get_route), methods=["GET"])]
