"""Anthropic Messages stream grammar: a pure fold and a validator.

``accumulate(event, snapshot)`` folds one event into a message snapshot without mutating its
input (as anthropic-sdk-python's ``accumulate_event``, but it records instead of raising);
``final_message(frames)`` folds a whole stream; ``validate(frames, request=None)`` returns the
``Finding`` list for the rules in ``RULES`` (API_FACTS.md, "Anthropic Messages").
"""

from __future__ import annotations

import json
from typing import Any

from harnesscheck.conformance.apis.anthropic import TOOL_BLOCKS as _TOOL_BLOCKS
from harnesscheck.conformance.apis.anthropic import accumulate, final_message
from harnesscheck.conformance.apis.base import is_int as _is_int

from .findings import Collector, EventNames, Finding, frames_and_request, short

__all__ = ["EVENT_TYPES", "INFORMATIONAL", "RULES", "STOP_REASONS", "accumulate", "final_message", "validate"]

# References: the streaming docs (docs.claude.com/en/api/messages-streaming: "Each event will use an
# SSE event name ... and include the matching event type in its data"; "One or more message_delta
# events"; "The token counts shown in the usage field of the message_delta event are cumulative";
# "Event streams may also include any number of ping events"; "we may occasionally send errors in the
# event stream ... overloaded_error"; "we may add new event types, and your code should handle unknown
# event types gracefully") and anthropic-sdk-python src/anthropic/_streaming.py (Stream.__stream__
# yields only events whose SSE name is one it knows, skips `ping`, raises at `error`; a frame without
# an `event:` line is never yielded) and lib/streaming/_messages.py (accumulate_event).
RULES: dict[str, str] = {
    "AN-GRAMMAR-JSON": "Every event's data is a JSON object with a string `type`.",
    "AN-GRAMMAR-DONE": "An Anthropic stream carries no `data: [DONE]` sentinel (an OpenAI convention; "
    "the anthropic SDK skips it, as it has no event name).",
    "AN-GRAMMAR-EVENT-LINE": "Every event has an SSE `event:` line: anthropic-sdk-python's Stream "
    "dispatches on the SSE event name and drops a frame that has none, so its content never reaches "
    "the client.",
    "AN-GRAMMAR-EVENT-NAME": "A present SSE `event:` name equals the data's `type` (streaming docs); the "
    "SDK drops an event whose name it does not know.",
    "AN-GRAMMAR-UNKNOWN-EVENT": "(informational) An event type outside the documented stream events: "
    "the docs tell clients to handle unknown event types gracefully, so it is recorded, not judged.",
    "AN-GRAMMAR-START": "`message_start` comes first (only `ping` may precede it) and exactly once.",
    "AN-GRAMMAR-MESSAGE-START": "`message_start.message` has `content: []`, `stop_reason: null` and "
    "integer `usage.input_tokens` and `usage.output_tokens`.",
    "AN-GRAMMAR-ORDER": "No content block event after the first `message_delta` (such events are not "
    "judged further).",
    "AN-GRAMMAR-INDEX": "`content_block_start.index` is the block's position: 0, 1, 2, ... never reused.",
    "AN-GRAMMAR-ONE-OPEN": "One content block is open at a time: a block starts only after the previous "
    "stopped.",
    "AN-GRAMMAR-BLOCK-START": "`content_block_start.content_block` is an object with a string `type`.",
    "AN-GRAMMAR-BLOCK-UNKNOWN": "A delta or stop refers to a block that was started.",
    "AN-GRAMMAR-BLOCK-CLOSED": "No delta or second stop for a block after its `content_block_stop`.",
    "AN-GRAMMAR-BLOCK-UNSTOPPED": "Every started block is stopped before `message_delta` / the end.",
    "AN-GRAMMAR-DELTA-TYPE": "The delta type matches the block type (text: text_delta/citations_delta; "
    "tool_use: input_json_delta; thinking: thinking_delta/signature_delta) and is well formed.",
    "AN-GRAMMAR-SIGNATURE": "A thinking block's `signature_delta` comes after its thinking and before its "
    "`content_block_stop` (not after the stop, and no thinking after the signature).",
    "AN-GRAMMAR-SIGNATURE-MISSING": "A thinking block gets a non-empty signature (`signature_delta`) at "
    "all; a backend that has no signatures sends none (Claude Code sends the empty signature back "
    "without trouble).",
    "AN-GRAMMAR-TOOL-START": "A tool_use block starts with a non-empty string `id` and `name` and "
    "`input: {}`.",
    "AN-GRAMMAR-TOOL-JSON": "A tool_use block's joined `partial_json` parses as a JSON object (empty "
    "joins to {}).",
    "AN-GRAMMAR-DELTA-USAGE": "Every `message_delta` has an integer `usage.output_tokens` (cumulative; "
    "several message_delta events are allowed).",
    "AN-GRAMMAR-STOP-REASON": "A `stop_reason` is one of the documented values, and the message ends "
    "with one: the SDK takes each `message_delta`'s `stop_reason`, so the last one sets it.",
    "AN-GRAMMAR-STOP-TOOL-USE": "`stop_reason` is `tool_use` if and only if the message ends with "
    "tool_use blocks.",
    "AN-GRAMMAR-AFTER-STOP": "`message_stop` is the last event (only `ping` may follow).",
    "AN-GRAMMAR-STOP-MISSING": "The stream ends with `message_stop` (unless an `error` event ended it).",
    "AN-GRAMMAR-ERROR-EVENT": "(informational) The endpoint reported an error in the stream (`event: "
    "error`, e.g. overloaded_error after a 200): the endpoint's error, with its body, not a grammar "
    "violation.",
    "AN-GRAMMAR-AFTER-ERROR": "An `error` event ends the stream: nothing but `ping` follows it (the SDK "
    "raises at the error and reads no further).",
}

