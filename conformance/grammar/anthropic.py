"""Anthropic Messages stream grammar: rules over the API's fold.

``validate(frames, request=None)`` returns the ``Finding`` list for the rules in ``RULES`` (API_FACTS.md,
"Anthropic Messages"). It keeps no stream state of its own: ``apis.anthropic.accumulate`` (re-exported
here with ``final_message``) folds each event and records what it did to the stream's state
(``apis.anthropic.record``); the rules judge that record, the event's own fields and the state at the end.
"""

from __future__ import annotations

from typing import Any

from harnesscheck.protocol.apis.anthropic import (
    What,
    did,
    EVENT_TYPES,
    LENGTH_STOP,
    accumulate,
    final_message,
    recording,
)
from harnesscheck.protocol.apis.anthropic import TOOL_BLOCKS as _TOOL_BLOCKS
from harnesscheck.protocol.apis import anthropic as _anthropic
from harnesscheck.protocol.apis.base import Reading
from harnesscheck.protocol.apis.base import is_int as _is_int
from harnesscheck.protocol.apis.base import json_object_text

from .findings import Collector, EventNames, Finding, frames_and_request, short, without_cut_call

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
    "joins to {}; the last block of a message cut by `max_tokens` is the cut-call rules' to judge).",
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

STOP_REASONS = frozenset(
    {
        "end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal",
        "model_context_window_exceeded",
    }
)

# -- validator: rules over the fold's record (apis.anthropic.record) --------------------------

def _sdk_note(event: str | None, typ: str) -> str:
    if event is None:
        return ": the anthropic SDK drops frames without an event name"
    if event not in SDK_EVENT_NAMES:
        return f": the anthropic SDK drops events named {event!r}"
    return ""


def validate(source: Any, request: Any = None) -> list[Finding]:
    """Judge an Anthropic Messages stream; never raises on what the server sent. The stream's state is
    the fold's (``accumulate`` from ``recording()``): each event's record says what it did, and the
    rules below judge that record, the event's own fields, and the state at the end."""
    frames, _ = frames_and_request(source, request)
    events = [f for f in frames if f.kind == "event"]
    sink = Collector(events)
    names = EventNames("AN-GRAMMAR-EVENT-LINE", "AN-GRAMMAR-EVENT-NAME")
    # Folded from recording() (events before message_start recorded too); from None, the same snapshots,
    # when the first event folded is message_start: the stream's one fold, shared with its other readers.
    first = next((f.json for f in events if not f.done and isinstance(f.json, dict)
                  and isinstance(f.json.get("type"), str)), None)
    step = Reading.of(_anthropic, source).fold(
        None if first is not None and first.get("type") == "message_start" else recording())
    snap: dict[str, Any] | None = step.snap
    at: list[int] = []  # the frame of each recorded event, by its number

    for f in events:
        if f.done:
            sink.add("AN-GRAMMAR-DONE", f.index, "`data: [DONE]` in an Anthropic stream (an OpenAI sentinel)",
                     f"event: {f.event}, data: {f.data}", "no [DONE]; message_stop ends the stream")
            continue
        ev = f.json
        if not isinstance(ev, dict) or not isinstance(ev.get("type"), str):  # a list type would not hash
            sink.add("AN-GRAMMAR-JSON", f.index, "data is not a JSON object with a string type",
                     f.json_error or f.data, 'a JSON object with "type"')
            continue
        snap = step(ev)
        at.append(f.index)
        rec = (snap or {}).get("_event") or {}
        if did(rec) not in ("ping", "unknown"):
            names.check(f, ev["type"])
        _judge_event(rec, ev, f, at, sink)

    names.report(sink, _sdk_note)
    g = (snap or {}).get("_g") or {}
    _judge_end(g, events, at, sink)
    starts = [f.index for f in events if isinstance(f.json, dict) and f.json.get("type") == "content_block_start"]
    cut_from = starts[-1] if g.get("reason") == LENGTH_STOP and starts else None  # the last block, cut
    return without_cut_call(sink.out, "AN-GRAMMAR-TOOL-JSON", cut_from)


def _frame(at: list[int], n: int | None) -> int | None:
    return None if n is None else at[n]


