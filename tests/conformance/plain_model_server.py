"""A small independent endpoint (Anthropic Messages, Chat Completions and Responses, `/tokenize` without
`/v1` as vLLM serves it), written apart from the reference server, whose "model" behaves like a real
small model: it interleaves reasoning and tool calls, or makes two calls in one turn, only when
the user asks for it plainly ("in this one turn"), and with `--one-in N` only on every Nth such ask.
Otherwise it thinks once and makes one call (when the user names a tool) or answers in text.

Its chat template renders `<|role|>` headers, `<think>r</think>` and `<tool_call>{...}</tool_call>`;
a token is one character; a prefix cache (16-token blocks) reports what each prompt shares with an
earlier prompt plus its output. `--mode` plants one history or stream bug:

- clean: none;
- flatten-history: past assistant turns are rendered with all reasoning first (r0 r1 t0 t1), in
  the prompts and in /tokenize;
- flatten-tokenize: only the chat-form /tokenize rendering is flattened;
- drop-agent-reasoning: reasoning is dropped from past tool-calling turns (prompts and /tokenize);
- parallel-same-index: two calls in one turn are streamed under one index (Chat tool_calls[].index,
  Anthropic content block index);
- sampling: no bug, but every answer carries a random number (in its reasoning, text and tool
  arguments), as a sampling model answers one request differently each time;
- buffer-tool-calls: streamed tool calls are held back to the end of the turn (after the reasoning
  and text the model said after them); non-streamed answers keep the model's order.

`--mode` takes a comma-separated list: one of the modes above, plus any of these behaviours of the
real serving stacks issue 36 met (a small verbose model behind a C++ server), none of them a bug the
references forbid unless said:

- verbose: the model reasons briefly and seldom ends a turn: after its answer it calls the same tool
  again (or says more) until the request's output limit cuts it, so the last call is cut mid-arguments
  after complete ones (stop max_tokens / length / incomplete); parallel tool use off still stops after
  one call;
- history-500: a history whose tool call's arguments are not JSON (a cut call replayed) is answered
  HTTP 500 (a bug: a client's mistake must be a 4xx);
- tokenize-content: /tokenize takes llama.cpp's `{"content": ...}` and answers `{"tokens": []}` to any
  other form (the chat form included); /detokenize answers `{"content": ...}`;
- real-header-cache: the prefix cache normalises Claude Code 2.1.197's billing header
  (`cc_version=X.Y.Z.<3 hex>; cc_entrypoint=...;`, with or without a five-character `cch`) before
  matching, and no other form of it (the older `cch=<12 hex>==` stamp still defeats reuse);
- forced-text: a forced or named tool_choice is answered with plain text (a bug in every API);
  otherwise forced choices are obeyed (guided decoding: the call and nothing else) and `none` makes
  no call;
- tokenize-drops-reasoning-content: /tokenize renders an assistant message's `reasoning_content` as if it
  were not there (vLLM 0.32's tokenize request lacks the chat request's rename step), while the generation
  routes keep the reasoning under either name;
- openai-404: a route the server does not have answers 404 in OpenAI's error shape (as llama.cpp's
  server does); it never has GET /v1/models/{id} and serves any model name;
- no-models-routes: no GET /v1/models nor /v1/models/{id} at all, and every unknown route answers a 404
  that echoes its path (`{"error": "Cannot GET /v1/models/x"}`, as an Express-style gateway does).

Streams otherwise carry the parts in the model's order (Chat too: reasoning, tool-call and content
deltas as they were generated).

    python -m tests.conformance.plain_model_server --port P [--mode M[,BEHAVIOUR...]] [--one-in N]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL = "plain/tiny-model"
MODES = ("clean", "flatten-history", "flatten-tokenize", "drop-agent-reasoning", "parallel-same-index", "sampling",
         "buffer-tool-calls")
BEHAVIOURS = ("verbose", "history-500", "tokenize-content", "real-header-cache", "forced-text", "openai-404",
              "no-models-routes",
              "tokenize-drops-reasoning-content")
# Claude Code 2.1.197's header (what real-header-cache normalises), and no other form
REAL_HEADER = re.compile(r"x-anthropic-billing-header: cc_version=\d+\.\d+\.\d+\.[0-9a-f]{3}; "
                         r"cc_entrypoint=[\w-]+;(?: cch=[0-9a-f]{5};)?")
BLOCK = 16
ASK = "in this one turn"


@dataclass
class Part:
    kind: str  # reasoning | text | call | result
    text: str = ""  # reasoning or text; a result's content
    name: str = ""
    arguments: str = "{}"
    call_id: str = ""
    cut: bool = False  # a call the output limit cut: its arguments are the start of a JSON text


class BadHistory(Exception):
    """A history the server fails on (history-500): a tool call's arguments are not a JSON object."""


