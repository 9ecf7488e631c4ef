"""OpenAI Responses stream grammar: rules over the API's fold.

``validate(frames, request=None)`` returns findings for ``RULES`` (API_FACTS.md, "OpenAI Responses"). It
keeps no stream state of its own: ``apis.responses.accumulate`` (re-exported here with
``final_message``) folds each event into ``{"response": ..., "output": {index: item}}`` and records its
notes and the stream's state (``apis.responses.record``).
"""

from __future__ import annotations

from typing import Any

from harnesscheck.protocol.apis import responses as _responses
from harnesscheck.protocol.apis.base import Reading
from harnesscheck.protocol.apis.base import is_int as _is_int
from harnesscheck.protocol.apis.base import json_object_text
from harnesscheck.protocol.apis.responses import (
    EVENT_TYPES,
    LENGTH_STOP,
    TERMINAL,
    Note,
    accumulate,
    did,
    final_message,
    notes_of,
)

from .findings import Collector, EventNames, Finding, frames_and_request, short, without_cut_call

__all__ = ["EVENT_TYPES", "INFORMATIONAL", "RULES", "TERMINAL", "accumulate", "final_message", "validate"]

# References: openai-python src/openai/_streaming.py (Stream.__stream__ parses every frame's data and
# yields it by the data's `type`; the SSE name matters only for `thread.*` and `error`; it stops at
# `[DONE]`), src/openai/types/responses/response_stream_event.py and its event types
# (ResponseQueuedEvent, ResponseContentPartAddedEvent with a `reasoning_text` part, ResponseErrorEvent,
# ResponseFailedEvent), lib/streaming/responses/_responses.py (accumulate_event: `response.created`
# first; `response.queued` handled like created and in_progress).
RULES: dict[str, str] = {
    "RS-GRAMMAR-JSON": "Every event's data is a JSON object with a string `type`.",
    "RS-GRAMMAR-EVENT-LINE": "(informational) An event without an SSE `event:` line (OpenAI's streams send "
    "one): the openai SDK and Codex read the data's `type`, so a stream without `event:` lines works; "
    "recorded, not judged.",
    "RS-GRAMMAR-EVENT-NAME": "A present SSE `event:` name equals the data's `type`.",
    "RS-GRAMMAR-UNKNOWN-EVENT": "(informational) An event type outside the documented Responses stream "
    "events: recorded, not judged (the SDK's stream helper passes unknown types through).",
    "RS-GRAMMAR-SEQUENCE": "Every event has an integer `sequence_number`, starting at 0 or 1 and "
    "increasing by exactly one.",
    "RS-GRAMMAR-CREATED": "`response.created` is the first event, and comes once.",
    "RS-GRAMMAR-IN-PROGRESS": "`response.in_progress` follows `response.created`; a `response.queued` may "
    "come between them (ResponseQueuedEvent: the response is queued and waiting to be processed), not "
    "after `response.in_progress`.",
    "RS-GRAMMAR-OUTPUT-INDEX": "`output_item.added` output_index values are 0, 1, 2, ... in order, and "
    "every event of an item carries its integer `output_index` (a content part's events their "
    "`content_index`); an event without one is still placed by its `item_id`, as Codex reads it.",
    "RS-GRAMMAR-ITEM-ORDER": "Within an item: output_item.added, then (content_part.added, "
    "output_text.delta*, output_text.done, content_part.done)* or (function_call_arguments.delta*, "
    "function_call_arguments.done) "
    "or reasoning events (with or without a `reasoning_text` content part around them), then "
    "output_item.done; one item open at a time; nothing after its done.",
    "RS-GRAMMAR-ITEM-IDS": "An item has a string `id`, and every event of it carries the same `item_id` "
    "for the same `output_index`.",
    "RS-GRAMMAR-ITEM-UNCLOSED": "Every added item gets its `output_item.done` before the response ends.",
    "RS-GRAMMAR-FUNCTION-CALL": "A function_call item has a non-empty `name` and `call_id` at "
    "`output_item.added`, unchanged at `output_item.done`.",
    "RS-GRAMMAR-ARGS-DONE": "`function_call_arguments.done` equals the joined deltas and the item's "
    "`arguments` at `output_item.done`.",
    "RS-GRAMMAR-ARGS-JSON": "A function call's final `arguments` parse as a JSON object (the last item of a "
    "response left incomplete at `max_output_tokens` is the cut-call rules' to judge).",
    "RS-GRAMMAR-CUSTOM-INPUT": "A custom tool call's input streams as response.custom_tool_call_input.delta "
    "events, then its .done, and the joined deltas, the .done input and the item's input at output_item.done "
    "are the same text (judged by RS-TOOLKIND-002:stream).",
    "RS-GRAMMAR-TEXT-DONE": "Every text `.done` (output text, content part, refusal, reasoning summary or "
    "text, the item at its done) equals the joined deltas.",
    "RS-GRAMMAR-COMPLETED": "The stream ends with exactly one `response.completed` (or `.failed` / "
    "`.incomplete`), and nothing follows it.",
    "RS-GRAMMAR-COMPLETED-OUTPUT": "The final response's `output` lists the streamed items, by id, in "
    "output_index order.",
    "RS-GRAMMAR-USAGE": "The completed response has `usage` with integer input_tokens, output_tokens and "
    "total_tokens.",
    "RS-GRAMMAR-ERROR-EVENT": "(informational) The endpoint reported an error in the stream (an `error` "
    "event, or `response.failed`, a valid terminal event): the endpoint's error, with its body, not a "
    "grammar violation; a stream that an `error` event ended is not judged for what is missing at the end.",
}