def _judge_event(rec: dict[str, Any], ev: dict[str, Any], f: Any, at: list[int], sink: Collector) -> None:
    """The findings of one event, from what the fold recorded it did."""
    add, i, typ, what = sink.add, f.index, ev["type"], did(rec)
    if what == "unknown":
        add("AN-GRAMMAR-UNKNOWN-EVENT", i, f"unknown event type {typ!r} (recorded; clients are told to "
            "handle unknown event types gracefully)", f"event: {f.event}, type: {typ}",
            sorted(EVENT_TYPES), informational=True)
    elif what == "after-error":
        add("AN-GRAMMAR-AFTER-ERROR", i, f"{typ} after the error event at frame #{_frame(at, rec['error'])}",
            typ, "nothing after the error (ping at most)")
    elif what == "error":
        err = ev.get("error")
        body = {k: err.get(k) for k in ("type", "message") if k in err} if isinstance(err, dict) else err
        said = f"{err.get('type')}: {err.get('message')}" if isinstance(err, dict) else short(err)
        add("AN-GRAMMAR-ERROR-EVENT", i, f"the endpoint reported an error in the stream ({said})", body,
            informational=True)
    elif what == "after-stop":
        add("AN-GRAMMAR-AFTER-STOP", i, f"{typ} after message_stop (frame #{_frame(at, rec['stop'])})", typ,
            "nothing after message_stop (ping at most)")
    elif what == "second-start":
        add("AN-GRAMMAR-START", i, f"a second message_start (the first at frame #{_frame(at, rec['start'])})",
            "message_start", "exactly one message_start")
    elif what == "start":
        _check_message_start(ev, i, add)
    if rec.get("early"):
        add("AN-GRAMMAR-START", i, f"{typ} before message_start", typ, "message_start first")
    if what == "after-delta":
        add("AN-GRAMMAR-ORDER", i, f"{typ} after the first message_delta (frame #{_frame(at, rec['delta'])})",
            f"{typ} index {ev.get('index')}", "every content block before message_delta")
    elif what == "block-start":
        _block_start(rec, ev, i, add)
    elif what in _BLOCK_EVENT:
        _BLOCK_EVENT[what](rec, typ, ev, i, at, add)
    elif what in ("message-delta", "message-stop"):
        for key, btype, started in rec.get("closed") or ():
            add("AN-GRAMMAR-BLOCK-UNSTOPPED", i, f"block {key} ({btype}, started at frame #{at[started]}) "
                f"was never stopped before {typ}", f"block {key} still open", "content_block_stop first")
        if what == "message-delta":
            _message_delta(rec, ev, i, add)
        elif rec.get("reason") is None:
            where = (f"the last message_delta (frame #{at[rec['reason_at']]}) has stop_reason null"
                     if rec.get("reason_at") is not None else "no message_delta set one")
            add("AN-GRAMMAR-STOP-REASON", i, f"message_stop, but the message has no stop_reason: {where}",
                "stop_reason null", "a stop_reason in the last message_delta")


def _message_delta(rec: dict[str, Any], ev: dict[str, Any], i: int, add: Any) -> None:
    usage = ev.get("usage")
    if not isinstance(usage, dict) or not _is_int(usage.get("output_tokens")):
        add("AN-GRAMMAR-DELTA-USAGE", i, "message_delta without an integer usage.output_tokens", usage,
            '"usage": {"output_tokens": <int>} (cumulative)')
    reason = rec.get("reason")
    if reason is not None and not (isinstance(reason, str) and reason in STOP_REASONS):  # a list: no hash
        add("AN-GRAMMAR-STOP-REASON", i, f"unknown stop_reason {reason!r}", reason, sorted(STOP_REASONS))


def _block_start(rec: dict[str, Any], ev: dict[str, Any], i: int, add: Any) -> None:
    idx = rec["index"]
    if rec["open"]:
        add("AN-GRAMMAR-ONE-OPEN", i, f"block {idx} started while block {rec['open'][0]} is open",
            f"open: {rec['open']}", "content_block_stop first")
    if rec["misplaced"]:
        add("AN-GRAMMAR-INDEX", i, "block index is not the block's position", idx, rec["position"])
    cb = ev.get("content_block")
    if not isinstance(cb, dict) or not isinstance(cb.get("type"), str):
        add("AN-GRAMMAR-BLOCK-START", i, "content_block is not an object with a type", cb,
            '{"type": "text" | "tool_use" | "thinking" | ...}')
        cb = cb if isinstance(cb, dict) else {}
    if cb.get("type") in _TOOL_BLOCKS:
        problems = []
        if not isinstance(cb.get("id"), str) or not cb.get("id"):
            problems.append("id")
        if not isinstance(cb.get("name"), str) or not cb.get("name"):
            problems.append("name")
        if cb.get("input") != {}:
            problems.append("input")
        if problems == ["input"] and "input" not in cb:  # llama-server 11434's start (fault an-tool-start-no-input)
            add("AN-GRAMMAR-TOOL-START", i, "tool_use start without its input {}",
                {k: cb.get(k) for k in ("id", "name", "input")}, "non-empty id and name, input {}")
        elif problems:
            add("AN-GRAMMAR-TOOL-START", i, f"tool_use start lacks a valid {', '.join(problems)}",
                {k: cb.get(k) for k in ("id", "name", "input")}, "non-empty id and name, input {}")


Rec = dict[str, Any]


def _unknown_block(rec: Rec, typ: str, ev: Rec, i: int, at: list[int], add: Any) -> None:
    idx = rec["index"]
    add("AN-GRAMMAR-BLOCK-UNKNOWN", i, f"{typ} for block {idx!r}, which was never started", f"index {idx!r}",
        f"one of the started blocks {rec['started']}")


