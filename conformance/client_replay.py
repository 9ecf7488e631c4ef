"""Replaying a real client's recorded session against the endpoint, in the client's own form.

A session (``harnesscheck.scenarios.client_sessions``: Claude Code, Codex under two catalog profiles,
OpenClaw over each API) holds the client's requests turn by turn, each with the answer the reference
server gave when it was captured. Replaying it sends request 0 as recorded (with the endpoint's model
id), and each later request as the client would have sent it had the endpoint given *this* answer:
the recorded request, with every value the recorded answer contributed to it replaced by the live
answer's value at the same place (``answer_values``: tool call ids, arguments, texts, reasoning,
signatures, encrypted reasoning, output item ids), wherever the client put it and in whatever form it
wrote it (the exact string; a call id without its non-alphanumerics, as OpenClaw over Chat sends it;
Anthropic tool input as the parsed object). Nothing else changes: the client's tools, system prompt,
headers, cache_control placement and field order stay as recorded.

``mapping(api, recorded, live)`` pairs the values by kind and position; ``None`` (with why) when
the live answer's structure differs from the recorded one (another number of tool calls, say): the
round trip is then not exercised and later requests go as recorded. ``substitute(body, m)`` applies it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from harnesscheck.protocol import apis
from harnesscheck.protocol.wire.sse import SSEFrame
from harnesscheck.scenarios import client_sessions


def frames_of(events: list[Any]) -> list[SSEFrame]:
    """A recorded answer's data events as SSE frames (for the API's own fold)."""
    out = []
    for n, e in enumerate(events):
        if e == "[DONE]":
            out.append(SSEFrame(index=n, data="[DONE]", done=True))
        else:
            out.append(SSEFrame(index=n, event=e.get("type") if isinstance(e, dict) else None,
                                data=json.dumps(e), json=e))
    return out


def recorded_answer(api: str, events: list[Any]) -> dict[str, Any] | None:
    """The recorded answer in the non-stream shape: the fold of its events, or its JSON body."""
    if len(events) == 1 and isinstance(events[0], dict) and not _is_event(api, events[0]):
        return events[0]
    return apis.get(api).final_answer(frames_of(events))


def _is_event(api: str, e: dict[str, Any]) -> bool:
    return bool(apis.get(api).is_stream_event(e))


# (kind, value) in answer order; kinds are compared position by position
Value = tuple[str, Any]


def answer_values(api: str, answer: dict[str, Any] | None) -> list[Value]:
    """The values an answer contributes to the client's next request, in order, by kind (the API module's
    ``answer_values``)."""
    if not isinstance(answer, dict):
        return []
    return list(apis.get(api).answer_values(answer))


_STRUCTURE = ("call", "item")  # kinds whose values must agree: the answer's structure


@dataclass
class Mapping:
    """Recorded value -> live value, for strings and for objects (Anthropic tool input)."""
    strings: dict[str, str] = field(default_factory=dict)
    objects: list[tuple[Any, Any]] = field(default_factory=list)
    live_call_ids: list[str] = field(default_factory=list)
    # recorded arguments as a client re-serialises them, whose live counterpart does not parse
    unparsed: set[str] = field(default_factory=set)


def _alnum(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "", s)


DIFFERS, BROKEN = "differs", "broken"  # why there is no mapping: another structure; an answer the client cannot carry


def mapping(api: str, recorded: dict[str, Any] | None,
            live: dict[str, Any] | None) -> tuple[Mapping | None, str, str]:
    """The recorded answer's values paired with the live answer's (module doc); else None, why, and
    DIFFERS (the live answer took another path: the round trip is not exercised) or BROKEN (it cannot
    be sent back: a call without an id, tool input that does not parse)."""
    rec, got = answer_values(api, recorded), answer_values(api, live)
    shape_rec = [(k, v) for k, v in rec if k in _STRUCTURE]
    shape_got = [(k, v) for k, v in got if k in _STRUCTURE]
    if shape_rec != shape_got:
        return None, (f"the endpoint answered {_describe(shape_got)} where the recorded session had "
                      f"{_describe(shape_rec)}"), DIFFERS
    m = Mapping()
    by_kind: dict[str, list[Any]] = {}
    for k, v in got:
        by_kind.setdefault(k, []).append(v)
    seen: dict[str, int] = {}
    for k, v in rec:
        n = seen.get(k, 0)
        seen[k] = n + 1
        live_values = by_kind.get(k) or []
        new = live_values[n] if n < len(live_values) else None
        if k == "call_id":
            if not isinstance(new, str) or not new:
                return None, "a tool call of the endpoint's answer has no id the client could send back", BROKEN
            m.live_call_ids.append(new)
        if k == "input" and not isinstance(new, dict):
            return None, (f"a tool call's input does not parse as a JSON object ({new!r}): the client cannot send "
                          "it back"), BROKEN
        if k in _STRUCTURE or v is None or v == "":
            continue
        if isinstance(v, str):
            m.strings[v] = new if isinstance(new, str) else ""
            if k == "call_id" and isinstance(new, str) and _alnum(v) != v:  # new: checked above
                m.strings.setdefault(_alnum(v), _alnum(new))
            if k == "arguments":
                _reserialised(v, new, m)
        else:
            m.objects.append((v, new))
    return m, "", ""


_STYLES: tuple[dict[str, Any], ...]
_STYLES = ({"separators": (",", ":")}, {}, {"separators": (",", ":"), "ensure_ascii": False},
           {"ensure_ascii": False})


def _reserialised(recorded: str, live: Any, m: Mapping) -> None:
    """Map the forms a client that parses tool arguments and writes them again (OpenClaw) sends them in;
    where the live arguments do not parse, note those forms as ones the client cannot write."""
    try:
        parsed = json.loads(recorded)
    except ValueError:
        return
    forms = {json.dumps(parsed, **style): style for style in _STYLES}
    forms.pop(recorded, None)
    try:
        live_parsed = json.loads(live) if isinstance(live, str) else None
    except ValueError:
        live_parsed = None
    if not isinstance(live_parsed, dict):
        m.unparsed.update(forms)
        return
    for form, style in forms.items():
        m.strings.setdefault(form, json.dumps(live_parsed, **style))


def uncarried(body: Any, m: Mapping) -> str | None:
    """Why the client could not have sent this request with the live answer: it re-serialises the tool
    arguments (the recorded request holds them re-written) and the endpoint's do not parse."""
    found = [v for v in client_sessions.strings(body) if v in m.unparsed]
    if not found:
        return None
    return (f"the client writes tool arguments again from their parsed form ({found[0][:80]!r}), and the "
            "endpoint's arguments do not parse: it cannot send them back")


def _describe(shape: list[Value]) -> str:
    names = [str(v) for _, v in shape]
    return ", ".join(names) if names else "nothing to call"


def substitute(value: Any, m: Mapping) -> Any:
    """``value`` with every recorded value of the mapping replaced by the live one."""
    for old, new in m.objects:
        if value == old and isinstance(value, type(old)):
            return new
    if isinstance(value, str):
        return m.strings.get(value, value)
    if isinstance(value, dict):
        return {k: substitute(v, m) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, m) for v in value]
    return value


def carried(body: Any, m: Mapping) -> list[str]:
    """The live call ids the request carries (anywhere: tool results, the assistant turn)."""
    text = json.dumps(body)
    return [i for i in m.live_call_ids if json.dumps(i)[1:-1] in text or _alnum(i) in text]
