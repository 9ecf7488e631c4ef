"""Anthropic Messages stream grammar: a pure fold and a validator.

``accumulate(event, snapshot)`` folds one event into a message snapshot without mutating its
input (as anthropic-sdk-python's ``accumulate_event``, but it records instead of raising);
``final_message(frames)`` folds a whole stream; ``validate(frames, request=None)`` returns the
``Finding`` list for the rules in ``RULES`` (API_FACTS.md, "Anthropic Messages").
"""

from __future__ import annotations

import json
from typing import Any

from .findings import Finding, fold, frames_and_request, short

__all__ = ["EVENT_TYPES", "RULES", "STOP_REASONS", "accumulate", "final_message", "validate"]

RULES: dict[str, str] = {
    "AN-GRAMMAR-JSON": "Every event's data is a JSON object.",
    "AN-GRAMMAR-DONE": "An Anthropic stream carries no `data: [DONE]` sentinel.",
    "AN-GRAMMAR-EVENT-NAME": "The SSE `event:` name is present and equals the data's `type`.",
    "AN-GRAMMAR-UNKNOWN-EVENT": "Every event type is one of the documented stream events.",
    "AN-GRAMMAR-START": "`message_start` comes first (only `ping` may precede it) and exactly once.",
    "AN-GRAMMAR-MESSAGE-START": "`message_start.message` has `content: []`, `stop_reason: null` and "
    "integer `usage.input_tokens` and `usage.output_tokens`.",
    "AN-GRAMMAR-ORDER": "No content block event after the first `message_delta` (such events are not "
    "judged further).",
    "AN-GRAMMAR-INDEX": "`content_block_start.index` is the block's position: 0, 1, 2, ... never reused.",
    "AN-GRAMMAR-ONE-OPEN": "One content block is open at a time: a block starts only after the previous stopped.",
    "AN-GRAMMAR-BLOCK-START": "`content_block_start.content_block` is an object with a string `type`.",
    "AN-GRAMMAR-BLOCK-UNKNOWN": "A delta or stop refers to a block that was started.",
    "AN-GRAMMAR-BLOCK-CLOSED": "No delta or second stop for a block after its `content_block_stop`.",
    "AN-GRAMMAR-BLOCK-UNSTOPPED": "Every started block is stopped before `message_delta` / the end.",
    "AN-GRAMMAR-DELTA-TYPE": "The delta type matches the block type (text: text_delta/citations_delta; "
    "tool_use: input_json_delta; thinking: thinking_delta/signature_delta) and is well formed.",
    "AN-GRAMMAR-SIGNATURE": "A thinking block gets its signature (`signature_delta`) after its thinking "
    "and before its `content_block_stop`.",
    "AN-GRAMMAR-TOOL-START": "A tool_use block starts with a non-empty string `id` and `name` and `input: {}`.",
    "AN-GRAMMAR-TOOL-JSON": "A tool_use block's joined `partial_json` parses as a JSON object (empty joins to {}).",
    "AN-GRAMMAR-DELTA-USAGE": "`message_delta` has an integer `usage.output_tokens`.",
    "AN-GRAMMAR-STOP-REASON": "A `stop_reason` is set by `message_delta` and is one of the documented values.",
    "AN-GRAMMAR-STOP-TOOL-USE": "`stop_reason` is `tool_use` if and only if the message ends with tool_use blocks.",
    "AN-GRAMMAR-AFTER-STOP": "`message_stop` is the last event (only `ping` may follow).",
    "AN-GRAMMAR-STOP-MISSING": "The stream ends with `message_stop` (unless an `error` event ended it).",
    "AN-GRAMMAR-ERROR-EVENT": "The stream carries an `event: error` (reported so checks can show it).",
    "AN-GRAMMAR-AFTER-ERROR": "An `error` event ends the stream: nothing follows it.",
}

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
_TOOL_BLOCKS = ("tool_use", "server_tool_use")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# -- fold -----------------------------------------------------------------------------------