def _closed_block(rec: Rec, typ: str, ev: Rec, i: int, at: list[int], add: Any) -> None:
    idx, stop = rec["index"], at[rec["stop"]]
    if did(rec) == "signature-after-stop":
        add("AN-GRAMMAR-SIGNATURE", i, f"signature_delta for thinking block {idx} after its "
            f"content_block_stop (frame #{stop})", "signature_delta after the stop",
            "signature_delta before the stop")
    else:
        add("AN-GRAMMAR-BLOCK-CLOSED", i, f"{typ} for block {idx} after its content_block_stop "
            f"(frame #{stop})", rec["delta"] or typ, "nothing after the block's stop")


def _block_stop(rec: Rec, typ: str, ev: Rec, i: int, at: list[int], add: Any) -> None:
    joined = rec["json"]  # one parse of tool input, the fold's (RFC 8259: NaN and Infinity are no JSON)
    if rec["block"] in _TOOL_BLOCKS and joined.strip() != "" and not json_object_text(joined):
        add("AN-GRAMMAR-TOOL-JSON", i, f"tool input of block {rec['index']} does not join to a JSON object",
            joined, "a JSON object")


def _bad_delta(rec: Rec, typ: str, ev: Rec, i: int, at: list[int], add: Any) -> None:
    what, dtype, btype, delta = did(rec), rec["delta"], rec["block"], ev.get("delta")
    if what == "delta-type":
        add("AN-GRAMMAR-DELTA-TYPE", i, f"{dtype} inside a {btype} block", dtype, rec["allowed"])
    elif what == "delta-field":
        add("AN-GRAMMAR-DELTA-TYPE", i, f"{dtype} without a valid `{rec['field']}`", delta,
            f"`{rec['field']}` of type {rec['kind']}")
    elif what == "delta-malformed":
        add("AN-GRAMMAR-DELTA-TYPE", i, f"malformed delta in a {btype} block", delta, rec["allowed"])
    else:  # thinking after the signature
        add("AN-GRAMMAR-SIGNATURE", i, f"thinking_delta in block {rec['index']} after its signature_delta "
            f"(frame #{at[rec['sign']]})", "thinking_delta after the signature",
            "all thinking before the signature")


_BLOCK_EVENT: dict[What, Any] = {"unknown-block": _unknown_block, "signature-after-stop": _closed_block,
                "block-closed": _closed_block, "block-stop": _block_stop, "delta-type": _bad_delta,
                "delta-field": _bad_delta, "delta-malformed": _bad_delta,
                "thinking-after-signature": _bad_delta}


def _judge_end(g: dict[str, Any], events: list[Any], at: list[int], sink: Collector) -> None:
    """What the state at the end of the stream says: signatures, a missing start or stop, blocks left
    open, and the stop_reason against the last block."""
    order = g.get("blocks") or ()
    for b in order:  # a block stopped without any signature; one signed late is AN-GRAMMAR-SIGNATURE
        if b["type"] == "thinking" and b["stop"] is not None and not b["signed"]:
            sink.add("AN-GRAMMAR-SIGNATURE-MISSING", at[b["stop"]], f"thinking block {b['index']} was "
                     "stopped without a signature", "no non-empty signature_delta",
                     "signature_delta before content_block_stop")
    if g.get("error") is None:  # an error ends a stream early: nothing missing at the end is judged then
        if g.get("start") is None and not g.get("early"):
            sink.at_end("AN-GRAMMAR-START", "no message_start in the stream", "no message_start",
                        "message_start first")
        if g.get("stop") is None:
            last = events[-1].json.get("type") if events and isinstance(events[-1].json, dict) else None
            sink.at_end("AN-GRAMMAR-STOP-MISSING", "the stream ended without message_stop",
                        f"last event: {last}", "message_stop")
            for b in order:
                if b["open"]:
                    sink.add("AN-GRAMMAR-BLOCK-UNSTOPPED", sink.last, f"block {b['index']} ({b['type']}, "
                             f"started at frame #{at[b['start']]}) was never stopped before the stream ended",
                             f"block {b['index']} still open", "content_block_stop first")
    reason = g.get("reason")
    if isinstance(reason, str) and reason in STOP_REASONS:
        last_block = order[-1]["type"] if order else None
        where = _frame(at, g["stop"] if g.get("stop") is not None else g.get("reason_at"))
        if reason == "tool_use" and last_block != "tool_use":
            sink.add("AN-GRAMMAR-STOP-TOOL-USE", where, "stop_reason tool_use but the message does not end "
                     "with a tool_use block", f"last block: {last_block}", "a tool_use block last")
        elif last_block == "tool_use" and reason in ("end_turn", "stop_sequence"):
            sink.add("AN-GRAMMAR-STOP-TOOL-USE", where, f"the message ends with tool_use blocks but "
                     f"stop_reason is {reason}", reason, "tool_use")


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
