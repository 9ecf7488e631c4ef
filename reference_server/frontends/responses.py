"""OpenAI Responses: POST /v1/responses (stream and not), as Codex uses it.

Input items become the internal conversation (consecutive reasoning / assistant message /
function_call items form one assistant turn, in order); `previous_response_id` prepends the stored
input and output of that response; reasoning items come back with `encrypted_content` when asked,
and such items sent back restore the reasoning into the next prompt. Every event carries a
`sequence_number` that increases by one.

Why one module (720 lines): one frontend per API (as frontends/anthropic.py and chat.py), and the
Responses API is the widest of the three: its stored responses (`previous_response_id`), its input
items' mapping to the conversation and its event stream belong to one route and change together
when the API does; in the product only app.py (its routes and store) imports it, and the server's other parts never
see a Responses item.
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from harnesscheck.reference_server.conversation import Conversation, Message, ToolResult, ToolSpec
from harnesscheck.reference_server.events import (Event, Finish, Part, ReasoningDelta, TextDelta, ToolCall, ToolCallArgsDelta,
                                     ToolCallEnd, ToolCallStart)
from harnesscheck.reference_server.faults import Faults
from harnesscheck.reference_server.frontends.chat import refuse_strict_schema, tool_choice_of
from harnesscheck.reference_server.frontends.common import (
    ApiError, accept_malformed, add_tool_result, answer_events, engine_stop_error, error_response, expect, function_parameters,
    int_in, json_str, number_in, sse, text_or_parts, tool_array,
)
from harnesscheck.reference_server.frontends.http import ApiContext, parse
from harnesscheck.reference_server.signing import pack_reasoning, unpack_reasoning

ECHOED = ("instructions", "tools", "tool_choice", "parallel_tool_calls", "reasoning", "store", "text", "truncation",
          "metadata", "max_output_tokens", "temperature", "top_p", "previous_response_id", "prompt_cache_key",
          "include", "user", "service_tier")


MIN_OUTPUT_TOKENS = 16  # CreateResponse.max_output_tokens: "minimum": 16 (openai-openapi)
# The `type` values of InputItem (openai-openapi, Aug 2026); an item of any other type is refused.
INPUT_ITEM_TYPES = frozenset({
    "additional_tools", "apply_patch_call", "apply_patch_call_output", "code_interpreter_call", "compaction",
    "compaction_trigger", "computer_call", "computer_call_output", "custom_tool_call",
    "custom_tool_call_output", "file_search_call", "function_call", "function_call_output",
    "image_generation_call", "item_reference", "local_shell_call", "local_shell_call_output",
    "mcp_approval_request", "mcp_approval_response", "mcp_call", "mcp_list_tools", "message", "program",
    "program_output", "reasoning", "shell_call", "shell_call_output", "tool_search_call",
    "tool_search_output", "web_search_call"})


class ResponseStore:
    """Stored responses for previous_response_id, bounded by count and by bytes (LRU; text counted
    in encoded bytes, ``approx_bytes``).

    Each response is stored once: the messages it added to the conversation (its new input and its
    output) and the id of the response it continued; `get` walks the chain back to its start. A
    chain of N turns so costs O(N) memory (whole copies per response cost O(N²)). Messages are
    shared, not copied: nothing may change them after `put` (the pipeline only reads them).

    When over a bound, the least recently used response goes, and with it every stored response
    that continues it (they can no longer be rebuilt). `get` touches the whole chain, start first,
    so an active conversation stays and idle ones leave whole. A chain larger than the byte bound
    cannot be kept: its start is evicted and a later `get` finds nothing (a 400, as for any id).
    """

    def __init__(self, capacity: int, max_bytes: int) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: OrderedDict[str, _Stored] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, response_id: str, history: list[Message], parent: str | None = None) -> None:
        """Store the conversation after `response_id`. With `parent` (the previous_response_id it
        continued) only what `history` adds to the parent's conversation is kept: the messages
        after the parent's own, the very objects `get(parent)` gave (else the whole history)."""
        if response_id in self._items:
            self._drop(response_id)
        base = self._chain(parent) if parent is not None else None
        if base is not None and len(base) <= len(history) and all(a is b for a, b in zip(base, history)):
            own = tuple(history[len(base):])
        else:
            parent, own = None, tuple(history)
        entry = _Stored(parent=parent, messages=own, size=_ENTRY_BYTES + approx_bytes(own))
        self._items[response_id] = entry
        self.bytes += entry.size
        if parent is not None:
            self._items[parent].children.add(response_id)
        while self._items and (len(self._items) > self.capacity or self.bytes > self.max_bytes):
            self._drop(next(iter(self._items)))

    def get(self, response_id: str) -> list[Message] | None:
        """The whole conversation after `response_id` (None when it is not stored); touches its chain."""
        ids = self._ids(response_id)
        if ids is None:
            return None
        out: list[Message] = []
        for rid in reversed(ids):
            self._items.move_to_end(rid)
            out.extend(self._items[rid].messages)
        return out

    def stats(self) -> dict[str, int]:
        return {"responses": len(self._items), "bytes": self.bytes, "max_bytes": self.max_bytes,
                "max_responses": self.capacity}

    def _ids(self, response_id: str) -> list[str] | None:
        """The chain's ids, newest first."""
        ids: list[str] = []
        rid: str | None = response_id
        while rid is not None:
            entry = self._items.get(rid)
            if entry is None:
                return None
            ids.append(rid)
            rid = entry.parent
        return ids

    def _chain(self, response_id: str) -> list[Message] | None:
        ids = self._ids(response_id)
        return None if ids is None else [m for rid in reversed(ids) for m in self._items[rid].messages]

    def _drop(self, response_id: str) -> None:
        """Remove a response and every stored response that continues it."""
        entry = self._items.get(response_id)
        if entry is not None and entry.parent is not None and entry.parent in self._items:
            self._items[entry.parent].children.discard(response_id)
        stack = [response_id]
        while stack:
            gone = self._items.pop(stack.pop(), None)
            if gone is not None:
                self.bytes -= gone.size
                stack.extend(gone.children)


