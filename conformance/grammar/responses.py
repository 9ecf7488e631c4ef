"""OpenAI Responses stream grammar: a pure fold and a validator.

``accumulate(event, snapshot)`` folds one event into ``{"response": ..., "output": {index: item}}``
without mutating the given snapshot; ``final_message(frames)`` returns ``{"response": the final
response object, "output": [items by output_index]}``; ``validate(frames, request=None)`` returns
findings for ``RULES`` (API_FACTS.md, "OpenAI Responses").
"""

from __future__ import annotations

import json
from typing import Any

from .findings import Finding, fold, frames_and_request, short

__all__ = ["EVENT_TYPES", "RULES", "TERMINAL", "accumulate", "final_message", "validate"]

RULES: dict[str, str] = {
    "RS-GRAMMAR-JSON": "Every event's data is a JSON object.",
    "RS-GRAMMAR-EVENT-NAME": "The SSE `event:` name is present and equals the data's `type`.",
    "RS-GRAMMAR-UNKNOWN-EVENT": "Every event type is a documented Responses stream event.",
    "RS-GRAMMAR-SEQUENCE": "Every event has an integer `sequence_number`, starting at 0 or 1 and "
    "increasing by exactly one.",
    "RS-GRAMMAR-CREATED": "`response.created` is the first event, and comes once.",
    "RS-GRAMMAR-IN-PROGRESS": "`response.in_progress` follows `response.created`.",
    "RS-GRAMMAR-OUTPUT-INDEX": "`output_item.added` output_index values are 0, 1, 2, ... in order.",
    "RS-GRAMMAR-ITEM-ORDER": "Within an item: output_item.added, then (content_part.added, output_text.delta*, "
    "output_text.done, content_part.done)* or (function_call_arguments.delta*, function_call_arguments.done) "
    "or reasoning events, then output_item.done; one item open at a time; nothing after its done.",
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
    "RS-GRAMMAR-ERROR": "The stream carries an `error` event.",
}

TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete"})

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

# text streams: type prefix -> (index field, key of the final text in the .done event)
_TEXT_STREAMS = {
    "response.output_text": ("content_index", "text"),
    "response.refusal": ("content_index", "refusal"),
    "response.reasoning_summary_text": ("summary_index", "text"),
    "response.reasoning_text": ("content_index", "text"),
}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ""


# -- fold -----------------------------------------------------------------------------------

def _set_at(items: Any, idx: Any, value: Any) -> list[Any]:
    out = list(items) if isinstance(items, list) else []
    if not _is_int(idx) or idx < 0 or idx > 10_000:
        return out
    while len(out) <= idx:
        out.append({})
    out[idx] = value
    return out


def _get_at(items: Any, idx: Any) -> dict[str, Any]:
    if isinstance(items, list) and _is_int(idx) and 0 <= idx < len(items) and isinstance(items[idx], dict):
        return dict(items[idx])
    return {}


