"""OpenAI Responses stream grammar: a pure fold and a validator.

``accumulate(event, snapshot)`` folds one event into ``{"response": ..., "output": {index: item}}``
without mutating the given snapshot; ``final_message(frames)`` returns ``{"response": the final
response object, "output": [items by output_index]}``; ``validate(frames, request=None)`` returns
findings for ``RULES`` (API_FACTS.md, "OpenAI Responses").
"""

from __future__ import annotations

import json
from typing import Any

from harnesscheck.conformance.apis.base import is_int as _is_int
from harnesscheck.conformance.apis.base import text as _s
from harnesscheck.conformance.apis.responses import _TEXT_STREAMS, TERMINAL, accumulate, final_message

from .findings import Collector, EventNames, Finding, frames_and_request, short

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
    "RS-GRAMMAR-OUTPUT-INDEX": "`output_item.added` output_index values are 0, 1, 2, ... in order.",
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
    "RS-GRAMMAR-ARGS-JSON": "A function call's final `arguments` parse as a JSON object.",
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


EVENT_TYPES = frozenset(
    {
        "response.created", "response.in_progress", "response.queued", *TERMINAL,
        "response.output_item.added", "response.output_item.done",
        "response.content_part.added", "response.content_part.done",
        "response.output_text.delta", "response.output_text.done", "response.output_text.annotation.added",
        "response.refusal.delta", "response.refusal.done",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
        "response.reasoning_text.delta", "response.reasoning_text.done",
        "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done",
        "response.file_search_call.in_progress", "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.web_search_call.in_progress", "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.code_interpreter_call.in_progress", "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed", "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.done",
        "response.image_generation_call.in_progress", "response.image_generation_call.generating",
        "response.image_generation_call.partial_image", "response.image_generation_call.completed",
        "response.mcp_call.in_progress", "response.mcp_call.completed", "response.mcp_call.failed",
        "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
        "response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
        "response.mcp_list_tools.failed",
        "response.audio.delta", "response.audio.done", "response.audio.transcript.delta",
        "response.audio.transcript.done",
        "response.shell_call_command.added", "response.shell_call_command.delta",
        "response.shell_call_command.done", "response.shell_call_output_content.delta",
        "response.shell_call_output_content.done", "response.compaction.compacting",
        "error",
    }
)



# -- validator ------------------------------------------------------------------------------

class _Item:
    __slots__ = (
        "args",
        "args_done",
        "call_id",
        "frame",
        "id",
        "index",
        "name",
        "open",
        "part_types",
        "parts",
        "texts",
        "type",
    )

    def __init__(self, index: int, item: dict[str, Any], frame: int) -> None:
        self.index = index
        self.id = item.get("id")
        self.type = item.get("type")
        self.open = True
        self.name = item.get("name")
        self.call_id = item.get("call_id")
        self.args: list[str] = []
        self.args_done: str | None = None
        self.texts: dict[tuple[str, Any], dict[str, Any]] = {}  # (stream, index) -> {deltas, done}
        self.parts: dict[Any, str] = {}  # content_index -> "open" | "text_done" | "closed"
        self.part_types: dict[Any, str] = {}  # content_index -> the part's type at content_part.added
        self.frame = frame