@dataclass(slots=True)
class _Stored:
    parent: str | None
    messages: tuple[Message, ...]
    size: int
    children: set[str] = field(default_factory=set)


_OBJECT_BYTES = 64  # about what one small Python object (a slotted dataclass, a list) costs
_ENTRY_BYTES = 4 * _OBJECT_BYTES  # the store's own entry: the record, its dict slot, the id, the children set


def text_bytes(text: str) -> int:
    """A text's size in UTF-8 bytes (lone surrogates as 3), at least what CPython holds for it
    (1, 2 or 4 bytes per character): a character outside ASCII is not one byte."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def approx_bytes(messages: tuple[Message, ...] | list[Message]) -> int:
    """About what the messages take in memory: their text in encoded bytes (``text_bytes``) and a
    fixed cost per object."""
    n = 0
    for m in messages:
        n += 3 * _OBJECT_BYTES + text_bytes(m.text)
        for p in m.parts:
            n += _OBJECT_BYTES + text_bytes(p.text)
            if p.call is not None:
                n += _OBJECT_BYTES + sum(map(text_bytes, (p.call.id, p.call.name, p.call.arguments)))
        for r in m.results:
            n += _OBJECT_BYTES + text_bytes(r.call_id) + text_bytes(r.content)
    return n


def _text(content: Any, where: str) -> str:
    parts = text_or_parts(content, where)
    if isinstance(parts, str):
        return parts
    out = []
    for part in parts:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append(part["text"])
        elif isinstance(part, dict) and part.get("type") in ("input_image", "input_file"):
            out.append("[attachment]")
    return "\n".join(out)


def _reasoning_text(item: dict[str, Any]) -> str:
    token = item.get("encrypted_content")
    if isinstance(token, str):
        unpacked = unpack_reasoning(token)
        if unpacked is not None:
            return unpacked
    for key in ("content", "summary"):
        parts = item.get(key)
        if isinstance(parts, list):
            text = "".join(p.get("text", "") for p in parts if isinstance(p, dict))
            if text:
                return text
    return ""


# The input items of an older request model (fault rs-narrow-request-schema): nothing else, and each with its id.
NARROW_ITEM_TYPES = frozenset({"message", "function_call", "function_call_output", "reasoning"})


def items_to_messages(items: Any, faults: Faults | None = None) -> tuple[list[str], list[Message]]:
    """Input items -> (leading system/developer texts, messages). A custom tool's call comes back as a call
    with arguments ``{"input": its text}``, the form the model wrote it in (``ResponsesStream``)."""
    if isinstance(items, str):
        return [], [Message(role="user", text=items)]
    if not isinstance(items, list):
        raise ApiError(400, "input: expected a string or an array of items", param="input")
    system: list[str] = []
    messages: list[Message] = []

    def assistant() -> Message:
        if not messages or messages[-1].role != "assistant":
            messages.append(Message(role="assistant"))
        return messages[-1]

    for n, item in enumerate(items):
        where = f"input[{n}]"
        if not isinstance(item, dict):
            raise ApiError(400, f"{where}: expected an object", param=where)
        kind = item.get("type", "message" if "role" in item else None)
        if faults is not None and faults.on("rs-narrow-request-schema"):
            _narrow_item(item, kind, where)
        if kind == "message":
            role = item.get("role")
            text = _text(item.get("content"), f"{where}.content")
            if role in ("system", "developer"):
                (system.append(text) if not messages else messages.append(Message(role="system", text=text)))
            elif role == "user":
                messages.append(Message(role="user", text=text))
            elif role == "assistant":
                if text:
                    assistant().parts.append(Part(kind="text", text=text))
            else:
                raise ApiError(400, f"{where}.role: expected user, assistant, system or developer", param=where)
        elif kind == "reasoning":
            text = _reasoning_text(item)
            if text:
                assistant().parts.append(Part(kind="reasoning", text=text))
        elif kind in ("function_call", "custom_tool_call"):
            name = expect(item, "name", str, required=True, where=f"{where}.")
            call_id = expect(item, "call_id", str, required=True, where=f"{where}.")
            if kind == "custom_tool_call":  # ResponseCustomToolCallParam: input (text) required
                arguments = json.dumps({"input": expect(item, "input", str, required=True, where=f"{where}.")},
                                       ensure_ascii=False)
            else:
                arguments = item.get("arguments", "{}")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            turn = assistant()
            turn.parts.append(Part(kind="tool_call", call=ToolCall(index=len(turn.tool_calls), id=call_id, name=name,
                                                                   arguments=arguments)))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = expect(item, "call_id", str, required=True, where=f"{where}.")
            output = item.get("output", "")
            content = output if isinstance(output, str) else _text(output, where)
            add_tool_result(messages, ToolResult(call_id=call_id, content=content))
        elif kind is None:
            raise ApiError(400, f"{where}.type: field required", param=where)
        elif kind not in INPUT_ITEM_TYPES:
            raise ApiError(400, f"Invalid value: '{kind}'. {where}.type must be one of the input item types "
                                f"of the Responses API.", param=f"{where}.type", code="invalid_value")
        # Other item types (tool_search_call / _output, local_shell_call, web_search_call, item_reference...)
        # are accepted and skipped: this server runs none of those tools.
    return system, messages


def _narrow_item(item: dict[str, Any], kind: Any, where: str) -> None:
    """Fault rs-narrow-request-schema: an older request model's refusals (the item types it lacks, an item
    of the model's without its id)."""
    if kind not in NARROW_ITEM_TYPES:
        raise ApiError(400, f"{where}.type: Input tag '{kind}' found using 'type' does not match any of the "
                            f"expected tags: {', '.join(sorted(NARROW_ITEM_TYPES))}", param=f"{where}.type")
    if (kind in ("function_call", "reasoning") or item.get("role") == "assistant") and "id" not in item:
        raise ApiError(400, f"{where}.id: Field required", param=f"{where}.id")