def accumulate(event: Any, snapshot: dict[str, Any] | None) -> dict[str, Any]:
    """Fold one event; return the new snapshot (the given one is not mutated)."""
    snap: dict[str, Any] = dict(snapshot) if snapshot is not None else {"response": None, "output": {}}
    if not isinstance(event, dict):
        return snap
    typ = event.get("type")
    if not isinstance(typ, str):
        return snap
    if typ in ("response.created", "response.in_progress", "response.queued") or typ in TERMINAL:
        if isinstance(event.get("response"), dict):
            snap["response"] = event["response"]
        return snap
    oi = event.get("output_index")
    if not _is_int(oi):
        return snap
    output = dict(snap.get("output") or {})
    if typ in ("response.output_item.added", "response.output_item.done"):
        if isinstance(event.get("item"), dict):
            output[oi] = dict(event["item"])
            snap["output"] = output
        return snap
    item = output.get(oi)
    if not isinstance(item, dict):
        return snap
    item = dict(item)
    if typ == "response.content_part.added" or typ == "response.content_part.done":
        if isinstance(event.get("part"), dict):
            item["content"] = _set_at(item.get("content"), event.get("content_index"), dict(event["part"]))
    elif typ == "response.reasoning_summary_part.added" or typ == "response.reasoning_summary_part.done":
        if isinstance(event.get("part"), dict):
            item["summary"] = _set_at(item.get("summary"), event.get("summary_index"), dict(event["part"]))
    elif typ == "response.function_call_arguments.delta":
        item["arguments"] = _s(item.get("arguments")) + _s(event.get("delta"))
    elif typ == "response.function_call_arguments.done":
        if isinstance(event.get("arguments"), str):
            item["arguments"] = event["arguments"]
    else:
        for prefix, (idx_key, text_key) in _TEXT_STREAMS.items():
            if typ.startswith(prefix + "."):
                field = "summary" if idx_key == "summary_index" else "content"
                part = _get_at(item.get(field), event.get(idx_key))
                if prefix == "response.reasoning_text" and not part:
                    part = {"type": "reasoning_text", "text": ""}
                if typ.endswith(".delta"):
                    part[text_key] = _s(part.get(text_key)) + _s(event.get("delta"))
                elif typ.endswith(".done") and isinstance(event.get(text_key), str):
                    part[text_key] = event[text_key]
                else:
                    return snap
                item[field] = _set_at(item.get(field), event.get(idx_key), part)
                break
        else:
            return snap
    output[oi] = item
    snap["output"] = output
    return snap


def final_message(source: Any) -> dict[str, Any] | None:
    """``{"response": final response object, "output": [items by output_index]}``; None if empty."""
    snap = fold(source, accumulate)
    if snap is None:
        return None
    output = snap.get("output") or {}
    return {"response": snap.get("response"), "output": [output[k] for k in sorted(output)]}


# -- validator ------------------------------------------------------------------------------

class _Item:
    __slots__ = ("index", "id", "type", "open", "name", "call_id", "args", "args_done", "texts", "parts",
                 "frame")

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
        self.frame = frame