def accumulate(event: Any, snapshot: dict[str, Any] | None) -> dict[str, Any] | None:
    """Fold one event (a decoded data object) into the snapshot; return the new snapshot.

    Pure: the input snapshot is never mutated. Before ``message_start`` there is no snapshot
    (None). Tool input is buffered in the block's ``_partial_json`` and parsed at its stop.
    Unknown, malformed or out-of-order events leave the snapshot unchanged.
    """
    if not isinstance(event, dict):
        return snapshot
    typ = event.get("type")
    if typ == "message_start":
        msg = event.get("message")
        if not isinstance(msg, dict):
            return snapshot
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
            return snapshot
        block = dict(block)
        if block.get("type") in _TOOL_BLOCKS:
            block["_partial_json"] = ""
        return {**snapshot, "content": [*snapshot.get("content", []), block]}
    if typ in ("content_block_delta", "content_block_stop"):
        idx = event.get("index")
        content = snapshot.get("content", [])
        if not _is_int(idx) or not 0 <= idx < len(content):
            return snapshot
        block = dict(content[idx])
        if typ == "content_block_delta":
            delta = event.get("delta")
            if not isinstance(delta, dict):
                return snapshot
            dt = delta.get("type")
            if dt == "text_delta" and isinstance(delta.get("text"), str):
                block["text"] = _s(block.get("text")) + delta["text"]
            elif dt == "thinking_delta" and isinstance(delta.get("thinking"), str):
                block["thinking"] = _s(block.get("thinking")) + delta["thinking"]
            elif dt == "signature_delta" and isinstance(delta.get("signature"), str):
                block["signature"] = delta["signature"]
            elif dt == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                block["_partial_json"] = _s(block.get("_partial_json")) + delta["partial_json"]
            elif dt == "citations_delta" and "citation" in delta:
                cites = block.get("citations")
                block["citations"] = [*(cites if isinstance(cites, list) else []), delta["citation"]]
            else:
                return snapshot
        else:
            if "_partial_json" not in block:
                return snapshot
            block = _parse_tool_input(block)
        new_content = list(content)
        new_content[idx] = block
        return {**snapshot, "content": new_content}
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
    return snapshot


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _parse_tool_input(block: dict[str, Any]) -> dict[str, Any]:
    block = dict(block)
    raw = _s(block.pop("_partial_json", ""))
    if raw.strip() == "":
        block["input"] = {}
    else:
        try:
            block["input"] = json.loads(raw)
        except (ValueError, RecursionError):
            block["input"] = raw  # keep what was sent; the validator reports it
    return block


def final_message(source: Any) -> dict[str, Any] | None:
    """The message folded from a stream (a Transcript or frames); None without message_start."""
    snap = fold(source, accumulate)
    if snap is None:
        return None
    content = [(_parse_tool_input(b) if "_partial_json" in b else b) for b in snap.get("content", [])]
    return {**snap, "content": content}


# -- validator ------------------------------------------------------------------------------

class _Block:
    __slots__ = ("index", "type", "open", "frame", "signed", "json")

    def __init__(self, index: int, typ: Any, frame: int, signed: bool) -> None:
        self.index = index
        self.type = typ
        self.open = True
        self.frame = frame
        self.signed = signed
        self.json: list[str] = []


