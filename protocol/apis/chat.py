"""OpenAI Chat Completions in the kit: route and headers, request builders, the stream fold.

A streamed tool call arrives as deltas by ``index``; it is complete when a later index starts or the
choice's ``finish_reason`` arrives (openai-python's ChatCompletionStreamState folds the same way;
API_FACTS, "Chat Completions"). The reference server can also announce a call with its own
``event: tool_call_dispatch`` frame (DISPATCH_EVENT), which is not part of the API.

Why one module of ~800 lines: it is the kit's one home for this API (STYLE: one home per API on each side;
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

NAME = "chat"
PATH = "/v1/chat/completions"
PREFIX = "CH"
LABEL = "Chat Completions"
GRAMMAR = "harnesscheck.conformance.grammar.chat"  # its stream validator, by module name
ALIASES = ("chat_completions", "openai-chat")  # other names the grammar lookup accepts
ANSWER_ENDS = ("[DONE]",)  # a client has its whole answer after these
# Bodies the reference refuses (<P>-ERR-001 wants a 4xx in the API's error shape; "{model}": the model).
BAD_REQUESTS: tuple[tuple[str, Any], ...] = (
    ("missing messages", {"model": "{model}"}),
    ("bad role", {"model": "{model}", "messages": [{"role": "robot", "content": "x"}]}),
    ("tools not an array", {"model": "{model}", "messages": [{"role": "user", "content": "x"}], "tools": 3}),
    ("body not JSON", b"[1, 2"))
ALLOWED_REQUESTS: tuple[tuple[str, dict[str, Any]], ...] = ()  # allowed bodies a strict server might refuse
MIN_OUTPUT_TOKENS = 1  # `max_completion_tokens` / `max_tokens` minimum
MAX_TOKENS_FIELD = "max_tokens"
DISPATCH_EVENT = "tool_call_dispatch"

FORM = base.Form("messages", None, False, "text", ("authorization", "Bearer {key}"),
                 stream_fields={"stream_options": {"include_usage": True}}, chat_messages=True)


def headers(api_key: str | None = None) -> dict[str, str]:
    return base.headers(api_key)


def tool(spec: dict[str, Any], *, strict: bool | None = None) -> dict[str, Any]:
    """One function tool (``spec``: name, description, parameters), with ``function.strict`` when given
    (FunctionDefinition.strict: "the model will follow the exact schema defined in the parameters field")."""
    fn = {"name": spec["name"], "description": spec.get("description", ""), "parameters": spec["parameters"]}
    return {"type": "function", "function": fn if strict is None else {**fn, "strict": strict}}


def tools(scenario: Scenario) -> list[dict[str, Any]]:
    return [tool(t) for t in scenario.tools]


def tool_choice(mode: str, name: str = "") -> Any:
    """``tool_choice`` for one of the kit's modes (auto, required, named, none): a string, or the named
    function's object (ChatCompletionNamedToolChoiceParam)."""
    return {"type": "function", "function": {"name": name}} if mode == "named" else mode


def without_parallel(body: dict[str, Any]) -> dict[str, Any]:
    """The request with parallel function calling off (``parallel_tool_calls: false``)."""
    return {**body, "parallel_tool_calls": False}


PARALLEL_FIELD = "parallel_tool_calls"  # the request field without_parallel sets


def cut_answer(name: str, arguments: str) -> dict[str, Any]:
    """A non-streamed answer with one call cut by the output limit."""
    return {"choices": [{"index": 0, "finish_reason": "length", "message": {
        "role": "assistant", "content": None, "tool_calls": [{"id": "call_cut_1", "type": "function", "function": {
            "name": name, "arguments": arguments}}]}}]}


LENGTH_STOP = "length"  # the finish_reason of an answer cut by its output limit


def first(scenario: Scenario, model: str, *, stream: bool = True) -> dict[str, Any]:
    messages = [{"role": "system", "content": scenario.system}] if scenario.system else []
    body: dict[str, Any] = {"model": model, "stream": stream,
                            "messages": messages + [{"role": "user", "content": base.user_text(scenario)}],
                            "max_tokens": base.output_budget(scenario)}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if scenario.tools:
        body["tools"] = tools(scenario)
    return body


def message_of(answer: dict[str, Any]) -> dict[str, Any]:
    """The assistant message of a completion (choices[0].message) or of a folded stream (itself)."""
    return answer["choices"][0]["message"] if "choices" in answer else answer