INFORMATIONAL = frozenset({"AN-GRAMMAR-UNKNOWN-EVENT", "AN-GRAMMAR-ERROR-EVENT"})

# The names anthropic-sdk-python's Stream yields for a Messages stream (src/anthropic/_streaming.py).
SDK_EVENT_NAMES = frozenset({"message_start", "message_delta", "message_stop", "content_block_start",
                             "content_block_delta", "content_block_stop", "ping", "error"})

EVENT_TYPES = frozenset(
    {
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop", "ping", "error",
    }
)

STOP_REASONS = frozenset(
    {
        "end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal",
        "model_context_window_exceeded",
    }
)

_DELTAS_FOR = {
    "text": {"text_delta", "citations_delta"},
    "tool_use": {"input_json_delta"},
    "server_tool_use": {"input_json_delta"},
    "thinking": {"thinking_delta", "signature_delta"},
    "redacted_thinking": set(),
}
_DELTA_FIELD = {
    "text_delta": ("text", str),
    "input_json_delta": ("partial_json", str),
    "thinking_delta": ("thinking", str),
    "signature_delta": ("signature", str),
    "citations_delta": ("citation", dict),
}


# -- validator ------------------------------------------------------------------------------

class _Block:
    __slots__ = ("frame", "index", "json", "open", "sign_frame", "signed", "stop_frame", "type")

    def __init__(self, index: int, typ: Any, frame: int, signed: bool) -> None:
        self.index = index
        self.type = typ
        self.open = True
        self.frame = frame
        self.signed = signed  # a non-empty signature arrived (at start, or by signature_delta)
        self.sign_frame: int | None = None
        self.stop_frame: int | None = None
        self.json: list[str] = []


def _sdk_note(event: str | None, typ: str) -> str:
    if event is None:
        return ": the anthropic SDK drops frames without an event name"
    if event not in SDK_EVENT_NAMES:
        return f": the anthropic SDK drops events named {event!r}"
    return ""