def validate(source: Any, request: Any = None) -> list[Finding]:
    """Judge a Responses stream; never raises on what the server sent."""
    frames, _ = frames_and_request(source, request)
    events = [f for f in frames if f.kind == "event"]
    sink = Collector(events)
    add = sink.add
    names = EventNames("RS-GRAMMAR-EVENT-LINE", "RS-GRAMMAR-EVENT-NAME", absent_informational=True)

    seq_prev: int | None = None
    n_events = 0
    created_frame: int | None = None
    in_progress_frame: int | None = None
    lifecycle_next = False  # the next event must be response.in_progress (after created, and queued)
    terminal_frame: int | None = None
    terminal_type: str | None = None
    error_frame: int | None = None
    items: dict[int, _Item] = {}

    for f in events:
        i = f.index
        if f.done:
            if terminal_frame is None:  # a trailing [DONE] is tolerated (the SDK stops on it)
                add("RS-GRAMMAR-COMPLETED", i, "data: [DONE] before the terminal event (the openai SDK stops "
                    "reading at [DONE])", "[DONE]", "response.completed / .failed / .incomplete first")
            continue
        ev = f.json
        if not isinstance(ev, dict):
            add("RS-GRAMMAR-JSON", i, "data is not a JSON object", f.json_error or f.data,
                'a JSON object with "type"')
            continue
        typ = ev.get("type")
        sn = ev.get("sequence_number")
        if not _is_int(sn):
            add("RS-GRAMMAR-SEQUENCE", i, f"{typ} without an integer sequence_number",
                sn if "sequence_number" in ev else "no sequence_number", "an integer sequence_number")
        else:
            if seq_prev is None:
                if sn not in (0, 1):
                    add("RS-GRAMMAR-SEQUENCE", i, f"first sequence_number is {sn}", sn, "0 or 1")
            elif sn != seq_prev + 1:
                add("RS-GRAMMAR-SEQUENCE", i, f"sequence_number {sn} after {seq_prev}", sn, seq_prev + 1)
            seq_prev = sn
        n_events += 1
        if not isinstance(typ, str):  # a list would not even hash
            add("RS-GRAMMAR-JSON", i, "data has no string type", typ, 'a string "type"')
            continue
        if typ not in EVENT_TYPES:
            add("RS-GRAMMAR-UNKNOWN-EVENT", i, f"unknown event type {typ!r} (recorded, not judged)",
                f"event: {f.event}, type: {typ}", "a documented Responses stream event", informational=True)
            continue
        names.check(f, typ)
        if terminal_frame is not None:
            add("RS-GRAMMAR-COMPLETED", i, f"{typ} after the terminal {terminal_type} (frame "
                f"#{terminal_frame})", typ, "nothing after the terminal event")
            continue
        if typ == "error":
            error_frame = i
            fields = {k: ev[k] for k in ("code", "message", "param") if ev.get(k) is not None}
            body = fields or ev.get("error")
            add("RS-GRAMMAR-ERROR-EVENT", i, f"the endpoint reported an error in the stream ({_what(body)})",
                body, informational=True)
            continue
        if typ == "response.created":
            if created_frame is not None or n_events != 1:
                where = "not the first event" if created_frame is None else \
                    f"a second one (the first at frame #{created_frame})"
                add("RS-GRAMMAR-CREATED", i, f"response.created is {where}", "response.created",
                    "response.created once, first")
            created_frame = i if created_frame is None else created_frame
            lifecycle_next = n_events == 1
            continue
        if n_events == 1:
            add("RS-GRAMMAR-CREATED", i, f"the first event is {typ}", typ, "response.created")
        if typ == "response.queued":
            if in_progress_frame is not None:
                add("RS-GRAMMAR-IN-PROGRESS", i, f"response.queued after response.in_progress (frame "
                    f"#{in_progress_frame})", "response.queued",
                    "response.queued before response.in_progress")
            continue  # between created and in_progress, where the reference puts it
        if lifecycle_next:
            lifecycle_next = False
            if typ != "response.in_progress":
                add("RS-GRAMMAR-IN-PROGRESS", i, f"response.created (frame #{created_frame}) is followed by "
                    f"{typ}", typ, "response.in_progress (after an optional response.queued)")
        if typ == "response.in_progress":
            in_progress_frame = i if in_progress_frame is None else in_progress_frame
            continue
        if typ in TERMINAL:
            terminal_frame, terminal_type = i, typ
            terminal = ev.get("response") if isinstance(ev.get("response"), dict) else {}
            if typ == "response.failed":
                body = terminal.get("error")
                add("RS-GRAMMAR-ERROR-EVENT", i, f"the endpoint reported the response failed ({_what(body)})",
                    body, informational=True)
            _check_terminal(typ, terminal, i, items, add)
            continue
        if typ == "response.output_item.added":
            _item_added(ev, i, items, add)
            continue

        # every other event belongs to an item
        oi = ev.get("output_index")
        it = items.get(oi) if _is_int(oi) else None
        if it is None:
            add("RS-GRAMMAR-ITEM-ORDER", i, f"{typ} for output_index {oi!r}, which was never added", oi,
                f"one of the added items {sorted(items)}")
            continue
        if not it.open:
            add("RS-GRAMMAR-ITEM-ORDER", i, f"{typ} after output_item.done of item {oi}", typ,
                "nothing for an item after its output_item.done")
            continue
        if typ == "response.output_item.done":
            _item_done(ev, it, i, add)
            continue
        if ev.get("item_id") != it.id:
            add("RS-GRAMMAR-ITEM-IDS", i, f"item_id differs from item {oi}'s id", ev.get("item_id"), it.id)
        _item_event(typ, ev, it, i, add)

    names.report(sink)
    if terminal_frame is None and error_frame is None:
        sink.at_end("RS-GRAMMAR-COMPLETED", "the stream ended without response.completed / .failed / "
                    ".incomplete", "no terminal event", "response.completed")
        for it in items.values():
            if it.open:
                sink.at_end("RS-GRAMMAR-ITEM-UNCLOSED", f"item {it.index} (added at frame #{it.frame}) was "
                            "never done", f"item {it.index} open", "response.output_item.done")
    if not n_events:
        sink.at_end("RS-GRAMMAR-CREATED", "no events at all", "no event", "response.created first")
    return sink.out


