"""Anthropic Messages: POST /v1/messages (stream and not) and /v1/messages/count_tokens.

`to_conversation` validates and normalises a request; `AnthropicStream` maps internal events to
the exact event grammar (one block open at a time, index = position, signature_delta just before a
thinking block's stop, usage in message_start with the cached part split out).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from harnesscheck.reference_server.conversation import Conversation, Message, ToolChoice, ToolResult, ToolSpec
from harnesscheck.reference_server.events import (Event, Finish, Part, ReasoningDelta, TextDelta, ToolCall, ToolCallArgsDelta,
                                     ToolCallEnd, ToolCallStart, Usage)
from harnesscheck.reference_server.faults import Faults
from harnesscheck.reference_server.frontends.common import (ApiError, accept_malformed, anthropic_error_body,
                                                            answer_events,
                                                            engine_stop_error, expect, has_cache_control,
                                                            int_in, json_str, number_in, sse, tool_array)
from harnesscheck.reference_server.frontends.http import ApiContext, parse
from harnesscheck.reference_server.signing import sign

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _text_of(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ApiError(400, f"{where}: expected a string or an array of content blocks")
    texts = []
    for n, block in enumerate(content):
        if not isinstance(block, dict):
            raise ApiError(400, f"{where}.{n}: expected a content block object")
        if block.get("type") == "text":
            texts.append(expect(block, "text", str, required=True, where=f"{where}.{n}."))
        elif block.get("type") == "image":
            texts.append("[image]")
        elif "text" in block and isinstance(block["text"], str):
            texts.append(block["text"])
    return "\n".join(texts)


def _system_blocks(system: Any) -> list[str]:
    if system is None:
        return []
    if isinstance(system, str):
        return [system] if system else []
    if not isinstance(system, list):
        raise ApiError(400, "system: expected a string or an array of text blocks", param="system")
    blocks = []
    for n, block in enumerate(system):
        if not isinstance(block, dict) or not isinstance(block.get("text"), str):
            raise ApiError(400, f"system.{n}: expected a text block with a string `text`", param="system")
        blocks.append(block["text"])
    return blocks


def _assistant(content: Any, where: str, faults: Faults | None = None) -> Message:
    if isinstance(content, str):
        return Message(role="assistant", parts=[Part(kind="text", text=content)] if content else [])
    if not isinstance(content, list):
        raise ApiError(400, f"{where}: expected a string or an array of content blocks")
    parts: list[Part] = []
    for n, block in enumerate(content):
        if not isinstance(block, dict):
            raise ApiError(400, f"{where}.{n}: expected a content block object")
        kind = block.get("type")
        if kind in ("thinking", "redacted_thinking") and faults is not None and faults.on("reject-history-thinking"):
            raise ApiError(400, f"{where}.{n}: Input tag '{kind}' found using 'type' does not match any of the "
                                "expected tags: 'text', 'image', 'tool_use', 'tool_result'")
        if kind == "text":
            parts.append(Part(kind="text", text=expect(block, "text", str, required=True, where=f"{where}.{n}.")))
        elif kind == "thinking":
            parts.append(Part(kind="reasoning", text=expect(block, "thinking", str, required=True,
                                                            where=f"{where}.{n}.")))
        elif kind == "tool_use":
            name = expect(block, "name", str, required=True, where=f"{where}.{n}.")
            call_input = block.get("input", {})
            if not isinstance(call_input, dict):
                raise ApiError(400, f"{where}.{n}.input: expected an object")
            parts.append(Part(kind="tool_call", call=ToolCall(
                index=len(parts), id=str(block.get("id", "")), name=name,
                arguments=json.dumps(call_input, ensure_ascii=False))))
        # redacted_thinking, server tool blocks and unknown types are accepted and not replayed.
    return Message(role="assistant", parts=parts)


def _user(content: Any, where: str, faults: Faults | None = None) -> list[Message]:
    if isinstance(content, str):
        return [Message(role="user", text=content)]
    if not isinstance(content, list):
        raise ApiError(400, f"{where}: expected a string or an array of content blocks")
    results, texts = [], []
    for n, block in enumerate(content):
        if not isinstance(block, dict):
            raise ApiError(400, f"{where}.{n}: expected a content block object")
        if block.get("type") == "tool_result":
            call_id = expect(block, "tool_use_id", str, required=True, where=f"{where}.{n}.")
            inner = block.get("content", "")
            if (faults is not None and faults.on("reject-tool-result-image") and isinstance(inner, list)
                    and any(isinstance(b, dict) and b.get("type") == "image" for b in inner)):
                raise ApiError(400, f"{where}.{n}.content: tool_result content must be text")
            # ToolResultBlockParam content: text, image (screenshots), document, search_result blocks
            text = inner if isinstance(inner, str) else _text_of(inner, f"{where}.{n}.content")
            results.append(ToolResult(call_id=call_id, content=text, is_error=bool(block.get("is_error"))))
        else:
            texts.append(_text_of([block], f"{where}.{n}"))
    out = [Message(role="tool", results=results)] if results else []
    if any(t for t in texts):
        out.append(Message(role="user", text="\n".join(t for t in texts if t)))
    return out


def messages_of(raw_messages: Any, faults: Faults) -> list[Message]:
    if not isinstance(raw_messages, list):
        raise ApiError(400, "messages: expected an array", param="messages")
    if not raw_messages:  # the Messages API requires at least one message
        raise ApiError(400, "messages: at least one message is required", param="messages")
    messages: list[Message] = []
    for n, raw in enumerate(raw_messages):
        where = f"messages.{n}"
        if not isinstance(raw, dict):
            raise ApiError(400, f"{where}: expected an object")
        role = raw.get("role")
        if "content" not in raw:
            raise ApiError(400, f"{where}.content: field required")
        if role == "user":
            messages.extend(_user(raw["content"], f"{where}.content", faults))
        elif role == "assistant":
            messages.append(_assistant(raw["content"], f"{where}.content", faults))
        elif role == "system":  # Claude Code sends mid-conversation system entries
            if faults.on("reject-system-role"):
                raise ApiError(400, f"{where}.role: Input should be 'user' or 'assistant'")
            messages.append(Message(role="system", text=_text_of(raw["content"], f"{where}.content")))
        else:
            raise ApiError(400, f"{where}.role: expected 'user' or 'assistant', got {role!r}")
    return messages


def tools_of(raw: Any, faults: Faults | None = None) -> list[ToolSpec]:
    """Client tools (a `name` and an `input_schema`; `type` absent or "custom"). Server tools
    (`web_search_20250305`, `web_fetch_20250910`, `bash_...`: a `type` and no schema) run on the API's
    side; this server runs none, so they are left out of the prompt, never refused and never offered as
    client tools the client would be asked to run."""
    tools = []
    for n, tool in enumerate(tool_array(raw)):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise ApiError(400, f"tools.{n}.name: field required", param="tools")
        schema = tool.get("input_schema", {"type": "object", "properties": {}})
        if "type" in tool and tool["type"] not in ("custom",) and "input_schema" not in tool:
            if faults is not None and faults.on("reject-server-tools"):
                raise ApiError(400, f"tools.{n}.input_schema: Field required", param="tools")
            if faults is not None and faults.on("server-tools-as-client-tools"):
                tools.append(ToolSpec(name=tool["name"], description=""))
            continue
        if not isinstance(schema, dict):
            raise ApiError(400, f"tools.{n}.input_schema: expected an object", param="tools")
        tools.append(ToolSpec(name=tool["name"], description=str(tool.get("description", "")),
                              parameters=schema, strict=tool.get("strict") is True))
    return tools


def tool_choice_of(raw: Any) -> ToolChoice:
    if raw is None:
        return ToolChoice()
    if not isinstance(raw, dict) or raw.get("type") not in ("auto", "any", "tool", "none"):
        raise ApiError(400, "tool_choice.type: expected auto, any, tool or none", param="tool_choice")
    if raw["type"] == "tool":
        return ToolChoice(mode="named", name=expect(raw, "name", str, required=True, where="tool_choice."))
    modes: dict[str, Literal["auto", "required", "none"]]
    modes = {"auto": "auto", "any": "required", "none": "none"}
    return ToolChoice(mode=modes[raw["type"]])


# With this beta the budget covers every thinking block of a turn and may exceed max_tokens
# (extended-thinking docs, "interleaved thinking").
INTERLEAVED_THINKING = "interleaved-thinking-2025-05-14"
MIN_THINKING_BUDGET = 1024  # SDK ThinkingConfigEnabledParam: "Must be >= 1024 and less than max_tokens"


def thinking_of(raw: Any, *, max_tokens: int | None, betas: str) -> bool | None:
    """The client's thinking switch (None: not said). `enabled` needs a budget of at least 1024
    tokens below max_tokens (SDK `thinking_config_enabled_param.py`); `adaptive` and `disabled`
    carry none (Claude Code sends `adaptive`)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or raw.get("type") not in ("enabled", "disabled", "adaptive"):
        raise ApiError(400, "thinking.type: expected enabled, disabled or adaptive", param="thinking")
    if raw["type"] == "enabled":
        budget = expect(raw, "budget_tokens", int, required=True, where="thinking.")
        if budget < MIN_THINKING_BUDGET:
            raise ApiError(400, f"thinking.budget_tokens: Input should be greater than or equal to "
                                f"{MIN_THINKING_BUDGET}", param="thinking.budget_tokens")
        if max_tokens is not None and budget >= max_tokens and INTERLEAVED_THINKING not in betas:
            raise ApiError(400, "`max_tokens` must be greater than `thinking.budget_tokens`",
                           param="max_tokens")
    return raw["type"] != "disabled"