def validate(source: Any, request: Any = None) -> list[Finding]:
    """Judge an Anthropic Messages stream; never raises on what the server sent."""
    frames, _ = frames_and_request(source, request)
    out: list[Finding] = []

    def add(rule: str, frame: int | None, message: str, observed: Any = None, expected: Any = None) -> None:
        out.append(Finding(rule, frame, message, None if observed is None else short(observed),
                           None if expected is None else short(expected)))

    started = False
    start_reported = False
    stop_frame: int | None = None
    error_frame: int | None = None
    delta_seen = False
    stop_reason: Any = None
    blocks: dict[int, _Block] = {}
    order: list[_Block] = []

    def close_open(frame: int | None, why: str) -> None:
        for b in order:
            if b.open:
                b.open = False
                add("AN-GRAMMAR-BLOCK-UNSTOPPED", frame, f"block {b.index} ({b.type}) was never stopped {why}")

    for f in frames:
        if f.kind != "event":
            continue
        i = f.index
        if error_frame is not None:
            add("AN-GRAMMAR-AFTER-ERROR", i, f"frame after the error event #{error_frame}", f.data)
            continue
        if f.done:
            add("AN-GRAMMAR-DONE", i, "`[DONE]` sentinel in an Anthropic stream", f.data)
            continue
        ev = f.json
        if not isinstance(ev, dict):
            add("AN-GRAMMAR-JSON", i, "data is not a JSON object", f.json_error or f.data)
            continue
        typ = ev.get("type")
        if f.event != typ:
            add("AN-GRAMMAR-EVENT-NAME", i, "SSE event name differs from the data's type",
                f"event: {f.event}", f"event: {typ}")
        if typ == "ping":
            continue
        if typ == "error":
            error_frame = i
            err = ev.get("error")
            add("AN-GRAMMAR-ERROR-EVENT", i, "the stream carries an error event", err)
            continue
        if stop_frame is not None:
            add("AN-GRAMMAR-AFTER-STOP", i, f"event after message_stop (#{stop_frame})", typ)
            continue
        if not isinstance(typ, str) or typ not in EVENT_TYPES:  # a list would not even hash
            add("AN-GRAMMAR-UNKNOWN-EVENT", i, "unknown event type", typ)
            continue
        if typ == "message_start":
            if started:
                add("AN-GRAMMAR-START", i, "a second message_start")
                continue
            started = True
            _check_message_start(ev, i, add)
            continue
        if not started and not start_reported:
            start_reported = True
            add("AN-GRAMMAR-START", i, "event before message_start", typ, "message_start")

        if typ in ("content_block_start", "content_block_delta", "content_block_stop") and delta_seen:
            add("AN-GRAMMAR-ORDER", i, f"{typ} after message_delta", ev.get("index"))
            continue

        if typ == "content_block_start":
            idx = ev.get("index")
            opened = [b.index for b in order if b.open]
            if opened:
                add("AN-GRAMMAR-ONE-OPEN", i, "block started while another is open", f"open: {opened}",
                    "content_block_stop first")
            if not _is_int(idx) or idx != len(order) or idx in blocks:
                add("AN-GRAMMAR-INDEX", i, "block index is not the block's position", idx, len(order))
            cb = ev.get("content_block")
            if not isinstance(cb, dict) or not isinstance(cb.get("type"), str):
                add("AN-GRAMMAR-BLOCK-START", i, "content_block is not an object with a type", cb)
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
                        {k: cb.get(k) for k in ("id", "name", "input")}, 'non-empty id and name, input {}')
            signed = btype == "thinking" and isinstance(cb.get("signature"), str) and bool(cb.get("signature"))
            key = idx if _is_int(idx) else -1 - len(order)
            block = _Block(key, btype, i, signed)
            blocks[key] = block
            order.append(block)
            continue

        if typ in ("content_block_delta", "content_block_stop"):
            idx = ev.get("index")
            b = blocks.get(idx) if _is_int(idx) else None
            delta = ev.get("delta") if typ == "content_block_delta" else None
            dtype = delta.get("type") if isinstance(delta, dict) else None
            if b is None:
                add("AN-GRAMMAR-BLOCK-UNKNOWN", i, f"{typ} for a block that was never started", idx)
                continue
            if not b.open:
                if dtype == "signature_delta" and b.type == "thinking":
                    add("AN-GRAMMAR-SIGNATURE", i, f"signature_delta after block {idx} was stopped")
                else:
                    add("AN-GRAMMAR-BLOCK-CLOSED", i, f"{typ} for block {idx} after its stop", dtype or typ)
                continue
            if typ == "content_block_delta":
                allowed = _DELTAS_FOR.get(b.type) if isinstance(b.type, str) else None
                fld = _DELTA_FIELD.get(dtype) if isinstance(dtype, str) else None
                if allowed is not None and dtype not in allowed:
                    add("AN-GRAMMAR-DELTA-TYPE", i, f"{dtype} inside a {b.type} block", dtype, sorted(allowed))
                    continue
                if fld is not None and not isinstance(delta.get(fld[0]), fld[1]):  # type: ignore[union-attr]
                    add("AN-GRAMMAR-DELTA-TYPE", i, f"{dtype} without a valid `{fld[0]}`", delta)
                    continue
                if allowed is not None and fld is None:
                    add("AN-GRAMMAR-DELTA-TYPE", i, "malformed delta", delta)
                    continue
                if dtype == "thinking_delta" and b.signed:
                    add("AN-GRAMMAR-SIGNATURE", i, "thinking_delta after the block's signature")
                elif dtype == "signature_delta":
                    b.signed = bool(delta.get("signature"))  # type: ignore[union-attr]
                    if not b.signed:
                        add("AN-GRAMMAR-SIGNATURE", i, "empty signature_delta")
                elif dtype == "input_json_delta":
                    b.json.append(delta["partial_json"])  # type: ignore[index]
                continue
            b.open = False
            if b.type == "thinking" and not b.signed:
                add("AN-GRAMMAR-SIGNATURE", i, f"thinking block {idx} stopped without a signature",
                    None, "signature_delta before content_block_stop")
            if b.type in _TOOL_BLOCKS:
                joined = "".join(b.json)
                ok = joined.strip() == ""
                parsed: Any = None
                if not ok:
                    try:
                        parsed = json.loads(joined)
                        ok = isinstance(parsed, dict)
                    except (ValueError, RecursionError):
                        ok = False
                if not ok:
                    add("AN-GRAMMAR-TOOL-JSON", i, f"tool input of block {idx} does not join to a JSON object",
                        joined, "a JSON object")
            continue

        if typ == "message_delta":
            close_open(i, "before message_delta")
            delta_seen = True
            usage = ev.get("usage")
            if not isinstance(usage, dict) or not _is_int(usage.get("output_tokens")):
                add("AN-GRAMMAR-DELTA-USAGE", i, "message_delta without an integer usage.output_tokens", usage)
            delta = ev.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason") is not None:
                stop_reason = delta.get("stop_reason")
                if not isinstance(stop_reason, str) or stop_reason not in STOP_REASONS:
                    add("AN-GRAMMAR-STOP-REASON", i, "unknown stop_reason", stop_reason, sorted(STOP_REASONS))
            continue

        if typ == "message_stop":
            stop_frame = i
            close_open(i, "before message_stop")
            if stop_reason is None:
                add("AN-GRAMMAR-STOP-REASON", i, "message_stop without a stop_reason from message_delta")
            continue

    if error_frame is None:
        if not started and not start_reported:
            add("AN-GRAMMAR-START", None, "no message_start in the stream")
        if stop_frame is None:
            add("AN-GRAMMAR-STOP-MISSING", None, "the stream ended without message_stop")
            close_open(None, "before the stream ended")

    if isinstance(stop_reason, str) and stop_reason in STOP_REASONS:
        last = order[-1].type if order else None
        if stop_reason == "tool_use" and last != "tool_use":
            add("AN-GRAMMAR-STOP-TOOL-USE", stop_frame, "stop_reason tool_use but the message does not end "
                "with a tool_use block", f"last block: {last}", "a tool_use block last")
        elif last == "tool_use" and stop_reason in ("end_turn", "stop_sequence"):
            add("AN-GRAMMAR-STOP-TOOL-USE", stop_frame, "the message ends with tool_use blocks but "
                f"stop_reason is {stop_reason}", stop_reason, "tool_use")
    return out


def _check_message_start(ev: dict[str, Any], i: int, add: Any) -> None:
    msg = ev.get("message")
    if not isinstance(msg, dict):
        add("AN-GRAMMAR-MESSAGE-START", i, "message_start without a message object", msg)
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
        add("AN-GRAMMAR-MESSAGE-START", i, "; ".join(problems),
            {k: msg.get(k) for k in ("content", "stop_reason", "usage")})