def _what(body: Any) -> str:
    if isinstance(body, dict):
        return f"{body.get('code') or body.get('type')}: {body.get('message')}"
    return short(body)


def _item_added(ev: dict[str, Any], i: int, items: dict[int, _Item], add: Any) -> None:
    oi = ev.get("output_index")
    item = ev.get("item")
    opened = [it.index for it in items.values() if it.open]
    if opened:
        add("RS-GRAMMAR-ITEM-ORDER", i, f"item {oi} added while item {opened[0]} is open", f"open: {opened}",
            "output_item.done of the open item first")
    if not _is_int(oi) or oi != len(items) or oi in items:
        add("RS-GRAMMAR-OUTPUT-INDEX", i, "output_index is not the next position", oi, len(items))
        if not _is_int(oi) or oi in items:
            return
    if not isinstance(item, dict):
        add("RS-GRAMMAR-ITEM-IDS", i, "output_item.added without an item object", item,
            '{"id": ..., "type": ...}')
        return
    if not isinstance(item.get("id"), str) or not item.get("id"):
        add("RS-GRAMMAR-ITEM-IDS", i, "item without a string id", item.get("id", "no id"),
            "a non-empty string id")
    it = _Item(oi, item, i)
    items[oi] = it
    if it.type == "function_call":
        bad = [k for k in ("name", "call_id") if not isinstance(item.get(k), str) or not item.get(k)]
        if bad:
            add("RS-GRAMMAR-FUNCTION-CALL", i, f"function_call item added without {', '.join(bad)}",
                {k: item.get(k) for k in ("name", "call_id")}, "non-empty name and call_id")


# content part type -> (text stream, key of the text in the part)
_PART_STREAMS = {"output_text": ("response.output_text", "text"), "refusal": ("response.refusal", "refusal"),
                 "reasoning_text": ("response.reasoning_text", "text")}
# item type -> the content part types it may add (ResponseContentPartAddedEvent.part)
_PARTS_FOR = {"message": {"output_text", "refusal"}, "reasoning": {"reasoning_text"}}


