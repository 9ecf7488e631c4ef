"""OpenAI Chat Completions stream grammar: rules over the API's fold.

``validate(frames, request=None)`` returns findings for ``RULES`` (API_FACTS.md, "OpenAI Chat
Completions"), including Dynamo's ``tool_call_dispatch`` side events when they are present. It keeps no
stream state of its own: ``apis.chat.accumulate`` (re-exported here with ``final_message``: first-seen
``id``/``type``/``name`` per tool call, ``arguments`` joined, reasoning from ``reasoning_content`` or
``reasoning``) folds each chunk and records its notes and the stream's state (``apis.chat.record``).

On repeated fields: openai-python's ``accumulate_delta`` concatenates every string field of a
tool-call delta except ``index`` and ``type``, so a repeated ``id`` or ``function.name`` arrives
doubled (CH-GRAMMAR-TOOL-REPEAT); a repeated ``type: "function"`` is harmless and not reported.
"""

from __future__ import annotations

import json
from typing import Any

from harnesscheck.protocol.apis import chat as _chat
from harnesscheck.protocol.apis.base import is_int as _is_int
from harnesscheck.protocol.apis.base import json_object_text
from harnesscheck.protocol.apis.chat import (
    DISPATCH_EVENT,
    FINISH_REASONS,
    LENGTH_STOP,
    accumulate,
    NoteTag,
    did,
    dispatch_event,
    dispatch_shape,
    final_message,
    notes_of,
)
from harnesscheck.protocol.apis.base import Reading

from .findings import Collector, Finding, frames_and_request, short

__all__ = ["DISPATCH_EVENT", "FINISH_REASONS", "INFORMATIONAL", "RULES", "accumulate", "final_message",
           "validate"]


RULES: dict[str, str] = {
    "CH-GRAMMAR-JSON": "Every frame's data is JSON (or the final `[DONE]`): openai-python's Stream parses "
    "every frame's data, whatever its event name, and fails on one that is not JSON.",
    "CH-GRAMMAR-EVENT-NAME": "Chunks carry no SSE `event:` line: Chat streams have none (a stream without "
    "event lines is the norm); openai-python ignores a name unless it starts with `thread.`.",
    "CH-GRAMMAR-UNKNOWN-EVENT": "(informational) A named SSE side event whose data is not a chunk (a "
    "server's own event; Dynamo's `tool_call_dispatch` is judged by CH-DISPATCH-*): recorded, not judged. "
    "The openai SDK's stream helper skips frames whose `object` is not chat.completion.chunk.",
    "CH-GRAMMAR-ERROR": "(informational) The endpoint reported an error in the stream (a data object with "
    "`error`; the openai SDK raises it): the endpoint's error, with its body; nothing after it is judged.",
    "CH-GRAMMAR-OBJECT": "Every chunk has `object: \"chat.completion.chunk\"`.",
    "CH-GRAMMAR-ID": "Every chunk has the same string `id`.",
    "CH-GRAMMAR-CHOICES": "`choices` is a list of objects with an integer `index` and an object `delta`.",
    "CH-GRAMMAR-TOOL-INDEX": "Tool-call deltas carry an integer `index`; new indices come in order 0, 1, 2, ...",
    "CH-GRAMMAR-TOOL-FIRST": "The first delta of a tool-call index carries `id`, `type: \"function\"` and "
    "a non-empty `function.name`.",
    "CH-GRAMMAR-TOOL-REPEAT": "Later deltas of a tool-call index carry no `id` or `function.name` "
    "(the SDK would concatenate them).",
    "CH-GRAMMAR-TOOL-ARGS": "A tool call's joined `function.arguments` strings parse as a JSON object (the "
    "last call of a turn cut by its output limit, `finish_reason: length`, is the cut-call rules' to judge).",
    "CH-GRAMMAR-FINISH-REASON": "`finish_reason` is null or one of stop, length, tool_calls, content_filter, "
    "function_call.",
    "CH-GRAMMAR-FINISH-ONCE": "Each choice gets exactly one non-null `finish_reason`.",
    "CH-GRAMMAR-AFTER-FINISH": "No content, reasoning or tool-call delta for a choice after its finish_reason.",
    "CH-GRAMMAR-FINISH-TOOL-CALLS": "`finish_reason` is `tool_calls` when tool calls were streamed (a forced "
    "named function may answer `stop`), and only then.",
    "CH-GRAMMAR-USAGE-CHUNK": "With `stream_options.include_usage`, a usage chunk comes: exactly one chunk "
    "with `choices: []` and integer usage prompt/completion/total tokens, after the finish and before "
    "`[DONE]`.",
    "CH-GRAMMAR-USAGE-CHOICES": "The include_usage chunk has `choices: []` (openai-python "
    "ChatCompletionStreamOptionsParam: \"the `choices` field will always be an empty array\"), not the "
    "usage on a chunk with choices such as `[{\"index\": 0, \"delta\": {}}]`.",
    "CH-GRAMMAR-DONE": "`data: [DONE]` ends the stream: present, and nothing after it.",
    "CH-DISPATCH-SHAPE": "A `tool_call_dispatch` frame has `choice_index` and `tool_call{index, id, type: "
    "\"function\", function{name, arguments}}`.",
    "CH-DISPATCH-ONCE": "At most one `tool_call_dispatch` per tool call.",
    "CH-DISPATCH-MATCH": "A dispatched call equals the streamed call (id, name, arguments).",
    "CH-DISPATCH-EARLY": "A call is dispatched only once its arguments are complete in the deltas.",
    "CH-DISPATCH-LATE": "A `tool_call_dispatch` comes before the stream ends (before `[DONE]`).",
    "CH-DISPATCH-MISSING": "When dispatch is offered, every streamed tool call is dispatched.",
}