def _sampling(body: dict[str, Any], thinking: Any) -> None:
    """temperature 0..1 (SDK `message_create_params.py`: "Ranges from 0.0 to 1.0"), top_p 0..1, top_k
    an integer >= 0; with thinking enabled, no temperature but 1, no top_k, top_p of 0.95..1 and no
    forced tool use (extended-thinking docs, "feature compatibility")."""
    temperature = number_in(body, "temperature", 0, 1)
    top_p = number_in(body, "top_p", 0, 1)
    top_k = int_in(body, "top_k", 0)
    if not (isinstance(thinking, dict) and thinking.get("type") == "enabled"):
        return
    if temperature is not None and temperature != 1:
        raise ApiError(400, "`temperature` may only be set to 1 when thinking is enabled",
                       param="temperature")
    if top_k is not None:
        raise ApiError(400, "`top_k` may not be set when thinking is enabled", param="top_k")
    if top_p is not None and top_p < 0.95:
        raise ApiError(400, "`top_p` must be between 0.95 and 1 when thinking is enabled", param="top_p")
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        raise ApiError(400, "Thinking may not be enabled when tool_choice forces tool use",
                       param="tool_choice")


def to_conversation(body: dict[str, Any], faults: Faults, *, count_only: bool = False,
                    betas: str = "") -> Conversation:
    """Validate a Messages (or count_tokens) body as the API does and normalise it. `betas` is the
    request's `anthropic-beta` header (interleaved thinking lifts the budget < max_tokens rule)."""
    if faults.on("reject-cache-control") and has_cache_control(body):
        raise ApiError(400, "cache_control: Extra inputs are not permitted")
    if faults.on("reject-cache-control-extensions"):
        _basic_cache_control_only(body)
    if faults.on("lenient-input"):
        body = accept_malformed(body, "anthropic")
    if faults.on("reject-unknown-fields"):
        known = {"model", "messages", "system", "max_tokens", "stream", "tools", "tool_choice", "thinking",
                 "temperature", "top_p", "top_k", "stop_sequences", "metadata", "cache_control"}
        extra = sorted(set(body) - known)
        if extra:
            raise ApiError(400, f"{extra[0]}: Extra inputs are not permitted")
    model = expect(body, "model", str, required=True)
    # max_tokens 0 pre-warms the prompt cache on the real API (SDK docstring); this server cannot
    # generate nothing yet (its engine limit treats 0 as unset), so it says so rather than answering.
    max_tokens = None if count_only else int_in(body, "max_tokens", 0, required=True)
    if max_tokens == 0:
        raise ApiError(400, "max_tokens: 0 (prompt-cache pre-warming) is not supported by this server; "
                            "send at least 1", param="max_tokens")
    if "messages" not in body:
        raise ApiError(400, "messages: field required", param="messages")
    tool_choice = tool_choice_of(body.get("tool_choice"))
    parallel = not (isinstance(body.get("tool_choice"), dict) and body["tool_choice"].get("disable_parallel_tool_use"))
    stops = expect(body, "stop_sequences", list) or []
    if not all(isinstance(s, str) for s in stops):
        raise ApiError(400, "stop_sequences: expected an array of strings", param="stop_sequences")
    expect(body, "stream", bool)
    thinking = thinking_of(body.get("thinking"), max_tokens=max_tokens, betas=betas)
    _sampling(body, body.get("thinking"))
    return Conversation(
        model=model, system=_system_blocks(body.get("system")), messages=messages_of(body["messages"], faults),
        tools=tools_of(body.get("tools"), faults), tool_choice=tool_choice, max_tokens=max_tokens,
        thinking=thinking, parallel_tool_calls=parallel, stop=stops)


def _basic_cache_control_only(body: dict[str, Any]) -> None:
    """Fault reject-cache-control-extensions: a request model whose cache_control is `{"type": "ephemeral"}`
    on content blocks only (no `ttl`, no `scope`, none at the top level, none on a thinking block)."""
    if "cache_control" in body:
        raise ApiError(400, "cache_control: Extra inputs are not permitted", param="cache_control")
    stack: list[tuple[str, Any]] = [("", body)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, dict):
            control = node.get("cache_control")
            if isinstance(control, dict) and node.get("type") in ("thinking", "redacted_thinking"):
                raise ApiError(400, f"{where}.thinking.cache_control: Extra inputs are not permitted")
            if isinstance(control, dict) and set(control) - {"type"}:
                extra = sorted(set(control) - {"type"})[0]
                raise ApiError(400, f"{where}.cache_control.ephemeral.{extra}: Extra inputs are not permitted")
            stack.extend((f"{where}.{k}".lstrip("."), v) for k, v in node.items() if k != "cache_control")
        elif isinstance(node, list):
            stack.extend((f"{where}.{i}", v) for i, v in enumerate(node))


def usage_json(usage: Usage, *, output_tokens: int) -> dict[str, int]:
    return {"input_tokens": usage.uncached_tokens, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": usage.cached_tokens, "output_tokens": output_tokens}


class AnthropicStream:
    """Internal events -> Anthropic SSE frames, one block open at a time."""

    def __init__(self, *, message_id: str, model: str, prompt_tokens: int, cached_tokens: int, faults: Faults,
                 stream: bool = True) -> None:
        self.message_id = message_id
        # fault stream-tool-input-empty: a streamed tool_use block gets no input_json_delta (input {})
        self.empty_input = stream and faults.on("stream-tool-input-empty")
        self.model = model
        self.faults = faults
        self.start_usage = Usage(prompt_tokens=prompt_tokens, cached_tokens=cached_tokens)
        self.index = -1
        self.open: str | None = None  # type of the open block
        self.thinking = ""
        self.blocks: list[dict[str, Any]] = []  # the final content, for the non-stream response
        self.skipped_stop = False
        # Decided once, not per token: the SSE event name of every content_block_delta.
        self.delta_event = "delta" if faults.on("an-event-name-mismatch") else "content_block_delta"

    def start(self) -> list[bytes]:
        usage = usage_json(self.start_usage, output_tokens=1)
        if self.faults.on("message-start-zero-input-tokens"):
            usage["input_tokens"] = 0
            usage["cache_read_input_tokens"] = 0
        elif self.faults.on("message-start-estimated-input-tokens"):
            usage["input_tokens"] = max(1, int(self.start_usage.prompt_tokens * 0.8))
            usage["cache_read_input_tokens"] = 0
        elif self.faults.on("usage-cache-only-in-final"):  # vLLM 0.32: the split only in message_delta
            usage = {"input_tokens": self.start_usage.prompt_tokens, "output_tokens": 1}
        message: dict[str, Any]
        message = {"id": self.message_id, "type": "message", "role": "assistant", "model": self.model,
                   "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
        return [sse("message_start", {"type": "message_start", "message": message}),
                sse("ping", {"type": "ping"})]

    def _open(self, block: dict[str, Any]) -> list[bytes]:
        out = self._close()
        self.index += 1
        if self.faults.on("an-block-index-skip") and self.index == 1:
            self.index += 1
        self.open = block["type"]
        self.blocks.append(json.loads(json.dumps(block)))
        if self.faults.on("an-delta-unstarted-block") and self.index == 0:
            out.append(self._delta({"type": "text_delta", "text": ""}))  # delta before its block's start
        if self.faults.on("an-tool-start-no-input") and block["type"] == "tool_use":
            block = {k: v for k, v in block.items() if k != "input"}  # llama-server 11434's tool_use start
        return out + [sse("content_block_start", {"type": "content_block_start", "index": self.index,
                                                  "content_block": block})]

    def _close(self) -> list[bytes]:
        if self.open is None:
            return []
        out = []
        signature = None
        if self.open == "thinking":
            signature = sign(self.thinking)
            self.blocks[-1]["signature"] = signature
            if not self.faults.on("an-signature-after-stop"):
                out.append(self._delta({"type": "signature_delta", "signature": signature}))
            self.thinking = ""
        if self.faults.on("an-missing-block-stop") and not self.skipped_stop:
            self.skipped_stop = True
        else:
            out.append(sse("content_block_stop", {"type": "content_block_stop", "index": self.index}))
        if signature is not None and self.faults.on("an-signature-after-stop"):
            out.append(self._delta({"type": "signature_delta", "signature": signature}))
        self.open = None
        return out

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return sse(self.delta_event, {"type": "content_block_delta", "index": self.index, "delta": delta})

    def _text_delta(self, kind: str, key: str, text: str) -> bytes:
        """`_delta({"type": kind, key: text})`, the same bytes, written directly (nearly every token's)."""
        return (f'event: {self.delta_event}\ndata: {{"type":"content_block_delta","index":{self.index},'
                f'"delta":{{"type":"{kind}","{key}":{json_str(text)}}}}}\n\n').encode()

    def feed(self, event: Event) -> list[bytes]:
        out: list[bytes] = []
        if isinstance(event, ReasoningDelta):
            if self.open != "thinking":
                out += self._open({"type": "thinking", "thinking": "", "signature": ""})
            self.thinking += event.text
            self.blocks[-1]["thinking"] += event.text
            out.append(self._text_delta("thinking_delta", "thinking", event.text))
        elif isinstance(event, TextDelta):
            if self.open != "text":
                out += self._open({"type": "text", "text": ""})
            self.blocks[-1]["text"] += event.text
            out.append(self._text_delta("text_delta", "text", event.text))
        elif isinstance(event, ToolCallStart):
            out += self._open({"type": "tool_use", "id": event.id, "name": event.name, "input": {}})
            self.blocks[-1]["_json"] = ""
            if self.faults.on("an-delta-type-mismatch"):
                out.append(self._delta({"type": "text_delta", "text": " "}))
        elif isinstance(event, ToolCallArgsDelta):
            self.blocks[-1]["_json"] += event.text
            if not self.empty_input:
                out.append(self._text_delta("input_json_delta", "partial_json", event.text))
        elif isinstance(event, ToolCallEnd):
            block = self.blocks[-1]
            try:
                block["input"] = json.loads(block.pop("_json") or "{}")
            except ValueError:
                block["input"] = {}
            out += self._close()
        elif isinstance(event, Finish):
            out += self._close()
            reason = STOP_REASONS[event.reason]
            if reason == "tool_use" and self.faults.on("an-end-turn-after-tool-use"):
                reason = "end_turn"
            self.stop_reason = reason
            self.final_usage = usage_json(event.usage, output_tokens=event.usage.completion_tokens)
            delta_event: dict[str, Any] = {"type": "message_delta",
                                           "delta": {"stop_reason": reason, "stop_sequence": None},
                                           "usage": self.final_usage}
            if self.faults.on("an-usage-missing"):
                del delta_event["usage"]
            out.append(sse("message_delta", delta_event))
            if not self.faults.on("an-missing-message-stop"):
                out.append(sse("message_stop", {"type": "message_stop"}))
        return out

    def fail(self, reason: str, message: str) -> list[bytes]:
        """The engine stopped the turn mid-stream: an `error` event ends it, with the error shape and
        type the status would have had (streaming docs, "Error events"); the SDK raises APIStatusError."""
        error = engine_stop_error(reason, message, "anthropic")
        return [sse("error", anthropic_error_body(error, error.status))]

    def message(self) -> dict[str, Any]:
        for block in self.blocks:
            block.pop("_json", None)
        return {"id": self.message_id, "type": "message", "role": "assistant", "model": self.model,
                "content": self.blocks, "stop_reason": self.stop_reason, "stop_sequence": None,
                "usage": self.final_usage}



def message_id() -> str:
    return f"msg_{time.time_ns():x}"


def routes(ctx: ApiContext) -> list[BaseRoute]:
    """POST /v1/messages and /v1/messages/count_tokens (404 unless --enable-anthropic-api)."""
    service, faults = ctx.service, ctx.faults

    def enabled() -> None:
        if not ctx.config.enable_anthropic_api:
            raise ApiError(404, "the Anthropic Messages API is not enabled (--enable-anthropic-api)")

    async def messages(request: Request) -> Response:
        enabled()
        body = await ctx.body(request)
        conv = parse(to_conversation, body, faults, betas=request.headers.get("anthropic-beta", ""))
        turn = await service.start_turn(conv, id_prefix="toolu_")
        adapter = AnthropicStream(message_id=message_id(), model=conv.model, prompt_tokens=turn.prompt_tokens,
                                  cached_tokens=turn.cached_tokens, faults=faults, stream=bool(body.get("stream")))
        if body.get("stream"):
            return ctx.stream(adapter, turn)
        adapter.start()
        for event in await answer_events(turn, conv, faults):
            adapter.feed(event)
        message = adapter.message()
        if faults.on("nonstream-calls-as-text"):  # a gateway's rendering: calls as text, stop_reason kept
            message["content"] = [{"type": "text", "text": f"Tool usage: {b['name']}({json.dumps(b.get('input'))})"}
                                  if b.get("type") == "tool_use" else b for b in message["content"]]
        if faults.on("nonstream-no-stop-sequence"):  # vLLM 0.32 serialises with exclude_none
            message = {k: v for k, v in message.items() if v is not None}
        return JSONResponse(message)

    async def count_tokens(request: Request) -> Response:
        enabled()
        if faults.on("no-count-tokens-route"):
            raise ApiError(404, "Not Found")
        raw = await ctx.body(request)
        conv = parse(to_conversation, raw, faults, count_only=True,
                     betas=request.headers.get("anthropic-beta", ""))
        if faults.on("count-tokens-partial"):  # the newest message alone: no system, tools or earlier turns
            conv = replace(conv, system=[], tools=[], messages=conv.messages[-1:])
        # The prompt as a turn would render it: system, tools and the whole history (MessageTokensCount:
        # "The total number of tokens across the provided list of messages, system prompt, and tools").
        count = await service.count_tokens(conv)  # on the pool's workers: seconds for a large prompt
        if faults.on("count-tokens-mismatch"):
            count = count + 7
        if faults.on("count-tokens-estimate"):  # a gateway's local estimate: a quarter of the body's length
            count = max(1, len(json.dumps(raw)) // 4)
        return JSONResponse({"input_tokens": count})

    return [Route("/v1/messages", ctx.handler("anthropic", messages), methods=["POST"]),
            Route("/v1/messages/count_tokens", ctx.handler("anthropic", count_tokens), methods=["POST"])]