def _item_event(typ: str, ev: dict[str, Any], it: _Item, i: int, add: Any) -> None:
    if typ == "response.content_part.added":
        ci = ev.get("content_index")
        part = ev.get("part") if isinstance(ev.get("part"), dict) else {}
        allowed = _PARTS_FOR.get(it.type) if isinstance(it.type, str) else None
        ptype = part.get("type")
        misplaced = allowed is None or (ptype is not None and ptype not in allowed)
        if not _is_int(ci) or ci in it.parts or misplaced:
            why = f"content_index {ci!r} already added" if ci in it.parts else \
                f"a {ptype} part in a {it.type} item"
            add("RS-GRAMMAR-ITEM-ORDER", i, f"content_part.added out of place ({why})",
                {"content_index": ci, "part": ptype, "item": it.type},
                "a new content_index; output_text/refusal parts in a message, reasoning_text in a reasoning "
                "item")
            return
        it.parts[ci] = "open"
        it.part_types[ci] = ptype if isinstance(ptype, str) else "output_text"
        return
    if typ == "response.content_part.done":
        ci = ev.get("content_index")
        state = it.parts.get(ci)
        part = ev.get("part") if isinstance(ev.get("part"), dict) else {}
        if state != "text_done" and not (state == "open" and part.get("type") == "refusal"):
            add("RS-GRAMMAR-ITEM-ORDER", i, f"content_part.done of part {ci!r} without its text .done, or "
                "after the part was done", f"part state: {state}", "the part's text .done before "
                "content_part.done")
            if state is None:
                return
        it.parts[ci] = "closed"
        done_type = part.get("type")
        stream, key = _PART_STREAMS[done_type if done_type in _PART_STREAMS else
                                    it.part_types.get(ci, "output_text")]
        t = it.texts.get((stream, ci))
        if t is not None and key in part and part.get(key) != "".join(t["deltas"]):
            add("RS-GRAMMAR-TEXT-DONE", i, f"content part {ci} {key} differs from the joined deltas",
                part.get(key), "".join(t["deltas"]))
        return
    if typ == "response.function_call_arguments.delta" or typ == "response.function_call_arguments.done":
        if it.type != "function_call" or it.args_done is not None:
            add("RS-GRAMMAR-ITEM-ORDER", i, f"{typ} out of place (item type {it.type}, arguments already "
                f"done: {it.args_done is not None})", typ,
                "argument events of a function_call item, before its .done")
            return
        if typ.endswith(".delta"):
            it.args.append(_s(ev.get("delta")))
            return
        args = ev.get("arguments")
        joined = "".join(it.args)
        if args != joined:
            add("RS-GRAMMAR-ARGS-DONE", i, "arguments.done differs from the joined deltas", args, joined)
        it.args_done = args if isinstance(args, str) else joined
        return
    for prefix, (idx_key, text_key) in _TEXT_STREAMS.items():
        if typ.startswith(prefix + "."):
            idx = ev.get(idx_key)
            # output text and refusals live in a content part; reasoning text may (vLLM adds a
            # reasoning_text part) or may not (the part is optional around it)
            needs_part = prefix in ("response.output_text", "response.refusal") or idx in it.parts
            if needs_part and it.parts.get(idx) != "open":
                add("RS-GRAMMAR-ITEM-ORDER", i, f"{typ} outside an open content part (content_index {idx!r})",
                    f"part state: {it.parts.get(idx)}", "inside content_part.added ... content_part.done")
                return
            t = it.texts.setdefault((prefix, idx), {"deltas": [], "done": False})
            if t["done"]:
                add("RS-GRAMMAR-ITEM-ORDER", i, f"{typ} after the {prefix}.done of index {idx}", typ,
                    f"nothing after {prefix}.done")
                return
            if typ.endswith(".delta"):
                t["deltas"].append(_s(ev.get("delta")))
                return
            if typ.endswith(".done"):
                t["done"] = True
                joined = "".join(t["deltas"])
                if ev.get(text_key) != joined:
                    add("RS-GRAMMAR-TEXT-DONE", i, f"{typ} {text_key} differs from the joined deltas",
                        ev.get(text_key), joined)
                if idx in it.parts:
                    it.parts[idx] = "text_done"
            return
    if typ.startswith("response.reasoning_summary_part."):
        return  # the summary text events carry the content; part events are bookkeeping
    # other documented item events (tool calls of hosted tools, annotations, audio): no order rules


