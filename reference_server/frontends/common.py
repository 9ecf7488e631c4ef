"""What every frontend shares: body reading (size limit, Content-Encoding), auth, errors, SSE.

Bad input gets the API's own error shape and a 4xx, never a 500: frontends raise `ApiError`, and
the app renders it in the shape of the API the route belongs to.
"""

from __future__ import annotations

import gzip
import hmac
import io
import json
import re
import uuid
import zlib
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any, Literal, Protocol

import zstandard
from starlette.requests import Request
from starlette.responses import JSONResponse

from harnesscheck.reference_server.conversation import Conversation, Message, ToolResult
from harnesscheck.reference_server.events import Event, Finish, TextDelta, ToolCallArgsDelta, ToolCallEnd, ToolCallStart
from harnesscheck.reference_server.faults import Faults

ApiKind = Literal["anthropic", "openai"]

ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 405: "invalid_request_error", 413: "request_too_large",
                         415: "invalid_request_error", 429: "rate_limit_error", 500: "api_error",
                         529: "overloaded_error"}


@dataclass
class ApiError(Exception):
    status: int
    message: str
    param: str | None = None
    code: str | None = None

    def __str__(self) -> str:
        return self.message


def anthropic_error_body(error: ApiError, status: int) -> dict[str, Any]:
    """Anthropic's error shape (errors docs): {"type": "error", "error": {"type", "message"}}."""
    kind = ANTHROPIC_ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


OPENAI_ERROR_TYPES = {401: "authentication_error", 404: "not_found_error", 413: "invalid_request_error",
                      429: "rate_limit_error"}


def openai_error_body(error: ApiError, status: int) -> dict[str, Any]:
    """OpenAI's error shape (Chat and Responses alike): {"error": {"message", "type", "param", "code"}}."""
    kind = OPENAI_ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": error.message, "type": kind, "param": error.param, "code": error.code}}


# Whose error shape a route answers in: Chat and Responses share OpenAI's.
ERROR_BODIES: dict[ApiKind, Callable[[ApiError, int], dict[str, Any]]] = {
    "anthropic": anthropic_error_body, "openai": openai_error_body}

# The status an engine's own stop (`EngineStopped.reason`) gets, per error shape: a timeout is the
# engine out of capacity (Anthropic 529 overloaded_error; OpenAI 503, "the engine is currently
# overloaded"), any other reason (cancelled) an internal error (500). docs/API_FACTS.md, "Errors".
ENGINE_STOP_STATUS: dict[ApiKind, dict[str, int]] = {"anthropic": {"timeout": 529}, "openai": {"timeout": 503}}


def engine_stop_error(reason: str, message: str, api: ApiKind) -> ApiError:
    """The ApiError an engine's own stop becomes in `api`'s shape."""
    return ApiError(ENGINE_STOP_STATUS[api].get(reason, 500), f"generation stopped by the engine ({reason}): {message}")


LENIENT_ROLES = {"anthropic": ("user", "assistant", "system"),
                 "chat": ("system", "developer", "user", "assistant", "tool", "function")}


def accept_malformed(body: dict[str, Any], api: str) -> dict[str, Any]:
    """Fault lenient-input: `body` with what the API would refuse read leniently instead (a message of an
    unknown role as the user's; a function_call_output whose output is neither text nor parts as its
    JSON text), as servers that accept malformed input do."""
    if api in LENIENT_ROLES and isinstance(body.get("messages"), list):
        body = {**body, "messages": [
            {**m, "role": "user"} if isinstance(m, dict) and m.get("role") not in LENIENT_ROLES[api] else m
            for m in body["messages"]]}
    if api == "responses" and isinstance(body.get("input"), list):
        body = {**body, "input": [
            {**i, "output": json.dumps(i["output"])} if isinstance(i, dict) and i.get("type") ==
            "function_call_output" and not isinstance(i.get("output"), (str, list)) else i
            for i in body["input"]]}
    return body


def error_response(error: ApiError, api: ApiKind, faults: Faults) -> JSONResponse:
    status = error.status
    # A message that quotes the client's input may carry a lone surrogate: JSON rendering would fail.
    error.message = error.message.encode("utf-8", "backslashreplace").decode("utf-8")
    if faults.on("bad-input-500") and status == 400:
        status = 500
    if faults.on("wrong-error-shape"):
        return JSONResponse({"detail": error.message}, status_code=status)
    return JSONResponse(ERROR_BODIES[api](error, status), status_code=status)


def _decompress(data: bytes, encoding: str, limit: int) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return data
    try:
        if encoding == "zstd":
            out = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read(limit + 1)
        elif encoding in ("gzip", "x-gzip"):
            out = gzip.GzipFile(fileobj=io.BytesIO(data)).read(limit + 1)
        elif encoding == "deflate":
            out = zlib.decompressobj().decompress(data, limit + 1)
        else:
            raise ApiError(415, f"unsupported Content-Encoding {encoding!r} (identity, gzip, deflate, zstd)")
    except ApiError:
        raise
    except Exception as exc:  # corrupt compressed data is the client's fault
        raise ApiError(400, f"could not decode {encoding} request body: {exc}") from exc
    if len(out) > limit:
        raise ApiError(413, f"request body over {limit} bytes once decompressed")
    return out