def validate(source: Any, request: Any = None) -> list[Finding]:
    """Judge an Anthropic Messages stream; never raises on what the server sent."""
    frames, _ = frames_and_request(source, request)
    events = [f for f in frames if f.kind == "event"]
    sink = Collector(events)
    add = sink.add
    names = EventNames("AN-GRAMMAR-EVENT-LINE", "AN-GRAMMAR-EVENT-NAME")

    start_frame: int | None = None
    start_reported = False
    stop_frame: int | None = None
    error_frame: int | None = None
    delta_frame: int | None = None
    stop_reason: Any = None
    stop_reason_frame: int | None = None
    blocks: dict[int, _Block] = {}
    order: list[_Block] = []

    def close_open(frame: int | None, why: str) -> None:
        for b in order:
            if b.open:
                b.open = False
                add("AN-GRAMMAR-BLOCK-UNSTOPPED", frame, f"block {b.index} ({b.type}, started at frame "
                    f"#{b.frame}) was never stopped {why}", f"block {b.index} still open",
                    "content_block_stop first")

    for f in events:
        i = f.index
        if f.done:
            add("AN-GRAMMAR-DONE", i, "`data: [DONE]` in an Anthropic stream (an OpenAI sentinel)",
                f"event: {f.event}, data: {f.data}", "no [DONE]; message_stop ends the stream")
            continue
        ev = f.json
        typ = ev.get("type") if isinstance(ev, dict) else None
        if not isinstance(ev, dict) or not isinstance(typ, str):  # a list type would not even hash
            add("AN-GRAMMAR-JSON", i, "data is not a JSON object with a string type",
                f.json_error or f.data, 'a JSON object with "type"')
            continue
        if typ == "ping":
            continue  # "any number of ping events", anywhere
        if typ not in EVENT_TYPES:
            add("AN-GRAMMAR-UNKNOWN-EVENT", i, f"unknown event type {typ!r} (recorded; clients are told to "
                "handle unknown event types gracefully)", f"event: {f.event}, type: {typ}",
                sorted(EVENT_TYPES), informational=True)
            continue
        names.check(f, typ)
        if error_frame is not None:
            add("AN-GRAMMAR-AFTER-ERROR", i, f"{typ} after the error event at frame #{error_frame}", typ,
                "nothing after the error (ping at most)")
            continue
        if typ == "error":
            error_frame = i
            err = ev.get("error")
            body = {k: err.get(k) for k in ("type", "message") if k in err} if isinstance(err, dict) else err
            what = f"{err.get('type')}: {err.get('message')}" if isinstance(err, dict) else short(err)
            add("AN-GRAMMAR-ERROR-EVENT", i, f"the endpoint reported an error in the stream ({what})", body,
                informational=True)
            continue
        if stop_frame is not None:
            add("AN-GRAMMAR-AFTER-STOP", i, f"{typ} after message_stop (frame #{stop_frame})", typ,
                "nothing after message_stop (ping at most)")
            continue
        if typ == "message_start":
            if start_frame is not None:
                add("AN-GRAMMAR-START", i, f"a second message_start (the first at frame #{start_frame})",
                    "message_start", "exactly one message_start")
                continue
            start_frame = i
            _check_message_start(ev, i, add)
            continue
        if start_frame is None and not start_reported:
            start_reported = True
            add("AN-GRAMMAR-START", i, f"{typ} before message_start", typ, "message_start first")

        if typ.startswith("content_block_") and delta_frame is not None:
            add("AN-GRAMMAR-ORDER", i, f"{typ} after the first message_delta (frame #{delta_frame})",
                f"{typ} index {ev.get('index')}", "every content block before message_delta")
            continue

        if typ == "content_block_start":
            _block_start(ev, i, blocks, order, add)
            continue

        if typ in ("content_block_delta", "content_block_stop"):
            _block_event(typ, ev, i, blocks, add)
            continue

        if typ == "message_delta":
            close_open(i, "before message_delta")
            delta_frame = i if delta_frame is None else delta_frame
            usage = ev.get("usage")
            if not isinstance(usage, dict) or not _is_int(usage.get("output_tokens")):
                add("AN-GRAMMAR-DELTA-USAGE", i, "message_delta without an integer usage.output_tokens",
                    usage, '"usage": {"output_tokens": <int>} (cumulative)')
            delta = ev.get("delta")
            if isinstance(delta, dict):  # the SDK sets stop_reason from every message_delta
                stop_reason, stop_reason_frame = delta.get("stop_reason"), i
                known = isinstance(stop_reason, str) and stop_reason in STOP_REASONS  # a list would not hash
                if stop_reason is not None and not known:
                    add("AN-GRAMMAR-STOP-REASON", i, f"unknown stop_reason {stop_reason!r}", stop_reason,
                        sorted(STOP_REASONS))
            continue

        if typ == "message_stop":
            stop_frame = i
            close_open(i, "before message_stop")
            if stop_reason is None:
                where = (f"the last message_delta (frame #{stop_reason_frame}) has stop_reason null"
                         if stop_reason_frame is not None else "no message_delta set one")
                add("AN-GRAMMAR-STOP-REASON", i, f"message_stop, but the message has no stop_reason: {where}",
                    "stop_reason null", "a stop_reason in the last message_delta")
            continue

    names.report(sink, _sdk_note)
    for b in order:  # a block stopped without any signature; one signed late is AN-GRAMMAR-SIGNATURE
        if b.type == "thinking" and b.stop_frame is not None and not b.signed:
            add("AN-GRAMMAR-SIGNATURE-MISSING", b.stop_frame, f"thinking block {b.index} was stopped "
                "without a signature", "no non-empty signature_delta",
                "signature_delta before content_block_stop")
    if error_frame is None:  # an error ends a stream early: nothing missing at the end is judged then
        if start_frame is None and not start_reported:
            sink.at_end("AN-GRAMMAR-START", "no message_start in the stream", "no message_start",
                        "message_start first")
        if stop_frame is None:
            last = events[-1].json.get("type") if events and isinstance(events[-1].json, dict) else None
            sink.at_end("AN-GRAMMAR-STOP-MISSING", "the stream ended without message_stop",
                        f"last event: {last}", "message_stop")
            close_open(sink.last, "before the stream ended")

    if isinstance(stop_reason, str) and stop_reason in STOP_REASONS:
        last_block = order[-1].type if order else None
        at = stop_frame if stop_frame is not None else stop_reason_frame
        if stop_reason == "tool_use" and last_block != "tool_use":
            add("AN-GRAMMAR-STOP-TOOL-USE", at, "stop_reason tool_use but the message does not end with a "
                "tool_use block", f"last block: {last_block}", "a tool_use block last")
        elif last_block == "tool_use" and stop_reason in ("end_turn", "stop_sequence"):
            add("AN-GRAMMAR-STOP-TOOL-USE", at, f"the message ends with tool_use blocks but stop_reason is "
                f"{stop_reason}", stop_reason, "tool_use")
    return sink.out


