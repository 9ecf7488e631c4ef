"""Anthropic Messages in the kit: route and headers, request builders, the stream fold.

``accumulate(event, snapshot)`` folds one event into a message snapshot without mutating its input
(as anthropic-sdk-python's ``accumulate_event``, but it records what it cannot place instead of
raising); a tool call is complete at its block's ``content_block_stop`` (Claude Code dispatches it
then: API_FACTS, "Streaming tool dispatch").

Why one module of ~750 lines: it is the kit's one home for this API (STYLE: one home per API on each side;
`base.Api` lists its members and `apis.register` checks them). Its parts (request builders, the answer
fold ``place``, the recorded fold ``accumulate`` the grammar reads, the answer readers) share the
event names, tag types and block rules of one wire format; split, each half would import the other's
private tables, and adding an API would mean finding several files instead of copying one.
"""

from __future__ import annotations

import copy
import json
import sys
from typing import Any, Literal, cast

from harnesscheck.protocol.apis import base
from harnesscheck.protocol.apis.base import Snapshot, ToolCall, is_int, public, text
from harnesscheck.scenarios.loader import Scenario

NAME = "anthropic"
PATH = "/v1/messages"
PREFIX = "AN"
LABEL = "Anthropic Messages"
GRAMMAR = "harnesscheck.conformance.grammar.anthropic"  # its stream validator, by module name
ALIASES = ("messages",)  # other names the grammar lookup accepts
ANSWER_ENDS = ("message_stop",)  # a client has its whole answer after these
# Bodies the reference refuses (<P>-ERR-001 sends each and wants a 4xx in the API's error shape): a required
# field missing, a field of the wrong type, a role that is not the API's ("{model}": the endpoint's model).
BAD_REQUESTS: tuple[tuple[str, Any], ...] = (
    ("missing model", {"max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}),
    ("messages not an array", {"model": "{model}", "max_tokens": 1, "messages": "hi"}),
    ("bad role", {"model": "{model}", "max_tokens": 1, "messages": [{"role": "robot", "content": "x"}]}),
    ("max_tokens a string",
     {"model": "{model}", "max_tokens": "ten", "messages": [{"role": "user", "content": "hi"}]}),
    ("body not JSON", b"{not json"))
ALLOWED_REQUESTS: tuple[tuple[str, dict[str, Any]], ...] = ()  # allowed bodies a strict server might refuse
MIN_OUTPUT_TOKENS = 1  # Messages `max_tokens` minimum
MAX_TOKENS_FIELD = "max_tokens"
TOOL_BLOCKS = ("tool_use", "server_tool_use")
_CONTENT_DELTAS = frozenset({"text_delta", "thinking_delta", "input_json_delta"})

FORM = base.Form("messages", "system", False, "text", ("x-api-key", "{key}"), roles=("user", "assistant"),
                 required_max_tokens=1024, version_headers={"anthropic-version": base.ANTHROPIC_VERSION},
                 call_id_prefix="toolu")


def headers(api_key: str | None = None) -> dict[str, str]:
    return base.headers(api_key, {"anthropic-version": base.ANTHROPIC_VERSION})


def tool(spec: dict[str, Any], *, strict: bool | None = None) -> dict[str, Any]:
    """One tool as Messages declares it (``spec``: name, description, parameters), with ``strict`` when given
    (SDK ToolParam.strict: "When true, guarantees schema validation on tool names and inputs")."""
    out = {"name": spec["name"], "description": spec.get("description", ""),
           "input_schema": spec["parameters"]}
    return out if strict is None else {**out, "strict": strict}


def tools(scenario: Scenario) -> list[dict[str, Any]]:
    return [tool(t) for t in scenario.tools]


def tool_choice(mode: str, name: str = "") -> dict[str, Any]:
    """``tool_choice`` for one of the kit's modes (auto, required, named, none): Messages calls a required
    call ``any`` and a named one ``tool`` (SDK ToolChoiceParam)."""
    if mode == "named":
        return {"type": "tool", "name": name}
    return {"type": "any" if mode == "required" else mode}


def without_parallel(body: dict[str, Any]) -> dict[str, Any]:
    """The request with parallel tool use off: ``disable_parallel_tool_use`` on its tool_choice (auto if
    none is set)."""
    choice = body.get("tool_choice") or {"type": "auto"}
    return {**body, "tool_choice": {**choice, "disable_parallel_tool_use": True}}


PARALLEL_FIELD = "tool_choice"  # the request field without_parallel sets


def cut_answer(name: str, arguments: str) -> dict[str, Any]:
    """A non-streamed answer with one call cut by the output limit (its input the cut text: the client's
    mistake, as a client that keeps the text leaves it)."""
    return {"type": "message", "role": "assistant", "stop_reason": "max_tokens", "content": [
        {"type": "tool_use", "id": "toolu_cut_1", "name": name, "input": arguments}]}


LENGTH_STOP = "max_tokens"  # the stop_reason of an answer cut by its output limit


def first(scenario: Scenario, model: str, *, stream: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": base.output_budget(scenario), "stream": stream,
                            "messages": [{"role": "user", "content": base.user_text(scenario)}]}
    if scenario.system:
        body["system"] = scenario.system
    if scenario.tools:
        body["tools"] = tools(scenario)
    return body


def follow(body: dict[str, Any], answer: dict[str, Any], scenario: Scenario, turn: int) -> dict[str, Any]:
    """The request for ``turn`` (>= 1): the answer's blocks as sent back (thinking with signatures,
    tool_use), a tool_result per call, and the next user text, if any."""
    body = copy.deepcopy(body)
    content = [{k: v for k, v in b.items() if k != "citations" or v} for b in answer.get("content", [])]
    body["messages"].append({"role": "assistant", "content": content})
    blocks: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": c.id,
                                     "content": scenario.result_for(c.name, c.arguments)} for c in tool_calls(answer)]
    user = base.next_user(scenario, turn)
    if user:
        blocks.append({"type": "text", "text": user})
    if blocks:
        body["messages"].append({"role": "user", "content": blocks})
    return body