# A custom tool is offered to the model as a function of one string, `input`; its call's text is that string.
CUSTOM_PARAMETERS = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}
GRAMMAR_CHARS = 8000  # the most of a grammar's definition put into the tool's description


def tools_of(raw: Any, faults: Faults | None = None) -> list[ToolSpec]:
    """The tools the model is offered: function tools, custom tools (free-form text, a Lark or regex grammar:
    Codex's apply_patch) and the function / custom tools inside namespace tools (MCP servers). Every other
    kind of ToolParam (web_search, local_shell, tool_search, image_generation, mcp, ...) names a tool this
    server cannot run: accepted and left out, never refused."""
    tools: list[ToolSpec] = []
    for n, tool in enumerate(tool_array(raw)):
        where = f"tools[{n}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise ApiError(400, f"{where}: expected an object with a string `type`", param="tools")
        kind = tool["type"]
        if faults is not None and faults.on("rs-function-tools-only") and kind != "function":
            raise ApiError(400, f"Invalid value: '{kind}'. Only function tools are supported.",
                           param=f"{where}.type", code="invalid_value")
        if kind == "namespace":
            name = expect(tool, "name", str, required=True, where=f"{where}.")
            for m, inner in enumerate(expect(tool, "tools", list, required=True, where=f"{where}.")):
                if not isinstance(inner, dict) or inner.get("type") not in ("function", "custom"):
                    raise ApiError(400, f"{where}.tools[{m}]: expected a function or custom tool",
                                   param=f"{where}.tools")
                spec = _tool_spec(inner, f"{where}.tools[{m}]", faults, namespace=name)
                tools += [spec] if spec is not None else []
        elif kind in ("function", "custom"):
            spec = _tool_spec(tool, where, faults)
            tools += [spec] if spec is not None else []
    return tools


def _tool_spec(tool: dict[str, Any], where: str, faults: Faults | None, *,
               namespace: str | None = None) -> ToolSpec | None:
    """One function or custom tool (None: a custom tool the fault rs-custom-tool-dropped leaves out)."""
    name = expect(tool, "name", str, required=True, where=f"{where}.")
    description = str(tool.get("description") or "")
    if tool["type"] == "function":
        params = function_parameters(tool.get("parameters"), f"{where}.parameters")
        if tool.get("strict") is True:
            refuse_strict_schema(name, params, f"{where}.parameters")
        # unmarked: strict, the API normalizing the schema into strict mode (function calling guide)
        return ToolSpec(name=name, description=description, parameters=params,
                        strict=tool.get("strict") is not False, namespace=namespace)
    fmt = expect(tool, "format", dict, where=f"{where}.") or {}
    definition = fmt.get("definition")
    if fmt.get("type") == "grammar" and isinstance(definition, str) and definition:
        # CustomToolInputFormat: {"type": "text"} or a grammar (syntax lark | regex, definition); one this
        # server cannot read is taken as free text, not refused (it constrains nothing here anyway)
        description += (f"\n\nThe input is free-form text in this {fmt.get('syntax') or 'grammar'} grammar:\n"
                        f"{definition[:GRAMMAR_CHARS]}")
    if faults is not None and faults.on("rs-custom-tool-dropped"):
        return None
    return ToolSpec(name=name, description=description, parameters=CUSTOM_PARAMETERS, kind="custom",
                    namespace=namespace)


def thinking_of(body: dict[str, Any]) -> bool | None:
    reasoning = body.get("reasoning")
    if reasoning is None:
        return None
    if not isinstance(reasoning, dict):
        raise ApiError(400, "reasoning: expected an object", param="reasoning")
    return reasoning.get("effort") not in ("none",)


KNOWN_FIELDS = {"model", "input", "instructions", "stream", "tools", "tool_choice", "parallel_tool_calls",
                "reasoning", "store", "include", "previous_response_id", "text", "max_output_tokens", "temperature",
                "top_p", "metadata", "truncation", "user", "service_tier"}