def follow(body: dict[str, Any], answer: dict[str, Any], scenario: Scenario, turn: int) -> dict[str, Any]:
    """The request for ``turn`` (>= 1): the assistant message with reasoning_content and tool_calls as
    sent back, a tool message per call, and the next user text, if any."""
    body = copy.deepcopy(body)
    message = message_of(answer)
    sent: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    for key in ("reasoning_content", "reasoning"):
        if message.get(key):
            sent[key] = message[key]
            break
    if message.get("tool_calls"):
        sent["tool_calls"] = [{"id": c["id"], "type": "function", "function": c["function"]}
                              for c in message["tool_calls"]]
    body["messages"].append(sent)
    for c in tool_calls(answer):
        body["messages"].append({"role": "tool", "tool_call_id": c.id, "content": scenario.result_for(c.name, c.arguments)})
    user = base.next_user(scenario, turn)
    if user:
        body["messages"].append({"role": "user", "content": user})
    return body


def malformed_history(body: Any) -> str:
    """The first assistant tool call in a request's history whose arguments are no JSON object (the
    endpoint's own broken call, sent back as it came), or ''."""
    for m in (body.get("messages") or []) if isinstance(body, dict) else []:
        for c in (m.get("tool_calls") if isinstance(m, dict) and m.get("role") == "assistant" else None) or []:
            fn = c.get("function") if isinstance(c, dict) else None
            if isinstance(fn, dict) and not base.json_object_text(fn.get("arguments")):
                return f"tool call {c.get('id')} ({fn.get('name')}) with arguments {str(fn.get('arguments'))[:80]!r}"
    return ""


# The tags between the fold and the grammar validator (issue 44): what one event did (`What`, its record's
# "what"), and the notes it made (`Note`: a tag, then its details), as Literal types mypy checks (strict on protocol/ and the grammar): a tag written here or
# compared in the validator that is not in the list is a type error.
What = Literal["chunk", "dispatch", "done", "error", "other"]
NoteTag = Literal["after-finish", "choice-invalid", "choices-not-list", "dispatch-again", "dispatch-before-args",
                  "dispatch-early", "dispatch-late", "dispatch-malformed", "finish-again", "finish-unknown",
                  "id-differs", "id-missing", "object", "tool-args-type", "tool-first", "tool-index-order",
                  "tool-no-index", "tool-repeat", "tools-not-list"]
Note = tuple[NoteTag, Unpack[tuple[Any, ...]]]  # a note: its tag, then what a rule reports


def notes_of(rec: Any) -> list[Note]:
    """The notes one event's record made, in stream order."""
    return list((rec or {}).get("notes") or ())


def _w(what: What) -> What:
    return what


_CHUNK = _w("chunk")  # (what most events did: made once)


def did(rec: Any) -> What | None:
    """What one event did, as its record (the snapshot's ``_event``) says; None without a record."""
    return cast("What | None", (rec or {}).get("what"))


# -- the fold -------------------------------------------------------------------------------

def accumulate(chunk: Any, snapshot: dict[str, Any] | None) -> dict[str, Any] | None:
    """Fold one chunk; return the new snapshot (the given one is not mutated). ``_at`` names the parts of
    choice 0 the chunk placed something in ("reasoning", "text", tool-call indices), ``_said`` the text it
    added as (channel, text), ``_closed`` the parts choice 0's finish_reason closed (the wire closes no part
    before it). ``_g`` / ``_event``: the stream's state and what this chunk did to it (``record``), what
    the grammar validator judges; a Dynamo ``tool_call_dispatch`` side frame is folded as
    ``dispatch_event(data)`` (it changes no content).
    """
    snap = _place(chunk, snapshot)  # a new dict for a chunk or [DONE] (the given one otherwise): set in place
    is_chunk = isinstance(chunk, dict)
    if snap is not None and (is_chunk or chunk == "[DONE]"):
        g, rec = record(chunk, snapshot.get("_g") if snapshot is not None else None)
        snap = dict(snap) if snap is snapshot else snap
        snap["_g"], snap["_event"] = g, rec
    if snap is None or not is_chunk or "error" in chunk:
        return snap
    at: list[Any] = []
    said: list[tuple[str, str]] = []
    choices = chunk.get("choices")
    for c in choices if isinstance(choices, list) else ():
        delta = c.get("delta") if isinstance(c, dict) and c.get("index") == 0 and is_int(c["index"]) else None
        if not isinstance(delta, dict):
            continue
        for rkey, channel in _CHANNELS:
            if isinstance(delta.get(rkey), str):
                said.append((channel, delta[rkey]))
                at += [channel] if delta[rkey] else []
        tcs = delta.get("tool_calls")
        at += [tc["index"] for tc in tcs if isinstance(tc, dict) and is_int(tc.get("index"))] \
            if isinstance(tcs, list) else []
    ch0 = (snap.get("choices") or {}).get(0)
    snap["_at"] = tuple(dict.fromkeys(at)) if len(at) > 1 else tuple(at)
    snap["_said"] = tuple(said)
    snap["_closed"] = _finished(snapshot, snap) if ch0 and ch0.get("finish_reason") is not None else None
    return snap


