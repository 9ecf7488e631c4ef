"""A small independent endpoint (Anthropic Messages and Chat Completions, `/tokenize` without `/v1`
as vLLM serves it), written apart from the reference server, whose "model" behaves like a real
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

Streams otherwise carry the parts in the model's order (Chat too: reasoning, tool-call and content
deltas as they were generated).

    python -m tests.conformance.plain_model_server --port P [--mode M] [--one-in N]
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
BLOCK = 16
ASK = "in this one turn"


@dataclass
class Part:
    kind: str  # reasoning | text | call | result
    text: str = ""  # reasoning or text; a result's content
    name: str = ""
    arguments: str = "{}"
    call_id: str = ""


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
                parts.append(Part("call", name=b["name"], arguments=json.dumps(b.get("input", {})), call_id=b["id"]))
            elif kind == "tool_result":
                parts.append(Part("result", _text(b.get("content")), call_id=b.get("tool_use_id", "")))
        for c in m.get("tool_calls") or []:
            parts.append(Part("call", name=c["function"]["name"], arguments=c["function"].get("arguments") or "{}",
                              call_id=c.get("id", "")))
        out.append(Message("user" if role == "user" else "assistant", parts))
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

    def answer(self, messages: list[Message], tools: list[str]) -> list[Part]:
        last = messages[-1] if messages else Message("user")
        if any(p.kind == "result" for p in last.parts) or last.role != "user":
            return [Part("reasoning", "The tool output answers the question, so I can reply now."),
                    Part("text", "Done: the tool output shows the cause.")]
        text = " ".join(p.text for p in last.parts if p.kind == "text")
        named = sorted((t for t in tools if t in text), key=text.index) or tools[:1]
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

    @staticmethod
    def _call(name: str, text: str, n: int) -> Part:
        files = re.findall(r"[\w/-]+\.\w+", text) or ["x"]
        return Part("call", name=name, arguments=json.dumps({"value": files[min(n, len(files) - 1)]}),
                    call_id=f"call_{uuid.uuid4().hex[:12]}")


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
    model, cache = Model(one_in), Cache()
    history_mode = {"flatten-history": "flatten", "drop-agent-reasoning": "drop-agent-reasoning"}.get(mode, "")
    tokenize_mode = "flatten" if mode == "flatten-tokenize" else history_mode

    def generate(messages: list[Message], tools: list[str]) -> tuple[list[Part], dict[str, int]]:
        prompt = render(messages, history_mode)
        parts = model.answer(messages, tools)
        if mode == "sampling":
            parts = [_sampled(p) for p in parts]
        output = render_assistant(parts)
        cached = cache.hit(prompt)
        cache.store(prompt, prompt + output)
        return parts, {"prompt": len(prompt), "cached": cached, "output": len(output)}

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0,
                                                         "owned_by": "test", "max_model_len": 65536}]})

    async def messages_route(request: Request) -> Response:
        body = await request.json()
        tools = [t["name"] for t in body.get("tools") or []]
        parts, usage = generate(parse(body["messages"], body.get("system")), tools)
        if (body.get("thinking") or {}).get("type") == "disabled":
            parts = [p for p in parts if p.kind != "reasoning"]
        stop = "tool_use" if any(p.kind == "call" for p in parts) else "end_turn"
        u = {"input_tokens": usage["prompt"] - usage["cached"], "cache_read_input_tokens": usage["cached"],
             "cache_creation_input_tokens": 0, "output_tokens": usage["output"]}
        msg_id = f"msg_{uuid.uuid4().hex[:16]}"
        if not body.get("stream"):
            return JSONResponse({"id": msg_id, "type": "message", "role": "assistant", "model": MODEL,
                                 "content": [_an_block(p) for p in parts], "stop_reason": stop, "stop_sequence": None,
                                 "usage": u})
        blocks = [_an_block(p) for p in _streamed(parts, mode)]
        return StreamingResponse(_an_stream(msg_id, blocks, stop, u, mode), media_type="text/event-stream")

    async def chat_route(request: Request) -> Response:
        body = await request.json()
        tools = [t["function"]["name"] for t in body.get("tools") or []]
        parts, usage = generate(parse(body["messages"]), tools)
        calls = [p for p in parts if p.kind == "call"]
        reasoning = " ".join(p.text for p in parts if p.kind == "reasoning") or None
        content = "".join(p.text for p in parts if p.kind == "text") or None
        finish = "tool_calls" if calls else "stop"
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

    async def tokenize_route(request: Request) -> Response:
        body = await request.json()
        if "messages" in body:
            text = render(parse(body["messages"], body.get("system")), tokenize_mode,
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
        return JSONResponse({"prompt": "".join(chr(t) for t in body.get("tokens") or [])})

    return Starlette(routes=[Route("/v1/models", models), Route("/v1/messages", messages_route, methods=["POST"]),
                             Route("/v1/chat/completions", chat_route, methods=["POST"]),
                             Route("/tokenize", tokenize_route, methods=["POST"]),
                             Route("/detokenize", detokenize_route, methods=["POST"])])


def _streamed(parts: list[Part], mode: str) -> list[Part]:
    """The parts in the order a stream sends them: the model's, or calls last when they are buffered."""
    if mode != "buffer-tool-calls":
        return parts
    return [p for p in parts if p.kind != "call"] + [p for p in parts if p.kind == "call"]


def _an_block(p: Part) -> dict[str, Any]:
    if p.kind == "reasoning":
        return {"type": "thinking", "thinking": p.text, "signature": hashlib.sha256(p.text.encode()).hexdigest()}
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
            deltas = [{"type": "input_json_delta", "partial_json": t} for t in _pieces(json.dumps(block["input"]), 5)]
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
    parser.add_argument("--mode", choices=MODES, default="clean")
    parser.add_argument("--one-in", type=int, default=1, help="take an asked-for path on every Nth ask only")
    args = parser.parse_args()
    uvicorn.run(create_app(args.mode, args.one_in), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