@dataclass
class Message:
    role: str  # system | user | assistant
    parts: list[Part] = field(default_factory=list)


# -- requests to messages --------------------------------------------------------------------------

def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def parse(messages: list[dict[str, Any]], system: Any = None) -> list[Message]:
    """Anthropic or Chat messages (either shape, as the tokenize route takes both) as one conversation."""
    out: list[Message] = [Message("system", [Part("text", _text(system))])] if system else []
    for m in messages:
        role, content = m.get("role"), m.get("content")
        if role in ("system", "developer"):
            out.append(Message("system", [Part("text", _text(content))]))
            continue
        if role == "tool":
            out.append(Message("user", [Part("result", _text(content), call_id=m.get("tool_call_id", ""))]))
            continue
        parts: list[Part] = []
        if role == "assistant" and (m.get("reasoning_content") or m.get("reasoning")):
            parts.append(Part("reasoning", m.get("reasoning_content") or m.get("reasoning")))
        if isinstance(content, str) and content:
            parts.append(Part("text", content))
        for b in content if isinstance(content, list) else []:
            kind = b.get("type")
            if kind == "thinking":
                parts.append(Part("reasoning", b.get("thinking", "")))
            elif kind == "text" and b.get("text"):
                parts.append(Part("text", b["text"]))
            elif kind == "tool_use":
                if not isinstance(b.get("input", {}), dict):
                    raise BadHistory(f"tool_use input {b.get('input')!r}")
                parts.append(Part("call", name=b["name"], arguments=json.dumps(b.get("input", {})), call_id=b["id"]))
            elif kind == "tool_result":
                parts.append(Part("result", _text(b.get("content")), call_id=b.get("tool_use_id", "")))
        for c in m.get("tool_calls") or []:
            parts.append(Part("call", name=c["function"]["name"], arguments=_json_object(c["function"].get("arguments")),
                              call_id=c.get("id", "")))
        out.append(Message("user" if role == "user" else "assistant", parts))
    return out


def _json_object(arguments: Any) -> str:
    """A history call's arguments, which must be a JSON object's text (else BadHistory)."""
    try:
        if isinstance(json.loads(arguments or "{}"), dict):
            return arguments or "{}"
    except (TypeError, ValueError):
        pass
    raise BadHistory(f"arguments {arguments!r}")


def parse_input(body: dict[str, Any]) -> list[Message]:
    """A Responses request's instructions and input items as one conversation."""
    out: list[Message] = [Message("system", [Part("text", body["instructions"])])] if body.get("instructions") else []
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items or []:
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            content = item.get("content")
            text = content if isinstance(content, str) else "".join(
                c.get("text", "") for c in content or [] if isinstance(c, dict))
            if role in ("system", "developer"):
                out.append(Message("system", [Part("text", text)]))
            else:
                out.append(Message("user" if role == "user" else "assistant", [Part("text", text)]))
            continue
        if kind == "function_call_output":
            out.append(Message("user", [Part("result", str(item.get("output")), call_id=item.get("call_id", ""))]))
            continue
        if not out or out[-1].role != "assistant":
            out.append(Message("assistant"))
        if kind == "reasoning":
            text = " ".join(s.get("text", "") for s in item.get("summary") or item.get("content") or [])
            out[-1].parts.append(Part("reasoning", text))
        elif kind == "function_call":
            out[-1].parts.append(Part("call", name=item.get("name", ""), arguments=_json_object(item.get("arguments")),
                                      call_id=item.get("call_id", "")))
    return out


# -- the template ------------------------------------------------------------------------------------

def render_assistant(parts: list[Part]) -> str:
    out = ""
    for p in parts:
        if p.kind == "reasoning":
            out += f"<think>{p.text}</think>\n"
        elif p.kind == "call":
            out += f'<tool_call>{{"name": "{p.name}", "arguments": {p.arguments}}}</tool_call>\n'
        else:
            out += p.text + "\n"
    return out + "<|end|>\n"