INFORMATIONAL = frozenset({"RS-GRAMMAR-EVENT-LINE", "RS-GRAMMAR-UNKNOWN-EVENT", "RS-GRAMMAR-ERROR-EVENT"})





# -- validator: rules over the fold's record (apis.responses.record) --------------------------

def validate(source: Any, request: Any = None) -> list[Finding]:
    """Judge a Responses stream; never raises on what the server sent. The stream's state is the fold's
    (``accumulate``, ``record``): each event's record says what it did, and the rules below judge its
    notes, the event's own fields, and the state at the end."""
    frames, _ = frames_and_request(source, request)
    events = [f for f in frames if f.kind == "event"]
    sink = Collector(events)
    add = sink.add
    names = EventNames("RS-GRAMMAR-EVENT-LINE", "RS-GRAMMAR-EVENT-NAME", absent_informational=True)
    snap: dict[str, Any] | None = None
    at: list[int] = []  # the frame of each folded event, by its number
    step = Reading.of(_responses, source).fold()  # the stream's one fold, shared with its other readers

    for f in events:
        i = f.index
        if f.done:
            if ((snap or {}).get("_g") or {}).get("terminal") is None:  # a trailing [DONE] is tolerated
                add("RS-GRAMMAR-COMPLETED", i, "data: [DONE] before the terminal event (the openai SDK stops "
                    "reading at [DONE])", "[DONE]", "response.completed / .failed / .incomplete first")
            continue
        ev = f.json
        if not isinstance(ev, dict):
            add("RS-GRAMMAR-JSON", i, "data is not a JSON object", f.json_error or f.data,
                'a JSON object with "type"')
            continue
        snap = step(ev)
        at.append(i)
        rec = (snap or {}).get("_event") or {}
        typ: Any = ev.get("type")
        what = did(rec)
        _notes([n for n in notes_of(rec) if n[0].startswith("seq-")], i, at, add)
        if what == "no-type":
            add("RS-GRAMMAR-JSON", i, "data has no string type", typ, 'a string "type"')
            continue
        if what == "unknown":
            add("RS-GRAMMAR-UNKNOWN-EVENT", i, f"unknown event type {typ!r} (recorded, not judged)",
                f"event: {f.event}, type: {typ}", "a documented Responses stream event", informational=True)
            continue
        names.check(f, typ)
        if what == "after-terminal":
            add("RS-GRAMMAR-COMPLETED", i, f"{typ} after the terminal {rec['terminal_type']} (frame "
                f"#{at[rec['terminal']]})", typ, "nothing after the terminal event")
            continue
        if what == "error":
            fields = {k: ev[k] for k in ("code", "message", "param") if ev.get(k) is not None}
            body = fields or ev.get("error")
            add("RS-GRAMMAR-ERROR-EVENT", i, f"the endpoint reported an error in the stream ({_what(body)})",
                body, informational=True)
            continue
        _notes([n for n in notes_of(rec) if not n[0].startswith("seq-")], i, at, add, ev)
        if what == "terminal" and typ == "response.failed":  # the fold notes no open item then
            terminal: Any = ev.get("response")
            body = terminal.get("error") if isinstance(terminal, dict) else None
            add("RS-GRAMMAR-ERROR-EVENT", i, f"the endpoint reported the response failed ({_what(body)})",
                body, informational=True)
        if what == "terminal":
            resp: Any = ev.get("response")
            _check_terminal(typ, resp if isinstance(resp, dict) else {}, i,
                            rec["ids"], add)

    names.report(sink)
    g = (snap or {}).get("_g") or {}
    cut_from = _cut_from(events)
    if g.get("terminal") is None and g.get("error") is None:
        sink.at_end("RS-GRAMMAR-COMPLETED", "the stream ended without response.completed / .failed / "
                    ".incomplete", "no terminal event", "response.completed")
        for it in (g.get("items") or {}).values():
            if it["open"]:
                sink.at_end("RS-GRAMMAR-ITEM-UNCLOSED",
                            f"item {it['index']} (added at frame #{at[it['start']]}) "
                            "was never done", f"item {it['index']} open", "response.output_item.done")
    if not g.get("events"):
        sink.at_end("RS-GRAMMAR-CREATED", "no events at all", "no event", "response.created first")
    return without_cut_call(sink.out, "RS-GRAMMAR-ARGS-JSON", cut_from)