def validate(source: Any, request: Any = None) -> list[Finding]:
    """Judge a Responses stream; never raises on what the server sent."""
    frames, _ = frames_and_request(source, request)
    out: list[Finding] = []

    def add(rule: str, frame: int | None, message: str, observed: Any = None, expected: Any = None) -> None:
        out.append(Finding(rule, frame, message, None if observed is None else short(observed),
                           None if expected is None else short(expected)))

    seq_prev: int | None = None
    n_events = 0
    first_frame: int | None = None
    prev_type: str | None = None
    created_frame: int | None = None
    terminal_frame: int | None = None
    terminal: dict[str, Any] | None = None
    terminal_type: str | None = None
    error_seen = False
    items: dict[int, _Item] = {}

    for f in frames:
        if f.kind != "event":
            continue
        i = f.index
        if f.done and terminal_frame is not None:
            continue  # a trailing [DONE] is tolerated (the SDK stops on it)
        ev = f.json
        if not isinstance(ev, dict):
            add("RS-GRAMMAR-JSON", i, "data is not a JSON object", f.json_error or f.data)
            continue
        typ = ev.get("type")
        if f.event != typ:
            add("RS-GRAMMAR-EVENT-NAME", i, "SSE event name differs from the data's type",
                f"event: {f.event}", f"event: {typ}")
        sn = ev.get("sequence_number")
        if not _is_int(sn):
            add("RS-GRAMMAR-SEQUENCE", i, "event without an integer sequence_number", sn)
        else:
            if seq_prev is None:
                if sn not in (0, 1):
                    add("RS-GRAMMAR-SEQUENCE", i, "first sequence_number is not 0 or 1", sn, "0 or 1")
            elif sn != seq_prev + 1:
                add("RS-GRAMMAR-SEQUENCE", i, "sequence_number does not increase by one", sn, seq_prev + 1)
            seq_prev = sn
        n_events += 1
        if n_events == 1:
            first_frame = i
        this_prev, prev_type = prev_type, typ if isinstance(typ, str) else None
        if terminal_frame is not None:
            add("RS-GRAMMAR-COMPLETED", i, f"event after the terminal {terminal_type} (#{terminal_frame})", typ)
            continue
        if typ == "error":
            error_seen = True
            add("RS-GRAMMAR-ERROR", i, "the stream carries an error event",
                {k: ev.get(k) for k in ("code", "message") if k in ev} or ev.get("error"))
            continue
        if not isinstance(typ, str) or typ not in EVENT_TYPES:
            add("RS-GRAMMAR-UNKNOWN-EVENT", i, "unknown event type", typ)
            continue
        if typ == "response.created":
            if created_frame is not None or n_events != 1:
                add("RS-GRAMMAR-CREATED", i, "response.created is not the first event, or comes twice")
            created_frame = i if created_frame is None else created_frame
            continue
        if n_events == 1:
            add("RS-GRAMMAR-CREATED", i, "the first event is not response.created", typ, "response.created")
        if this_prev == "response.created" and created_frame == first_frame and typ != "response.in_progress":
            add("RS-GRAMMAR-IN-PROGRESS", i, "response.created is not followed by response.in_progress", typ,
                "response.in_progress")
        if typ in ("response.in_progress", "response.queued"):
            continue
        if typ in TERMINAL:
            terminal_frame, terminal_type = i, typ
            terminal = ev.get("response") if isinstance(ev.get("response"), dict) else {}
            _check_terminal(typ, terminal, i, items, add)
            continue
        if typ == "response.output_item.added":
            oi = ev.get("output_index")
            item = ev.get("item")
            opened = [it.index for it in items.values() if it.open]
            if opened:
                add("RS-GRAMMAR-ITEM-ORDER", i, "item added while another is open", f"open: {opened}")
            if not _is_int(oi) or oi != len(items) or oi in items:
                add("RS-GRAMMAR-OUTPUT-INDEX", i, "output_index is not the next position", oi, len(items))
                if not _is_int(oi) or oi in items:
                    continue
            if not isinstance(item, dict):
                add("RS-GRAMMAR-ITEM-IDS", i, "output_item.added without an item object", item)
                continue
            if not isinstance(item.get("id"), str) or not item.get("id"):
                add("RS-GRAMMAR-ITEM-IDS", i, "item without a string id", item.get("id"))
            it = _Item(oi, item, i)
            items[oi] = it
            if it.type == "function_call":
                bad = [k for k in ("name", "call_id") if not isinstance(item.get(k), str) or not item.get(k)]
                if bad:
                    add("RS-GRAMMAR-FUNCTION-CALL", i, f"function_call item added without {', '.join(bad)}",
                        {k: item.get(k) for k in ("name", "call_id")}, "non-empty name and call_id")
            continue

        # every other event belongs to an item
        oi = ev.get("output_index")
        it = items.get(oi) if _is_int(oi) else None
        if it is None:
            add("RS-GRAMMAR-ITEM-ORDER", i, f"{typ} for an item that was never added", oi)
            continue
        if not it.open:
            add("RS-GRAMMAR-ITEM-ORDER", i, f"{typ} after output_item.done of item {oi}")
            continue
        if typ == "response.output_item.done":
            _item_done(ev, it, i, add)
            continue
        if ev.get("item_id") != it.id:
            add("RS-GRAMMAR-ITEM-IDS", i, f"item_id differs from item {oi}'s id", ev.get("item_id"), it.id)
        _item_event(typ, ev, it, i, add)

    if terminal_frame is None and not error_seen:
        add("RS-GRAMMAR-COMPLETED", None, "the stream ended without response.completed / .failed / .incomplete")
        for it in items.values():
            if it.open:
                add("RS-GRAMMAR-ITEM-UNCLOSED", None, f"item {it.index} was never done")
    if n_events and created_frame is None:
        pass  # already reported at the first event
    elif not n_events:
        add("RS-GRAMMAR-CREATED", None, "no events at all")
    return out