def history_parts(parts: list[Part], mode: str) -> list[Part]:
    """A past assistant turn as it goes back into the prompt (where the planted bugs live)."""
    if mode == "flatten" and any(p.kind == "reasoning" for p in parts):
        joined = " ".join(p.text for p in parts if p.kind == "reasoning")
        return [Part("reasoning", joined)] + [p for p in parts if p.kind != "reasoning"]
    if mode == "drop-agent-reasoning" and any(p.kind == "call" for p in parts):
        return [p for p in parts if p.kind != "reasoning"]
    return parts


def render(messages: list[Message], mode: str, *, generation_prompt: bool = True) -> str:
    out = ""
    for m in messages:
        if m.role == "assistant":
            out += "<|assistant|>\n" + render_assistant(history_parts(m.parts, mode))
            continue
        for p in m.parts:
            out += f"<|tool|>\n{p.text}\n" if p.kind == "result" else f"<|{m.role}|>\n{p.text}\n"
    return out + ("<|assistant|>\n" if generation_prompt else "")


# -- the model -----------------------------------------------------------------------------------------

class Model:
    """Decides the answer from the newest user text: asked plainly for two calls in one turn it makes
    them (interleaved with reasoning when asked to think before each), on every `one_in`th such ask."""

    def __init__(self, one_in: int) -> None:
        self.one_in = one_in
        self.asks = {"interleave": itertools.count(1), "parallel": itertools.count(1)}

    def answer(self, messages: list[Message], tools: dict[str, dict[str, Any]]) -> list[Part]:
        last = messages[-1] if messages else Message("user")
        if any(p.kind == "result" for p in last.parts) or last.role != "user":
            return [Part("reasoning", "The tool output answers the question, so I can reply now."),
                    Part("text", "Done: the tool output shows the cause.")]
        text = " ".join(p.text for p in last.parts if p.kind == "text")
        named = sorted((t for t in tools if t in text), key=text.index) or list(tools)[:1]
        self.schemas = tools
        think = "Let me think about what the user wants before I act. " * 3
        lower = text.lower()
        if ASK in lower and named and ("think" in lower or "reason" in lower) and "twice" not in lower:
            if self._takes("interleave"):
                second = named[1] if len(named) > 1 else named[0]
                return [Part("reasoning", think + f"First I call {named[0]}."), self._call(named[0], text, 0),
                        Part("reasoning", f"Now that {named[0]} ran I call {second} as asked, one step after "
                                          "the other, to see the rest of the picture."),
                        self._call(second, text, 1)]
        elif ASK in lower and named and "twice" in lower:
            if self._takes("parallel"):
                return [Part("reasoning", think + "Both reads can go out at once."), self._call(named[0], text, 0),
                        self._call(named[0], text, 1)]
        if named and any(w in lower for w in ("call", "use", "run", "read", "check")):
            return [Part("reasoning", think + f"I will use {named[0]}."), self._call(named[0], text, 0)]
        return [Part("reasoning", think), Part("text", "A prefix cache keeps computed prompt prefixes for reuse.")]

    def _takes(self, kind: str) -> bool:
        return next(self.asks[kind]) % self.one_in == 0

    def _call(self, name: str, text: str, n: int) -> Part:
        return call(name, text, n, getattr(self, "schemas", {}).get(name) or {})


def call(name: str, text: str, n: int, schema: dict[str, Any]) -> Part:
    """A call of `name` whose arguments follow the tool's schema (a file named in the text for a string)."""
    files = re.findall(r"[\w/-]+\.\w+", text) or ["x"]
    value = files[min(n, len(files) - 1)]
    props = schema.get("properties") or {}
    if not props:
        args: dict[str, Any] = {"value": value}
    else:
        fill = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
        args = {k: (p["enum"][0] if p.get("enum") else fill.get(p.get("type"), value))
                for k, p in props.items() if k in (schema.get("required") or props)}
    return Part("call", name=name, arguments=json.dumps(args), call_id=f"call_{uuid.uuid4().hex[:12]}")