def _block_start(ev: dict[str, Any], i: int, blocks: dict[int, _Block], order: list[_Block],
                 add: Any) -> None:
    idx = ev.get("index")
    opened = [b.index for b in order if b.open]
    if opened:
        add("AN-GRAMMAR-ONE-OPEN", i, f"block {idx} started while block {opened[0]} is open",
            f"open: {opened}", "content_block_stop first")
    if not _is_int(idx) or idx != len(order) or idx in blocks:
        add("AN-GRAMMAR-INDEX", i, "block index is not the block's position", idx, len(order))
    cb = ev.get("content_block")
    if not isinstance(cb, dict) or not isinstance(cb.get("type"), str):
        add("AN-GRAMMAR-BLOCK-START", i, "content_block is not an object with a type", cb,
            '{"type": "text" | "tool_use" | "thinking" | ...}')
        cb = cb if isinstance(cb, dict) else {}
    btype = cb.get("type")
    if btype in _TOOL_BLOCKS:
        problems = []
        if not isinstance(cb.get("id"), str) or not cb.get("id"):
            problems.append("id")
        if not isinstance(cb.get("name"), str) or not cb.get("name"):
            problems.append("name")
        if cb.get("input") != {}:
            problems.append("input")
        if problems:
            add("AN-GRAMMAR-TOOL-START", i, f"tool_use start lacks a valid {', '.join(problems)}",
                {k: cb.get(k) for k in ("id", "name", "input")}, "non-empty id and name, input {}")
    signed = btype == "thinking" and isinstance(cb.get("signature"), str) and bool(cb.get("signature"))
    key = idx if _is_int(idx) else -1 - len(order)
    block = _Block(key, btype, i, signed)
    blocks[key] = block
    order.append(block)