def malformed_history(body: Any) -> str:
    """The first assistant tool_use in a request's history whose input is no JSON object (the fold keeps
    an input that did not parse as its text, so the endpoint's own broken call comes back as it came), or ''."""
    for m in (body.get("messages") or []) if isinstance(body, dict) else []:
        for b in (m.get("content") if isinstance(m, dict) and m.get("role") == "assistant" else None) or []:
            if isinstance(b, dict) and b.get("type") == "tool_use" and not isinstance(b.get("input"), dict):
                return f"tool_use {b.get('id')} ({b.get('name')}) with input {str(b.get('input'))[:80]!r}"
    return ""


# The tags between the fold and the grammar validator (issue 44): what one event did (`What`, its record's
# "what"), as Literal types mypy checks (strict on protocol/ and the grammar): a tag written here or
# compared in the validator that is not in the list is a type error.
What = Literal["after-delta", "after-error", "after-stop", "block-closed", "block-start", "block-stop", "delta",
               "delta-field", "delta-malformed", "delta-type", "error", "event", "message-delta", "message-stop",
               "ping", "second-start", "signature-after-stop", "start", "thinking-after-signature", "unknown",
               "unknown-block", "untyped"]


def _w(what: What) -> What:
    return what


def did(rec: Any) -> What | None:
    """What one event did, as its record (the snapshot's ``_event``) says; None without a record."""
    return cast("What | None", (rec or {}).get("what"))


# -- the fold -------------------------------------------------------------------------------

fold_input = base.fold_input  # what the fold takes of a frame: its JSON object

def accumulate(event: Any, snapshot: dict[str, Any] | None) -> dict[str, Any] | None:
    """Fold one event (a decoded data object) into the snapshot; return the new snapshot.

    Pure: the input snapshot is never mutated. Before ``message_start`` there is no snapshot (None), unless
    the fold started from ``recording()``: then the events before it are recorded too. Tool input is
    buffered in the block's ``_partial_json`` and parsed at its stop. An event it cannot place leaves the
    content as it was and is recorded in ``_unplaced``; ``_complete`` maps a tool block's index to "stop";
    ``_end`` is set by message_stop. ``_at`` is the content position of the block the event belongs to (its
    wire index among the started blocks, whether or not the content could take it; None: none),
    and ``_g`` / ``_event`` the stream's state and what this event did to it (``record``): what the
    grammar validator judges.
    """
    if not isinstance(event, dict):
        return snapshot
    g, rec = record(event, (snapshot or {}).get("_g"))
    placed = _place(event, None if snapshot is None or snapshot.get("_pending") else snapshot)
    if placed is None:
        return {**snapshot, "_g": g, "_event": rec, "_at": None} if snapshot is not None else None
    at = event.get("index") if event.get("type") in ("content_block_delta", "content_block_stop") else None
    if event.get("type") == "content_block_start":
        at = len(placed.get("content") or ()) - 1
    if len(placed.get("_unplaced", ())) > len((snapshot or {}).get("_unplaced", ())):
        at = None
    idx = event.get("index")  # the block the wire names, by its place among the started blocks
    if str(event.get("type")).startswith("content_block_") and is_int(idx) and idx in g["where"]:
        at = g["where"][idx]
    delta = event.get("delta") if at is not None and event.get("type") == "content_block_delta" else None
    said = _SAID.get(delta["type"]) if isinstance(delta, dict) and isinstance(delta.get("type"), str) else None
    words = delta.get(said[1]) if said and isinstance(delta, dict) else None
    return {**placed, "_g": g, "_event": rec, "_at": at if is_int(at) else None,
            "_said": ((said[0], words),) if said and isinstance(words, str) else (),
            "_closed": at if did(rec) == "block-stop" else None}


def place(event: Any, snapshot: dict[str, Any] | None) -> dict[str, Any] | None:
    """``accumulate`` without the per-event record (no ``_g``, ``_event``, ``_at``, ``_said``, ``_closed``):
    the answer's fold (`base.Reading.snapshot`), as cheap as the fold was before the record."""
    if not isinstance(event, dict):
        return snapshot
    placed = _place(event, None if snapshot is None or snapshot.get("_pending") else snapshot)
    return snapshot if placed is None else placed


# the text a placed delta adds: (channel, the delta's field)
_SAID = {"text_delta": ("text", "text"), "thinking_delta": ("reasoning", "thinking")}


def recording() -> dict[str, Any]:
    """The snapshot a fold starts from when every event is to be recorded, those before message_start too."""
    return {"_pending": True}


def _place(event: dict[str, Any], snapshot: dict[str, Any] | None) -> dict[str, Any] | None:
    typ = event.get("type")
    if typ == "message_start":
        msg = event.get("message")
        if not isinstance(msg, dict):
            return base.unplaced(snapshot, "message_start without a message") if snapshot is not None else None
        snap = dict(msg)
        content = msg.get("content")
        snap["content"] = [dict(b) for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        snap["usage"] = dict(msg["usage"]) if isinstance(msg.get("usage"), dict) else {}
        return snap
    if snapshot is None:
        return None
    if typ == "content_block_start":
        block = event.get("content_block")
        if not isinstance(block, dict):
            return base.unplaced(snapshot, "content_block_start without a content_block")
        block = dict(block)
        if block.get("type") in TOOL_BLOCKS:
            block["_partial_json"] = ""
        return {**snapshot, "content": [*snapshot.get("content", []), block]}
    if typ in ("content_block_delta", "content_block_stop"):
        return _block_event(typ, event, snapshot)
    if typ == "message_delta":
        snap = dict(snapshot)
        delta = event.get("delta")
        if isinstance(delta, dict):
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    snap[key] = delta[key]
        usage = event.get("usage")
        if isinstance(usage, dict):
            merged = dict(snapshot.get("usage") or {})
            merged.update({k: v for k, v in usage.items() if v is not None})
            snap["usage"] = merged
        return snap
    if typ == "message_stop":
        return {**snapshot, "_end": True}
    if typ in ("ping", "error"):
        return snapshot
    return base.unplaced(snapshot, f"unknown event {typ!r}")


def _block_event(typ: str, event: dict[str, Any], snapshot: dict[str, Any]) -> dict[str, Any]:
    idx = event.get("index")
    content = snapshot.get("content", [])
    if not is_int(idx) or not 0 <= idx < len(content):
        return base.unplaced(snapshot, f"{typ} for unknown index {idx!r}")
    block = dict(content[idx])
    if typ == "content_block_delta":
        delta = event.get("delta")
        if not isinstance(delta, dict):
            return base.unplaced(snapshot, "content_block_delta without a delta")
        dt = delta.get("type")
        if dt == "text_delta" and isinstance(delta.get("text"), str):
            block["text"] = text(block.get("text")) + delta["text"]
        elif dt == "thinking_delta" and isinstance(delta.get("thinking"), str):
            block["thinking"] = text(block.get("thinking")) + delta["thinking"]
        elif dt == "signature_delta" and isinstance(delta.get("signature"), str):
            block["signature"] = delta["signature"]
        elif dt == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            block["_partial_json"] = text(block.get("_partial_json")) + delta["partial_json"]
        elif dt == "citations_delta" and "citation" in delta:
            cites = block.get("citations")
            block["citations"] = [*(cites if isinstance(cites, list) else []), delta["citation"]]
        else:
            return base.unplaced(snapshot, f"delta {dt!r} not placeable in block {idx}")
        snap = snapshot
    else:
        if "_partial_json" not in block:
            return snapshot  # a stop of a text or thinking block: nothing to fold
        block = _parse_tool_input(block)
        snap = base.completed(snapshot, idx, "stop")
    new_content = list(content)
    new_content[idx] = block
    return {**snap, "content": new_content}


# -- the stream's state, as the grammar judges it --------------------------------------------
# The events of a Messages stream, the delta types each block type takes and the field each delta carries
# (the streaming docs and anthropic-sdk-python's accumulate_event).
EVENT_TYPES = frozenset({"message_start", "content_block_start", "content_block_delta", "content_block_stop",
                         "message_delta", "message_stop", "ping", "error"})
DELTAS_FOR = {"text": frozenset({"text_delta", "citations_delta"}),
              "tool_use": frozenset({"input_json_delta"}), "server_tool_use": frozenset({"input_json_delta"}),
              "thinking": frozenset({"thinking_delta", "signature_delta"}), "redacted_thinking": frozenset()}
DELTA_FIELD = {"text_delta": ("text", str), "input_json_delta": ("partial_json", str),
               "thinking_delta": ("thinking", str), "signature_delta": ("signature", str),
               "citations_delta": ("citation", dict)}
_NEW_STATE: dict[str, Any] = {"n": 0, "start": None, "early": False, "stop": None, "error": None,
                              "delta": None, "reason": None, "reason_at": None, "blocks": (), "where": {}}


def record(event: dict[str, Any], state: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stream's state after one more event, and what the event did (``what``, with the details a rule
    needs; event numbers ``n`` count the events recorded, from 0). The state: the numbers of the events
    that started, stopped, errored and first closed the content (``message_delta``), the stop_reason (and
    the event that set it), and each block by its wire index (``-1 - position`` for one without an integer
    index; a reused index names the later block): its type, whether it is open, the events that started,
    stopped and signed it, whether a non-empty signature arrived, and its joined tool input. Events after an
    error or message_stop, or content events after message_delta, change nothing."""
    g = dict(state or _NEW_STATE)
    n = g["n"]
    g["n"] = n + 1
    typ = event.get("type")
    rec: dict[str, Any] = {"n": n, "type": typ, "what": _w("event")}
    if not isinstance(typ, str):
        return g, {**rec, "what": _w("untyped")}
    if typ == "ping" or typ not in EVENT_TYPES:
        return g, {**rec, "what": _w("ping" if typ == "ping" else "unknown")}
    if g["error"] is not None:
        return g, {**rec, "what": _w("after-error"), "error": g["error"]}
    if typ == "error":
        g["error"] = n
        return g, {**rec, "what": _w("error")}
    if g["stop"] is not None:
        return g, {**rec, "what": _w("after-stop"), "stop": g["stop"]}
    if typ == "message_start":
        if g["start"] is not None:
            return g, {**rec, "what": _w("second-start"), "start": g["start"]}
        g["start"] = n
        return g, {**rec, "what": _w("start")}
    if g["start"] is None and not g["early"]:
        g["early"] = True
        rec["early"] = True  # the first event before message_start
    if typ.startswith("content_block_") and g["delta"] is not None:
        return g, {**rec, "what": _w("after-delta"), "delta": g["delta"]}
    blocks = list(g["blocks"])
    if typ == "content_block_start":
        rec = {**rec, **_record_start(event, n, g, blocks)}
    elif typ in ("content_block_delta", "content_block_stop"):
        rec = {**rec, **_record_block(typ, event, n, g["where"], blocks)}
    else:
        rec["closed"] = [(b["index"], b["type"], b["start"]) for b in blocks if b["open"]]  # closed now
        blocks = [{**b, "open": False} if b["open"] else b for b in blocks]
    g["blocks"] = tuple(blocks)
    if typ.startswith("content_block_"):
        return g, rec
    if typ == "message_delta":
        g["delta"] = n if g["delta"] is None else g["delta"]
        delta = event.get("delta")
        if isinstance(delta, dict):  # the SDK sets stop_reason from every message_delta
            g["reason"], g["reason_at"] = delta.get("stop_reason"), n
            rec["reason"] = delta.get("stop_reason")
        return g, {**rec, "what": _w("message-delta")}
    g["stop"] = n  # message_stop
    return g, {**rec, "what": _w("message-stop"), "reason": g["reason"], "reason_at": g["reason_at"]}


def _record_start(event: dict[str, Any], n: int, g: dict[str, Any], blocks: list[Any]) -> dict[str, Any]:
    idx = event.get("index")
    cb = event.get("content_block")
    btype = cb.get("type") if isinstance(cb, dict) else None
    sig = cb.get("signature") if isinstance(cb, dict) else None
    signed = btype == "thinking" and isinstance(sig, str) and bool(sig)
    where = g["where"]
    rec = {"what": _w("block-start"), "index": idx, "position": len(blocks),
           "open": [b["index"] for b in blocks if b["open"]],
           "misplaced": not is_int(idx) or idx != len(blocks) or idx in where}
    key = idx if is_int(idx) else -1 - len(blocks)
    g["where"] = {**where, key: len(blocks)}
    blocks.append({"index": key, "type": btype, "open": True, "start": n, "stop": None, "signed": signed,
                   "sign": None, "json": ""})
    return rec


def _record_block(typ: str, event: dict[str, Any], n: int, where: dict[Any, int],
                  blocks: list[Any]) -> dict[str, Any]:
    idx = event.get("index")
    pos = where.get(idx) if is_int(idx) else None
    delta = event.get("delta") if typ == "content_block_delta" else None
    dtype = delta.get("type") if isinstance(delta, dict) else None
    if pos is None:
        return {"what": _w("unknown-block"), "index": idx, "started": sorted(k for k in where if k >= 0)}
    b = blocks[pos] = dict(blocks[pos])
    rec = {"index": idx, "block": b["type"], "delta": dtype}
    if not b["open"]:
        if dtype == "signature_delta" and b["type"] == "thinking":
            b["signed"] = b["signed"] or bool(delta.get("signature"))  # type: ignore[union-attr]
            return {**rec, "what": _w("signature-after-stop"), "stop": b["stop"]}
        return {**rec, "what": _w("block-closed"), "stop": b["stop"]}
    if typ == "content_block_stop":
        b["open"], b["stop"] = False, n
        return {**rec, "what": _w("block-stop"), "json": b["json"]}
    allowed = DELTAS_FOR.get(b["type"]) if isinstance(b["type"], str) else None
    fld = DELTA_FIELD.get(dtype) if isinstance(dtype, str) else None
    if allowed is not None and not (isinstance(dtype, str) and dtype in allowed):  # a list would not hash
        return {**rec, "what": _w("delta-type"), "allowed": sorted(allowed)}
    if fld is not None and not isinstance(delta.get(fld[0]), fld[1]):  # type: ignore[union-attr]
        return {**rec, "what": _w("delta-field"), "field": fld[0], "kind": fld[1].__name__}
    if allowed is not None and fld is None:
        return {**rec, "what": _w("delta-malformed"), "allowed": sorted(allowed)}
    if dtype == "thinking_delta" and b["sign"] is not None:
        return {**rec, "what": _w("thinking-after-signature"), "sign": b["sign"]}
    if dtype == "signature_delta":
        b["sign"] = n
        b["signed"] = b["signed"] or bool(delta.get("signature"))  # type: ignore[union-attr]
    elif dtype == "input_json_delta":
        b["json"] += delta["partial_json"]  # type: ignore[index]
    return {**rec, "what": _w("delta")}


def _parse_tool_input(block: dict[str, Any]) -> dict[str, Any]:
    block = dict(block)
    raw = text(block.pop("_partial_json", ""))
    if raw.strip() == "":
        block["input"] = {}
    else:
        try:  # NaN, Infinity (no JSON, RFC 8259) and 1e999 (past a float): Python would read them, and a
            # history holding them could never be sent again
            block["input"] = json.loads(raw, parse_constant=base.not_json, parse_float=base.finite_float)
        except (ValueError, RecursionError):
            block["input"] = raw  # keep what was sent; the validator reports it
    return block


def final_message(source: Any) -> dict[str, Any] | None:
    """The message folded from a stream (a Transcript or frames); None without message_start."""
    snap = base.Reading.of(sys.modules[__name__], source).snapshot  # the stream's one fold
    if snap is None:
        return None
    content = [(_parse_tool_input(b) if "_partial_json" in b else b) for b in snap.get("content", [])]
    return copy.deepcopy({**public(snap), "content": content})  # the caller's own: the fold is shared


# -- what an answer holds -------------------------------------------------------------------

def tool_calls(answer: dict[str, Any] | None) -> list[ToolCall]:
    """The tool_use blocks of a snapshot or message, in order; a streamed one is complete at its stop."""
    if not answer:
        return []
    done = answer.get("_complete") or {}
    out: list[ToolCall] = []
    for key, b in enumerate(answer.get("content") or []):
        if not isinstance(b, dict) or b.get("type") != "tool_use":
            continue
        streaming = "_partial_json" in b
        args = b["_partial_json"] if streaming else json.dumps(b.get("input", {}), ensure_ascii=False)
        complete = not streaming
        out.append(ToolCall(key, len(out), text(b.get("id")), text(b.get("name")), text(args), complete,
                            done.get(key, "")))
    return out


def is_content(event: Any) -> bool:
    """The event carries generated content (text, thinking, tool input): a token."""
    return (isinstance(event, dict) and event.get("type") == "content_block_delta"
            and isinstance(event.get("delta"), dict) and event["delta"].get("type") in _CONTENT_DELTAS)


def error_of(event: Any) -> str | None:
    if isinstance(event, dict) and event.get("type") == "error":
        return json.dumps(event)[:300]
    return None


# -- answers and requests as the history witnesses see them -----------------------------------

SDK = "anthropic"  # the official SDK that speaks this API
SIGNS_THINKING = True  # the endpoint issues a signature on each thinking block


def final_answer(source: Any) -> dict[str, Any] | None:
    """The answer folded from a stream, in the shape of the non-stream response (the message)."""
    return final_message(source)


def parts(answer: dict[str, Any]) -> list[tuple[str, str]]:
    """The answer's parts in model order as (kind, text): ("reasoning", thinking; "" when redacted),
    ("text", text), ("tool_call", name)."""
    out: list[tuple[str, str]] = []
    for b in answer.get("content") or []:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "thinking":
            out.append(("reasoning", text(b.get("thinking"))))
        elif kind == "redacted_thinking":
            out.append(("reasoning", ""))
        elif kind == "text":
            out.append(("text", text(b.get("text"))))
        elif kind == "tool_use":
            out.append(("tool_call", text(b.get("name"))))
    return out


def usage(answer: dict[str, Any]) -> dict[str, Any]:
    return answer.get("usage") or {}


def usage_tokens(answer: dict[str, Any]) -> tuple[int, int, int]:
    """(prompt total, output tokens, cached prompt tokens): the prompt total adds the cache reads and
    writes to ``input_tokens``, which counts only the uncached rest."""
    u = usage(answer)
    cached = int(u.get("cache_read_input_tokens") or 0)
    return (int(u.get("input_tokens") or 0) + cached + int(u.get("cache_creation_input_tokens") or 0),
            int(u.get("output_tokens") or 0), cached)


def stop_reason(answer: dict[str, Any]) -> str | None:
    return answer.get("stop_reason")


def rewritten(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The answer with its first thinking edited at its start (as a client that rewrites history
    sends it); None when it has no thinking."""
    answer = copy.deepcopy(answer)
    for block in answer.get("content", []):
        if block.get("type") == "thinking":
            block["thinking"] = base.REVISED + block["thinking"]
            return answer
    return None


def missing_calls(answer: dict[str, Any]) -> str:
    """What the answer says of a call it does not hold: stop_reason tool_use with no tool_use block (a client
    cannot run a call it only reads as text); "" otherwise."""
    blocks = [b for b in answer.get("content") or [] if isinstance(b, dict)]
    if answer.get("stop_reason") != "tool_use" or any(b.get("type") in TOOL_BLOCKS for b in blocks):
        return ""
    text = " ".join(b.get("text") or "" for b in blocks if b.get("type") == "text").strip()
    return f"stop_reason tool_use with no tool_use block (its text: {text[:120]!r})"


def without_reasoning(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The answer with its thinking (and redacted thinking) blocks left out, the rest as it was: what the
    presence witness sends beside the answer itself; None when it has none."""
    content = answer.get("content") or []
    kept = [b for b in content if not (isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking"))]
    return None if len(kept) == len(content) else {**answer, "content": copy.deepcopy(kept)}


def kit_answer(scenario: Scenario, *, signature: str = "") -> dict[str, Any]:
    """The scenario's scripted turn 0 as a message the kit built: thinking blocks (carrying
    ``signature``), tool_use and text blocks in script order."""
    content: list[dict[str, Any]] = []
    for n, p in enumerate(scenario.turns[0].model):
        if p.kind == "reasoning":
            content.append({"type": "thinking", "thinking": p.text, "signature": signature})
        elif p.kind == "tool_call":
            content.append({"type": "tool_use", "id": f"toolu_kit{n}", "name": p.name, "input": json.loads(p.arguments)})
        else:
            content.append({"type": "text", "text": p.text})
    return {"role": "assistant", "content": content, "stop_reason": "tool_use"}


def thinking_on(body: dict[str, Any]) -> dict[str, Any]:
    """The request with thinking enabled (budget 1024, the reference's minimum, below max_tokens)."""
    return {**body, "thinking": {"type": "enabled", "budget_tokens": 1024},
            "max_tokens": max(body["max_tokens"], 2048)}


def with_system_prefix(body: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The request with ``prefix`` put before its system prompt."""
    return {**body, "system": prefix + body.get("system", "")}


def append_user(body: dict[str, Any], user: str) -> dict[str, Any]:
    """The request with one more user message at the end."""
    return {**body, "messages": [*body["messages"], {"role": "user", "content": user}]}


def tokenize_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The request's conversation as a chat-form /tokenize payload's fields (messages, system)."""
    return {"messages": body["messages"], **({"system": body["system"]} if body.get("system") else {})}


def is_error_body(body: Any) -> bool:
    """The body is this API's error shape: ``{"type": "error", "error": {"type", "message"}}``."""
    if not isinstance(body, dict):
        return False
    error = body.get("error")
    return body.get("type") == "error" and isinstance(error, dict) and isinstance(error.get("type"), str) \
        and isinstance(error.get("message"), str)

# -- what the replay client reads from a stream's snapshot ------------------------------------
# (the answer in history form, its structure, usage, stop, end, the error of an error event; the
# content and call ids of a history-form answer: replay.fold.View)


def stream_part(snap: Snapshot, key: Any) -> str | None:
    """The block at content position ``key`` as a timeline names it: its place, type and a tool's name."""
    content = (snap or {}).get("content") or []
    block = content[key] if is_int(key) and 0 <= key < len(content) and isinstance(content[key], dict) else {}
    name = block.get("name") if block.get("type") == "tool_use" else None
    return f"block {key}: {block.get('type', '?')}" + (f" {name}" if name else "")


def stream_history(snap: Snapshot) -> list[Any]:
    content: list[dict[str, Any]] = []
    for b in (snap or {}).get("content") or ():
        kind = b.get("type")
        if kind == "text":
            content.append({"type": "text", "text": text(b.get("text"))})
        elif kind == "thinking":
            content.append({"type": "thinking", "thinking": text(b.get("thinking")),
                            "signature": text(b.get("signature"))})
        elif kind == "tool_use":  # a call whose block never stopped goes back with an empty input
            content.append({"type": "tool_use", "id": b.get("id", ""), "name": b.get("name", ""),
                            "input": {} if "_partial_json" in b else b.get("input", {})})
        else:
            content.append({k: v for k, v in b.items() if not k.startswith("_") and (k != "citations" or v)})
    return [{"role": "assistant", "content": content}]


def stream_structure(snap: Snapshot, kinds: list[str]) -> dict[str, Any]:
    blocks = (snap or {}).get("content") or ()
    return {"blocks": [b.get("type") for b in blocks],
            "tool_calls": [b.get("name") for b in blocks if b.get("type") == "tool_use"],
            "stop": stream_stop(snap)}


def stream_stop(snap: Snapshot) -> str | None:
    return (snap or {}).get("stop_reason")


def answer_text(answer: list[Any] | None) -> str:
    out: list[str] = []
    for item in answer or ():
        for block in item.get("content") or ():
            kind = block.get("type")
            if kind in ("text", "thinking"):
                out.append(block.get(kind) or "")
            elif kind == "tool_use":
                out += [block.get("name") or "", json.dumps(block.get("input"), ensure_ascii=False)]
    return "".join(out)


def answer_call_ids(answer: list[Any] | None) -> list[str]:
    return [str(b.get("id", "")) for entry in answer or () if isinstance(entry, dict)
            and isinstance(entry.get("content"), list)
            for b in entry["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]


def stream_error(event: Any) -> str | None:
    msg = error_of(event)
    return None if msg is None else f"error event: {msg}"


stream_usage = base.snapshot_usage
stream_ended = base.snapshot_ended
stream_grown = None  # blocks keep their own order
PER_CALL_END = True  # content_block_stop ends each call


# -- what a synthetic agent session writes (replay/workloads.py) -------------------------------------

def agent_request(model: str, system: str, tools: list[Any], new: list[Any],
                  max_tokens: int) -> dict[str, Any]:
    """An agent's streamed first request: the system prompt as one text block, the tools, the new messages."""
    return {"model": model, "max_tokens": max_tokens, "system": [{"type": "text", "text": system}],
            "tools": tools, "messages": new, "stream": True}


def history_answer(texts: list[str], calls: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """An answer in history form: its texts, then its (call id, scenario part) tool calls."""
    content: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
    content += [{"type": "tool_use", "id": i, "name": c.name, "input": json.loads(c.arguments)}
                for i, c in calls]
    return [{"role": "assistant", "content": content}]


def history_results(results: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """(call id, output) tool results in history form."""
    return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": r}
                                         for i, r in results]}]


# -- the kit's levers (conformance/levers.py) -----------------------------------------------------------
THINKING_BUDGET = 1024  # the smallest budget_tokens; max_tokens must exceed it


def is_opening(body: dict[str, Any]) -> bool:
    """The request holds no earlier answer: levers bend only these."""
    return base.is_opening_messages(body)


def _thinking_enabled(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def forcing_refused(body: dict[str, Any]) -> bool:
    """The API refuses a forced tool call with this request: extended thinking is on (API_FACTS)."""
    return _thinking_enabled(body)


def least_limit(body: dict[str, Any]) -> int:
    """The smallest ``max_tokens`` this request takes: above ``thinking.budget_tokens`` when thinking is on."""
    budget = body["thinking"].get("budget_tokens") if _thinking_enabled(body) else None
    return budget + 1 if base.is_int(budget) else MIN_OUTPUT_TOKENS


def lever_thinking_off(body: dict[str, Any]) -> dict[str, Any] | None:
    return base.set_absent(body, thinking={"type": "disabled"})


def lever_thinking_on(body: dict[str, Any]) -> dict[str, Any] | None:
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        return None  # extended thinking refuses forced tool use (API_FACTS, request validation)
    bent = base.set_absent(body, thinking={"type": "enabled", "budget_tokens": THINKING_BUDGET})
    if bent is not None:
        bent["max_tokens"] = max(int(body.get("max_tokens") or 0), THINKING_BUDGET + 256)
    return bent


lever_reasoning_minimal = None  # no effort setting below thinking off


def lever_prefill(body: dict[str, Any], start: str) -> dict[str, Any] | None:
    """The request with an assistant prefill that starts the answer."""
    return {**body, "messages": [*body["messages"], {"role": "assistant", "content": start}]}


# -- a recorded client session replayed (conformance/client_replay.py), a refused over-long prompt -------

def is_stream_event(e: dict[str, Any]) -> bool:
    """A recorded data object is a stream event (not a non-streamed answer's body)."""
    typ = e.get("type")
    return isinstance(typ, str) and (typ.startswith(("message_", "content_block_"))
                                     or typ in ("ping", "error"))


def answer_values(answer: dict[str, Any]) -> list[tuple[str, Any]]:
    """The values an answer contributes to the client's next request, in order, by kind."""
    out: list[tuple[str, Any]] = []
    for b in answer.get("content") or []:
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "thinking":
            out += [("reasoning", b.get("thinking")), ("signature", b.get("signature"))]
        elif kind == "redacted_thinking":
            out.append(("redacted", b.get("data")))
        elif kind == "text":
            out.append(("text", b.get("text")))
        elif kind == "tool_use":
            out += [("call", b.get("name")), ("call_id", b.get("id")), ("input", b.get("input"))]
    return out


# Claude Code 2.1.197's own test for the refusal (read from the client): the message contains this
# (case-insensitive); it then reads the two numbers with
# /prompt is too long[^0-9]*(\d+)\s*tokens?\s*>\s*(\d+)/i.
OVERFLOW_MARKER = "prompt is too long"


def overflow_marker_problem(body: Any) -> str | None:
    """Why a refusal of an over-long prompt lacks the marker Claude Code compacts on, or None."""
    message = ((body or {}).get("error") or {}).get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or OVERFLOW_MARKER not in message.lower():
        return (f"the error message {message!r} does not say {OVERFLOW_MARKER!r} "
                "(what Claude Code matches to compact)")
    return None


def streamed_refusal(frames: list[Any]) -> list[tuple[str, str]] | None:
    """A 200 stream with no ``error`` event is no refusal in Messages: None (the caller judges it as an answer).
    One that an ``error`` event ends is the endpoint refusing the prompt inside the stream (Dynamo 1.6.1: an
    api_error "Internal server error"), not in the form Claude Code compacts on: (part, problem), the
    marker read from the event's error as from an HTTP error's body."""
    for frame in frames:
        data = frame.json
        if frame.event == "error" or (isinstance(data, dict) and data.get("type") == "error"):
            body = data if isinstance(data, dict) else {}
            error = body.get("error")
            kind = error.get("type") if isinstance(error, dict) else None
            return base.refused_in_stream(
                f"an error event (type {kind!r})", error, overflow_marker_problem(body),
                "Claude Code compacts only on a 400 invalid_request_error saying 'prompt is too long'; "
                "anthropic-python raises the event as an APIStatusError of the stream's status, 200")
    return None