def to_conversation(body: dict[str, Any], store: ResponseStore, faults: Faults) -> Conversation:
    if faults.on("lenient-input"):
        body = accept_malformed(body, "responses")
    if faults.on("reject-unknown-fields") and set(body) - KNOWN_FIELDS:
        raise ApiError(400, f"Unknown parameter: '{sorted(set(body) - KNOWN_FIELDS)[0]}'.")
    model = expect(body, "model", str, required=True)
    # `input` is optional (CreateResponse): a request may run from `instructions`, `prompt` or
    # `previous_response_id` alone.
    if faults.on("rs-require-input") and body.get("input") is None:
        raise ApiError(400, "input: Field required", param="input")
    system, messages = items_to_messages(body["input"], faults) if body.get("input") is not None else ([], [])
    previous = expect(body, "previous_response_id", str)
    if previous and not faults.on("rs-ignore-previous-response-id"):
        prior = store.get(previous)
        if prior is None:
            raise ApiError(400, f"Previous response with id '{previous}' not found.", param="previous_response_id")
        messages = prior + messages
    instructions = expect(body, "instructions", str)
    expect(body, "stream", bool)
    expect(body, "store", bool)
    parallel = expect(body, "parallel_tool_calls", bool)
    include = expect(body, "include", list) or []
    for value in include:
        if not isinstance(value, str):
            raise ApiError(400, "include: expected an array of strings", param="include")
    text = expect(body, "text", dict)  # ResponseTextConfigParam: format and verbosity, both optional
    if faults.on("rs-narrow-request-schema") and text is not None and "format" not in text:
        raise ApiError(400, "text.format: Field required", param="text.format")
    # The ranges of CreateResponse (openai-openapi): max_output_tokens >= 16, temperature 0..2,
    # top_p 0..1, top_logprobs 0..20.
    max_tokens = int_in(body, "max_output_tokens", MIN_OUTPUT_TOKENS)
    number_in(body, "temperature", 0, 2)
    number_in(body, "top_p", 0, 1)
    int_in(body, "top_logprobs", 0, 20)
    return Conversation(model=model, system=([instructions] if instructions else []) + system, messages=messages,
                        tools=tools_of(body.get("tools"), faults),
                        tool_choice=tool_choice_of(body.get("tool_choice"), hosted=True),
                        max_tokens=max_tokens, thinking=thinking_of(body),
                        parallel_tool_calls=parallel is not False)


class InputText:
    """The text of a custom tool's call as it streams: the model writes ``{"input": "..."}`` (the function
    it was offered, CUSTOM_PARAMETERS); `feed` takes the next fragment of that JSON and gives the next part
    of the decoded string (an escape cut between fragments waits for its end), `final` the whole input."""

    _START = re.compile(r'\s*\{\s*"input"\s*:\s*"')

    def __init__(self) -> None:
        self.raw = ""
        self.sent = ""  # what feed has given so far
        self._at: int | None = None  # where the undecoded rest of the string starts in `raw`
        self._ended = False

    def feed(self, fragment: str) -> str:
        self.raw += fragment
        if self._ended:
            return ""
        if self._at is None:
            start = self._START.match(self.raw)
            if start is None:
                return ""
            self._at = start.end()
        raw, i, out = self.raw, self._at, []
        while i < len(raw):
            j = i
            while j < len(raw) and raw[j] not in '"\\':
                j += 1
            out.append(raw[i:j])
            i = j
            if i >= len(raw):
                break
            if raw[i] == '"':
                self._ended = True
                break
            size = 2 if raw[i + 1:i + 2] != "u" else 12 if raw[i + 2:i + 4].lower() in ("d8", "d9", "da", "db") else 6
            if i + size > len(raw):
                break  # the escape's end has not come yet
            try:
                out.append(json.loads('"' + raw[i:i + size] + '"'))
            except ValueError:  # not a JSON string after all: `final` decides
                self._ended = True
                break
            i += size
        self._at = i
        text = "".join(out)
        self.sent += text
        return text

    def final(self) -> str:
        """The call's input: the decoded string, or the raw text when the call was not {"input": text}."""
        try:
            value = json.loads(self.raw)
        except ValueError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("input"), str):
            return value["input"]
        return self.sent or self.raw


class ResponsesStream:
    """Internal events -> Responses events with sequence numbers, items in output order. A call of a custom
    tool (``tools``: the request's, ToolSpec.kind "custom") is a custom_tool_call item whose ``input`` streams
    as response.custom_tool_call_input.delta / .done (openai-python ResponseCustomToolCallInput*Event); a
    call of a namespace's tool carries the ``namespace``."""

    def __init__(self, *, response_id: str, body: dict[str, Any], faults: Faults,
                 tools: list[ToolSpec] | tuple[ToolSpec, ...] = ()) -> None:
        self.id = response_id
        self.body = body
        self.faults = faults
        self.tools = {t.name: t for t in tools}
        self._input: InputText | None = None  # the open custom tool call's text
        # fault stream-tool-input-empty: a streamed call's arguments are not sent (the store keeps them)
        self.empty_arguments = bool(body.get("stream")) and faults.on("stream-tool-input-empty")
        self.seq = 0
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        self.include_encrypted = "reasoning.encrypted_content" in (body.get("include") or [])
        self.created_at = int(time.time())
        self.usage: dict[str, Any] | None = None
        self.status = "in_progress"
        self.incomplete: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.parts: list[Part] = []  # the turn, for the response store

    def response(self) -> dict[str, Any]:
        echoed = {k: self.body.get(k) for k in ECHOED}
        if self.faults.on("rs-fields-dropped"):
            echoed = {k: None for k in ECHOED}
        echoed["tools"] = echoed["tools"] or []
        if not self.faults.on("rs-fields-dropped"):
            echoed["parallel_tool_calls"] = self.body.get("parallel_tool_calls", True)
            echoed["store"] = self.body.get("store", True)
        echoed["tool_choice"] = self.body.get("tool_choice", "auto")
        echoed["truncation"] = self.body.get("truncation", "disabled")
        return {"id": self.id, "object": "response", "created_at": self.created_at, "status": self.status,
                "model": self.body.get("model"), "output": copy.deepcopy(self.output), "usage": self.usage,
                "error": self.error, "incomplete_details": self.incomplete, **echoed}

    def _next_seq(self) -> int:
        seq = self.seq
        self.seq += 2 if (seq == 3 and self.faults.on("rs-sequence-gap")) else 1
        return seq

    def _event(self, kind: str, **fields: Any) -> bytes:
        event = {"type": kind, "sequence_number": self._next_seq(), **fields}
        if self.faults.on("rs-no-indices"):  # llama-server 11434's events: none of the three numbers
            for name in ("sequence_number", "output_index", "content_index"):
                event.pop(name, None)
        return sse(kind, event)

    def _delta(self, kind: str, text: str, *, content: bool = False, logprobs: bool = False) -> bytes:
        """`_event(kind, [content_index=0,] delta=text, [logprobs=[],] **self._where())`, the same
        bytes, written directly (the frame of nearly every token)."""
        assert self.open is not None
        if self.faults.on("rs-no-indices"):
            return self._event(kind, **({"content_index": 0} if content else {}), delta=text,
                               **({"logprobs": []} if logprobs else {}), **self._where())
        pre = '"content_index":0,' if content else ""
        post = '"logprobs":[],' if logprobs else ""
        return (f'event: {kind}\ndata: {{"type":"{kind}","sequence_number":{self._next_seq()},{pre}'
                f'"delta":{json_str(text)},{post}"item_id":{json_str(self.open["id"])},'
                f'"output_index":{len(self.output) - 1}}}\n\n').encode()

    def start(self) -> list[bytes]:
        return [self._event("response.created", response=self.response()),
                self._event("response.in_progress", response=self.response())]

    def _where(self) -> dict[str, Any]:
        assert self.open is not None
        return {"item_id": self.open["id"], "output_index": len(self.output) - 1}

    def _open(self, item: dict[str, Any]) -> list[bytes]:
        out = self._close()
        self.output.append(item)
        self.open = item
        out.append(self._event("response.output_item.added", output_index=len(self.output) - 1,
                               item=copy.deepcopy(item)))
        if item["type"] == "message":
            out.append(self._event("response.content_part.added", content_index=0, **self._where(),
                                   part={"type": "output_text", "text": "", "annotations": []}))
        return out

    def _close(self) -> list[bytes]:
        item = self.open
        if item is None:
            return []
        out = []
        where = self._where()
        if item["type"] == "message":
            text = item["content"][0]["text"]
            out.append(self._event("response.output_text.done", content_index=0, text=text, logprobs=[], **where))
            out.append(self._event("response.content_part.done", content_index=0, part=item["content"][0], **where))
        elif item["type"] == "reasoning":
            text = item["content"][0]["text"]
            out.append(self._event("response.reasoning_text.done", content_index=0, text=text, **where))
            if self.include_encrypted and not self.faults.on("rs-no-encrypted-content"):
                item["encrypted_content"] = pack_reasoning(text)
            if (self.body.get("reasoning") or {}).get("summary"):
                # A summary was asked for (Codex: summary "auto"): the reasoning text is its own summary,
                # announced by the summary events before the item is done, as OpenAI streams it.
                part = {"type": "summary_text", "text": text}
                at = {**where, "summary_index": 0}
                out.append(self._event("response.reasoning_summary_part.added", **at,
                                       part={"type": "summary_text", "text": ""}))
                out.append(self._event("response.reasoning_summary_text.delta", **at, delta=text))
                out.append(self._event("response.reasoning_summary_text.done", **at, text=text))
                out.append(self._event("response.reasoning_summary_part.done", **at, part=dict(part)))
                item["summary"] = [part]
        elif item["type"] == "custom_tool_call":
            final = "" if self.empty_arguments else (self._input.final() if self._input else "")
            if final != item["input"] and final.startswith(item["input"]):  # a rest never streamed
                out.append(self._delta("response.custom_tool_call_input.delta", final[len(item["input"]):]))
            item["input"] = final
            out.append(self._event("response.custom_tool_call_input.done", input=final, **where))
            self._input = None
        elif item["type"] == "function_call":
            if self.empty_arguments:
                item["arguments"] = "{}"
                out.append(self._delta("response.function_call_arguments.delta", "{}"))
            arguments = item["arguments"]
            if self.faults.on("rs-arguments-done-mismatch"):
                arguments = arguments.rstrip("}") + ', "extra": 1}' if arguments.endswith("}") else arguments + " "
            out.append(self._event("response.function_call_arguments.done", arguments=arguments, name=item["name"],
                                   **where))
        item["status"] = "completed"
        if not self.faults.on("rs-missing-output-item-done"):
            out.append(self._event("response.output_item.done", output_index=where["output_index"],
                                   item=copy.deepcopy(item)))
        self.open = None
        return out

    def feed(self, event: Event) -> list[bytes]:
        out: list[bytes] = []
        if isinstance(event, ReasoningDelta):
            if not self.open or self.open["type"] != "reasoning":
                out += self._open({"id": f"rs_{self.id[5:]}_{len(self.output)}", "type": "reasoning", "summary": [],
                                   "content": [{"type": "reasoning_text", "text": ""}]})
            assert self.open is not None
            self.open["content"][0]["text"] += event.text
            self._part("reasoning", event.text)
            out.append(self._delta("response.reasoning_text.delta", event.text, content=True))
        elif isinstance(event, TextDelta):
            if not self.open or self.open["type"] != "message":
                out += self._open({"id": f"msg_{self.id[5:]}_{len(self.output)}", "type": "message",
                                   "status": "in_progress", "role": "assistant",
                                   "content": [{"type": "output_text", "text": "", "annotations": []}]})
            assert self.open is not None
            self.open["content"][0]["text"] += event.text
            self._part("text", event.text)
            out.append(self._delta("response.output_text.delta", event.text, content=True, logprobs=True))
        elif isinstance(event, ToolCallStart):
            spec = self.tools.get(event.name)
            if spec is not None and spec.kind == "custom" and not self.faults.on("rs-custom-call-as-function"):
                item = {"id": f"ctc_{self.id[5:]}_{len(self.output)}", "type": "custom_tool_call",
                        "status": "in_progress", "call_id": event.id, "name": event.name, "input": ""}
                self._input = InputText()
            else:
                item = {"id": f"fc_{self.id[5:]}_{len(self.output)}", "type": "function_call",
                        "status": "in_progress", "call_id": event.id, "name": event.name, "arguments": ""}
            if spec is not None and spec.namespace:
                item["namespace"] = spec.namespace
            if self.faults.on("rs-missing-call-id"):
                del item["call_id"]
            out += self._open(item)
            self.parts.append(Part(kind="tool_call", call=ToolCall(index=event.index, id=event.id, name=event.name)))
        elif isinstance(event, ToolCallArgsDelta):
            call, opened = self.parts[-1].call, self.open
            assert call is not None and opened is not None  # the ToolCallStart before it opened both
            call.arguments += event.text
            if opened["type"] == "custom_tool_call":
                text = self._input.feed(event.text) if self._input and not self.empty_arguments else ""
                if text:
                    opened["input"] += text
                    out.append(self._delta("response.custom_tool_call_input.delta", text))
            elif not self.empty_arguments:
                opened["arguments"] += event.text
                out.append(self._delta("response.function_call_arguments.delta", event.text))
        elif isinstance(event, ToolCallEnd):
            out += self._close()
        elif isinstance(event, Finish):
            out += self._close()
            u = event.usage
            reasoning_tokens = 0
            self.usage = {"input_tokens": u.prompt_tokens, "input_tokens_details": {"cached_tokens": u.cached_tokens},
                          "output_tokens": u.completion_tokens,
                          "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
                          "total_tokens": u.prompt_tokens + u.completion_tokens}
            if self.faults.on("usage-cached-outside-prompt"):
                self.usage["input_tokens"] -= u.cached_tokens
            if event.reason == "length":
                self.status = "incomplete"
                self.incomplete = {"reason": "max_output_tokens"}
            else:
                self.status = "completed"
            if not self.faults.on("rs-missing-completed"):
                out.append(self._event(f"response.{self.status}", response=self.response()))
        return out

    def fail(self, reason: str, message: str) -> list[bytes]:
        """The engine stopped the turn mid-stream: `response.failed`, the response with status
        "failed" and an error object (openai-python ResponseFailedEvent, ResponseError code
        "server_error"); an item still open stays "in_progress"."""
        self.open = None
        self.status = "failed"
        self.error = {"code": "server_error", "message": engine_stop_error(reason, message, "openai").message}
        return [self._event("response.failed", response=self.response())]

    def _part(self, kind: str, text: str) -> None:
        if self.parts and self.parts[-1].kind == kind:
            self.parts[-1].text += text
        else:
            self.parts.append(Part(kind=kind, text=text))  # type: ignore[arg-type]



