"""POST /tokenize and /detokenize (also under /v1), in Dynamo's and vLLM's shape.

Prompt form: `{model?, prompt, add_special_tokens}`. Chat form: `{model?, messages,
add_generation_prompt, tools, chat_template_kwargs}` renders the chat template, so it shows how
the server rebuilds history. As an extension, `messages` may also be in the Anthropic shape
(thinking / tool_use / tool_result blocks, which can express interleaved reasoning) and `input`
may hold Responses items.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from harnesscheck.reference_server.conversation import Conversation
from harnesscheck.reference_server.frontends import anthropic, chat, responses
from harnesscheck.reference_server.frontends.common import ApiError, expect
from harnesscheck.reference_server.frontends.http import ApiContext, json_bytes, large_body, parse
from harnesscheck.reference_server.service import Service

ANTHROPIC_BLOCKS = {"thinking", "redacted_thinking", "tool_use", "tool_result"}


def _is_anthropic_shape(body: dict[str, Any], messages: list[Any]) -> bool:
    """Anthropic's request shape: a top-level `system`, tools with `input_schema`, or its blocks."""
    if "system" in body:
        return True
    tools = body.get("tools")
    if isinstance(tools, list) and any(isinstance(t, dict) and "input_schema" in t for t in tools):
        return True
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in ANTHROPIC_BLOCKS for b in content):
            return True
    return False


def _model(service: Service, body: dict[str, Any]) -> str:
    """The model asked for (validated: 400 when not a string, 404 when not served), else the default."""
    model = expect(body, "model", str) or service.default_model
    service.profile(model)
    return model


def _conversation(service: Service, body: dict[str, Any]) -> Conversation:
    model = _model(service, body)
    if "input" in body:
        system, messages = responses.items_to_messages(body["input"])
        instructions = expect(body, "instructions", str)
        conv = Conversation(model=model, system=([instructions] if instructions else []) + system, messages=messages, tools=responses.tools_of(body.get("tools")))
    elif isinstance(body.get("messages"), list) and _is_anthropic_shape(body, body["messages"]):
        conv = Conversation(model=model, system=anthropic._system_blocks(body.get("system")),
                            messages=anthropic.messages_of(body["messages"], service.faults),
                            tools=anthropic.tools_of(body.get("tools")))
    else:
        system, messages = chat.messages_of(body.get("messages"), service.faults)
        tools = body.get("tools")
        conv = Conversation(model=model, system=system, messages=messages, tools=chat.tools_of(tools))
    kwargs = body.get("chat_template_kwargs") or {}
    if isinstance(kwargs, dict) and isinstance(kwargs.get("enable_thinking"), bool):
        conv.thinking = kwargs["enable_thinking"]
    service.profile(conv.model)
    return conv


def tokenize(service: Service, body: dict[str, Any]) -> dict[str, Any]:
    max_len = 1 << 20
    _model(service, body)
    if "prompt" in body:
        prompt = expect(body, "prompt", str, required=True)
        ids = service.tokenizer.encode(prompt)
        text = prompt
    elif "messages" in body or "input" in body:
        conv = _conversation(service, body)
        add_prompt = body.get("add_generation_prompt", True)
        if not isinstance(add_prompt, bool):
            raise ApiError(400, "add_generation_prompt: expected a boolean", param="add_generation_prompt")
        rendered = service.prompt(conv, add_generation_prompt=add_prompt)
        ids, text = rendered.ids, rendered.text
    else:
        raise ApiError(400, "expected `prompt` (text) or `messages` (chat form)", param="prompt")
    out: dict[str, Any] = {"count": len(ids), "max_model_len": max_len, "tokens": ids}
    if body.get("return_token_strs"):
        out["token_strs"] = service.tokenizer.token_strs(ids)
    if body.get("return_text"):  # extension: the rendered prompt text
        out["text"] = text
    return out


def detokenize(service: Service, body: dict[str, Any]) -> dict[str, Any]:
    _model(service, body)
    tokens = expect(body, "tokens", list, required=True)
    vocab = service.tokenizer.vocab_size
    if not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab for t in tokens):
        raise ApiError(400, f"tokens: expected integers in [0, {vocab})", param="tokens")
    if service.faults.on("detokenize-drops-special"):
        return {"prompt": service.tokenizer.hf.decode(tokens, skip_special_tokens=True)}
    return {"prompt": service.tokenizer.decode(tokens)}


def routes(ctx: ApiContext) -> list[BaseRoute]:
    """POST /tokenize and /detokenize, at the root and under /v1."""
    service = ctx.service

    async def tokenize_route(request: Request) -> Response:
        body = await ctx.body(request)
        # Rendering, tokenizing and writing the answer (one id per token) all run on a worker.
        content = await service.pool.run(lambda: json_bytes(parse(tokenize, service, body)),
                                         large=large_body(request))
        return Response(content, media_type="application/json")

    async def detokenize_route(request: Request) -> Response:
        return JSONResponse(parse(detokenize, service, await ctx.body(request)))

    out: list[BaseRoute] = []
    for prefix in ("", "/v1"):
        out.append(Route(f"{prefix}/tokenize", ctx.handler("openai", tokenize_route), methods=["POST"]))
        out.append(Route(f"{prefix}/detokenize", ctx.handler("openai", detokenize_route), methods=["POST"]))
    return out
