"""OpenAI Chat Completions: POST /v1/chat/completions (stream and not).

Tool-call deltas carry id, type and name only in the first delta of an index; later ones carry
only argument fragments (the SDK concatenates every string field). With streaming tool dispatch
on, each complete call is also announced by an `event: tool_call_dispatch` side frame (Dynamo).
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from harnesscheck.reference_server.conversation import Conversation, Message, ToolChoice, ToolResult, ToolSpec
from harnesscheck.reference_server.events import (Event, Finish, Part, ReasoningDelta, TextDelta, ToolCall, ToolCallArgsDelta,
                                     ToolCallEnd, ToolCallStart)
from harnesscheck.reference_server.faults import Faults
from harnesscheck.reference_server.frontends.common import (
    ApiError, SSETemplate, accept_malformed, add_tool_result, answer_events, engine_stop_error, expect, function_parameters,
    int_in, number_in, openai_error_body, positive_int, sse, strict_schema_problem, text_or_parts, tool_array,
)
from harnesscheck.reference_server.frontends.http import ApiContext, parse


def _content_text(content: Any, where: str) -> str:
    parts = text_or_parts(content, where)
    if isinstance(parts, str):
        return parts
    texts = []
    for n, part in enumerate(parts):
        if not isinstance(part, dict):
            raise ApiError(400, f"{where}[{n}]: expected a content part object", param=where)
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") in ("image_url", "input_image", "image"):
            texts.append("[image]")
    return "\n".join(texts)


def _assistant(raw: dict[str, Any], where: str, faults: Faults | None = None) -> Message:
    """An incoming assistant message. Its reasoning is read under either name clients send it by:
    `reasoning_content` (DeepSeek, older vLLM) or `reasoning` (newer vLLM); the fault
    chat-history-reasoning-one-name reads the first only."""
    parts: list[Part] = []
    reasoning = raw.get("reasoning_content")
    if not reasoning and not (faults is not None and faults.on("chat-history-reasoning-one-name")):
        reasoning = raw.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append(Part(kind="reasoning", text=reasoning))
    text = _content_text(raw.get("content"), f"{where}.content")
    if text:
        parts.append(Part(kind="text", text=text))
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ApiError(400, f"{where}.tool_calls: expected an array", param=f"{where}.tool_calls")
    for n, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ApiError(400, f"{where}.tool_calls[{n}].function.name: field required", param=f"{where}.tool_calls")
        arguments = fn.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        parts.append(Part(kind="tool_call", call=ToolCall(index=n, id=str(call.get("id", "")), name=fn["name"],
                                                          arguments=arguments)))
    return Message(role="assistant", parts=parts)


def messages_of(raw_messages: Any, faults: Faults | None = None) -> tuple[list[str], list[Message]]:
    if not isinstance(raw_messages, list) or not raw_messages:
        raise ApiError(400, "messages: expected a non-empty array", param="messages")
    system: list[str] = []
    messages: list[Message] = []
    for n, raw in enumerate(raw_messages):
        where = f"messages[{n}]"
        if not isinstance(raw, dict):
            raise ApiError(400, f"{where}: expected an object", param=where)
        role = raw.get("role")
        if role in ("system", "developer", "user", "tool") and raw.get("content") is None:
            # Only an assistant message may leave content out (ChatCompletionRequestMessage).
            raise ApiError(400, f"Missing required parameter: '{where}.content'.", param=f"{where}.content",
                           code="missing_required_parameter")
        if role in ("system", "developer"):
            text = _content_text(raw.get("content"), f"{where}.content")
            if not messages:
                system.append(text)
            else:
                messages.append(Message(role="system", text=text))
        elif role == "user":
            messages.append(Message(role="user", text=_content_text(raw.get("content"), f"{where}.content")))
        elif role == "assistant":
            messages.append(_assistant(raw, where, faults))
        elif role == "tool":
            call_id = expect(raw, "tool_call_id", str, required=True, where=f"{where}.")
            content = _content_text(raw.get("content"), f"{where}.content")
            add_tool_result(messages, ToolResult(call_id=call_id, content=content))
        else:
            raise ApiError(400, f"{where}.role: expected system, developer, user, assistant or tool, got {role!r}",
                           param=f"{where}.role")
    return system, messages


def tools_of(raw: Any) -> list[ToolSpec]:
    tools = []
    for n, tool in enumerate(tool_array(raw)):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ApiError(400, f"tools[{n}].function.name: field required", param="tools")
        params = function_parameters(fn.get("parameters"), f"tools[{n}].function.parameters")
        strict = fn.get("strict") is True
        if strict:
            refuse_strict_schema(fn["name"], params, f"tools[{n}].function.parameters")
        tools.append(ToolSpec(name=fn["name"], description=str(fn.get("description") or ""),
                              parameters=params, strict=strict))
    return tools


def refuse_strict_schema(name: str, params: dict[str, Any], param: str) -> None:
    """A 400 for a strict function whose schema strict mode cannot take (function calling guide: "the
    request will be rejected with details about the missing constraints")."""
    problem = strict_schema_problem(params)
    if problem:
        raise ApiError(400, f"Invalid schema for function '{name}': {problem}", param=param,
                       code="invalid_function_parameters")


def tool_choice_of(raw: Any, *, hosted: bool = False) -> ToolChoice:
    """A request's tool_choice: a mode, a named function or custom tool, or an allowed-tools set (its
    mode; Chat nests it under `allowed_tools`). ``hosted`` (Responses): a built-in tool's choice (web
    search, mcp, shell, ...) is accepted and forces nothing, as this server serves no built-in tools."""
    if raw is None or raw == "auto":
        return ToolChoice()
    if raw in ("none", "required"):
        return ToolChoice(mode=raw)
    if isinstance(raw, dict):
        for key in ("function", "custom"):  # Chat's named function or custom tool
            if isinstance(raw.get(key), dict) and isinstance(raw[key].get("name"), str):
                return ToolChoice(mode="named", name=raw[key]["name"])
        if isinstance(raw.get("name"), str):  # Responses-style named choice
            return ToolChoice(mode="named", name=raw["name"])
        if raw.get("type") == "allowed_tools":
            inner = raw.get("allowed_tools")
            allowed: dict[str, Any] = inner if isinstance(inner, dict) else raw
            if allowed.get("mode") in ("auto", "required"):
                return ToolChoice(mode=allowed["mode"])
        elif hosted and isinstance(raw.get("type"), str):
            return ToolChoice()
    raise ApiError(400, "tool_choice: expected auto, none, required, a named tool or allowed_tools",
                   param="tool_choice")


def thinking_of(body: dict[str, Any]) -> bool | None:
    kwargs = body.get("chat_template_kwargs")
    if isinstance(kwargs, dict):
        for key in ("enable_thinking", "thinking"):
            if isinstance(kwargs.get(key), bool):
                return kwargs[key]
    if body.get("reasoning_effort") == "none":
        return False
    return None


def _sampling(body: dict[str, Any]) -> None:
    """The ranges of CreateChatCompletionRequest (openai-openapi): temperature 0..2, top_p 0..1,
    presence and frequency penalty -2..2, top_logprobs 0..20 (with logprobs), n 1..128. n > 1 asks
    for n choices; this server answers one choice per request, so it refuses n > 1 as a server
    without that feature does, rather than answer fewer choices than asked for."""
    number_in(body, "temperature", 0, 2)
    number_in(body, "top_p", 0, 1)
    for key in ("presence_penalty", "frequency_penalty"):
        number_in(body, key, -2, 2)
    logprobs = expect(body, "logprobs", bool)
    if int_in(body, "top_logprobs", 0, 20) is not None and not logprobs:
        raise ApiError(400, "top_logprobs: `logprobs` must be set to true if this parameter is used",
                       param="top_logprobs", code="invalid_value")
    if (int_in(body, "n", 1, 128) or 1) > 1:
        raise ApiError(400, "Unsupported value: 'n' above 1 is not supported by this server (it generates "
                            "one choice per request); send n: 1 or leave it out.", param="n",
                       code="unsupported_value")


KNOWN_FIELDS = {"model", "messages", "stream", "stream_options", "tools", "tool_choice", "parallel_tool_calls",
                "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "n", "seed", "user",
                "response_format", "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty",
                "reasoning_effort"}


def to_conversation(body: dict[str, Any], faults: Faults) -> Conversation:
    if faults.on("lenient-input"):
        body = accept_malformed(body, "chat")
    if faults.on("reject-unknown-fields") and set(body) - KNOWN_FIELDS:
        raise ApiError(400, f"Unrecognized request argument supplied: {sorted(set(body) - KNOWN_FIELDS)[0]}")
    model = expect(body, "model", str, required=True)
    system, messages = messages_of(body.get("messages"), faults)
    max_tokens = positive_int(body, "max_completion_tokens") or positive_int(body, "max_tokens")
    stream = expect(body, "stream", bool)
    _sampling(body)
    options = expect(body, "stream_options", dict)
    if options is not None:
        if not stream:  # "Only set this when you set `stream: true`" (ChatCompletionStreamOptions)
            raise ApiError(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                           param="stream_options")  # OpenAI's own words, code null (BerriAI/litellm#5803)
        expect(options, "include_usage", bool, where="stream_options.")
    stop = expect(body, "stop", (str, list))
    if isinstance(stop, list) and not (1 <= len(stop) <= 4 and all(isinstance(s, str) for s in stop)):
        raise ApiError(400, "stop: expected a string or an array of 1 to 4 strings", param="stop")
    parallel = expect(body, "parallel_tool_calls", bool)
    return Conversation(model=model, system=system, messages=messages, tools=tools_of(body.get("tools")),
                        tool_choice=tool_choice_of(body.get("tool_choice")), max_tokens=max_tokens,
                        thinking=thinking_of(body), parallel_tool_calls=parallel is not False,
                        stop=[stop] if isinstance(stop, str) else [s for s in (stop or []) if isinstance(s, str)])


def usage_json(usage: Any) -> dict[str, Any]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens}}