class Cache:
    """Token sequences seen (prompts, and prompts with their outputs): a prompt's cached tokens are its
    longest shared prefix with one of them, in whole blocks."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def hit(self, prompt: str) -> int:
        best = 0
        for s in self.seen:
            n = 0
            for a, b in zip(s, prompt):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        return min(best, len(prompt) - 1) // BLOCK * BLOCK

    def store(self, *sequences: str) -> None:
        self.seen = (self.seen + list(sequences))[-200:]


# -- the app ----------------------------------------------------------------------------------------

def _sse(event: str | None, data: Any) -> bytes:
    return ((f"event: {event}\n" if event else "") + "data: " + json.dumps(data) + "\n\n").encode()


def _pieces(text: str, size: int = 12) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _sampled(part: Part) -> Part:
    """The part as a sampling model might have said it this time."""
    draw = random.randint(0, 10**9)
    if part.kind == "call":
        return Part("call", name=part.name, arguments=json.dumps({**json.loads(part.arguments), "draw": draw}),
                    call_id=part.call_id)
    return Part(part.kind, f"{part.text} {draw}" if part.kind in ("reasoning", "text") else part.text)


def create_app(mode: str = "clean", one_in: int = 1) -> Starlette:
    flags = set(mode.split(","))
    unknown = flags - set(MODES) - set(BEHAVIOURS)
    if unknown:
        raise ValueError(f"unknown mode {sorted(unknown)}")
    mode = next((m for m in MODES if m in flags), "clean")  # the one history or stream bug
    model, cache = Model(one_in), Cache()
    history_mode = {"flatten-history": "flatten", "drop-agent-reasoning": "drop-agent-reasoning"}.get(mode, "")
    tokenize_mode = "flatten" if mode == "flatten-tokenize" else history_mode

    def cache_key(prompt: str) -> str:
        if "real-header-cache" in flags:
            return REAL_HEADER.sub("x-anthropic-billing-header: (normalised)", prompt)
        return prompt

    def generate(messages: list[Message], tools: dict[str, dict[str, Any]], *, choice: str = "auto",
                 parallel: bool = True, limit: int | None = None) -> tuple[list[Part], dict[str, int], bool]:
        """The answer's parts, its usage, and whether the output limit cut it."""
        prompt = render(messages, history_mode)
        parts = model.answer(messages, tools)
        text = " ".join(p.text for p in (messages[-1].parts if messages else []) if p.kind == "text")
        if choice == "none":
            parts = [p for p in parts if p.kind != "call"] or [Part("text", "No tool is needed here.")]
        elif choice != "auto" and tools:  # forced: guided decoding writes the call and nothing else
            if "forced-text" in flags:
                parts = [Part("text", "The weather and the time are both pleasant today, as far as I know.")]
            else:
                name = choice if choice in tools else next((p.name for p in parts if p.kind == "call"), list(tools)[0])
                parts = [call(name, text, 0, tools[name])]
        if not parallel:
            first = next((i for i, p in enumerate(parts) if p.kind == "call"), None)
            parts = parts if first is None else parts[:first + 1]
        cut = False
        if "verbose" in flags and limit is not None and (parallel or not any(p.kind == "call" for p in parts)):
            parts, cut = _verbose(parts, limit)
        if mode == "sampling":
            parts = [_sampled(p) for p in parts]
        output = render_assistant(parts)
        cached = cache.hit(cache_key(prompt))
        cache.store(cache_key(prompt), cache_key(prompt + output))
        used = min(len(output), limit) if cut and limit else len(output)
        return parts, {"prompt": len(prompt), "cached": cached, "output": used}, cut

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0,
                                                         "owned_by": "test", "max_model_len": 65536}]})

    async def messages_route(request: Request) -> Response:
        body = await request.json()
        tools = {t["name"]: t.get("input_schema") or {} for t in body.get("tools") or []}
        tc = body.get("tool_choice") or {}
        choice = {"any": "any", "none": "none", "tool": tc.get("name", "any")}.get(tc.get("type"), "auto")
        parts, usage, cut = generate(parse(body["messages"], body.get("system")), tools, choice=choice,
                                     parallel=not tc.get("disable_parallel_tool_use"), limit=body.get("max_tokens"))
        if (body.get("thinking") or {}).get("type") == "disabled":
            parts = [p for p in parts if p.kind != "reasoning"]
        stop = "max_tokens" if cut else "tool_use" if any(p.kind == "call" for p in parts) else "end_turn"
        u = {"input_tokens": usage["prompt"] - usage["cached"], "cache_read_input_tokens": usage["cached"],
             "cache_creation_input_tokens": 0, "output_tokens": usage["output"]}
        msg_id = f"msg_{uuid.uuid4().hex[:16]}"
        if not body.get("stream"):
            content = [{k: v for k, v in _an_block(p).items() if k != "_partial"} for p in parts]
            return JSONResponse({"id": msg_id, "type": "message", "role": "assistant", "model": MODEL,
                                 "content": content, "stop_reason": stop, "stop_sequence": None, "usage": u})
        blocks = [_an_block(p) for p in _streamed(parts, mode)]
        return StreamingResponse(_an_stream(msg_id, blocks, stop, u, mode), media_type="text/event-stream")

    async def chat_route(request: Request) -> Response:
        body = await request.json()
        tools = {t["function"]["name"]: t["function"].get("parameters") or {} for t in body.get("tools") or []}
        tc = body.get("tool_choice") or "auto"
        choice = tc if isinstance(tc, str) and tc in ("none", "auto") else "any" if tc == "required" else \
            ((tc.get("function") or {}).get("name") or "any") if isinstance(tc, dict) else "auto"
        parts, usage, cut = generate(parse(body["messages"]), tools, choice=choice,
                                     parallel=body.get("parallel_tool_calls") is not False,
                                     limit=body.get("max_completion_tokens") or body.get("max_tokens"))
        calls = [p for p in parts if p.kind == "call"]
        reasoning = " ".join(p.text for p in parts if p.kind == "reasoning") or None
        content = "".join(p.text for p in parts if p.kind == "text") or None
        finish = "length" if cut else "tool_calls" if calls else "stop"
        u = {"prompt_tokens": usage["prompt"], "completion_tokens": usage["output"],
             "total_tokens": usage["prompt"] + usage["output"], "prompt_tokens_details": {"cached_tokens": usage["cached"]}}
        cid, created = f"chatcmpl-{uuid.uuid4().hex[:16]}", int(time.time())
        if not body.get("stream"):
            message = {"role": "assistant", "content": content, "reasoning_content": reasoning,
                       "tool_calls": [{"id": c.call_id, "type": "function",
                                       "function": {"name": c.name, "arguments": c.arguments}} for c in calls] or None}
            return JSONResponse({"id": cid, "object": "chat.completion", "created": created, "model": MODEL,
                                 "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": u})
        usage_chunk = u if (body.get("stream_options") or {}).get("include_usage") else None
        return StreamingResponse(_chat_stream(cid, created, _streamed(parts, mode), finish, usage_chunk, mode),
                                 media_type="text/event-stream")

    async def responses_route(request: Request) -> Response:
        body = await request.json()
        tools = {t["name"]: t.get("parameters") or {} for t in body.get("tools") or [] if t.get("type") == "function"}
        tc = body.get("tool_choice") or "auto"
        choice = tc if isinstance(tc, str) and tc in ("none", "auto") else "any" if tc == "required" else \
            (tc.get("name") or "any") if isinstance(tc, dict) else "auto"
        parts, usage, cut = generate(parse_input(body), tools, choice=choice,
                                     parallel=body.get("parallel_tool_calls") is not False,
                                     limit=body.get("max_output_tokens"))
        response = _response(parts, usage, cut)
        if not body.get("stream"):
            return JSONResponse(response)
        return StreamingResponse(_rs_stream(response), media_type="text/event-stream")

    async def tokenize_route(request: Request) -> Response:
        body = await request.json()
        if "tokenize-content" in flags:  # llama.cpp's dialect: content only, no count
            text = body.get("content") if isinstance(body.get("content"), str) else ""
            return JSONResponse({"tokens": [ord(c) for c in text]})
        if "messages" in body:
            messages = body["messages"]
            if "tokenize-drops-reasoning-content" in flags:
                messages = [{k: v for k, v in m.items() if k != "reasoning_content"} if isinstance(m, dict) else m
                            for m in messages]
            text = render(parse(messages, body.get("system")), tokenize_mode,
                          generation_prompt=bool(body.get("add_generation_prompt", True)))
        elif isinstance(body.get("prompt"), str):
            text = body["prompt"]
        else:
            return JSONResponse({"error": {"message": "prompt or messages required", "type": "invalid_request_error",
                                           "param": None, "code": None}}, status_code=400)
        tokens = [ord(c) for c in text]
        return JSONResponse({"tokens": tokens, "count": len(tokens), "max_model_len": 65536})

    async def detokenize_route(request: Request) -> Response:
        body = await request.json()
        text = "".join(chr(t) for t in body.get("tokens") or [])
        return JSONResponse({"content": text} if "tokenize-content" in flags else {"prompt": text})

    async def bad_history(request: Request, exc: Exception) -> Response:
        if "history-500" in flags:
            return Response("Internal Server Error", status_code=500, media_type="text/plain")
        return JSONResponse({"error": {"message": f"invalid history: {exc}", "type": "invalid_request_error",
                                       "param": None, "code": None}}, status_code=400)

    async def not_found(request: Request, exc: Exception) -> Response:
        if "no-models-routes" in flags:
            return JSONResponse({"error": f"Cannot {request.method} {request.url.path}"}, status_code=404)
        if "openai-404" in flags:
            return JSONResponse({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}},
                                status_code=404)
        return Response("Not Found", status_code=404, media_type="text/plain")

    listed = [] if "no-models-routes" in flags else [Route("/v1/models", models)]
    return Starlette(routes=[*listed, Route("/v1/messages", messages_route, methods=["POST"]),
                             Route("/v1/chat/completions", chat_route, methods=["POST"]),
                             Route("/v1/responses", responses_route, methods=["POST"]),
                             Route("/tokenize", tokenize_route, methods=["POST"]),
                             Route("/detokenize", detokenize_route, methods=["POST"])],
                     exception_handlers={BadHistory: bad_history, 404: not_found})