INFORMATIONAL = frozenset({"CH-GRAMMAR-UNKNOWN-EVENT", "CH-GRAMMAR-ERROR"})



# -- validator ------------------------------------------------------------------------------

def _forced_function(request: Any) -> bool:
    if not isinstance(request, dict):
        return False
    tc = request.get("tool_choice")
    return isinstance(tc, dict) and (tc.get("type") == "function" or "function" in tc)


def _include_usage(request: Any) -> bool:
    if not isinstance(request, dict):
        return False
    so = request.get("stream_options")
    return isinstance(so, dict) and so.get("include_usage") is True


def _parse_obj(text: str) -> tuple[bool, Any]:
    """Arguments text as a JSON object (the one criterion: RFC 8259, no NaN or Infinity), and its value."""
    if not json_object_text(text):
        return False, None
    return True, json.loads(text)


def _is_chunk(data: Any) -> bool:
    return isinstance(data, dict) and (data.get("object") == "chat.completion.chunk" or "choices" in data)


def validate(source: Any, request: Any = None) -> list[Finding]:
    """Judge a Chat Completions stream (``request``: the request body, for include_usage and
    tool_choice); never raises on what the server sent. The stream's state is the fold's (``accumulate``,
    ``record``): each chunk's record says what it did, and the rules below judge those notes, the frame's
    own shape, and the state at the end."""
    frames, request = frames_and_request(source, request)
    events = [f for f in frames if f.kind == "event"]
    sink = Collector(events)
    add = sink.add
    snap: dict[str, Any] | None = None
    at: list[int] = []  # the frame of each folded event, by its number
    named: dict[str, list[int]] = {}  # event name on a chunk -> frames
    side: dict[str, list[int]] = {}  # event name of a side event (not a chunk) -> frames

    step = Reading.of(_chat, source).fold()  # the stream's one fold, shared with its other readers

    def fold(data: Any, f: Any) -> dict[str, Any]:
        nonlocal snap
        snap = step(data)
        at.append(f.index)
        return (snap or {}).get("_event") or {}

    for f in events:
        i = f.index
        g = (snap or {}).get("_g") or {}
        if f.event == DISPATCH_EVENT:
            if not dispatch_shape(f.json):
                add("CH-DISPATCH-SHAPE", i, "malformed tool_call_dispatch",
                    f.json if f.json is not None else f.data,
                    '{"choice_index", "tool_call": {index, id, type, function{name, arguments}}}')
                continue
            _notes(fold(dispatch_event(f.json), f), i, at, add)
            continue
        if g.get("done") is not None:
            add("CH-GRAMMAR-DONE", i, f"frame after data: [DONE] (frame #{at[g['done']]})", f.data,
                "nothing after [DONE]")
            continue
        if f.done:
            fold("[DONE]", f)
            if f.event is not None:
                named.setdefault(f.event, []).append(i)
            continue
        ch = f.json
        if f.event is not None and isinstance(ch, dict) and not _is_chunk(ch) and "error" not in ch:
            side.setdefault(f.event, []).append(i)  # e.g. a server's own side events: recorded only
            continue
        if not isinstance(ch, dict):  # openai-python's Stream parses every frame's data as JSON
            add("CH-GRAMMAR-JSON", i, "data is not a JSON object (the openai SDK fails on it)",
                f.json_error or f.data, "a chat.completion.chunk object")
            continue
        if f.event is not None:
            named.setdefault(f.event, []).append(i)
        rec = fold(ch, f)
        if did(rec) == "error":
            err = ch.get("error")
            what = f"{err.get('type') or err.get('code')}: {err.get('message')}" if isinstance(err, dict) \
                else short(err)
            add("CH-GRAMMAR-ERROR", i, f"the endpoint reported an error in the stream ({what})", err,
                informational=True)
            break  # the openai SDK raises here and reads no further
        _notes(rec, i, at, add)

    for name, where in sorted(named.items(), key=lambda kv: kv[1][0]):
        add("CH-GRAMMAR-EVENT-NAME", where[0], f"{len(where)} chunk frame(s) carry an SSE event name (first "
            f"at frame #{where[0]}); Chat chunks have none (openai-python ignores it unless it starts with "
            "`thread.`)", f"event: {name}", "no event: line")
    for name, where in sorted(side.items(), key=lambda kv: kv[1][0]):
        add("CH-GRAMMAR-UNKNOWN-EVENT", where[0], f"{len(where)} `{name}` side event(s) that are not chunks "
            f"(first at frame #{where[0]}); recorded, not judged (the openai SDK's stream helper skips "
            "frames whose object is not chat.completion.chunk)", f"event: {name}", informational=True)
    g = (snap or {}).get("_g") or {}
    if g.get("error") is not None:
        return sink.out  # an error ends the stream: nothing missing at the end is judged
    _judge_end(g, at, events, request, sink)
    return sink.out