def _block_event(typ: str, ev: dict[str, Any], i: int, blocks: dict[int, _Block], add: Any) -> None:
    idx = ev.get("index")
    b = blocks.get(idx) if _is_int(idx) else None
    delta = ev.get("delta") if typ == "content_block_delta" else None
    dtype = delta.get("type") if isinstance(delta, dict) else None
    if b is None:
        add("AN-GRAMMAR-BLOCK-UNKNOWN", i, f"{typ} for block {idx!r}, which was never started",
            f"index {idx!r}", f"one of the started blocks {sorted(k for k in blocks if k >= 0)}")
        return
    if not b.open:
        if dtype == "signature_delta" and b.type == "thinking":
            b.signed = b.signed or bool(delta.get("signature"))  # type: ignore[union-attr]
            add("AN-GRAMMAR-SIGNATURE", i, f"signature_delta for thinking block {idx} after its "
                f"content_block_stop (frame #{b.stop_frame})", "signature_delta after the stop",
                "signature_delta before the stop")
        else:
            add("AN-GRAMMAR-BLOCK-CLOSED", i, f"{typ} for block {idx} after its content_block_stop "
                f"(frame #{b.stop_frame})", dtype or typ, "nothing after the block's stop")
        return
    if typ == "content_block_stop":
        b.open = False
        b.stop_frame = i
        if b.type in _TOOL_BLOCKS:
            _check_tool_json(b, i, add)
        return
    allowed = _DELTAS_FOR.get(b.type) if isinstance(b.type, str) else None
    fld = _DELTA_FIELD.get(dtype) if isinstance(dtype, str) else None
    if allowed is not None and dtype not in allowed:
        add("AN-GRAMMAR-DELTA-TYPE", i, f"{dtype} inside a {b.type} block", dtype, sorted(allowed))
        return
    if fld is not None and not isinstance(delta.get(fld[0]), fld[1]):  # type: ignore[union-attr]
        add("AN-GRAMMAR-DELTA-TYPE", i, f"{dtype} without a valid `{fld[0]}`", delta,
            f"`{fld[0]}` of type {fld[1].__name__}")
        return
    if allowed is not None and fld is None:
        add("AN-GRAMMAR-DELTA-TYPE", i, f"malformed delta in a {b.type} block", delta, sorted(allowed))
        return
    if dtype == "thinking_delta" and b.sign_frame is not None:
        add("AN-GRAMMAR-SIGNATURE", i, f"thinking_delta in block {idx} after its signature_delta "
            f"(frame #{b.sign_frame})", "thinking_delta after the signature",
            "all thinking before the signature")
    elif dtype == "signature_delta":
        b.sign_frame = i
        b.signed = b.signed or bool(delta.get("signature"))  # type: ignore[union-attr]
    elif dtype == "input_json_delta":
        b.json.append(delta["partial_json"])  # type: ignore[index]


def _check_tool_json(b: _Block, i: int, add: Any) -> None:
    joined = "".join(b.json)
    if joined.strip() == "":
        return
    try:
        ok = isinstance(json.loads(joined), dict)
    except (ValueError, RecursionError):
        ok = False
    if not ok:
        add("AN-GRAMMAR-TOOL-JSON", i, f"tool input of block {b.index} does not join to a JSON object",
            joined, "a JSON object")


def _check_message_start(ev: dict[str, Any], i: int, add: Any) -> None:
    msg = ev.get("message")
    expected = ('{"content": [], "stop_reason": null, '
                '"usage": {"input_tokens": <int>, "output_tokens": <int>}}')
    if not isinstance(msg, dict):
        add("AN-GRAMMAR-MESSAGE-START", i, "message_start without a message object", msg, expected)
        return
    problems = []
    if msg.get("content") != []:
        problems.append("content is not []")
    if msg.get("stop_reason", 0) is not None:
        problems.append("stop_reason is not null")
    usage = msg.get("usage")
    if not isinstance(usage, dict):
        problems.append("no usage")
    else:
        for key in ("input_tokens", "output_tokens"):
            if not _is_int(usage.get(key)):
                problems.append(f"usage.{key} is not an integer")
    if problems:
        add("AN-GRAMMAR-MESSAGE-START", i, "message_start: " + "; ".join(problems),
            {k: msg.get(k) for k in ("content", "stop_reason", "usage")}, expected)
