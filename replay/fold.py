"""The replay side of the one API fold: what replay reads from ``apis.get(api).accumulate``'s snapshot.

The stream fold itself lives in ``conformance.apis`` (one pure ``accumulate(event, snapshot)`` per API);
replay only adds timestamps. This module holds what the replay client, the streaming executor and the
dispatch benchmark read from a snapshot that the API modules do not (yet) offer, as one ``View`` per API
in ``VIEWS`` (keyed by API name): the answer in history form (what a next request carries), its
structure (part kinds in order, tool names, stop), usage, stop reason, whether the stream ended, and
the error text of an error event. ``CallWatch`` follows a stream's tool calls across snapshots: which
appeared and when each became complete (by the API's rule, or earlier by a parse of its arguments
where the API marks no end per call).

The reference server's own Chat ``event: tool_call_dispatch`` frames (``DISPATCH_EVENT``) are not part
of any API; the client and the executor handle them beside the fold.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harnesscheck.conformance import apis
from harnesscheck.conformance.apis import ToolCall
from harnesscheck.conformance.apis.chat import DISPATCH_EVENT

__all__ = ["DISPATCH_EVENT", "VIEWS", "CallWatch", "View", "parse_arguments", "view"]

Snapshot = dict[str, Any] | None


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ""


# -- Anthropic Messages ---------------------------------------------------------------------

def _an_history(snap: Snapshot) -> list[Any]:
    content: list[dict[str, Any]] = []
    for b in (snap or {}).get("content") or ():
        kind = b.get("type")
        if kind == "text":
            content.append({"type": "text", "text": _s(b.get("text"))})
        elif kind == "thinking":
            content.append({"type": "thinking", "thinking": _s(b.get("thinking")),
                            "signature": _s(b.get("signature"))})
        elif kind == "tool_use":  # a call whose block never stopped goes back with an empty input
            content.append({"type": "tool_use", "id": b.get("id", ""), "name": b.get("name", ""),
                            "input": {} if "_partial_json" in b else b.get("input", {})})
        else:
            content.append({k: v for k, v in b.items() if not k.startswith("_") and (k != "citations" or v)})
    return [{"role": "assistant", "content": content}]


def _an_structure(snap: Snapshot, kinds: list[str]) -> dict[str, Any]:
    blocks = (snap or {}).get("content") or ()
    return {"blocks": [b.get("type") for b in blocks],
            "tool_calls": [b.get("name") for b in blocks if b.get("type") == "tool_use"],
            "stop": _an_stop(snap)}


def _an_stop(snap: Snapshot) -> str | None:
    return (snap or {}).get("stop_reason")


def _an_text(answer: list[Any] | None) -> str:
    out: list[str] = []
    for item in answer or ():
        for block in item.get("content") or ():
            kind = block.get("type")
            if kind in ("text", "thinking"):
                out.append(block.get(kind) or "")
            elif kind == "tool_use":
                out += [block.get("name") or "", json.dumps(block.get("input"), ensure_ascii=False)]
    return "".join(out)


def _an_call_ids(answer: list[Any] | None) -> list[str]:
    return [str(b.get("id", "")) for entry in answer or () if isinstance(entry, dict)
            and isinstance(entry.get("content"), list)
            for b in entry["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]


def _an_error(event: Any) -> str | None:
    msg = apis.anthropic.error_of(event)
    return None if msg is None else f"error event: {msg}"


# -- Chat Completions -------------------------------------------------------------------------

_NO_CHOICE: dict[str, Any] = {"content": None, "reasoning_content": None, "tool_calls": {},
                              "finish_reason": None}


def _choice0(snap: Snapshot) -> dict[str, Any]:
    return ((snap or {}).get("choices") or {}).get(0) or _NO_CHOICE


def _ch_history(snap: Snapshot) -> list[Any]:
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


def _ch_grown(before: Snapshot, after: Snapshot, kinds: list[str]) -> None:
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


def _ch_structure(snap: Snapshot, kinds: list[str]) -> dict[str, Any]:
    calls = _choice0(snap).get("tool_calls") or {}
    return {"blocks": list(kinds), "tool_calls": [calls[k]["function"].get("name") or "" for k in sorted(calls)],
            "stop": _ch_stop(snap)}


def _ch_stop(snap: Snapshot) -> str | None:
    return _choice0(snap).get("finish_reason")


def _ch_ended(snap: Snapshot) -> bool:
    # [DONE] after the finish_reason is customary, but no client needs it
    return bool((snap or {}).get("_end")) or bool(_ch_stop(snap))


def _ch_text(answer: list[Any] | None) -> str:
    out: list[str] = []
    for item in answer or ():
        out += [item.get("reasoning_content") or "", item.get("content") or ""]
        for call in item.get("tool_calls") or ():
            fn = call.get("function") or {}
            out += [fn.get("name") or "", fn.get("arguments") or ""]
    return "".join(out)


def _ch_call_ids(answer: list[Any] | None) -> list[str]:
    return [str(c.get("id", "")) for entry in answer or () if isinstance(entry, dict)
            for c in entry.get("tool_calls") or () if isinstance(c, dict)]


def _ch_error(event: Any) -> str | None:
    msg = apis.chat.error_of(event)
    return None if msg is None else f"error chunk: {msg}"


# -- Responses --------------------------------------------------------------------------------

def _rs_items(snap: Snapshot) -> list[dict[str, Any]]:
    """The output items by output_index; the terminal response's own output fills any never streamed."""
    output = dict((snap or {}).get("output") or {})
    if (snap or {}).get("_end"):
        for n, item in enumerate(((snap or {}).get("response") or {}).get("output") or ()):
            output.setdefault(n, item)
    return [output[k] for k in sorted(output)]


