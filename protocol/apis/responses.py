"""OpenAI Responses in the kit: route and headers, request builders, the stream fold.

A function call is an output item; it is complete at its ``response.function_call_arguments.done`` or
its ``response.output_item.done``, whichever comes first (Codex runs it at the item's done: API_FACTS,
"Responses"). Follow-up turns replay the output items statelessly, as Codex does with ``store: false``.

Why one module of ~920 lines: it is the kit's one home for this API (STYLE: one home per API on each side;
`base.Api` lists its members and `apis.register` checks them). Its parts (request builders, the answer
fold ``place``, the recorded fold ``accumulate`` the grammar reads, the answer readers) share the
event names, tag types and block rules of one wire format; split, each half would import the other's
private tables, and adding an API would mean finding several files instead of copying one.
"""

from __future__ import annotations

import copy
import json
import sys
from typing import Any, Literal, Unpack, cast

from harnesscheck.protocol.apis import base
from harnesscheck.protocol.apis.base import Snapshot, ToolCall, is_int, text
from harnesscheck.scenarios.loader import Scenario

NAME = "responses"
PATH = "/v1/responses"
PREFIX = "RS"
LABEL = "Responses"
GRAMMAR = "harnesscheck.conformance.grammar.responses"  # its stream validator, by module name
ALIASES = ("openai-responses",)  # other names the grammar lookup accepts
ANSWER_ENDS = ("response.completed", "response.incomplete")  # a client has its whole answer after these
# Bodies the reference refuses (<P>-ERR-001 wants a 4xx in the API's error shape; "{model}": the model).
# `input` is optional in the Responses API (CreateResponse), so a missing input is not bad input.
BAD_REQUESTS: tuple[tuple[str, Any], ...] = (
    ("input neither a string nor an array", {"model": "{model}", "input": 42}),
    ("input item not an object", {"model": "{model}", "input": [3]}),
    ("function_call_output with a numeric output",
     {"model": "{model}", "input": [{"type": "function_call_output", "call_id": "call_1", "output": 7}]}),
    ("body not JSON", b"\x00\x01"))
# Bodies the reference allows that a strict-looking server might refuse (<P>-ERR-001:allowed wants a 2xx).
ALLOWED_REQUESTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("only instructions, no input", {"model": "{model}", "instructions": "Say ok.", "max_output_tokens": 16}),)
# `max_output_tokens` has a minimum of 16 (openai-openapi CreateResponse): the kit never asks for less.
MIN_OUTPUT_TOKENS = 16
MAX_TOKENS_FIELD = "max_output_tokens"
TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete"})
CONTENT_EVENTS = frozenset({"response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta",
                            "response.reasoning_summary_text.delta", "response.function_call_arguments.delta",
                            "response.custom_tool_call_input.delta"})
# The output items that are tool calls the client runs: a function's (JSON arguments) and a custom tool's
# (free-form `input` text, streamed as response.custom_tool_call_input.delta / .done).
CALL_ITEMS = frozenset({"function_call", "custom_tool_call"})

# text streams: type prefix -> (index field, key of the final text in the .done event)
_TEXT_STREAMS = {
    "response.output_text": ("content_index", "text"),
    "response.refusal": ("content_index", "refusal"),
    "response.reasoning_summary_text": ("summary_index", "text"),
    "response.reasoning_text": ("content_index", "text"),
}

FORM = base.Form("input", "instructions", True, "input_text", ("authorization", "Bearer {key}"),
                 model_items=frozenset({"reasoning", "function_call", "custom_tool_call", "local_shell_call"}),
                 one_answer_entry=False, text_history=True)


def headers(api_key: str | None = None) -> dict[str, str]:
    return base.headers(api_key)


def tool(spec: dict[str, Any], *, strict: bool | None = None) -> dict[str, Any]:
    """One function tool (``spec``: name, description, parameters), with ``strict`` when given (the API's
    default is strict: it normalizes an unmarked schema into strict mode; function calling guide)."""
    out = {"type": "function", "name": spec["name"], "description": spec.get("description", ""),
           "parameters": spec["parameters"]}
    return out if strict is None else {**out, "strict": strict}


def tools(scenario: Scenario) -> list[dict[str, Any]]:
    """The scenario's tools with ``strict: false``, as Codex sends its function tools: the scenarios'
    schemas are not written for strict mode, and an unmarked tool would be made strict (optional
    properties required) by the API; openai-python's FunctionToolParam marks ``strict`` Required."""
    return [tool(t, strict=False) for t in scenario.tools]


def tool_choice(mode: str, name: str = "") -> Any:
    """``tool_choice`` for one of the kit's modes (auto, required, named, none): a string
    (ToolChoiceOptions), or the named function's object (ToolChoiceFunctionParam)."""
    return {"type": "function", "name": name} if mode == "named" else mode


def without_parallel(body: dict[str, Any]) -> dict[str, Any]:
    """The request with parallel tool calls off (``parallel_tool_calls: false``)."""
    return {**body, "parallel_tool_calls": False}


PARALLEL_FIELD = "parallel_tool_calls"  # the request field without_parallel sets


def cut_answer(name: str, arguments: str) -> dict[str, Any]:
    """A non-streamed answer with one call cut by the output limit."""
    return {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": [
        {"type": "function_call", "id": "fc_cut_1", "call_id": "call_cut_1", "name": name,
         "arguments": arguments, "status": "incomplete"}]}


LENGTH_STOP = "max_output_tokens"  # stop_reason() of an answer cut by its output limit (incomplete_details)