# -- the stream's state, as the grammar judges it --------------------------------------------
FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call"})
_WORDS = ("content", "reasoning_content", "reasoning", "tool_calls")
_NEW_STATE: dict[str, Any] = {"n": 0, "done": None, "error": None, "first_id": None, "chunks": False,
                              "choices": {}, "usage": (), "usage_on_choices": (), "dispatches": {},
                              "early": frozenset()}


def dispatch_event(data: Any) -> dict[str, Any]:
    """A ``tool_call_dispatch`` side frame's data as the fold takes it (it changes no content)."""
    return {"object": DISPATCH_EVENT, "dispatch": data}


def dispatch_shape(d: Any) -> bool:
    """A ``tool_call_dispatch`` frame's data has ``choice_index`` and ``tool_call{index, id, type:
    "function", function{name, arguments}}`` (CH-DISPATCH-SHAPE); only such a frame is folded."""
    tc = d.get("tool_call") if isinstance(d, dict) else None
    fn = tc.get("function") if isinstance(tc, dict) else None
    return (
        isinstance(d, dict) and is_int(d.get("choice_index")) and isinstance(tc, dict)
        and is_int(tc.get("index")) and isinstance(tc.get("id"), str) and bool(tc.get("id"))
        and tc.get("type") == "function" and isinstance(fn, dict)
        and isinstance(fn.get("name"), str) and bool(fn.get("name")) and isinstance(fn.get("arguments"), str)
    )


def fold_input(frame: Any) -> Any:
    """What the fold takes of a frame: a chunk (a JSON object), ``"[DONE]"``, and Dynamo's well-formed
    ``tool_call_dispatch`` frame as ``dispatch_event(data)`` (a malformed one is the grammar's to report);
    None for anything else. Every reader of a Chat stream folds these, so the dispatches are read in the
    fold's record (``_g["dispatches"]``), not beside it."""
    if frame.kind != "event":
        return None
    if frame.event == DISPATCH_EVENT:
        return dispatch_event(frame.json) if dispatch_shape(frame.json) else None
    if frame.done:
        return "[DONE]"
    return frame.json if isinstance(frame.json, dict) else None