def _cut_from(events: list[Any]) -> int | None:
    """The frame of the last item's output_item.added when the response ended incomplete at its output
    limit (that item, a call, was cut: the limit may truncate; TOOLS-005 judges a cut call), else None."""
    added = [f.index for f in events if isinstance(f.json, dict) and f.json.get("type") == "response.output_item.added"]
    ends = [f.json for f in events if isinstance(f.json, dict) and f.json.get("type") == "response.incomplete"]
    response = ends[-1].get("response") if ends else None
    details = response.get("incomplete_details") if isinstance(response, dict) else None
    reason = details.get("reason") if isinstance(details, dict) else None
    return added[-1] if added and reason == LENGTH_STOP else None


_ORDER = "RS-GRAMMAR-ITEM-ORDER"


def _notes(notes: list[Note], i: int, at: list[int], add: Any, ev: Any = None) -> None:
    """The findings of one event, from the notes the fold recorded."""
    for note in notes:
        kind, a = note[0], note[1:]
        if kind == "seq-missing":
            add("RS-GRAMMAR-SEQUENCE", i, f"{a[0]} without an integer sequence_number", a[1],
                "an integer sequence_number")
        elif kind == "seq-first":
            add("RS-GRAMMAR-SEQUENCE", i, f"first sequence_number is {a[0]}", a[0], "0 or 1")
        elif kind == "seq-gap":
            add("RS-GRAMMAR-SEQUENCE", i, f"sequence_number {a[0]} after {a[1]}", a[0], a[1] + 1)
        elif kind == "created-again":
            where = "not the first event" if a[0] is None else \
                f"a second one (the first at frame #{at[a[0]]})"
            add("RS-GRAMMAR-CREATED", i, f"response.created is {where}", "response.created",
                "response.created once, first")
        elif kind == "first-not-created":
            add("RS-GRAMMAR-CREATED", i, f"the first event is {ev.get('type')}", ev.get("type"),
                "response.created")
        elif kind == "queued-late":
            add("RS-GRAMMAR-IN-PROGRESS", i, f"response.queued after response.in_progress (frame "
                f"#{at[a[0]]})", "response.queued", "response.queued before response.in_progress")
        elif kind == "not-in-progress":
            created = at[a[0]] if a[0] is not None else None
            add("RS-GRAMMAR-IN-PROGRESS", i, f"response.created (frame #{created}) is followed by "
                f"{ev.get('type')}", ev.get("type"),
                          "response.in_progress (after an optional response.queued)")
        elif kind == "unclosed":
            add("RS-GRAMMAR-ITEM-UNCLOSED", i, f"item {a[0]} (added at frame #{at[a[1]]}) not done "
                f"before {ev.get('type')}", f"item {a[0]} open", "response.output_item.done first")
        else:
            _item_note(kind, a, i, add, ev)