def response_id() -> str:
    return f"resp_{time.time_ns():x}"


NO_WEBSOCKET = "GET /v1/responses: no WebSocket transport on this server; use POST /v1/responses"


def routes(ctx: ApiContext, store: ResponseStore) -> list[BaseRoute]:
    """POST /v1/responses (previous_response_id from `store`), and GET / WebSocket denied the way
    Codex falls back from at once."""
    service, faults = ctx.service, ctx.faults

    async def create_response(request: Request) -> Response:
        body = await ctx.body(request)
        conv = parse(to_conversation, body, store, faults)
        turn = await service.start_turn(conv, id_prefix="call_")
        adapter = ResponsesStream(response_id=response_id(), body=body, faults=faults, tools=conv.tools)

        def remember() -> None:
            if body.get("store", True) is not False:
                history = conv.messages + [Message(role="assistant", parts=adapter.parts)]
                store.put(adapter.id, history, parent=body.get("previous_response_id"))

        if body.get("stream"):
            return ctx.stream(adapter, turn, then=remember)
        adapter.start()
        for event in await answer_events(turn, conv, faults):
            adapter.feed(event)
        remember()
        answer = adapter.response()
        if faults.on("nonstream-no-object"):
            del answer["object"]
        return JSONResponse(answer)

    async def responses_get(request: Request) -> Response:
        # Codex tries a WebSocket upgrade first. Measured with Codex 0.171.0 (docs/clients.md): 426
        # makes it fall back to POST at once (one GET, ~0.4 s); 404/405/403/501 make it retry with
        # backoff for ~6.5 s; 400 fails the turn. A proxy drops the hop-by-hop Upgrade header, so the
        # WebSocket handshake is also recognised by Sec-WebSocket-Key or openai-beta responses_websockets.
        h = request.headers
        if ("websocket" in h.get("upgrade", "").lower() or "sec-websocket-key" in h
                or "responses_websockets" in h.get("openai-beta", "")):
            raise ApiError(426, NO_WEBSOCKET)
        raise ApiError(405, "GET /v1/responses: use POST (no WebSocket transport on this server)")

    async def responses_websocket(websocket: WebSocket) -> None:
        # A direct connection: uvicorn turns the upgrade into a WebSocket scope before any HTTP route
        # sees it; deny it with the same 426 (a bare close would answer 403, which Codex retries ~6.5 s).
        body = error_response(ApiError(426, NO_WEBSOCKET), "openai", faults)
        try:
            await websocket.send_denial_response(body)
        except RuntimeError:  # the server lacks the websocket.http.response extension
            await websocket.close()

    return [Route("/v1/responses", ctx.handler("openai", create_response), methods=["POST"]),
            Route("/v1/responses", ctx.handler("openai", responses_get), methods=["GET"]),
            WebSocketRoute("/v1/responses", responses_websocket)]