def record(chunk: Any, state: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stream's state after one more chunk (``"[DONE]"``, a chunk, an error chunk, a dispatch_event),
    and what it did: ``what`` and ``notes``, the things a rule judges, in stream order. The state: the
    numbers (``n``, from 0) of the [DONE] and error events, the first chunk id, per choice its
    finish_reason (and the event that set it) and its tool calls by index (first id and name, joined
    arguments, first and last event, a non-string arguments fragment), the usage chunks (choices [], or
    not), and the dispatches by (choice, call) and those that came before the call's deltas ended."""
    g = dict(state or _NEW_STATE)
    n = g["n"]
    g["n"] = n + 1
    notes: list[Note] = []
    rec: dict[str, Any] = {"n": n, "what": _CHUNK, "notes": notes}
    if chunk == "[DONE]":
        g["done"] = n
        return g, {**rec, "what": _w("done")}
    if not isinstance(chunk, dict):
        return g, {**rec, "what": _w("other")}
    if chunk.get("object") == DISPATCH_EVENT and "dispatch" in chunk:
        _record_dispatch(chunk["dispatch"], n, g, notes)
        return g, {**rec, "what": _w("dispatch")}
    if "error" in chunk:
        g["error"] = n
        return g, {**rec, "what": _w("error")}
    g["chunks"] = True
    if chunk.get("object") != "chat.completion.chunk":
        notes.append(("object", chunk.get("object")))
    cid = chunk.get("id")
    if not isinstance(cid, str) or not cid:
        notes.append(("id-missing", cid))
    elif g["first_id"] is None:
        g["first_id"] = cid
    elif cid != g["first_id"]:
        notes.append(("id-differs", cid, g["first_id"]))
    cs = chunk.get("choices")
    if not isinstance(cs, list):
        notes.append(("choices-not-list", cs))
        return g, rec
    if isinstance(chunk.get("usage"), dict):
        if cs:
            g["usage_on_choices"] = (*g["usage_on_choices"], (n, cs))
        else:
            g["usage"] = (*g["usage"], n)
    choices = g["choices"] = dict(g["choices"])
    for c in cs:
        if not isinstance(c, dict) or not is_int(c.get("index")) or not isinstance(c.get("delta"), dict):
            notes.append(("choice-invalid", c))
            continue
        cidx, delta, fr = c["index"], c["delta"], c.get("finish_reason")
        tcs = delta.get("tool_calls")
        st = choices[cidx] = dict(choices.get(cidx) or {"finish": None, "finish_at": None, "calls": {}})
        if st["finish"] is not None:
            if fr is not None:
                notes.append(("finish-again", cidx, fr, st["finish_at"]))
                continue
            if any(delta.get(k) for k in _WORDS):
                notes.append(("after-finish", cidx, delta, st["finish_at"]))
                continue
        if tcs is not None:
            _record_tools(tcs, st, cidx, n, g, notes)
        if fr is not None:
            if not isinstance(fr, str) or fr not in FINISH_REASONS:  # a list would not even hash
                notes.append(("finish-unknown", fr))
            st["finish"], st["finish_at"] = fr, n
    return g, rec


def _record_tools(tcs: Any, st: dict[str, Any], cidx: int, n: int, g: dict[str, Any],
                  notes: list[Note]) -> None:
    if tcs is None:
        return
    if not isinstance(tcs, list):
        notes.append(("tools-not-list", tcs))
        return
    calls = st["calls"] = dict(st["calls"])
    for tc in tcs:
        if not isinstance(tc, dict) or not is_int(tc.get("index")):
            notes.append(("tool-no-index", tc))
            continue
        ti = tc["index"]
        fn: dict[str, Any] = tc["function"] if isinstance(tc.get("function"), dict) else {}
        call = calls.get(ti)
        if call is None:
            if ti != len(calls):
                notes.append(("tool-index-order", ti, len(calls)))
            missing = [what for what, ok in (
                ("id", isinstance(tc.get("id"), str) and bool(tc.get("id"))),
                ('type "function"', tc.get("type") == "function"),
                ("function.name", isinstance(fn.get("name"), str) and bool(fn.get("name")))) if not ok]
            if missing:
                notes.append(("tool-first", ti, missing, tc))
            call = {"id": tc.get("id"), "name": fn.get("name"), "args": "", "first": n, "bad_args": False}
        else:
            call = dict(call)
            repeated = [k for k, v in (("id", tc.get("id")), ("function.name", fn.get("name")))
                        if isinstance(v, str) and v]
            if repeated:
                notes.append(("tool-repeat", ti, repeated, tc))
        calls[ti] = call
        call["last"] = n
        args = fn.get("arguments")
        if args is not None and not isinstance(args, str):
            call["bad_args"] = True
            notes.append(("tool-args-type", ti, args))
        elif isinstance(args, str):
            call["args"] += args
            if args and (cidx, ti) in g["dispatches"]:
                g["early"] = g["early"] | {(cidx, ti)}
                notes.append(("dispatch-before-args", ti, args, g["dispatches"][(cidx, ti)][0]))


def _record_dispatch(d: Any, n: int, g: dict[str, Any], notes: list[Note]) -> None:
    tc = d.get("tool_call") if isinstance(d, dict) else None
    if not isinstance(tc, dict) or not is_int(d.get("choice_index")) or not is_int(tc.get("index")):
        notes.append(("dispatch-malformed", d))
        return
    key = (d["choice_index"], tc["index"])
    if g["done"] is not None:
        notes.append(("dispatch-late", g["done"]))
    if key in g["dispatches"]:
        notes.append(("dispatch-again", key, g["dispatches"][key][0]))
        return
    g["dispatches"] = {**g["dispatches"], key: (n, tc)}
    st = g["choices"].get(key[0])
    if st is None or key[1] not in st["calls"]:
        g["early"] = g["early"] | {key}
        notes.append(("dispatch-early", key))


def _finished(before: dict[str, Any] | None, after: dict[str, Any]) -> tuple[Any, ...] | None:
    """The parts of choice 0 (channels, tool calls) its finish_reason closed, when this chunk set it."""
    old = ((before or {}).get("choices") or {}).get(0) or {}
    ch = (after.get("choices") or {}).get(0) or {}
    if ch.get("finish_reason") is None or old.get("finish_reason") is not None:
        return None
    return (*(["reasoning"] if ch.get("reasoning_content") else []), *(["text"] if ch.get("content") else []),
            *ch.get("tool_calls", {}))


_CHANNELS = (("reasoning_content", "reasoning"), ("reasoning", "reasoning"), ("content", "text"))


def _place(chunk: Any, snapshot: dict[str, Any] | None) -> dict[str, Any] | None:
    """Fold one chunk: the snapshot's content.

    Snapshot: ``{"id", "model", "created", "choices": {index: choice}, "usage"}``, each choice
    ``{"index", "role", "content", "reasoning_content", "tool_calls": {index: call}, "finish_reason"}``;
    ``_complete`` maps (choice 0's) tool-call index to "next_index" or "finish_reason"; ``_end`` is set by
    ``[DONE]`` (passed as that string); an error chunk is recorded in ``_unplaced``.
    """
    if not isinstance(chunk, dict):
        if chunk == "[DONE]":
            return {**(snapshot if snapshot is not None else {"choices": {}, "usage": None}), "_end": True}
        return snapshot
    if "error" in chunk:
        return base.unplaced(snapshot, "error chunk") if snapshot is not None else snapshot
    snap: dict[str, Any] = snapshot.copy() if snapshot is not None else {"choices": {}, "usage": None}
    for key in _HEAD:
        if key not in snap and key in chunk:
            snap[key] = chunk[key]
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        snap["usage"] = dict(usage)
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return snap
    new_choices = dict(snap.get("choices") or {})
    for c in choices:
        idx = c.get("index") if isinstance(c, dict) else None
        if type(idx) is not int and not is_int(idx):  # (the first test is the common case's, the cheap one)
            snap = base.unplaced(snap, "choice without an index")
            continue
        old = new_choices.get(idx)
        ch = dict(old) if old else {"index": idx, "role": None, "content": None, "reasoning_content": None,
                                    "tool_calls": {}, "finish_reason": None}
        delta = c.get("delta")
        if isinstance(delta, dict):
            if ch["role"] is None:
                got = delta.get("role")
                if isinstance(got, str):
                    ch["role"] = got
            got = delta.get("content")
            if isinstance(got, str):
                was = ch["content"]
                ch["content"] = was + got if isinstance(was, str) else got
            for rkey in _REASONING:
                got = delta.get(rkey)
                if isinstance(got, str):
                    was = ch["reasoning_content"]
                    ch["reasoning_content"] = was + got if isinstance(was, str) else got
            tcs = delta.get("tool_calls")
            if isinstance(tcs, list):
                calls = dict(ch["tool_calls"])
                for tc in tcs:
                    if not isinstance(tc, dict) or not is_int(tc.get("index")):
                        snap = base.unplaced(snap, "tool-call delta without an index")
                        continue
                    ti = tc["index"]
                    if ti not in calls and idx == 0:  # a new index: the earlier calls are complete
                        for other in calls:
                            snap = base.completed(snap, other, "next_index")
                    calls[ti] = _tool_delta(calls.get(ti), ti, tc)
                ch["tool_calls"] = calls
        if c.get("finish_reason") is not None and ch["finish_reason"] is None:
            ch["finish_reason"] = c["finish_reason"]
            if idx == 0:
                for other in ch["tool_calls"]:
                    snap = base.completed(snap, other, "finish_reason")
        new_choices[idx] = ch
    snap["choices"] = new_choices
    return snap


_HEAD = ("id", "model", "created", "system_fingerprint")  # taken from the first chunk that has them
_REASONING = ("reasoning_content", "reasoning")  # the delta fields of reasoning (vLLM's, and others')
# `accumulate` without the per-event record (no ``_g``, ``_event``, ``_at``, ``_said``, ``_closed``): the answer's
# fold (`base.Reading.snapshot`), as cheap as the fold was before the record (issue 44)
place = _place


def _tool_delta(call: dict[str, Any] | None, ti: int, tc: dict[str, Any]) -> dict[str, Any]:
    call = dict(call or {"index": ti, "id": None, "type": None, "function": {"name": None, "arguments": ""}})
    fn = dict(call["function"])
    if call["id"] is None and isinstance(tc.get("id"), str) and tc["id"]:
        call["id"] = tc["id"]
    if call["type"] is None and isinstance(tc.get("type"), str):
        call["type"] = tc["type"]
    f = tc.get("function")
    if isinstance(f, dict):
        if fn["name"] is None and isinstance(f.get("name"), str) and f["name"]:
            fn["name"] = f["name"]
        if isinstance(f.get("arguments"), str):
            fn["arguments"] = fn["arguments"] + f["arguments"]
    call["function"] = fn
    return call


def final_message(source: Any, choice: int = 0) -> dict[str, Any] | None:
    """The folded message of one choice: ``{id, model, role, content, reasoning_content,
    tool_calls: [...by index], finish_reason, usage, dispatched: [...]}``; None without chunks."""
    frames, _ = base.frames_and_request(source)
    dispatched = [f.json for f in frames if f.event == DISPATCH_EVENT and f.kind == "event"]
    snap = base.Reading.of(sys.modules[__name__], source).snapshot
    # a dispatch frame folds without changing content (dispatch_event), but one before every chunk would
    # start a snapshot: the answer is None when no chunk (an object other than an error chunk) came
    if snap is None or not any(f.kind == "event" and f.event != DISPATCH_EVENT and isinstance(f.json, dict)
                               and "error" not in f.json for f in frames):
        return None
    ch = (snap.get("choices") or {}).get(choice) or {
        "role": None, "content": None, "reasoning_content": None, "tool_calls": {}, "finish_reason": None}
    # the caller's own copy (the fold is shared by the transcript's readers); a call is the fold's
    # (_tool_delta: strings, and its function's strings), the usage and the dispatch frames the server's
    calls = [{**c, "function": dict(c["function"])} for c in (ch["tool_calls"][k] for k in sorted(ch["tool_calls"]))]
    return {
        "id": snap.get("id"), "model": snap.get("model"), "role": ch["role"], "content": ch["content"],
        "reasoning_content": ch["reasoning_content"], "tool_calls": calls,
        "finish_reason": ch["finish_reason"], "usage": copy.deepcopy(snap.get("usage")),
        "dispatched": copy.deepcopy([d for d in dispatched if isinstance(d, dict) and d.get("choice_index", 0) == choice]),
    }


# -- what an answer holds -------------------------------------------------------------------

def tool_calls(answer: dict[str, Any] | None) -> list[ToolCall]:
    """Choice 0's tool calls, by index: of a stream snapshot (complete by the rule above), a folded
    message, or a non-streamed completion."""
    if not answer:
        return []
    if isinstance(answer.get("choices"), dict):  # a stream snapshot
        done = answer.get("_complete") or {}
        calls = ((answer["choices"].get(0) or {}).get("tool_calls")) or {}
        return [ToolCall(k, n, text(calls[k].get("id")), text(calls[k]["function"].get("name")),
                         text(calls[k]["function"].get("arguments")), k in done, done.get(k, ""))
                for n, k in enumerate(sorted(calls))]
    message = message_of(answer)
    return [ToolCall(n, n, c["id"], c["function"]["name"], c["function"]["arguments"])
            for n, c in enumerate(message.get("tool_calls") or [])]


def is_content(chunk: Any) -> bool:
    """The chunk carries generated content (text, reasoning, tool-call deltas) for choice 0."""
    if not isinstance(chunk, dict):
        return False
    for c in chunk.get("choices") or ():
        if isinstance(c, dict) and c.get("index", 0) == 0:
            d = c.get("delta") or {}
            if isinstance(d, dict) and (d.get("content") or d.get("reasoning_content") or d.get("reasoning")
                                        or d.get("tool_calls")):
                return True
    return False


def error_of(chunk: Any) -> str | None:
    if isinstance(chunk, dict) and "error" in chunk and "choices" not in chunk:
        return json.dumps(chunk)[:300]
    return None


# -- answers and requests as the history witnesses see them -----------------------------------

SDK = "openai"  # the official SDK that speaks this API
SIGNS_THINKING = False  # reasoning_content carries no signature


def final_answer(source: Any) -> dict[str, Any] | None:
    """The answer folded from a stream: choice 0's message with usage and finish_reason (a shape
    `message_of`, `tool_calls` and `follow` take as they take a completion)."""
    return final_message(source)


def parts(answer: dict[str, Any]) -> list[tuple[str, str]]:
    """The message's parts as (kind, text): ("reasoning", reasoning_content or reasoning), ("text",
    content), then ("tool_call", name) per call; one message cannot interleave them."""
    message = (answer.get("choices") or [{}])[0].get("message") or {} if "choices" in answer else answer
    out: list[tuple[str, str]] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning:
        out.append(("reasoning", reasoning))
    if message.get("content"):
        out.append(("text", message["content"]))
    return out + [("tool_call", c["function"]["name"]) for c in message.get("tool_calls") or []]


def usage(answer: dict[str, Any]) -> dict[str, Any]:
    return answer.get("usage") or {}


def usage_tokens(answer: dict[str, Any]) -> tuple[int, int, int]:
    """(prompt tokens, completion tokens, cached prompt tokens)."""
    u = usage(answer)
    details = u.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    return int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0), cached