def first(scenario: Scenario, model: str, *, stream: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "stream": stream, "max_output_tokens": base.output_budget(scenario),
                            "input": [{"type": "message", "role": "user", "content": base.user_text(scenario)}],
                            "include": ["reasoning.encrypted_content"], "store": True}
    if scenario.system:
        body["instructions"] = scenario.system
    if scenario.tools:
        body["tools"] = tools(scenario)
    return body


def follow(body: dict[str, Any], answer: dict[str, Any], scenario: Scenario, turn: int) -> dict[str, Any]:
    """The request for ``turn`` (>= 1): the output items replayed (reasoning with encrypted_content,
    function_call), a function_call_output per call, and the next user text, if any."""
    body = copy.deepcopy(body)
    for item in answer.get("output", []):
        body["input"].append({k: v for k, v in item.items() if k not in ("status",)})
    custom = {it.get("call_id") for it in answer.get("output", []) if it.get("type") == "custom_tool_call"}
    for c in tool_calls(answer):
        body["input"].append({"type": "custom_tool_call_output" if c.id in custom else "function_call_output",
                              "call_id": c.id, "output": scenario.result_for(c.name, c.arguments)})
    user = base.next_user(scenario, turn)
    if user:
        body["input"].append({"type": "message", "role": "user", "content": user})
    return body


def malformed_history(body: Any) -> str:
    """The first function_call input item whose arguments are no JSON object (the endpoint's own broken
    call, sent back as it came), or ''. A custom tool's input is free text: never malformed."""
    items = body.get("input") if isinstance(body, dict) else None
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "function_call" \
                and not base.json_object_text(item.get("arguments")):
            return f"function_call {item.get('call_id')} ({item.get('name')}) with arguments " \
                   f"{str(item.get('arguments'))[:80]!r}"
    return ""


# The tags between the fold and the grammar validator (issue 44): what one event did (`What`, its record's
# "what"), and the notes it made (`Note`: a tag, then its details), as Literal types mypy checks (strict on protocol/ and the grammar): a tag written here or
# compared in the validator that is not in the list is a type error.
What = Literal["after-terminal", "error", "event", "no-type", "terminal", "unknown"]
NoteTag = Literal["added-no-item", "added-while-open", "args-done", "args-misplaced", "created-again",
                  "custom-input", "custom-no-done", "done-args", "done-args-json", "done-id", "done-no-args-done",
                  "done-no-item", "done-parts-open", "done-text", "first-not-created", "function-call-added",
                  "function-call-changed", "index-missing", "item-closed", "item-id", "item-no-id", "no-item",
                  "not-in-progress", "output-index", "part-added-misplaced", "part-done-early", "part-text",
                  "queued-late", "seq-first", "seq-gap", "seq-missing", "text-after-done", "text-done",
                  "text-outside-part", "unclosed"]
Note = tuple[NoteTag, Unpack[tuple[Any, ...]]]  # a note: its tag, then what a rule reports


def notes_of(rec: Any) -> list[Note]:
    """The notes one event's record made, in stream order."""
    return list((rec or {}).get("notes") or ())


def _w(what: What) -> What:
    return what


def did(rec: Any) -> What | None:
    """What one event did, as its record (the snapshot's ``_event``) says; None without a record."""
    return cast("What | None", (rec or {}).get("what"))


# -- the fold -------------------------------------------------------------------------------

fold_input = base.fold_input  # what the fold takes of a frame: its JSON object

def _set_at(items: Any, idx: Any, value: Any) -> list[Any]:
    out = list(items) if isinstance(items, list) else []
    if not is_int(idx) or idx < 0 or idx > 10_000:
        return out
    while len(out) <= idx:
        out.append({})
    out[idx] = value
    return out


def _get_at(items: Any, idx: Any) -> dict[str, Any]:
    if isinstance(items, list) and is_int(idx) and 0 <= idx < len(items) and isinstance(items[idx], dict):
        return dict(items[idx])
    return {}


def accumulate(event: Any, snapshot: dict[str, Any] | None) -> dict[str, Any]:
    """Fold one event; return the new snapshot (the given one is not mutated). ``_at`` is the output index
    the event placed something in (None: none), ``_said`` the text it added as (channel, text), ``_closed``
    the output index its ``output_item.done`` closed; ``_g`` / ``_event`` the stream's state and what this
    event did to it (``record``), what the grammar validator judges.
    """
    snap = _place(event, snapshot)
    if not isinstance(event, dict):
        return snap
    g, rec = record(event, (snapshot or {}).get("_g"))
    snap = dict(snap) if snap is snapshot else snap  # _place made a new dict: set in place
    snap["_g"], snap["_event"] = g, rec
    typ, oi = event.get("type"), event.get("output_index")
    placed = is_int(oi) and len(snap.get("_unplaced", ())) == len((snapshot or {}).get("_unplaced", ())) \
        and oi in (snap.get("output") or {}) and typ not in ("error", *TERMINAL)
    words = event.get("delta")
    channel = _SAID.get(typ) if placed and isinstance(typ, str) and isinstance(words, str) else None
    snap["_at"], snap["_said"] = oi if placed else None, ((channel, words),) if channel else ()
    snap["_closed"] = oi if placed and typ == "response.output_item.done" else None
    return snap


# -- the stream's state, as the grammar judges it --------------------------------------------
# The documented Responses stream events (openai-python src/openai/types/responses/response_stream_event.py).
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
# content part type -> (text stream, key of the text in the part)
PART_STREAMS = {"output_text": ("response.output_text", "text"), "refusal": ("response.refusal", "refusal"),
                "reasoning_text": ("response.reasoning_text", "text")}