async def read_json(request: Request, *, limit: int, faults: Faults | None = None) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"request body of {declared} bytes is over the limit of {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"request body over the limit of {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if faults is not None and faults.on("reject-compressed-body") and request.headers.get("content-encoding"):
        raise ApiError(415, "Content-Encoding is not supported")
    for encoding in reversed(request.headers.get("content-encoding", "").split(",")):
        raw = _decompress(raw, encoding, limit)
    if not raw.strip():
        raise ApiError(400, "request body is empty; expected a JSON object")
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    if _SURROGATE_ESCAPE.search(raw) and _has_lone_surrogate(body):
        raise ApiError(400, "request body is not valid Unicode: a \\u escape encodes a lone UTF-16 surrogate")
    return body


def _no_constant(name: str) -> Any:
    # NaN and Infinity are not JSON (RFC 8259); Python's parser takes them, and echoing one back
    # (Responses echoes temperature) would fail when the answer is rendered.
    raise ValueError(f"{name} is not a JSON value")


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _has_lone_surrogate(value: Any) -> bool:
    """True when a string (key or value) anywhere in the JSON value cannot be encoded as UTF-8."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def check_auth(request: Request, api_key: str | None) -> None:
    if not api_key:
        return
    given = request.headers.get("x-api-key") or request.headers.get("api-key") or ""
    auth = request.headers.get("authorization", "")
    if not given and auth.lower().startswith("bearer "):
        given = auth[7:].strip()
    # Constant-time comparison: the time taken tells nothing about how much of the key matched.
    if not hmac.compare_digest(given.encode(), api_key.encode()):
        raise ApiError(401, "invalid or missing API key" if given else "missing API key (x-api-key or Bearer)")


class Adapter(Protocol):
    """One API's stream writer: its opening frames, the frames of each internal event, and the
    frames that end a stream the engine stopped (`EngineStopped`: the API's own error form)."""

    def start(self) -> list[bytes]: ...

    def feed(self, event: Any) -> list[bytes]: ...

    def fail(self, reason: str, message: str) -> list[bytes]: ...


def step_frames(adapter: Adapter, step: list[Any]) -> bytes:
    """The frames of one step's events, in order, joined into one body chunk (b"" for none)."""
    if len(step) == 1:
        frames = adapter.feed(step[0])
    else:
        frames = [frame for event in step for frame in adapter.feed(event)]
    return frames[0] if len(frames) == 1 else b"".join(frames)


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # json.dumps builds one per call
# The JSON form of one string, exactly as `_JSON` writes it inside an object (ensure_ascii=False).
json_str = json.encoder.encode_basestring


def sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else _JSON(data)
    if event:
        return f"event: {event}\ndata: {payload}\n\n".encode()
    return f"data: {payload}\n\n".encode()


class SSETemplate:
    """A frame whose only varying part is one string: `sse(event, build(text))` cut around it, so the
    frequent delta frames cost a string encoding and two concatenations instead of building and
    encoding a dict per token. `SSETemplate(event, build).frame(text) == sse(event, build(text))`
    for a `build` that puts its argument in one string value and is otherwise fixed.
    """

    __slots__ = ("head", "tail")

    def __init__(self, event: str | None, build: Callable[[str], Any]) -> None:
        slot = f"\x00{uuid.uuid4().hex}\x00"  # a string no fixed part of the frame can hold
        marker = json_str(slot).encode()
        whole = sse(event, build(slot))
        if whole.count(marker) != 1:
            raise ValueError("SSETemplate: build must place its argument exactly once")
        self.head, _, self.tail = whole.partition(marker)

    def frame(self, text: str) -> bytes:
        return self.head + json_str(text).encode() + self.tail


# --- small validators shared by the request parsers --------------------------------------------

def expect(body: dict[str, Any], key: str, kinds: type | tuple[type, ...], *, required: bool = False,
           where: str = "") -> Any:
    name = f"{where}{key}"
    if key not in body or body[key] is None:
        if required:
            raise ApiError(400, f"{name}: field required", param=name)
        return None
    value = body[key]
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise ApiError(400, f"{name}: expected {_names(kinds)}, got a boolean", param=name)
    if not isinstance(value, kinds):
        raise ApiError(400, f"{name}: expected {_names(kinds)}, got {type(value).__name__}", param=name)
    return value


def _names(kinds: type | tuple[type, ...]) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    table = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", list: "an array",
             dict: "an object"}
    return " or ".join(table.get(k, k.__name__) for k in kinds)


def positive_int(body: dict[str, Any], key: str, *, required: bool = False) -> int | None:
    return int_in(body, key, 1, required=required)


def int_in(body: dict[str, Any], key: str, low: int, high: int | None = None, *, required: bool = False,
           where: str = "") -> int | None:
    """An integer field within the API reference's bounds [low, high], or None when absent. The code
    is the one OpenAI answers (`integer_below_min_value`, `integer_above_max_value`)."""
    value = expect(body, key, int, required=required, where=where)
    if value is None:
        return None
    name = f"{where}{key}"
    if value < low:
        raise ApiError(400, f"Invalid '{name}': integer below minimum value. Expected a value >= {low}, "
                            f"but got {value} instead.", param=name, code="integer_below_min_value")
    if high is not None and value > high:
        raise ApiError(400, f"Invalid '{name}': integer above maximum value. Expected a value <= {high}, "
                            f"but got {value} instead.", param=name, code="integer_above_max_value")
    return value


def number_in(body: dict[str, Any], key: str, low: float, high: float, *, where: str = "") -> float | None:
    """A number field within the API reference's range [low, high], or None when absent."""
    value = expect(body, key, (int, float), where=where)
    if value is None:
        return None
    name = f"{where}{key}"
    if not low <= value <= high:
        side, code = ("below minimum", "decimal_below_min_value") if value < low else \
            ("above maximum", "decimal_above_max_value")
        raise ApiError(400, f"Invalid '{name}': decimal {side} value. Expected a value between {low} and "
                            f"{high}, but got {value} instead.", param=name, code=code)
    return value


def text_or_parts(content: Any, where: str) -> str | list[Any]:
    """An OpenAI message's content: its text when it is a string (absent: ""), else its array of
    content parts; anything else is a 400."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ApiError(400, f"{where}: expected a string or an array of content parts", param=where)
    return content


def tool_array(raw: Any) -> list[Any]:
    """A request's ``tools`` field as a list (absent: empty); anything but an array is a 400."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ApiError(400, "tools: expected an array", param="tools")
    return raw


def function_parameters(raw: Any, where: str) -> dict[str, Any]:
    """An OpenAI function tool's JSON Schema (absent or empty: an object with no properties)."""
    params = raw or {"type": "object", "properties": {}}
    if not isinstance(params, dict):
        raise ApiError(400, f"{where}: expected an object", param="tools")
    return params


def add_tool_result(messages: list[Message], result: ToolResult) -> None:
    """Append a tool's result: consecutive results join one tool message."""
    if messages and messages[-1].role == "tool":
        messages[-1].results.append(result)
    else:
        messages.append(Message(role="tool", results=[result]))


def has_cache_control(obj: Any) -> bool:
    if isinstance(obj, dict):
        return "cache_control" in obj or any(has_cache_control(v) for v in obj.values())
    if isinstance(obj, list):
        return any(has_cache_control(v) for v in obj)
    return False


def strict_schema_problem(schema: Any, context: tuple[str, ...] = ()) -> str | None:
    """Why a function's JSON Schema cannot be used with ``strict: true``, in OpenAI's words, or None.
    Strict mode needs every object to set ``additionalProperties: false`` and to list every property
    in ``required``; a strict tool with another schema is refused (function calling guide, strict mode)."""
    if not isinstance(schema, dict):
        return None
    where = f"In context={context!r}"
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            return f"{where}, 'additionalProperties' is required to be supplied and to be false."
        props = schema.get("properties") or {}
        required = schema.get("required") or []
        missing = [k for k in props if k not in required]
        if missing:
            return (f"{where}, 'required' is required to be supplied and to be an array including every key "
                    f"in properties. Missing '{missing[0]}'.")
        subs = [((*context, "properties", k), v) for k, v in props.items()]
    else:
        subs = []
    subs += [((*context, "items"), schema["items"])] if "items" in schema else []
    subs += [((*context, "anyOf", str(n)), v) for n, v in enumerate(schema.get("anyOf") or [])]
    for key in ("$defs", "definitions"):
        subs += [((*context, key, k), v) for k, v in (schema.get(key) or {}).items()]
    return next((p for sub_context, sub in subs if (p := strict_schema_problem(sub, sub_context))), None)


async def answer_events(turn: Any, conv: Conversation, faults: Faults) -> list[Event]:
    """A non-streamed answer's events (turn: `service.Turn`). Under the fault forced-cut-raw-markup, a
    forced call cut off by the output limit becomes the model's raw text from its tool-call tag on, as
    vLLM 0.32 answers it not streamed (its stream keeps the tool deltas)."""
    events = [event async for event in turn.events()]
    finish = events[-1] if events else None
    if not (faults.on("forced-cut-raw-markup") and conv.tool_choice.mode in ("required", "named")
            and isinstance(finish, Finish) and finish.reason == "length" and turn.plan.tools is not None):
        return events
    output = turn.decoder.tokenizer.decode(turn.generation.output_ids)
    at = output.find(getattr(turn.plan.tools, "open_tag", "<tool_call>"))
    if at < 0:
        return events
    calls = (ToolCallStart, ToolCallArgsDelta, ToolCallEnd)
    rest = [event for event in events[:-1] if not isinstance(event, calls)]
    return [*rest, TextDelta(text=output[at:]), finish]