def stop_reason(answer: dict[str, Any]) -> str | None:
    if "choices" in answer:
        reason = (answer.get("choices") or [{}])[0].get("finish_reason")
    else:
        reason = answer.get("finish_reason")
    return None if reason is None else str(reason)  # the endpoint's JSON: a string unless it is broken


def rewritten(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The answer with its reasoning edited at its start (as a client that rewrites history sends
    it); None when it has no reasoning."""
    answer = copy.deepcopy(answer)
    message = message_of(answer)
    for key in ("reasoning_content", "reasoning"):
        if message.get(key):
            message[key] = base.REVISED + message[key]
            return answer
    return None


def missing_calls(answer: dict[str, Any]) -> str:
    """What the answer says of a call it does not hold: finish_reason tool_calls with no tool_calls (a client
    cannot run a call it only reads as text); "" otherwise."""
    message = message_of(answer)
    if stop_reason(answer) != "tool_calls" or message.get("tool_calls"):
        return ""
    return f"finish_reason tool_calls with no tool_calls (its content: {str(message.get('content') or '')[:120]!r})"


def without_reasoning(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The answer with its reasoning (`reasoning_content`, `reasoning`) left out, the rest as it was (what
    the presence witness sends beside the answer itself); None when it has none."""
    answer = copy.deepcopy(answer)
    message = message_of(answer)
    found = [key for key in ("reasoning_content", "reasoning") if message.get(key)]
    for key in found:
        message.pop(key)
    return answer if found else None


def kit_answer(scenario: Scenario, *, signature: str = "") -> dict[str, Any]:
    """Refused: one assistant message cannot interleave reasoning and tool calls."""
    raise ValueError(f"{NAME}: one assistant message cannot interleave reasoning and tool calls")


def thinking_on(body: dict[str, Any]) -> dict[str, Any]:
    """The request as is: Chat Completions has no thinking switch the kit sends."""
    return body


def with_system_prefix(body: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The request with ``prefix`` put before its first message's content (the system message)."""
    messages = [dict(m) for m in body["messages"]]
    messages[0]["content"] = prefix + messages[0]["content"]
    return {**body, "messages": messages}


def append_user(body: dict[str, Any], user: str) -> dict[str, Any]:
    """The request with one more user message at the end."""
    return {**body, "messages": [*body["messages"], {"role": "user", "content": user}]}


def tokenize_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The request's conversation as a chat-form /tokenize payload's fields (messages)."""
    return {"messages": body["messages"]}


is_error_body = base.is_openai_error  # the body is OpenAI's error shape

# -- what the replay client reads from a stream's snapshot ------------------------------------
# (the answer in history form, its structure, usage, stop, end, the error of an error event; the
# content and call ids of a history-form answer: replay.fold.View)

_NO_CHOICE: dict[str, Any] = {"content": None, "reasoning_content": None, "tool_calls": {},
                              "finish_reason": None}


def _choice0(snap: Snapshot) -> dict[str, Any]:
    return ((snap or {}).get("choices") or {}).get(0) or _NO_CHOICE


def stream_part(snap: Snapshot, key: Any) -> str | None:
    """A part of choice 0 as a timeline names it: a channel by its name; None for a tool call (numbered
    by the reader)."""
    return key if isinstance(key, str) else None


def stream_history(snap: Snapshot) -> list[Any]:
    ch = _choice0(snap)
    msg: dict[str, Any] = {"role": "assistant", "content": ch.get("content") or None}
    if ch.get("reasoning_content"):
        msg["reasoning_content"] = ch["reasoning_content"]
    calls = ch.get("tool_calls") or {}
    if calls:
        msg["tool_calls"] = [{"id": calls[k].get("id") or "", "type": "function",
                              "function": {"name": calls[k]["function"].get("name") or "",
                                           "arguments": calls[k]["function"].get("arguments") or ""}}
                             for k in sorted(calls)]
    return [msg]


def stream_grown(before: Snapshot, after: Snapshot, kinds: list[str]) -> None:
    """Log the part kinds one chunk extended, in arrival order: a run of reasoning or text is one
    kind, each new tool call one more (a Chat message keeps no order of its own)."""
    a, b = _choice0(before), _choice0(after)
    for key, kind in (("reasoning_content", "reasoning"), ("content", "text")):
        was, now = a.get(key), b.get(key)
        if now is not was and len(now or "") > len(was or "") and (not kinds or kinds[-1] != kind):
            kinds.append(kind)
    new_calls = len(b.get("tool_calls") or ()) - len(a.get("tool_calls") or ())
    if new_calls > 0:
        kinds.extend(["tool_call"] * new_calls)


def stream_structure(snap: Snapshot, kinds: list[str]) -> dict[str, Any]:
    calls = _choice0(snap).get("tool_calls") or {}
    return {"blocks": list(kinds), "tool_calls": [calls[k]["function"].get("name") or "" for k in sorted(calls)],
            "stop": stream_stop(snap)}


def stream_stop(snap: Snapshot) -> str | None:
    return _choice0(snap).get("finish_reason")


def stream_ended(snap: Snapshot) -> bool:
    # [DONE] after the finish_reason is customary, but no client needs it
    return bool((snap or {}).get("_end")) or bool(stream_stop(snap))


def answer_text(answer: list[Any] | None) -> str:
    out: list[str] = []
    for item in answer or ():
        out += [item.get("reasoning_content") or "", item.get("content") or ""]
        for call in item.get("tool_calls") or ():
            fn = call.get("function") or {}
            out += [fn.get("name") or "", fn.get("arguments") or ""]
    return "".join(out)


def answer_call_ids(answer: list[Any] | None) -> list[str]:
    return [str(c.get("id", "")) for entry in answer or () if isinstance(entry, dict)
            for c in entry.get("tool_calls") or () if isinstance(c, dict)]


def stream_error(event: Any) -> str | None:
    msg = error_of(event)
    return None if msg is None else f"error chunk: {msg}"


stream_usage = base.snapshot_usage
PER_CALL_END = False  # no per-call end on the wire: the next index or finish_reason ends a call


# -- what a synthetic agent session writes (replay/workloads.py) -------------------------------------

def agent_request(model: str, system: str, tools: list[Any], new: list[Any],
                  max_tokens: int) -> dict[str, Any]:
    """An agent's streamed first request: a system message, the new messages, the tools, usage asked for."""
    return {"model": model, "messages": [{"role": "system", "content": system}, *new], "tools": tools,
            "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True}}


def history_answer(texts: list[str], calls: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """An answer in history form: its texts joined, then its (call id, scenario part) tool calls."""
    msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
    if calls:
        msg["tool_calls"] = [{"id": i, "type": "function",
                              "function": {"name": c.name, "arguments": c.arguments}} for i, c in calls]
    return [msg]


def history_results(results: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """(call id, output) tool results in history form."""
    return [{"role": "tool", "tool_call_id": i, "content": r} for i, r in results]


# -- the kit's levers (conformance/levers.py) -----------------------------------------------------------

def is_opening(body: dict[str, Any]) -> bool:
    """The request holds no earlier answer: levers bend only these."""
    return base.is_opening_messages(body)


def least_limit(body: dict[str, Any]) -> int:
    """The smallest output limit this request takes (no setting raises it)."""
    return MIN_OUTPUT_TOKENS


def forcing_refused(body: dict[str, Any]) -> bool:
    """Chat accepts a forced call with any request."""
    return False


def lever_thinking_off(body: dict[str, Any]) -> dict[str, Any] | None:
    return base.set_absent(body, reasoning_effort="none")


def lever_thinking_on(body: dict[str, Any]) -> dict[str, Any] | None:
    return base.set_absent(body, reasoning_effort="high")


def lever_reasoning_minimal(body: dict[str, Any]) -> dict[str, Any] | None:
    return base.set_absent(body, reasoning_effort="minimal")


lever_prefill = None  # no assistant prefill in Chat


# -- a recorded client session replayed (conformance/client_replay.py), a refused over-long prompt -------

def is_stream_event(e: dict[str, Any]) -> bool:
    """A recorded data object is a stream event (a chunk, not a non-streamed answer's body)."""
    return e.get("object") == "chat.completion.chunk"


def answer_values(answer: dict[str, Any]) -> list[tuple[str, Any]]:
    """The values an answer contributes to the client's next request, in order, by kind."""
    out: list[tuple[str, Any]] = []
    inner = answer.get("message")
    message: dict[str, Any] = inner if isinstance(inner, dict) else answer
    if isinstance(answer.get("choices"), list) and answer["choices"]:
        message = answer["choices"][0].get("message") or {}
    for key in ("reasoning_content", "reasoning"):
        if message.get(key):
            out.append(("reasoning", message[key]))
    if message.get("content"):
        out.append(("text", message["content"]))
    for c in message.get("tool_calls") or []:
        fn = c.get("function") or {}
        out += [("call", fn.get("name")), ("call_id", c.get("id")), ("arguments", fn.get("arguments"))]
    return out


overflow_marker_problem = base.openai_overflow_problem  # error.code context_length_exceeded


def streamed_refusal(frames: list[Any]) -> list[tuple[str, str]] | None:
    """A 200 stream with no error chunk is no refusal in Chat: None (the caller judges it as an answer). One
    carrying a chunk that holds only an ``error`` (vLLM's and Dynamo's failed stream; the Chat reference
    defines no in-stream error) is the endpoint refusing the prompt inside the stream: (part, problem), the
    marker read from the chunk as from an HTTP error's body."""
    for frame in frames:
        data = frame.json
        if error_of(data) is not None:
            return base.refused_in_stream("an error chunk", data.get("error"), overflow_marker_problem(data),
                                          "openai-python raises it as an APIError without a status; no measured "
                                          "client compacts on it")
    return None