class ChatStream:
    """Internal events -> chat.completion.chunk frames (plus tool_call_dispatch side frames)."""

    def __init__(self, *, completion_id: str, model: str, include_usage: bool, dispatch: bool, faults: Faults,
                 stream: bool = True, thinking_off: bool = False) -> None:
        self.id = completion_id
        # Faults that bend a streamed answer only (the non-streamed one stays right): stream-tool-input-empty
        # (a call's arguments never sent, "{}" at its end), chat-stream-call-dropped (no call, finish stop).
        self.empty_arguments = stream and faults.on("stream-tool-input-empty")
        self.drop_calls = stream and faults.on("chat-stream-call-dropped")
        # fault thinking-off-output-as-reasoning: with thinking off the whole output is reasoning
        self.all_reasoning = thinking_off and faults.on("thinking-off-output-as-reasoning")
        self._call_name = ""  # the call whose markup all_reasoning writes as reasoning
        self.model = model
        self.created = int(time.time())
        self.include_usage = include_usage
        self.dispatch = dispatch and not faults.on("dispatch-missing")
        self.faults = faults
        self.calls: dict[int, dict[str, Any]] = {}
        self._late: list[bytes] = []  # fault dispatch-late: dispatch frames sent after the finish chunk
        self.reasoning = ""
        self.content = ""
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        # The per-token frames, pre-encoded around their one varying string (same bytes as _chunk's).
        self._templates: dict[Any, SSETemplate] = {}

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse(None, self._payload(delta, finish))

    def _payload(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    def _delta(self, key: str | int, text: str) -> bytes:
        """`_chunk({key: text})` (a str key) or the arguments delta of tool call `key` (an int)."""
        template = self._templates.get(key)
        if template is None:
            def build(slot: str) -> dict[str, Any]:
                if isinstance(key, str):
                    return self._payload({key: slot})
                return self._payload({"tool_calls": [{"index": key, "function": {"arguments": slot}}]})
            template = self._templates[key] = SSETemplate(None, build)
        return template.frame(text)

    def start(self) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def feed(self, event: Event) -> list[bytes]:
        if self.all_reasoning or self.drop_calls:
            bent = self._bent(event)
            if bent is None:
                return []
            event = bent
        if isinstance(event, ReasoningDelta):
            self.reasoning += event.text
            return [self._delta("reasoning_content", event.text)]
        if isinstance(event, TextDelta):
            self.content += event.text
            return [self._delta("content", event.text)]
        if isinstance(event, ToolCallStart):
            self.calls[event.index] = {"id": event.id, "type": "function",
                                       "function": {"name": event.name, "arguments": ""}}
            return [self._chunk({"tool_calls": [{"index": event.index, "id": event.id, "type": "function",
                                                 "function": {"name": event.name, "arguments": ""}}]})]
        if isinstance(event, ToolCallArgsDelta):
            call = self.calls[event.index]
            call["function"]["arguments"] += event.text
            if self.empty_arguments:
                return []
            if self.faults.on("chat-repeat-tool-id-name"):
                delta = {"index": event.index, "id": call["id"], "type": "function",
                         "function": {"name": call["function"]["name"], "arguments": event.text}}
                return [self._chunk({"tool_calls": [delta]})]
            return [self._delta(event.index, event.text)]
        if isinstance(event, ToolCallEnd):
            empty = [self._chunk({"tool_calls": [{"index": event.index, "function": {"arguments": "{}"}}]})] \
                if self.empty_arguments else []
            if not self.dispatch:
                return empty
            call = self.calls[event.index]
            frame = sse("tool_call_dispatch", {"choice_index": 0, "tool_call": {
                "index": event.index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}}})
            if self.faults.on("dispatch-late"):  # held back until after the finish_reason chunk
                self._late.append(frame)
                return empty
            return empty + ([frame, frame] if self.faults.on("dispatch-twice") else [frame])
        if isinstance(event, Finish):
            reason = event.reason
            if reason == "tool_calls" and self.faults.on("chat-finish-stop-after-tool-calls"):
                reason = "stop"
            self.finish_reason = reason
            self.usage = usage_json(event.usage)
            if self.faults.on("usage-cached-outside-prompt"):
                self.usage["prompt_tokens"] -= event.usage.cached_tokens
            out = [self._chunk({}, finish=reason), *self._late]
            if self.include_usage and not self.faults.on("chat-no-usage-chunk"):
                out.append(sse(None, {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                                      "model": self.model, "choices": [], "usage": self.usage}))
            if not self.faults.on("chat-no-done"):
                out.append(b"data: [DONE]\n\n")
            return out
        return []

    def _bent(self, event: Event) -> Event | None:
        """An event as the faults above turn it (None: not sent). thinking-off-output-as-reasoning: text and
        each call's markup as reasoning (what a parser that starts in reasoning makes of an answer with no
        </think>); chat-stream-call-dropped: calls not sent, an empty content delta in their place."""
        if isinstance(event, (ToolCallStart, ToolCallArgsDelta, ToolCallEnd)):
            if self.drop_calls:
                return TextDelta(text="") if isinstance(event, ToolCallStart) else None
            if isinstance(event, ToolCallStart):
                self._call_name = event.name
                return None
            if isinstance(event, ToolCallEnd):
                call = f'{{"name": {json.dumps(self._call_name)}, "arguments": {event.arguments or "{}"}}}'
                return ReasoningDelta(text=f"<tool_call>\n{call}\n</tool_call>")
            return None
        if isinstance(event, TextDelta) and self.all_reasoning:
            return ReasoningDelta(text=event.text)
        if isinstance(event, Finish) and event.reason == "tool_calls":
            return Finish(reason="stop", usage=event.usage)
        return event

    def fail(self, reason: str, message: str) -> list[bytes]:
        """The engine stopped the turn mid-stream: a chunk holding only OpenAI's error object, then
        [DONE], as vLLM ends a failed stream (serving_chat.py); openai-python raises APIError on a
        chunk with an `error` key. The Chat reference defines no in-stream error (docs/API_FACTS.md)."""
        error = engine_stop_error(reason, message, "openai")
        return [sse(None, openai_error_body(error, error.status)), b"data: [DONE]\n\n"]

    def completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": self.finish_reason}],
                "usage": self.usage}