def _item_note(kind: str, a: tuple[Any, ...], i: int, add: Any, ev: Any) -> None:
    typ = ev.get("type")
    if kind == "added-while-open":
        add(_ORDER, i, f"item {a[0]} added while item {a[1][0]} is open", f"open: {a[1]}",
            "output_item.done of the open item first")
    elif kind == "output-index":
        add("RS-GRAMMAR-OUTPUT-INDEX", i, "output_item.added without an integer output_index" if a[0] is None
            else "output_index is not the next position", "no output_index" if a[0] is None else a[0], a[1])
    elif kind == "index-missing":
        add("RS-GRAMMAR-OUTPUT-INDEX", i, f"{a[0]} without an integer {a[1]}", f"no {a[1]}",
            f"an integer {a[1]}")
    elif kind == "added-no-item":
        add("RS-GRAMMAR-ITEM-IDS", i, "output_item.added without an item object", a[0],
            '{"id": ..., "type": ...}')
    elif kind == "item-no-id":
        add("RS-GRAMMAR-ITEM-IDS", i, "item without a string id", a[0], "a non-empty string id")
    elif kind == "function-call-added":
        add("RS-GRAMMAR-FUNCTION-CALL", i, f"function_call item added without {', '.join(a[0])}", a[1],
            "non-empty name and call_id")
    elif kind == "no-item":
        add(_ORDER, i, f"{typ} for output_index {a[0]!r}, which was never added", a[0],
            f"one of the added items {a[1]}")
    elif kind == "item-closed":
        add(_ORDER, i, f"{typ} after output_item.done of item {a[0]}", typ,
            "nothing for an item after its output_item.done")
    elif kind == "item-id":
        add("RS-GRAMMAR-ITEM-IDS", i, f"item_id differs from item {a[0]}'s id", a[1], a[2])
    elif kind == "part-added-misplaced":
        ci, ptype, itype, again = a
        why = f"content_index {ci!r} already added" if again else f"a {ptype} part in a {itype} item"
        add(_ORDER, i, f"content_part.added out of place ({why})",
            {"content_index": ci, "part": ptype, "item": itype},
            "a new content_index; output_text/refusal parts in a message, reasoning_text in a reasoning item")
    elif kind == "part-done-early":
        add(_ORDER, i, f"content_part.done of part {a[0]!r} without its text .done, or after the part was "
            "done", f"part state: {a[1]}", "the part's text .done before content_part.done")
    elif kind == "part-text":
        add("RS-GRAMMAR-TEXT-DONE", i, f"content part {a[0]} {a[1]} differs from the joined deltas", a[2],
            a[3])
    elif kind == "args-misplaced":
        add(_ORDER, i, f"{a[0]} out of place (item type {a[1]}, arguments already done: {a[2]})", a[0],
            "argument events of a function_call item, before its .done")
    elif kind == "args-done":
        add("RS-GRAMMAR-ARGS-DONE", i, "arguments.done differs from the joined deltas", a[0], a[1])
    elif kind == "text-outside-part":
        add(_ORDER, i, f"{a[0]} outside an open content part (content_index {a[1]!r})", f"part state: {a[2]}",
            "inside content_part.added ... content_part.done")
    elif kind == "text-after-done":
        add(_ORDER, i, f"{a[0]} after the {a[1]}.done of index {a[2]}", a[0], f"nothing after {a[1]}.done")
    elif kind == "text-done":
        add("RS-GRAMMAR-TEXT-DONE", i, f"{a[0]} {a[1]} differs from the joined deltas", a[2], a[3])
    else:
        _done_note(kind, a, i, add)


def _done_note(kind: str, a: tuple[Any, ...], i: int, add: Any) -> None:
    if kind == "done-no-item":
        add("RS-GRAMMAR-ITEM-IDS", i, "output_item.done without an item object", a[0],
            '{"id": ..., "type": ...}')
    elif kind == "done-id":
        add("RS-GRAMMAR-ITEM-IDS", i, "item id at done differs from the id at added", a[0], a[1])
    elif kind == "done-parts-open":
        add(_ORDER, i, f"output_item.done of item {a[0]} with content parts still open",
            f"open parts: {a[1]}",
            "content_part.done for every part first")
    elif kind == "function-call-changed":
        add("RS-GRAMMAR-FUNCTION-CALL", i, "name or call_id changed between added and done", a[0], a[1])
    elif kind == "done-no-args-done":
        add(_ORDER, i, f"function_call item {a[0]} done without function_call_arguments.done",
            "no function_call_arguments.done", "function_call_arguments.done before output_item.done")
    elif kind == "custom-no-done":
        add("RS-GRAMMAR-CUSTOM-INPUT", i, f"custom_tool_call {a[0]} ended without "
            "response.custom_tool_call_input.done", "no custom_tool_call_input.done",
            "custom_tool_call_input.done before output_item.done")
    elif kind == "custom-input":
        add("RS-GRAMMAR-CUSTOM-INPUT", i, f"custom_tool_call {a[0]}: the joined deltas {a[1][:60]!r}, the .done "
            f"input {str(a[2])[:60]!r} and the item's input {str(a[3])[:60]!r} differ", a[3], a[1])
    elif kind == "done-args":
        add("RS-GRAMMAR-ARGS-DONE", i, "item arguments at done differ from the streamed arguments", a[0],
            a[1])
    elif kind == "done-args-json":
        if not json_object_text(a[0]):  # the one criterion for arguments (RFC 8259: no NaN or Infinity)
            add("RS-GRAMMAR-ARGS-JSON", i, "function_call arguments are not a JSON object", a[0],
                "a JSON object")
    elif kind == "done-text":
        field, idx, key = a[0], a[1], a[2]
        add("RS-GRAMMAR-TEXT-DONE", i, f"item {field}[{idx}].{key} at done differs from the deltas", a[3],
            a[4])


def _what(body: Any) -> str:
    if isinstance(body, dict):
        return f"{body.get('code') or body.get('type')}: {body.get('message')}"
    return short(body)


def _check_terminal(typ: str, resp: dict[str, Any], i: int, ids: list[Any], add: Any) -> None:
    """The terminal event's own fields: its output lists the streamed items in order (``ids``, from the
    fold), and it carries the usage (items left open are the fold's notes)."""
    if typ == "response.failed":  # an error ended the response: what it left open is not judged
        return
    output = resp.get("output")
    got = [o.get("id") if isinstance(o, dict) else None for o in output] if isinstance(output, list) else None
    if got != ids:
        add("RS-GRAMMAR-COMPLETED-OUTPUT", i, "final output does not list the streamed items in order",
            got, ids)
    usage = resp.get("usage")
    if usage is None:
        usage = "no usage"
    bad = ["usage"] if not isinstance(usage, dict) else [
        k for k in ("input_tokens", "output_tokens", "total_tokens") if not _is_int(usage.get(k))]
    if bad:
        add("RS-GRAMMAR-USAGE", i, f"{typ} without integer {', '.join(bad)}", usage,
            "usage with integer input_tokens, output_tokens and total_tokens")