def _notes(rec: dict[str, Any], i: int, at: list[int], add: Any) -> None:
    """The findings of one chunk or dispatch, from the notes the fold recorded."""
    for note in notes_of(rec):
        kind, args = note[0], note[1:]
        if kind == "object":
            add("CH-GRAMMAR-OBJECT", i, f"chunk with object {args[0]!r}", args[0], "chat.completion.chunk")
        elif kind == "id-missing":
            add("CH-GRAMMAR-ID", i, "chunk without a string id", args[0],
                "the same non-empty string id on every chunk")
        elif kind == "id-differs":
            add("CH-GRAMMAR-ID", i, "chunk id differs from the first chunk's", args[0], args[1])
        elif kind == "choices-not-list":
            add("CH-GRAMMAR-CHOICES", i, "choices is not a list", args[0],
                "a list of choices (or [] on the usage chunk)")
        elif kind == "choice-invalid":
            add("CH-GRAMMAR-CHOICES", i, "choice without an integer index and an object delta", args[0],
                '{"index": <int>, "delta": {...}}')
        elif kind == "finish-again":
            add("CH-GRAMMAR-FINISH-ONCE", i, f"second finish_reason for choice {args[0]}", args[1],
                f"only the one at frame #{at[args[2]]}")
        elif kind == "after-finish":
            add("CH-GRAMMAR-AFTER-FINISH", i, f"delta for choice {args[0]} after its finish_reason (frame "
                f"#{at[args[2]]})", args[1], "no content after the finish_reason")
        elif kind == "finish-unknown":
            add("CH-GRAMMAR-FINISH-REASON", i, f"unknown finish_reason {args[0]!r}", args[0],
                sorted(FINISH_REASONS))
        else:
            _tool_note(kind, args, i, at, add)


def _tool_note(kind: NoteTag, args: tuple[Any, ...], i: int, at: list[int], add: Any) -> None:
    if kind == "tools-not-list":
        add("CH-GRAMMAR-TOOL-INDEX", i, "tool_calls is not a list", args[0], "a list of tool-call deltas")
    elif kind == "tool-no-index":
        add("CH-GRAMMAR-TOOL-INDEX", i, "tool-call delta without an integer index", args[0],
            '{"index": <int>, ...}')
    elif kind == "tool-index-order":
        add("CH-GRAMMAR-TOOL-INDEX", i, f"new tool-call index {args[0]} out of order", args[0], args[1])
    elif kind == "tool-first":
        add("CH-GRAMMAR-TOOL-FIRST", i, f"first delta of tool call {args[0]} lacks {', '.join(args[1])}",
            args[2], 'id, type "function" and function.name on the first delta')
    elif kind == "tool-repeat":
        add("CH-GRAMMAR-TOOL-REPEAT", i, f"later delta of tool call {args[0]} repeats {', '.join(args[1])}",
            args[2], "only index and function.arguments")
    elif kind == "tool-args-type":
        add("CH-GRAMMAR-TOOL-ARGS", i, f"arguments of tool call {args[0]} is not a string", args[1],
            "a string fragment")
    elif kind == "dispatch-before-args":
        add("CH-DISPATCH-EARLY", i, f"argument delta for tool call {args[0]} after it was dispatched "
            f"(frame #{at[args[2]]})", args[1], "every argument delta before the dispatch")
    elif kind == "dispatch-late":
        add("CH-DISPATCH-LATE", i, f"tool_call_dispatch after [DONE] (frame #{at[args[0]]})",
            "dispatch after [DONE]", "before data: [DONE]")
    elif kind == "dispatch-again":
        add("CH-DISPATCH-ONCE", i, f"tool call {args[0][1]} of choice {args[0][0]} dispatched again",
            "a second tool_call_dispatch", f"once (first at frame #{at[args[1]]})")
    elif kind == "dispatch-early":
        add("CH-DISPATCH-EARLY", i, f"tool call {args[0][1]} dispatched before any of its deltas",
            "dispatch before the call's deltas", "dispatch once the arguments are complete")


def _judge_end(g: dict[str, Any], at: list[int], events: list[Any], request: Any, sink: Collector) -> None:
    """What the state at the end says: [DONE], a finish_reason per choice, the joined arguments, the
    finish against the tool calls, the usage chunk, and the dispatches."""
    add = sink.add
    choices = g.get("choices") or {}
    if g.get("done") is None:
        sink.at_end("CH-GRAMMAR-DONE", "the stream ended without data: [DONE]", "no [DONE]",
                    "data: [DONE] last")
    if not choices and g.get("chunks"):
        sink.at_end("CH-GRAMMAR-FINISH-ONCE", "no choice was streamed, so no finish_reason", "no choice",
                    "one finish_reason per choice")
    forced = _forced_function(request)
    for cidx, st in sorted(choices.items()):
        if st["finish"] is None:
            sink.at_end("CH-GRAMMAR-FINISH-ONCE", f"choice {cidx} has no finish_reason", "finish_reason null",
                        "one non-null finish_reason")
        cut = max(st["calls"]) if st["finish"] == LENGTH_STOP and st["calls"] else None  # the last call, cut
        for ti, call in sorted(st["calls"].items()):  # (the limit may truncate: TOOLS-005 judges a cut call)
            if ti != cut and not call["bad_args"] and not _parse_obj(call["args"])[0]:
                add("CH-GRAMMAR-TOOL-ARGS", at[call["last"]], f"arguments of tool call {ti} do not join to a "
                    "JSON object", call["args"], "a JSON object")
        finish, finish_frame = st["finish"], _at(at, st["finish_at"])
        if finish is not None:
            if st["calls"]:
                allowed = {"tool_calls", "length", "content_filter"} | ({"stop"} if forced else set())
                if not isinstance(finish, str) or finish not in allowed:
                    add("CH-GRAMMAR-FINISH-TOOL-CALLS", finish_frame, "tool calls were streamed for "
                        f"choice {cidx} but finish_reason is {finish}", finish, "tool_calls")
            elif finish == "tool_calls":
                add("CH-GRAMMAR-FINISH-TOOL-CALLS", finish_frame, "finish_reason tool_calls but choice "
                    f"{cidx} streamed no tool call", finish, "stop (no tool call was streamed)")
    if _include_usage(request):
        _judge_usage(g, at, events, sink)
    if g.get("dispatches"):
        _judge_dispatches(g, at, sink)


def _at(at: list[int], n: int | None) -> int | None:
    return None if n is None else at[n]


def _judge_usage(g: dict[str, Any], at: list[int], events: list[Any], sink: Collector) -> None:
    """include_usage: one chunk with `choices: []` and the usage, after every finish_reason (openai-python
    ChatCompletionStreamOptionsParam: "the `choices` field will always be an empty array")."""
    by_index = {f.index: f for f in events}
    usage_frames = [at[n] for n in g.get("usage") or ()]
    usage_on_choices = [(at[n], cs) for n, cs in g.get("usage_on_choices") or ()]
    last_finish = max((at[st["finish_at"]] for st in (g.get("choices") or {}).values()
                       if st["finish_at"] is not None), default=-1)
    if not usage_frames:
        if usage_on_choices:
            i, cs = usage_on_choices[-1]
            sink.add("CH-GRAMMAR-USAGE-CHOICES", i, f"the usage came on a chunk whose choices is not [] "
                     f"(frame #{i}): include_usage puts it on a chunk of its own with choices: []",
                     f"choices: {short(cs, 80)}", "choices: []")
            _check_usage(by_index[i].json["usage"], i, sink.add)
        else:
            sink.at_end("CH-GRAMMAR-USAGE-CHUNK", "include_usage was requested but no chunk carried usage",
                        "no usage chunk", "a chunk with choices: [] and usage before [DONE]")
        return
    for extra in usage_frames[1:]:
        sink.add("CH-GRAMMAR-USAGE-CHUNK", extra, f"another usage chunk (the first at frame "
                 f"#{usage_frames[0]})", "a second usage chunk", "exactly one")
    u = usage_frames[0]
    _check_usage(by_index[u].json["usage"], u, sink.add)
    if u < last_finish:
        sink.add("CH-GRAMMAR-USAGE-CHUNK", u, "the usage chunk comes before the finish_reason (frame "
                 f"#{last_finish})", f"usage at frame #{u}", f"after frame #{last_finish}")


def _judge_dispatches(g: dict[str, Any], at: list[int], sink: Collector) -> None:
    add = sink.add
    choices, dispatches, early = g.get("choices") or {}, g["dispatches"], g.get("early") or frozenset()
    for (cidx, ti), (dn, tc) in sorted(dispatches.items()):
        di = at[dn]
        st = choices.get(cidx)
        call = st["calls"].get(ti) if st is not None else None
        if call is None:
            if (cidx, ti) not in early:
                add("CH-DISPATCH-MATCH", di, f"dispatched call {ti} of choice {cidx} was never streamed",
                    f"tool_call_dispatch for call {ti}", "a streamed call with that index")
            continue
        fn = tc["function"]
        diffs = []
        if tc["id"] != call["id"]:
            diffs.append(f"id {tc['id']!r} != {call['id']!r}")
        if fn["name"] != call["name"]:
            diffs.append(f"name {fn['name']!r} != {call['name']!r}")
        joined = call["args"]
        ok_a, va = _parse_obj(fn["arguments"])
        ok_b, vb = _parse_obj(joined)
        if not ((ok_a and ok_b and va == vb) or fn["arguments"] == joined):
            diffs.append(f"arguments {short(fn['arguments'], 60)} != {short(joined, 60)}")
        if diffs:
            add("CH-DISPATCH-MATCH", di, f"dispatched call {ti} differs from the streamed call: "
                + "; ".join(diffs),
                {"id": tc["id"], "name": fn["name"], "arguments": fn["arguments"]},
                {"id": call["id"], "name": call["name"], "arguments": joined})
    for cidx, st in sorted(choices.items()):
        for ti, _call in sorted(st["calls"].items()):
            if (cidx, ti) not in dispatches:
                sink.at_end("CH-DISPATCH-MISSING", f"tool call {ti} of choice {cidx} was never dispatched",
                            f"no tool_call_dispatch for call {ti}", "one tool_call_dispatch per call")


def _check_usage(usage: dict[str, Any], i: int, add: Any) -> None:
    bad = [k for k in ("prompt_tokens", "completion_tokens", "total_tokens") if not _is_int(usage.get(k))]
    if bad:
        add("CH-GRAMMAR-USAGE-CHUNK", i, f"usage without integer {', '.join(bad)}", usage,
            "integer prompt_tokens, completion_tokens and total_tokens")
