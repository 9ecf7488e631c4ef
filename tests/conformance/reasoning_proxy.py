"""A reasoning model that never leaves its reasoning unless thinking is turned off: a proxy in front of
a reference server, written for the lever tests (issue 35), modelled on vLLM 0.32 serving a tiny random
Qwen3 under `--reasoning-parser qwen3` (every answer reasoning to the output limit; a forced tool call
constrained only after the reasoning, so never made).

An opening request (no answer in its history) that does not turn thinking off reaches the reference
server with its user text replaced by one no scenario answers and without its `tool_choice`: the answer
is a short thought and "ok", never a tool call, whatever the prompt names or forces. One that turns
thinking off in any of the ways vLLM reads (Anthropic `thinking: {"type": "disabled"}`, Chat
`reasoning_effort: "none"`, Responses `reasoning: {"effort": "none"}`, `chat_template_kwargs:
{"enable_thinking": false}`) goes through as it is, and the scripted model takes the scenario's path.
Follow-up turns go through as they are, but under `drop-history` (below). Per API (`--modes anthropic=never,chat=refuse-none`): `never`, no
request goes through as it is; `refuse-none`, it is a model before gpt-5.1: an effort of "none" is refused
with a 400 in OpenAI's shape, and "minimal", the lowest effort it takes, turns thinking off; `cut`, the
model reasons to the output limit (vLLM's tiny Qwen3): a hidden request also has its limit lowered to
16 tokens (Responses' minimum), so its answer is reasoning alone, cut by the limit. Modes combine with
`+`: `never+cut`, a model that reasons to the limit whatever the levers. `drop-history` (issue 41) is the
gateway that streams the model's reasoning to the client and drops every piece of reasoning the client sends
back (Anthropic thinking blocks, Chat `reasoning_content` / `reasoning`, Responses reasoning items), as an
Anthropic-to-Chat gateway measured did; with it the other modes are off. `--no-tokenize`: /tokenize and
/detokenize answer 404, as a gateway's do. `fail-500`: every generation request is answered with a bare HTTP
500 (a proxy that cannot route the model). `refuse-forced`: a forced tool_choice (Anthropic `any`, OpenAI
`required`) is refused with a 400 in the API's error shape, everything else goes through as it is.
`zero-usage`: every token count in a generation's answer (usage, streamed or not) reads 0.

    python -m tests.conformance.reasoning_proxy --upstream http://127.0.0.1:PORT --port P [--modes API=MODE,...]
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

_HOP = {"content-length", "transfer-encoding", "connection", "content-encoding", "host"}
_GENERATION = {"/v1/messages": "anthropic", "/v1/chat/completions": "chat", "/v1/responses": "responses"}
HIDDEN = "Think about it."
_COUNTS = re.compile(rb'"(input_tokens|output_tokens|prompt_tokens|completion_tokens|total_tokens|cached_tokens|'
                     rb'cache_read_input_tokens|cache_creation_input_tokens|reasoning_tokens)":\s*\d+')  # a user text no scenario answers


def effort(body: dict[str, Any]) -> Any:
    reasoning = body.get("reasoning")
    return body.get("reasoning_effort") or (reasoning.get("effort") if isinstance(reasoning, dict) else None)


def thinking_off(body: dict[str, Any], lowest: str = "none") -> bool:
    thinking, kwargs = body.get("thinking"), body.get("chat_template_kwargs")
    return ((isinstance(thinking, dict) and thinking.get("type") == "disabled") or effort(body) == lowest
            or (isinstance(kwargs, dict) and kwargs.get("enable_thinking") is False))


def opening(body: dict[str, Any]) -> bool:
    items = body.get("messages") if "messages" in body else body.get("input")
    if body.get("previous_response_id"):
        return False
    if not isinstance(items, list):
        return True
    if items and isinstance(items[-1], dict) and items[-1].get("role") == "assistant" and \
            isinstance(items[-1].get("content"), str):
        items = items[:-1]  # an assistant prefill: still the opening request
    return not any(isinstance(i, dict) and (i.get("role") in ("assistant", "tool") or i.get("type") in (
        "function_call", "function_call_output", "reasoning")) for i in items)


CUT_AT = 16  # shorter than the reference server's thought for HIDDEN: reasoning alone, cut by the limit
_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def hide(body: dict[str, Any], cut: bool = False) -> dict[str, Any]:
    """The request with its user text replaced and no tool_choice: the model only thinks and says ok (`cut`:
    it only thinks, until the output limit, whatever thinking switch the request holds)."""
    out = {k: v for k, v in body.items() if k != "tool_choice"}
    if cut:
        out = {k: v for k, v in out.items() if k not in ("thinking", "reasoning_effort", "reasoning",
                                                         "chat_template_kwargs")}
        out.update({k: CUT_AT for k in _LIMITS if k in out} or {"max_tokens": CUT_AT})
    key = "messages" if "messages" in body else "input"
    if isinstance(out.get(key), str):
        out[key] = HIDDEN
    elif isinstance(out.get(key), list):
        out[key] = [{**i, "content": HIDDEN} if isinstance(i, dict) and i.get("role") == "user" else i
                    for i in out[key] if not (isinstance(i, dict) and i.get("role") == "assistant")]
    return out


def drop_history_reasoning(body: dict[str, Any]) -> dict[str, Any]:
    """The request with every piece of reasoning sent back left out (the gateway's bug)."""
    out = dict(body)
    if isinstance(body.get("messages"), list):
        messages = []
        for m in body["messages"]:
            if isinstance(m, dict) and m.get("role") == "assistant":
                m = {k: v for k, v in m.items() if k not in ("reasoning_content", "reasoning")}
                if isinstance(m.get("content"), list):
                    m["content"] = [b for b in m["content"] if not (isinstance(b, dict) and b.get("type") in (
                        "thinking", "redacted_thinking"))]
            messages.append(m)
        out["messages"] = messages
    if isinstance(body.get("input"), list):
        out["input"] = [i for i in body["input"] if not (isinstance(i, dict) and i.get("type") == "reasoning")]
    return out


def forced(content: bytes) -> bool:
    """The request forces a tool call (Anthropic `{"type": "any"}`, OpenAI `"required"`)."""
    try:
        choice = json.loads(content).get("tool_choice")
    except (ValueError, AttributeError):
        return False
    return choice == "required" or (isinstance(choice, dict) and choice.get("type") == "any")


def create_app(upstream: str, modes: dict[str, str], *, tokenize: bool = True) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=httpx.Timeout(300.0))

    async def proxy(request: Request) -> Response:
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        content = await request.body()
        if not tokenize and request.url.path.rstrip("/").endswith(("/tokenize", "/detokenize")):
            return Response(json.dumps({"error": {"message": "Not Found", "type": "not_found_error"}}),
                            status_code=404, media_type="application/json")
        if request.method == "POST" and request.url.path in _GENERATION and \
                "refuse-forced" in modes.get(_GENERATION[request.url.path], "") and forced(content):
            error = ({"type": "error", "error": {"type": "invalid_request_error", "message": "tool_choice any is not "
                                                 "supported"}} if _GENERATION[request.url.path] == "anthropic" else
                     {"error": {"message": "tool_choice required is not supported", "type": "invalid_request_error",
                                "param": "tool_choice", "code": None}})
            return Response(json.dumps(error), status_code=400, media_type="application/json")
        if request.method == "POST" and request.url.path in _GENERATION and \
                "fail-500" in modes.get(_GENERATION[request.url.path], ""):
            return Response("Internal Server Error", status_code=500, media_type="text/plain")
        if request.method == "POST" and request.url.path in _GENERATION and \
                "drop-history" in modes.get(_GENERATION[request.url.path], ""):
            try:
                content = json.dumps(drop_history_reasoning(json.loads(content))).encode()
            except (ValueError, AttributeError):
                pass
        elif request.method == "POST" and request.url.path in _GENERATION:
            try:
                body = json.loads(content)
            except ValueError:
                body = None
            mode = set(modes.get(_GENERATION[request.url.path], "").split("+"))
            never, refuse_none = "never" in mode, "refuse-none" in mode
            if isinstance(body, dict) and refuse_none and effort(body) == "none":
                return Response(json.dumps({"error": {"message": "Unsupported value: 'reasoning_effort' does not support "
                                                      "'none' with this model.", "type": "invalid_request_error",
                                                      "param": "reasoning_effort", "code": "unsupported_value"}}),
                                status_code=400, media_type="application/json")
            lowest = "minimal" if refuse_none else "none"
            if isinstance(body, dict) and opening(body) and (never or not thinking_off(body, lowest)):
                content = json.dumps(hide(body, "cut" in mode)).encode()
            elif isinstance(body, dict) and effort(body) == "minimal":  # the upstream need not know it
                content = json.dumps({k: v for k, v in body.items() if k not in ("reasoning_effort", "reasoning")}).encode()
        answer = await client.send(client.build_request(request.method, path, headers=headers, content=content),
                                   stream=True)
        out_headers = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}

        zero = request.url.path in _GENERATION and "zero-usage" in modes.get(_GENERATION[request.url.path], "")

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in answer.aiter_bytes():
                    yield _COUNTS.sub(rb'"\1": 0', chunk) if zero else chunk
            finally:
                await answer.aclose()

        return StreamingResponse(relay(), status_code=answer.status_code, headers=out_headers)

    return Starlette(routes=[Route("/{path:path}", proxy, methods=["GET", "POST", "HEAD"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--modes", default="", help="API=MODE,...: never (no lever helps), refuse-none (effort "
                                                     "none refused with a 400, minimal turns thinking off), cut "
                                                     "(reasoning to the output limit until thinking is off)")
    parser.add_argument("--no-tokenize", action="store_true", help="/tokenize and /detokenize answer 404")
    args = parser.parse_args()
    modes = dict(item.split("=", 1) for item in args.modes.split(",") if item)
    uvicorn.run(create_app(args.upstream, modes, tokenize=not args.no_tokenize), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