def _item_done(ev: dict[str, Any], it: _Item, i: int, add: Any) -> None:
    it.open = False
    item = ev.get("item")
    if not isinstance(item, dict):
        add("RS-GRAMMAR-ITEM-IDS", i, "output_item.done without an item object", item,
            '{"id": ..., "type": ...}')
        return
    if item.get("id") != it.id:
        add("RS-GRAMMAR-ITEM-IDS", i, "item id at done differs from the id at added", item.get("id"), it.id)
    open_parts = [ci for ci, s in it.parts.items() if s != "closed"]
    if open_parts:
        add("RS-GRAMMAR-ITEM-ORDER", i, f"output_item.done of item {it.index} with content parts still open",
            f"open parts: {open_parts}", "content_part.done for every part first")
    if it.type == "function_call":
        if item.get("name") != it.name or item.get("call_id") != it.call_id:
            add("RS-GRAMMAR-FUNCTION-CALL", i, "name or call_id changed between added and done",
                {k: item.get(k) for k in ("name", "call_id")}, {"name": it.name, "call_id": it.call_id})
        if it.args_done is None:
            add("RS-GRAMMAR-ITEM-ORDER", i, f"function_call item {it.index} done without "
                "function_call_arguments.done", "no function_call_arguments.done",
                "function_call_arguments.done before output_item.done")
        final = item.get("arguments")
        expected = it.args_done if it.args_done is not None else "".join(it.args)
        if final != expected and (it.args or it.args_done is not None):
            add("RS-GRAMMAR-ARGS-DONE", i, "item arguments at done differ from the streamed arguments",
                final, expected)
        ok = False
        if isinstance(final, str):
            try:
                ok = isinstance(json.loads(final), dict)
            except (ValueError, RecursionError):
                ok = False
        if not ok:
            add("RS-GRAMMAR-ARGS-JSON", i, "function_call arguments are not a JSON object", final, "a JSON object")
    if it.type in ("message", "reasoning"):
        field = "content"
        for (stream, idx), t in it.texts.items():
            idx_key, text_key = _TEXT_STREAMS[stream]
            field = "summary" if idx_key == "summary_index" else "content"
            parts = item.get(field)
            if not isinstance(parts, list) or not _is_int(idx) or not 0 <= idx < len(parts):
                continue  # reasoning content may be omitted from the item (e.g. encrypted)
            part = parts[idx]
            if isinstance(part, dict) and text_key in part and part[text_key] != "".join(t["deltas"]):
                add("RS-GRAMMAR-TEXT-DONE", i, f"item {field}[{idx}].{text_key} at done differs from the deltas",
                    part[text_key], "".join(t["deltas"]))


def _check_terminal(typ: str, resp: dict[str, Any], i: int, items: dict[int, _Item], add: Any) -> None:
    if typ == "response.failed":  # an error ended the response: what it left open is not judged
        return
    for it in items.values():
        if it.open:
            add("RS-GRAMMAR-ITEM-UNCLOSED", i, f"item {it.index} (added at frame #{it.frame}) not done "
                f"before {typ}", f"item {it.index} open", "response.output_item.done first")
            it.open = False
    output = resp.get("output")
    ids = [items[k].id for k in sorted(items)]
    got = [o.get("id") if isinstance(o, dict) else None for o in output] if isinstance(output, list) else None
    if got != ids:
        add("RS-GRAMMAR-COMPLETED-OUTPUT", i, "final output does not list the streamed items in order", got, ids)
    usage = resp.get("usage")
    if usage is None:
        usage = "no usage"
    bad = ["usage"] if not isinstance(usage, dict) else [
        k for k in ("input_tokens", "output_tokens", "total_tokens") if not _is_int(usage.get(k))]
    if bad:
        add("RS-GRAMMAR-USAGE", i, f"{typ} without integer {', '.join(bad)}", usage,
            "usage with integer input_tokens, output_tokens and total_tokens")