# item type -> the content part types it may add (ResponseContentPartAddedEvent.part)
PARTS_FOR = {"message": frozenset({"output_text", "refusal"}), "reasoning": frozenset({"reasoning_text"})}
_NEW_STATE: dict[str, Any] = {"n": 0, "seq": None, "events": 0, "created": None, "in_progress": None,
                              "lifecycle_next": False, "terminal": None, "terminal_type": None, "error": None,
                              "items": {}}


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _hashable(v: Any) -> Any:
    return v if v is None or isinstance(v, int | str | float) else repr(v)


def record(event: dict[str, Any], state: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stream's state after one more event, and what it did: ``what`` and ``notes`` (the things a rule
    judges, in stream order; event numbers ``n`` count the events recorded, from 0). The state: the last
    sequence_number, the events counted, the events that created, put in progress, ended (terminal) or
    errored the response, whether in_progress must come next, and each item by output_index: its id,
    type, name and call_id at added, whether it is open, its arguments (deltas joined, how many, the .done
    text), its text streams (deltas joined, done) and content parts (open, text_done, closed; their type).
    An event without output_index (or content_index) is placed as the fold places it (`_index_of`: by its
    item id, an item added in the next position) and noted for the missing number alone.
    Events after the terminal one change nothing."""
    g = dict(state or _NEW_STATE)
    n = g["n"]
    g["n"] = n + 1
    notes: list[Note] = []
    rec: dict[str, Any] = {"n": n, "what": _w("event"), "notes": notes}
    typ, sn = event.get("type"), event.get("sequence_number")
    if not is_int(sn):
        notes.append(("seq-missing", typ, sn if "sequence_number" in event else "no sequence_number"))
    else:
        if g["seq"] is None:
            if sn not in (0, 1):
                notes.append(("seq-first", sn))
        elif sn != g["seq"] + 1:
            notes.append(("seq-gap", sn, g["seq"]))
        g["seq"] = sn
    g["events"] += 1
    if not isinstance(typ, str):  # a list would not even hash
        return g, {**rec, "what": _w("no-type")}
    if typ not in EVENT_TYPES:
        return g, {**rec, "what": _w("unknown")}
    if g["terminal"] is not None:
        return g, {**rec, "what": _w("after-terminal"), "terminal": g["terminal"],
                   "terminal_type": g["terminal_type"]}
    if typ == "error":
        g["error"] = n
        return g, {**rec, "what": _w("error")}
    if typ == "response.created":
        if g["created"] is not None or g["events"] != 1:
            notes.append(("created-again", g["created"]))
        g["created"] = n if g["created"] is None else g["created"]
        g["lifecycle_next"] = g["events"] == 1
        return g, rec
    if g["events"] == 1:
        notes.append(("first-not-created",))
    if typ == "response.queued":
        if g["in_progress"] is not None:
            notes.append(("queued-late", g["in_progress"]))
        return g, rec
    if g["lifecycle_next"]:
        g["lifecycle_next"] = False
        if typ != "response.in_progress":
            notes.append(("not-in-progress", g["created"]))
    if typ == "response.in_progress":
        g["in_progress"] = n if g["in_progress"] is None else g["in_progress"]
        return g, rec
    items = g["items"] = dict(g["items"])
    if typ in TERMINAL:
        g["terminal"], g["terminal_type"] = n, typ
        if typ != "response.failed":  # an error ended the response: what it left open is not judged
            for k, it in items.items():
                if it["open"]:
                    notes.append(("unclosed", it["index"], it["start"]))
                    items[k] = {**it, "open": False}
        return g, {**rec, "what": _w("terminal"), "ids": [items[k]["id"] for k in sorted(items)]}
    if typ == "response.output_item.added":
        _record_added(event, n, items, notes)
        return g, rec
    oi = event.get("output_index")
    placed = _index_of(typ, event, items) if oi is None else None
    by_id = placed in items  # without an output_index: the item its id names, as the fold (`_index_of`) reads it
    if by_id:
        notes.append(("index-missing", typ, "output_index"))
        oi = placed
    it = items.get(oi) if is_int(oi) else None
    if it is None:
        notes.append(("no-item", oi, sorted(items)))
        return g, rec
    if not it["open"]:
        notes.append(("item-closed", oi))
        return g, rec
    it = items[oi] = dict(it)
    if typ == "response.output_item.done":
        _record_item_done(event, it, notes)
        return g, rec
    if not by_id and event.get("item_id") != it["id"]:
        notes.append(("item-id", oi, event.get("item_id"), it["id"]))
    _record_item_event(typ, _with_content_index(typ, event, it, notes), it, notes)
    return g, rec


def _with_content_index(typ: str, event: dict[str, Any], it: dict[str, Any],
                        notes: list[Note]) -> dict[str, Any]:
    """The event with its content_index: without one (llama-server 11434 sends none), the part it opens (the
    next position) or the last part added, noted for RS-GRAMMAR-OUTPUT-INDEX; other events as they are."""
    part_event = typ.startswith("response.content_part.")
    if event.get("content_index") is not None or not (
            part_event or _TEXT_STREAMS.get(typ.rsplit(".", 1)[0], ("",))[0] == "content_index"):
        return event
    notes.append(("index-missing", typ, "content_index"))
    known = [ci for ci in it["parts"] if is_int(ci)]
    if typ == "response.content_part.added":
        return {**event, "content_index": len(known)}
    return {**event, "content_index": max(known)} if known else event


def _record_added(event: dict[str, Any], n: int, items: dict[Any, Any], notes: list[Note]) -> None:
    oi, item = event.get("output_index"), event.get("item")
    opened = [it["index"] for it in items.values() if it["open"]]
    if opened:
        notes.append(("added-while-open", oi, opened))
    if not is_int(oi) or oi != len(items) or oi in items:
        notes.append(("output-index", oi, len(items)))
        if oi is None:  # placed in the next position, as the fold places it (`_index_of`)
            oi = len(items)
        if not is_int(oi) or oi in items:
            return
    if not isinstance(item, dict):
        notes.append(("added-no-item", item))
        return
    if not isinstance(item.get("id"), str) or not item.get("id"):
        notes.append(("item-no-id", item.get("id", "no id")))
    items[oi] = {"index": oi, "id": item.get("id"), "type": item.get("type"), "open": True,
                 "name": item.get("name"), "call_id": item.get("call_id"), "args": "", "deltas": 0,
                 "args_done": None, "texts": {}, "parts": {}, "part_types": {}, "start": n,
                 "input": "", "input_done": None}
    if item.get("type") == "function_call":
        bad = [k for k in ("name", "call_id") if not isinstance(item.get(k), str) or not item.get(k)]
        if bad:
            notes.append(("function-call-added", bad, {k: item.get(k) for k in ("name", "call_id")}))


def _record_item_event(typ: str, ev: dict[str, Any], it: dict[str, Any],
                       notes: list[Note]) -> None:
    if typ == "response.content_part.added":
        ci = _hashable(ev.get("content_index"))
        part = _obj(ev.get("part"))
        allowed = PARTS_FOR.get(it["type"]) if isinstance(it["type"], str) else None
        ptype = part.get("type")
        known = isinstance(ptype, str) and allowed is not None and ptype in allowed
        misplaced = allowed is None or (ptype is not None and not known)
        if not is_int(ci) or ci in it["parts"] or misplaced:
            notes.append(("part-added-misplaced", ci, ptype, it["type"], ci in it["parts"]))
            return
        it["parts"] = {**it["parts"], ci: "open"}
        it["part_types"] = {**it["part_types"], ci: ptype if isinstance(ptype, str) else "output_text"}
        return
    if typ == "response.content_part.done":
        ci = _hashable(ev.get("content_index"))
        state = it["parts"].get(ci)
        part = _obj(ev.get("part"))
        if state != "text_done" and not (state == "open" and part.get("type") == "refusal"):
            notes.append(("part-done-early", ci, state))
            if state is None:
                return
        it["parts"] = {**it["parts"], ci: "closed"}
        done_type = part.get("type")
        stream, key = PART_STREAMS[done_type if isinstance(done_type, str) and done_type in PART_STREAMS else
                                   it["part_types"].get(ci, "output_text")]
        t = it["texts"].get((stream, ci))
        if t is not None and key in part and part.get(key) != t["deltas"]:
            notes.append(("part-text", ci, key, part.get(key), t["deltas"]))
        return
    if typ == "response.custom_tool_call_input.delta":  # a custom tool's input: joined, judged at the item's end
        it["input"] += str(ev.get("delta", ""))
        return
    if typ == "response.custom_tool_call_input.done":
        it["input_done"] = (ev.get("input"),)
        return
    if typ in ("response.function_call_arguments.delta", "response.function_call_arguments.done"):
        if it["type"] != "function_call" or it["args_done"] is not None:
            notes.append(("args-misplaced", typ, it["type"], it["args_done"] is not None))
            return
        if typ.endswith(".delta"):
            it["args"] += text(ev.get("delta"))
            it["deltas"] += 1
            return
        args = ev.get("arguments")
        if args != it["args"]:
            notes.append(("args-done", args, it["args"]))
        it["args_done"] = args if isinstance(args, str) else it["args"]
        return
    for prefix, (idx_key, text_key) in _TEXT_STREAMS.items():
        if typ.startswith(prefix + "."):
            _record_text(typ, prefix, ev, _hashable(ev.get(idx_key)), text_key, it, notes)
            return
    # reasoning summary part events are bookkeeping; other documented item events (tool calls of hosted
    # tools, annotations, audio): no order rules


def _record_text(typ: str, prefix: str, ev: dict[str, Any], idx: Any, text_key: str, it: dict[str, Any],
                 notes: list[Note]) -> None:
    # output text and refusals live in a content part; reasoning text may (vLLM adds a reasoning_text
    # part) or may not (the part is optional around it)
    needs_part = prefix in ("response.output_text", "response.refusal") or idx in it["parts"]
    if needs_part and it["parts"].get(idx) != "open":
        notes.append(("text-outside-part", typ, idx, it["parts"].get(idx)))
        return
    t = dict(it["texts"].get((prefix, idx)) or {"deltas": "", "done": False})
    if t["done"]:
        notes.append(("text-after-done", typ, prefix, idx))
        return
    it["texts"] = {**it["texts"], (prefix, idx): t}
    if typ.endswith(".delta"):
        t["deltas"] += text(ev.get("delta"))
    elif typ.endswith(".done"):
        t["done"] = True
        if ev.get(text_key) != t["deltas"]:
            notes.append(("text-done", typ, text_key, ev.get(text_key), t["deltas"]))
        if idx in it["parts"]:
            it["parts"] = {**it["parts"], idx: "text_done"}


def _record_item_done(ev: dict[str, Any], it: dict[str, Any], notes: list[Note]) -> None:
    it["open"] = False
    item = ev.get("item")
    if not isinstance(item, dict):
        notes.append(("done-no-item", item))
        return
    if item.get("id") != it["id"]:
        notes.append(("done-id", item.get("id"), it["id"]))
    open_parts = [ci for ci, s in it["parts"].items() if s != "closed"]
    if open_parts:
        notes.append(("done-parts-open", it["index"], open_parts))
    if it["type"] == "function_call":
        if item.get("name") != it["name"] or item.get("call_id") != it["call_id"]:
            notes.append(("function-call-changed", {k: item.get(k) for k in ("name", "call_id")},
                          {"name": it["name"], "call_id": it["call_id"]}))
        if it["args_done"] is None:
            notes.append(("done-no-args-done", it["index"]))
        final = item.get("arguments")
        expected = it["args_done"] if it["args_done"] is not None else it["args"]
        if final != expected and (it["deltas"] or it["args_done"] is not None):
            notes.append(("done-args", final, expected))
        notes.append(("done-args-json", final))
    if item.get("type") == "custom_tool_call":  # its input deltas, its .done and the item agree
        if it["input_done"] is None:
            notes.append(("custom-no-done", item.get("id")))
        elif it["input_done"][0] != item.get("input") or it["input"] != item.get("input"):
            notes.append(("custom-input", item.get("id"), it["input"], it["input_done"][0], item.get("input")))
    if it["type"] in ("message", "reasoning"):
        for (stream, idx), t in it["texts"].items():
            idx_key, text_key = _TEXT_STREAMS[stream]
            field = "summary" if idx_key == "summary_index" else "content"
            parts = item.get(field)
            if not isinstance(parts, list) or not is_int(idx) or not 0 <= idx < len(parts):
                continue  # reasoning content may be omitted from the item (e.g. encrypted)
            part = parts[idx]
            if isinstance(part, dict) and text_key in part and part[text_key] != t["deltas"]:
                notes.append(("done-text", field, idx, text_key, part[text_key], t["deltas"]))


# the channel of a text delta's words
_SAID = {"response.output_text.delta": "text", "response.reasoning_text.delta": "reasoning",
         "response.reasoning_summary_text.delta": "reasoning"}


def _place(event: Any, snapshot: dict[str, Any] | None) -> dict[str, Any]:
    """Fold one event: the snapshot's content.

    Snapshot: ``{"response": the latest response object, "output": {output_index: item}}``; ``_complete``
    maps a function call's output_index to "arguments.done" or "item.done"; ``_end`` is set by a
    terminal event; events it cannot place are recorded in ``_unplaced``.
    """
    snap: dict[str, Any] = dict(snapshot) if snapshot is not None else {"response": None, "output": {}}
    if not isinstance(event, dict):
        return snap
    typ = event.get("type")
    if not isinstance(typ, str):
        return base.unplaced(snap, "event without a type")
    if typ in ("response.created", "response.in_progress", "response.queued") or typ in TERMINAL:
        if isinstance(event.get("response"), dict):
            snap["response"] = event["response"]
        if typ in TERMINAL:
            snap["_end"] = True
        return snap
    output = dict(snap.get("output") or {})
    oi = _index_of(typ, event, output)
    if oi is None:
        return snap if typ == "error" else base.unplaced(snap, f"{typ} without an output_index")
    if typ in ("response.output_item.added", "response.output_item.done"):
        if isinstance(event.get("item"), dict):
            output[oi] = dict(event["item"])
            snap["output"] = output
            if typ == "response.output_item.done" and str(event["item"].get("type")) in CALL_ITEMS:
                snap = base.completed(snap, oi, "item.done")
        return snap
    item = output.get(oi)
    if not isinstance(item, dict):
        return base.unplaced(snap, f"{typ} for unknown output_index {oi}")
    item = dict(item)
    if typ in ("response.content_part.added", "response.content_part.done"):
        if isinstance(event.get("part"), dict):
            item["content"] = _set_at(item.get("content"), event.get("content_index"), dict(event["part"]))
    elif typ in ("response.reasoning_summary_part.added", "response.reasoning_summary_part.done"):
        if isinstance(event.get("part"), dict):
            item["summary"] = _set_at(item.get("summary"), event.get("summary_index"), dict(event["part"]))
    elif typ == "response.function_call_arguments.delta":
        item["arguments"] = text(item.get("arguments")) + text(event.get("delta"))
    elif typ == "response.function_call_arguments.done":
        if isinstance(event.get("arguments"), str):
            item["arguments"] = event["arguments"]
        snap = base.completed(snap, oi, "arguments.done")
    elif typ == "response.custom_tool_call_input.delta":
        item["input"] = text(item.get("input")) + text(event.get("delta"))
    elif typ == "response.custom_tool_call_input.done":
        if isinstance(event.get("input"), str):
            item["input"] = event["input"]
        snap = base.completed(snap, oi, "input.done")
    elif not _text_event(typ, event, item):
        return base.unplaced(snap, f"{typ} not folded")
    output[oi] = item
    snap["output"] = output
    return snap


def _index_of(typ: str, event: dict[str, Any], output: dict[Any, Any]) -> Any:
    """Where an event belongs: its output_index; without one (llama.cpp's llama-server 11434 sends none), the
    item its id names, as a client that reads item ids does (Codex), an item added in the next position. The
    grammar still judges the missing number (RS-GRAMMAR-OUTPUT-INDEX); the answer is read all the same."""
    oi = event.get("output_index")
    if oi is not None:  # a number given: the event's own, or none that can be placed
        return oi if is_int(oi) else None
    item = event.get("item")
    iid = item.get("id") if isinstance(item, dict) else event.get("item_id")
    if not isinstance(iid, str) or not iid:
        return None
    known = next((k for k, it in output.items() if isinstance(it, dict) and it.get("id") == iid), None)
    if known is not None or typ not in ("response.output_item.added", "response.output_item.done"):
        return known
    return max((k for k in output if is_int(k)), default=-1) + 1


# `accumulate` without the per-event record (no ``_g``, ``_event``, ``_at``, ``_said``, ``_closed``): the answer's
# fold (`base.Reading.snapshot`), as cheap as the fold was before the record (issue 44)
place = _place


def _text_event(typ: str, event: dict[str, Any], item: dict[str, Any]) -> bool:
    """Fold a text stream's delta or done into ``item`` (in place: a copy); False when it is none."""
    for prefix, (idx_key, text_key) in _TEXT_STREAMS.items():
        if typ.startswith(prefix + "."):
            field = "summary" if idx_key == "summary_index" else "content"
            part = _get_at(item.get(field), event.get(idx_key))
            if prefix == "response.reasoning_text" and not part:
                part = {"type": "reasoning_text", "text": ""}
            if typ.endswith(".delta"):
                part[text_key] = text(part.get(text_key)) + text(event.get("delta"))
            elif typ.endswith(".done") and isinstance(event.get(text_key), str):
                part[text_key] = event[text_key]
            else:
                return False
            item[field] = _set_at(item.get(field), event.get(idx_key), part)
            return True
    return False


def final_message(source: Any) -> dict[str, Any] | None:
    """``{"response": final response object, "output": [items by output_index]}``; None if empty."""
    snap = base.Reading.of(sys.modules[__name__], source).snapshot  # the stream's one fold
    if snap is None:
        return None
    output = snap.get("output") or {}
    # the caller's own copy: the fold is shared by the transcript's readers
    return copy.deepcopy({"response": snap.get("response"), "output": [output[k] for k in sorted(output)]})


# -- what an answer holds -------------------------------------------------------------------

def tool_calls(answer: dict[str, Any] | None) -> list[ToolCall]:
    """The function_call and custom_tool_call items of a stream snapshot (complete by the rule above), a
    folded stream or a non-streamed response, in output order (a custom call's arguments: its input text)."""
    if not answer:
        return []
    output = answer.get("output") or []
    streamed = isinstance(output, dict)
    done = answer.get("_complete") or {}
    keyed = sorted(output.items()) if isinstance(output, dict) else list(enumerate(output))
    calls = [(k, it) for k, it in keyed if isinstance(it, dict) and str(it.get("type")) in CALL_ITEMS]
    return [ToolCall(k, n, text(it.get("call_id")), text(it.get("name")),
                     text(it.get("input") if it.get("type") == "custom_tool_call" else it.get("arguments")),
                     (k in done) if streamed else True, done.get(k, ""))
            for n, (k, it) in enumerate(calls)]


def is_content(event: Any) -> bool:
    """The event carries generated content (text, refusal, reasoning, function-call arguments)."""
    return isinstance(event, dict) and event.get("type") in CONTENT_EVENTS


def error_of(event: Any) -> str | None:
    if not isinstance(event, dict):
        return None
    if event.get("type") == "error":
        return json.dumps(event)[:300]
    if event.get("type") == "response.failed":
        return f"response.failed: {json.dumps((event.get('response') or {}).get('error'))[:300]}"
    return None


# -- answers and requests as the history witnesses see them -----------------------------------

SDK = "openai"  # the official SDK that speaks this API
SIGNS_THINKING = False  # reasoning items carry encrypted_content, not a signature the kit replays


def final_answer(source: Any) -> dict[str, Any] | None:
    """The answer folded from a stream in the non-stream shape: the final response object, with the
    output items as they were streamed."""
    folded = final_message(source)
    if folded is None:
        return None
    return {**(folded.get("response") or {}), "output": folded["output"]}


def parts(answer: dict[str, Any]) -> list[tuple[str, str]]:
    """The output items as (kind, text) in order: ("reasoning", its reasoning text), ("text", a
    message's output text), ("tool_call", a function call's name)."""
    out: list[tuple[str, str]] = []
    for item in answer.get("output") or []:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "reasoning":
            out.append(("reasoning", "".join(p.get("text", "") for p in item.get("content") or [])))
        elif kind == "message":
            out.append(("text", "".join(text(p.get("text")) for p in item.get("content") or []
                                        if isinstance(p, dict))))
        elif kind in CALL_ITEMS:
            out.append(("tool_call", item.get("name", "")))
    return out


def usage(answer: dict[str, Any]) -> dict[str, Any]:
    return answer.get("usage") or {}


def usage_tokens(answer: dict[str, Any]) -> tuple[int, int, int]:
    """(input tokens, output tokens, cached input tokens)."""
    u = usage(answer)
    details = u.get("input_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    return int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0), cached


def stop_reason(answer: dict[str, Any]) -> str | None:
    """The response's status ("completed", "incomplete", "failed"), or the incomplete reason."""
    details = answer.get("incomplete_details")
    reason = details["reason"] if isinstance(details, dict) and details.get("reason") else answer.get("status")
    return None if reason is None else str(reason)  # the endpoint's JSON: a string unless it is broken


def rewritten(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The answer with its first reasoning item edited at its start, its encrypted_content dropped
    (as a client that rewrites history sends it); None when it has no reasoning item."""
    answer = copy.deepcopy(answer)
    for item in answer.get("output", []):
        if item.get("type") == "reasoning":
            item.pop("encrypted_content", None)
            item["content"] = [{"type": "reasoning_text",
                                "text": base.REVISED + "".join(p.get("text", "") for p in item.get("content") or [])}]
            return answer
    return None


def missing_calls(answer: dict[str, Any]) -> str:
    """"": a Responses answer has no stop reason that says a call was made (its calls are output items)."""
    return ""


def without_reasoning(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The answer with its reasoning items left out, the rest as it was (what the presence witness sends
    beside the answer itself); None when it has none."""
    output = answer.get("output") or []
    kept = [i for i in output if not (isinstance(i, dict) and i.get("type") == "reasoning")]
    return None if len(kept) == len(output) else {**answer, "output": copy.deepcopy(kept)}


def kit_answer(scenario: Scenario, *, signature: str = "") -> dict[str, Any]:
    """The scenario's scripted turn 0 as output items the kit built (reasoning, function_call,
    message) in script order; ``signature`` is unused (Responses has none)."""
    output: list[dict[str, Any]] = []
    for n, p in enumerate(scenario.turns[0].model):
        if p.kind == "reasoning":
            output.append({"type": "reasoning", "id": f"rs_kit{n}", "summary": [],
                           "content": [{"type": "reasoning_text", "text": p.text}]})
        elif p.kind == "tool_call":
            output.append({"type": "function_call", "id": f"fc_kit{n}", "call_id": f"call_kit{n}",
                           "name": p.name, "arguments": p.arguments})
        else:
            output.append({"type": "message", "role": "assistant", "id": f"msg_kit{n}",
                           "content": [{"type": "output_text", "text": p.text, "annotations": []}]})
    return {"output": output}


def thinking_on(body: dict[str, Any]) -> dict[str, Any]:
    """The request with ``reasoning.effort`` medium."""
    return {**body, "reasoning": {"effort": "medium"}}


def with_system_prefix(body: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The request with ``prefix`` put before its instructions."""
    return {**body, "instructions": prefix + body.get("instructions", "")}


def append_user(body: dict[str, Any], user: str) -> dict[str, Any]:
    """The request with one more user message item at the end of its input."""
    return {**body, "input": [*body["input"], {"type": "message", "role": "user", "content": user}]}


def tokenize_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The request's conversation as a chat-form /tokenize payload's ``input`` (instructions first,
    as a system message)."""
    system = [{"type": "message", "role": "system", "content": body["instructions"]}] if body.get("instructions") else []
    return {"input": system + body["input"]}


is_error_body = base.is_openai_error  # the body is OpenAI's error shape

# -- what the replay client reads from a stream's snapshot ------------------------------------
# (the answer in history form, its structure, usage, stop, end, the error of an error event; the
# content and call ids of a history-form answer: replay.fold.View)


def stream_part(snap: Snapshot, key: Any) -> str | None:
    """The output item at ``key`` as a timeline names it: its index, type and a function call's name."""
    item = ((snap or {}).get("output") or {}).get(key)
    item = item if isinstance(item, dict) else {}
    name = item.get("name") if item.get("type") == "function_call" else None
    return f"item {key}: {item.get('type', '?')}" + (f" {name}" if name else "")


def stream_history(snap: Snapshot) -> list[dict[str, Any]]:
    """The output items by output_index; the terminal response's own output fills any never streamed."""
    output = dict((snap or {}).get("output") or {})
    if (snap or {}).get("_end"):
        for n, item in enumerate(((snap or {}).get("response") or {}).get("output") or ()):
            output.setdefault(n, item)
    return [output[k] for k in sorted(output)]


def stream_structure(snap: Snapshot, kinds: list[str]) -> dict[str, Any]:
    items = stream_history(snap)
    return {"blocks": [it.get("type") for it in items],
            "tool_calls": [it.get("name") for it in items if it.get("type") in CALL_ITEMS],
            "stop": stream_stop(snap)}


def _stream_final(snap: Snapshot) -> dict[str, Any]:
    return ((snap or {}).get("response") or {}) if (snap or {}).get("_end") else {}


def stream_stop(snap: Snapshot) -> str | None:
    return _stream_final(snap).get("status")


def stream_ended(snap: Snapshot) -> bool:
    # response.incomplete (max_output_tokens, content filter) is the stream's end too: a whole stream
    # whose status says why it stopped; response.failed is an error, not an end
    return bool((snap or {}).get("_end")) and _stream_final(snap).get("status") != "failed"


def answer_text(answer: list[Any] | None) -> str:
    out: list[str] = []
    for item in answer or ():
        if item.get("type") in CALL_ITEMS:
            out += [item.get("name") or "", item.get("arguments") or item.get("input") or ""]
        for part in (item.get("content") or []) + (item.get("summary") or []):
            if isinstance(part, dict):
                out.append(part.get("text") or "")
    return "".join(out)


def answer_call_ids(answer: list[Any] | None) -> list[str]:
    return [str(entry.get("call_id", "")) for entry in answer or ()
            if isinstance(entry, dict) and entry.get("type") in CALL_ITEMS]


def stream_error(event: Any) -> str | None:
    msg = error_of(event)
    if msg is None or msg.startswith("response.failed"):
        return msg
    return f"error event: {msg}"


def stream_usage(snap: Snapshot) -> dict[str, Any]:
    return dict(_stream_final(snap).get("usage") or {})


stream_grown = None  # items keep their own order
PER_CALL_END = True  # function_call_arguments.done / output_item.done end each call


# -- what a synthetic agent session writes (replay/workloads.py) -------------------------------------

def agent_request(model: str, system: str, tools: list[Any], new: list[Any],
                  max_tokens: int) -> dict[str, Any]:
    """An agent's streamed first request: instructions, the new input items, the tools."""
    return {"model": model, "instructions": system, "input": new, "tools": tools,
            "max_output_tokens": max_tokens, "stream": True}


def history_answer(texts: list[str], calls: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """An answer in history form: a message item per text, then its (call id, scenario part) calls."""
    items: list[dict[str, Any]] = [{"type": "message", "role": "assistant",
                                    "content": [{"type": "output_text", "text": t}]} for t in texts]
    return items + [{"type": "function_call", "call_id": i, "name": c.name, "arguments": c.arguments}
                    for i, c in calls]


def history_results(results: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """(call id, output) tool results in history form."""
    return [{"type": "function_call_output", "call_id": i, "output": r} for i, r in results]


# -- the kit's levers (conformance/levers.py) -----------------------------------------------------------
_ANSWER_ITEMS = ("function_call", "function_call_output", "reasoning", "custom_tool_call",
                 "custom_tool_call_output")


def is_opening(body: dict[str, Any]) -> bool:
    """The request holds no earlier answer (nor continues a stored response): levers bend only these."""
    if body.get("previous_response_id"):
        return False
    items = body.get("input")
    if items is None or isinstance(items, str):
        return True
    return isinstance(items, list) and not any(isinstance(i, dict) and (
        i.get("type") in _ANSWER_ITEMS or i.get("role") == "assistant") for i in items)


def least_limit(body: dict[str, Any]) -> int:
    """The smallest output limit this request takes (no setting raises it)."""
    return MIN_OUTPUT_TOKENS


def forcing_refused(body: dict[str, Any]) -> bool:
    """Responses accepts a forced call with any request."""
    return False


def lever_thinking_off(body: dict[str, Any]) -> dict[str, Any] | None:
    return base.reasoning_effort(body, "none")


def lever_thinking_on(body: dict[str, Any]) -> dict[str, Any] | None:
    return base.reasoning_effort(body, "high", summary=True)


def lever_reasoning_minimal(body: dict[str, Any]) -> dict[str, Any] | None:
    return base.reasoning_effort(body, "minimal")


lever_prefill = None  # no assistant prefill in Responses


# -- a recorded client session replayed (conformance/client_replay.py), a refused over-long prompt -------

def is_stream_event(e: dict[str, Any]) -> bool:
    """A recorded data object is a stream event (not a non-streamed answer's body)."""
    typ = e.get("type")
    return isinstance(typ, str) and (typ.startswith("response.") or typ == "error")


def answer_values(answer: dict[str, Any]) -> list[tuple[str, Any]]:
    """The values an answer contributes to the client's next request, in order, by kind."""
    out: list[tuple[str, Any]] = []
    for item in answer.get("output") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        out.append(("item", kind))
        out.append(("item_id", item.get("id")))
        if kind == "reasoning":
            out += [("reasoning", p.get("text")) for p in item.get("content") or [] if isinstance(p, dict)]
            out += [("summary", p.get("text")) for p in item.get("summary") or [] if isinstance(p, dict)]
            out.append(("encrypted", item.get("encrypted_content")))
        elif kind == "message":
            out += [("text", p.get("text")) for p in item.get("content") or [] if isinstance(p, dict)]
        elif kind in ("function_call", "custom_tool_call"):
            out += [("call", item.get("name")), ("call_id", item.get("call_id")),
                    ("arguments", item.get("arguments") if kind == "function_call" else item.get("input"))]
    return out


overflow_marker_problem = base.openai_overflow_problem  # error.code context_length_exceeded


def streamed_refusal(frames: list[Any]) -> list[tuple[str, str]] | None:
    """A 200 stream with neither ``response.failed`` nor an ``error`` event is no refusal: None (the caller
    judges it as an answer, as in the other APIs). A streamed request may be refused with a stream whose
    ``response.failed`` carries the overflow code (how Codex recognises it, codex-rs
    codex-api/src/sse/responses.rs ``is_context_window_error``): [] for that refusal. Any other failure
    inside the stream is the endpoint refusing the prompt in a form Codex does not act on: a
    ``response.failed`` with another code (Dynamo 1.6.1: server_error, which Codex retries as it retries a
    500), and an ``error`` event, which Codex skips (the stream then ends without response.completed, an
    error it retries): (part, problem), the code judged as an HTTP error's."""
    for frame in frames:
        data = frame.json
        if not isinstance(data, dict):
            continue
        if data.get("type") == "response.failed":
            response = data.get("response")
            error = response.get("error") if isinstance(response, dict) else None
            if isinstance(error, dict) and error.get("code") == base.OVERFLOW_CODE:
                return []
            return base.refused_in_stream("response.failed", error, overflow_marker_problem({"error": error}),
                                          f"Codex reads a full window only from the code {base.OVERFLOW_CODE!r}; "
                                          "a server_error it retries, as it retries a 500")
        if data.get("type") == "error":
            error = data.get("error") if isinstance(data.get("error"), dict) else data
            return base.refused_in_stream("an error event", error, overflow_marker_problem({"error": error}),
                                          "Codex skips an error event and retries the stream that ends without "
                                          "response.completed")
    return None