def _item_event(typ: str, ev: dict[str, Any], it: _Item, i: int, add: Any) -> None:
    if typ == "response.content_part.added":
        ci = ev.get("content_index")
        if not _is_int(ci) or ci in it.parts or it.type != "message":
            add("RS-GRAMMAR-ITEM-ORDER", i, "content_part.added out of place", ci)
            return
        it.parts[ci] = "open"
        return
    if typ == "response.content_part.done":
        ci = ev.get("content_index")
        state = it.parts.get(ci)
        part = ev.get("part") if isinstance(ev.get("part"), dict) else {}
        if state != "text_done" and not (state == "open" and part.get("type") == "refusal"):
            add("RS-GRAMMAR-ITEM-ORDER", i, "content_part.done without its output_text.done / after it was done",
                state, "text_done")
            if state is None:
                return
        it.parts[ci] = "closed"
        for stream, key in (("response.output_text", "text"), ("response.refusal", "refusal")):
            t = it.texts.get((stream, ci))
            if t is not None and key in part and part.get(key) != "".join(t["deltas"]):
                add("RS-GRAMMAR-TEXT-DONE", i, f"content part {ci} {key} differs from the joined deltas",
                    part.get(key), "".join(t["deltas"]))
        return
    if typ == "response.function_call_arguments.delta" or typ == "response.function_call_arguments.done":
        if it.type != "function_call" or it.args_done is not None:
            add("RS-GRAMMAR-ITEM-ORDER", i, f"{typ} out of place (item type {it.type}, "
                f"arguments already done: {it.args_done is not None})")
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
            if prefix in ("response.output_text", "response.refusal") and it.parts.get(idx) != "open":
                add("RS-GRAMMAR-ITEM-ORDER", i, f"{typ} outside an open content part", idx)
                return
            t = it.texts.setdefault((prefix, idx), {"deltas": [], "done": False})
            if t["done"]:
                add("RS-GRAMMAR-ITEM-ORDER", i, f"{typ} after the {prefix}.done of index {idx}")
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
                if prefix == "response.output_text":
                    it.parts[idx] = "text_done"
            return
    if typ.startswith("response.reasoning_summary_part."):
        return  # the summary text events carry the content; part events are bookkeeping
    # other documented item events (tool calls of hosted tools, annotations, audio): no order rules


def _item_done(ev: dict[str, Any], it: _Item, i: int, add: Any) -> None:
    it.open = False
    item = ev.get("item")
    if not isinstance(item, dict):
        add("RS-GRAMMAR-ITEM-IDS", i, "output_item.done without an item object", item)
        return
    if item.get("id") != it.id:
        add("RS-GRAMMAR-ITEM-IDS", i, "item id at done differs from the id at added", item.get("id"), it.id)
    open_parts = [ci for ci, s in it.parts.items() if s != "closed"]
    if open_parts:
        add("RS-GRAMMAR-ITEM-ORDER", i, f"output_item.done with content parts still open: {open_parts}")
    if it.type == "function_call":
        if item.get("name") != it.name or item.get("call_id") != it.call_id:
            add("RS-GRAMMAR-FUNCTION-CALL", i, "name or call_id changed between added and done",
                {k: item.get(k) for k in ("name", "call_id")}, {"name": it.name, "call_id": it.call_id})
        if it.args_done is None:
            add("RS-GRAMMAR-ITEM-ORDER", i, "function_call done without function_call_arguments.done")
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
    for it in items.values():
        if it.open:
            add("RS-GRAMMAR-ITEM-UNCLOSED", i, f"item {it.index} not done before {typ}")
            it.open = False
    if typ == "response.failed":
        return
    output = resp.get("output")
    ids = [items[k].id for k in sorted(items)]
    got = [o.get("id") if isinstance(o, dict) else None for o in output] if isinstance(output, list) else None
    if got != ids:
        add("RS-GRAMMAR-COMPLETED-OUTPUT", i, "final output does not list the streamed items in order", got, ids)
    usage = resp.get("usage")
    bad = ["usage"] if not isinstance(usage, dict) else [
        k for k in ("input_tokens", "output_tokens", "total_tokens") if not _is_int(usage.get(k))]
    if bad:
        add("RS-GRAMMAR-USAGE", i, f"{typ} without integer {', '.join(bad)}", usage)