def routes(ctx: ApiContext) -> list[BaseRoute]:
    """POST /v1/chat/completions."""
    service, faults = ctx.service, ctx.faults
    serial = itertools.count()  # with the clock, a chat completion id unique per request

    async def chat_completions(request: Request) -> Response:
        body = await ctx.body(request)
        conv = parse(to_conversation, body, faults)
        turn = await service.start_turn(conv, id_prefix="call_")
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        adapter = ChatStream(completion_id=f"chatcmpl-{time.time_ns():x}{next(serial):04x}", model=conv.model,
                             include_usage=include_usage, dispatch=ctx.config.enable_streaming_tool_dispatch,
                             faults=faults, stream=bool(body.get("stream")), thinking_off=conv.thinking is False)
        if body.get("stream"):
            return ctx.stream(adapter, turn)
        for event in await answer_events(turn, conv, faults):
            adapter.feed(event)
        completion = adapter.completion()
        message = completion["choices"][0]["message"]
        if faults.on("nonstream-calls-as-text") and message.get("tool_calls"):  # calls as text, finish kept
            said = "".join(f"Tool usage: {c['function']['name']}({c['function']['arguments']})"
                           for c in message.pop("tool_calls"))
            message["content"] = (message.get("content") or "") + said
        if faults.on("nonstream-no-object"):
            del completion["object"]
        return JSONResponse(completion)

    return [Route("/v1/chat/completions", ctx.handler("openai", chat_completions), methods=["POST"])]