def _size(p: Part) -> int:
    """A part's output tokens (one a character, as the template renders it)."""
    return len(render_assistant([p])) - len("<|end|>\n")


def _verbose(parts: list[Part], limit: int) -> tuple[list[Part], bool]:
    """The answer of a model that seldom ends: it goes on (the last call again, or more text) until the
    output limit cuts it; the part the limit falls in is cut, a call before its name is dropped."""
    parts = [Part(p.kind, p.text[:24]) if p.kind == "reasoning" else p for p in parts]  # a small model: brief
    last = next((p for p in reversed(parts) if p.kind == "call"), None)
    while sum(_size(p) for p in parts) <= limit:
        parts.append(Part("call", name=last.name, arguments=last.arguments, call_id=f"call_{uuid.uuid4().hex[:12]}")
                     if last else Part("text", "And there is more to say about it. "))
    out, used = [], 0
    for p in parts:
        if used + _size(p) <= limit:
            out.append(p)
            used += _size(p)
            continue
        room = limit - used
        if p.kind == "call":  # cut inside its arguments (a few characters at least: the name is known)
            head = len(f'<tool_call>{{"name": "{p.name}", "arguments": ')
            keep = min(len(p.arguments) - 1, max(3, room - head))
            out.append(Part("call", name=p.name, arguments=p.arguments[:keep], call_id=p.call_id, cut=True))
        elif room > 0:
            out.append(Part(p.kind, p.text[:room]))
        break
    return out, True