def _rs_structure(snap: Snapshot, kinds: list[str]) -> dict[str, Any]:
    items = _rs_items(snap)
    return {"blocks": [it.get("type") for it in items],
            "tool_calls": [it.get("name") for it in items if it.get("type") == "function_call"],
            "stop": _rs_stop(snap)}


def _rs_final(snap: Snapshot) -> dict[str, Any]:
    return ((snap or {}).get("response") or {}) if (snap or {}).get("_end") else {}


def _rs_stop(snap: Snapshot) -> str | None:
    return _rs_final(snap).get("status")


def _rs_ended(snap: Snapshot) -> bool:
    # response.incomplete (max_output_tokens, content filter) is the stream's end too: a whole stream
    # whose status says why it stopped; response.failed is an error, not an end
    return bool((snap or {}).get("_end")) and _rs_final(snap).get("status") != "failed"


def _rs_text(answer: list[Any] | None) -> str:
    out: list[str] = []
    for item in answer or ():
        if item.get("type") == "function_call":
            out += [item.get("name") or "", item.get("arguments") or ""]
        for part in (item.get("content") or []) + (item.get("summary") or []):
            if isinstance(part, dict):
                out.append(part.get("text") or "")
    return "".join(out)


def _rs_call_ids(answer: list[Any] | None) -> list[str]:
    return [str(entry.get("call_id", "")) for entry in answer or ()
            if isinstance(entry, dict) and entry.get("type") == "function_call"]


def _rs_error(event: Any) -> str | None:
    msg = apis.responses.error_of(event)
    if msg is None or msg.startswith("response.failed"):
        return msg
    return f"error event: {msg}"


# -- the table --------------------------------------------------------------------------------

def _ended(snap: Snapshot) -> bool:
    return bool((snap or {}).get("_end"))


def _usage(snap: Snapshot) -> dict[str, Any]:
    return dict((snap or {}).get("usage") or {})