def _response(parts: list[Part], usage: dict[str, int], cut: bool) -> dict[str, Any]:
    """The Responses answer: reasoning, function_call and message items in the model's order."""
    output: list[dict[str, Any]] = []
    for p in parts:
        item_id = f"{p.kind[:2]}_{uuid.uuid4().hex[:12]}"
        if p.kind == "reasoning":
            output.append({"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": p.text}]})
        elif p.kind == "call":
            output.append({"type": "function_call", "id": item_id, "call_id": p.call_id, "name": p.name,
                           "arguments": p.arguments, "status": "incomplete" if p.cut else "completed"})
        else:
            output.append({"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": p.text, "annotations": []}]})
    return {"id": f"resp_{uuid.uuid4().hex[:16]}", "object": "response", "created_at": int(time.time()),
            "model": MODEL, "status": "incomplete" if cut else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None, "output": output,
            "usage": {"input_tokens": usage["prompt"], "output_tokens": usage["output"],
                      "total_tokens": usage["prompt"] + usage["output"],
                      "input_tokens_details": {"cached_tokens": usage["cached"]},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def _rs_stream(response: dict[str, Any]) -> Iterator[bytes]:
    seq = itertools.count()

    def event(data: dict[str, Any]) -> bytes:
        data = {**data, "sequence_number": next(seq)}
        return _sse(data["type"], data)

    opening = {**response, "status": "in_progress", "output": [], "incomplete_details": None}
    yield event({"type": "response.created", "response": opening})
    yield event({"type": "response.in_progress", "response": opening})
    for n, item in enumerate(response["output"]):
        yield event({"type": "response.output_item.added", "output_index": n,
                     "item": {**item, "arguments": ""} if item["type"] == "function_call" else
                     {**item, "content": []} if item["type"] == "message" else item})
        if item["type"] == "function_call":
            for piece in _pieces(item["arguments"], 5):
                yield event({"type": "response.function_call_arguments.delta", "item_id": item["id"],
                             "output_index": n, "delta": piece})
            yield event({"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": n,
                         "arguments": item["arguments"]})
        elif item["type"] == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event({"type": "response.content_part.added", "item_id": item["id"], "output_index": n,
                         "content_index": 0, "part": part})
            for piece in _pieces(text):
                yield event({"type": "response.output_text.delta", "item_id": item["id"], "output_index": n,
                             "content_index": 0, "delta": piece})
            yield event({"type": "response.output_text.done", "item_id": item["id"], "output_index": n,
                         "content_index": 0, "text": text})
            yield event({"type": "response.content_part.done", "item_id": item["id"], "output_index": n,
                         "content_index": 0, "part": {**part, "text": text}})
        yield event({"type": "response.output_item.done", "output_index": n, "item": item})
    final = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    yield event({"type": final, "response": response})


def _streamed(parts: list[Part], mode: str) -> list[Part]:
    """The parts in the order a stream sends them: the model's, or calls last when they are buffered."""
    if mode != "buffer-tool-calls":
        return parts
    return [p for p in parts if p.kind != "call"] + [p for p in parts if p.kind == "call"]


def _an_block(p: Part) -> dict[str, Any]:
    if p.kind == "reasoning":
        return {"type": "thinking", "thinking": p.text, "signature": hashlib.sha256(p.text.encode()).hexdigest()}
    if p.kind == "call" and p.cut:  # not JSON yet: no input to give, the streamed fragments are all there is
        return {"type": "tool_use", "id": p.call_id, "name": p.name, "input": {}, "_partial": p.arguments}
    if p.kind == "call":
        return {"type": "tool_use", "id": p.call_id, "name": p.name, "input": json.loads(p.arguments)}
    return {"type": "text", "text": p.text}


def _an_stream(msg_id: str, blocks: list[dict[str, Any]], stop: str, usage: dict[str, int],
               mode: str) -> Iterator[bytes]:
    start_usage = {**usage, "output_tokens": 1}
    yield _sse("message_start", {"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": MODEL, "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": start_usage}})
    index, calls = 0, 0
    for block in blocks:
        if block["type"] == "tool_use":
            calls += 1
            if mode == "parallel-same-index" and calls == 2:
                index -= 1  # the second call of the turn reuses the first one's index
        if block["type"] == "thinking":
            opened: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": t} for t in _pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "tool_use":
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": t}
                      for t in _pieces(block.get("_partial", json.dumps(block["input"])), 5)]
        else:
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t} for t in _pieces(block["text"])]
        yield _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": opened})
        for d in deltas:
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    yield _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": usage["output_tokens"]}})
    yield _sse("message_stop", {"type": "message_stop"})


def _chat_stream(cid: str, created: int, parts: list[Part], finish: str, usage: dict[str, Any] | None,
                 mode: str) -> Iterator[bytes]:
    """Deltas in the parts' order; reasoning parts joined by a space and text parts by nothing, as the
    non-streamed message joins them."""
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return _sse(None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

    yield chunk({"role": "assistant", "content": ""})
    calls = 0
    said_reasoning = False
    for part in parts:
        if part.kind == "reasoning":
            for piece in _pieces((" " if said_reasoning else "") + part.text):
                yield chunk({"reasoning_content": piece})
            said_reasoning = True
        elif part.kind == "text" and part.text:
            for piece in _pieces(part.text):
                yield chunk({"content": piece})
        elif part.kind == "call":
            index = 0 if mode == "parallel-same-index" else calls
            calls += 1
            yield chunk({"tool_calls": [{"index": index, "id": part.call_id, "type": "function",
                                         "function": {"name": part.name, "arguments": ""}}]})
            for piece in _pieces(part.arguments, 5):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, finish)
    if usage is not None:
        yield _sse(None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL,
                          "choices": [], "usage": usage})
    yield b"data: [DONE]\n\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", default="clean", help=f"one of {', '.join(MODES)}, with any of "
                        f"{', '.join(BEHAVIOURS)}, comma-separated")
    parser.add_argument("--one-in", type=int, default=1, help="take an asked-for path on every Nth ask only")
    args = parser.parse_args()
    uvicorn.run(create_app(args.mode, args.one_in), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