@dataclass(frozen=True, slots=True)
class View:
    """What replay reads from one API's snapshot (``None`` before the stream's first event)."""

    history: Callable[[Snapshot], list[Any]]  # the answer as a next request carries it
    structure: Callable[[Snapshot, list[str]], dict[str, Any]]  # blocks, tool_calls, stop
    usage: Callable[[Snapshot], dict[str, Any]]
    stop: Callable[[Snapshot], str | None]
    ended: Callable[[Snapshot], bool]  # the API's end event arrived (the stream is whole)
    error: Callable[[Any], str | None]  # the error text of an error event
    text: Callable[[list[Any] | None], str]  # the content a history-form answer carries, in order
    call_ids: Callable[[list[Any] | None], list[str]]  # the tool call ids of a history-form answer
    # logs the part kinds a content event grew, for an API whose answer keeps no order of its own
    grown: Callable[[Snapshot, Snapshot, list[str]], None] | None = None
    per_call_end: bool = True  # the API marks each tool call's end on the wire


VIEWS: dict[str, View] = {
    "anthropic": View(_an_history, _an_structure, _usage, _an_stop, _ended, _an_error, _an_text,
                      _an_call_ids),
    "chat": View(_ch_history, _ch_structure, _usage, _ch_stop, _ch_ended, _ch_error, _ch_text, _ch_call_ids,
                 _ch_grown, per_call_end=False),
    "responses": View(_rs_items, _rs_structure, lambda s: dict(_rs_final(s).get("usage") or {}),
                      _rs_stop, _rs_ended, _rs_error, _rs_text, _rs_call_ids),
}


def view(api: str) -> View:
    """The view of ``api``; KeyError (naming the APIs) for any other."""
    apis.get(api)
    return VIEWS[api]


# -- tool calls across snapshots ---------------------------------------------------------------

class CallWatch:
    """The tool calls of one stream as its snapshots pass.

    ``step(snapshot)`` returns ``(started, completed)``: the calls that appeared, and ``(call,
    source)`` for each call the API's rule (``_complete``) made complete, in call order; each call
    is reported once in each list. With ``early=True`` and an API that marks no end per call (Chat),
    a call also completes, with source "arguments", at the first snapshot whose arguments so far
    parse as a JSON object (a client parsing incrementally can start it then); its rule completion
    still follows (a consumer that wants the earliest keeps the first).
    ``starts=False`` skips the started list (and looks at the calls only when ``_complete`` changed).
    """

    __slots__ = ("_args", "_done", "_early", "_parsed", "_ruled", "_seen", "_starts", "_tool_calls")

    def __init__(self, api: str, *, early: bool = False, starts: bool = True) -> None:
        self._tool_calls = apis.get(api).tool_calls
        self._early = early and not view(api).per_call_end
        self._starts = starts or self._early
        self._done: Any = None
        self._seen: set[int] = set()
        self._ruled: set[int] = set()
        self._parsed: set[int] = set()
        self._args: dict[int, int] = {}

    def step(self, snapshot: Snapshot) -> tuple[list[ToolCall], list[tuple[ToolCall, str]]]:
        done = (snapshot or {}).get("_complete")
        if not self._starts and done is self._done:
            return [], []
        self._done = done
        done = done or {}
        started: list[ToolCall] = []
        completed: list[tuple[ToolCall, str]] = []
        for c in self._tool_calls(snapshot):
            if self._starts and c.key not in self._seen:
                self._seen.add(c.key)
                started.append(c)
            if c.key in self._ruled:
                continue
            if c.key in done:
                self._ruled.add(c.key)
                completed.append((c, done[c.key]))
            elif self._early and c.key not in self._parsed and self._args.get(c.key) != len(c.arguments):
                self._args[c.key] = len(c.arguments)
                if c.arguments.rstrip().endswith("}") and isinstance(_loads(c.arguments), dict):
                    self._parsed.add(c.key)
                    completed.append((c, "arguments"))
        return started, completed


def _loads(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def parse_arguments(raw: str) -> Any:
    """A call's arguments: the parsed JSON ({} when empty), or the raw text when it does not parse."""
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw
