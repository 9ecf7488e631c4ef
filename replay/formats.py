"""Import and export of other tools' trace formats: AIPerf ``single_turn``, ``multi_turn`` and
``mooncake_trace`` (documented in docs/trace-format.md).

The input rows are validated by pydantic models that mirror AIPerf 0.13.0's own
(``aiperf/dataset/loader/models.py``: ``SingleTurn``, ``MultiTurn``, ``MooncakeTrace``; field for
field, with AIPerf's rules: ``text``/``texts`` and ``timestamp``/``delay`` not set together, at
least one modality, ``output_length > 0``, exactly one Mooncake input mode, ``hash_ids`` only with
``input_length``, ``tools`` only with ``messages``). Files may be gzip-compressed (sniffed by the
magic bytes, as AIPerf's ``open_text_maybe_gzip`` does).

What each AIPerf field becomes, and why (AIPerf's loaders and endpoints, same version):

- ``text`` is a user message with a string content; ``texts`` a message with one text part per
  string (AIPerf renders several texts as content parts); ``role`` the message role.
- ``output_length`` the request's max-tokens field (AIPerf's ``Turn.max_tokens``); ``extra`` is
  shallow-merged into the request body (AIPerf's ``extra_body``).
- ``timestamp`` is ``timing.at_ms``, ``delay`` ``timing.think_ms``.
- ``multi_turn``: turn k > 0 is a delta ``[$answer, message]`` (AIPerf threads the endpoint's live
  answers into the history); a leading text-only ``role: "system"`` turn with no timing,
  ``output_length`` or ``extra`` is the conversation's system prompt (AIPerf hoists it into
  ``system_message``, ``MultiTurnDatasetLoader._try_hoist_system_message``).
- ``single_turn``: one request per row, no history; rows sharing a ``session_id`` are one session
  sent in order (``SingleTurnDatasetLoader``).
- ``mooncake_trace``: ``input_length`` (+ ``hash_ids``) synthesises a prompt (below);
  ``text_input`` is the prompt; ``messages`` (+ ``tools``) an OpenAI chat message list sent as is;
  ``payload`` the whole request body.

Every field a row gave is kept in the turn's ``synthetic`` record, so exporting an imported trace
gives the same rows back (``tests/replay/test_trace_interop.py``). Every other export says in
``Export.warnings``, field by field with counts, what the target cannot hold (tool results as tool
messages, tool definitions and choice, recorded answers, the model id, rewritten history, the
history a single_turn row does not carry, the live answers a Mooncake row cannot hold, a prompt
that Mooncake's lengths keep only as counts), instead of changing it silently; a value that is
dropped is said to be dropped, never to have been absent. An AIPerf turn's ``output_length`` and
``extra`` mean the same in a Mooncake row and are carried over.

Mooncake prompts: each hash id is a block of ``block_size`` words drawn from a fixed vocabulary
by a generator seeded with the id (the last block cut so the prompt has ``input_length`` words),
so requests sharing hash ids share a text prefix. Export of a trace that did not come from
Mooncake counts the prompt's words (``\\w+`` or one punctuation mark each) and numbers its blocks
by a hash chain, so identical prefixes get identical ids; ``output_length`` is an AIPerf row's own,
else the recorded output's length (``meta.output_tokens``, else the recorded answer's words), never
a captured request's ``max_tokens`` (a client's cap); the request's other fields go into ``extra``.

Why one module (888 lines): import and export of one family of formats (AIPerf's three), each
direction written beside the other so that a round trip (import, then export, gives the rows back:
tests/replay/test_trace_interop.py) can be read and changed in one place; they share the row models,
the request-text reading and the `Export.warnings` notes. Its sections are marked in the file.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harnesscheck.protocol.apis import get as get_api

from .forms import form
from .trace import ANSWER, DEFAULT_PATHS, Timing, Trace, TraceTurn, expand_session, history_key
from .trace import is_answer_marker, read_file_text, timing_problem

__all__ = [
    "AiperfMultiTurn",
    "AiperfText",
    "AiperfTurn",
    "Export",
    "MooncakeRow",
    "export_aiperf",
    "export_mooncake",
    "import_aiperf",
    "import_mooncake",
    "read_text",
    "request_text",
    "synth_prompt",
]

DEFAULT_BLOCK_SIZE = 512
_VOCAB = (
    "the of and to in is for that on with as by this from be are at it or an was which not can more "
    "data model time system value state code file line test build cache token server client stream "
    "request answer result error check block prefix turn session tool call read write run list map "
    "key node path port user agent input output batch queue event frame delta shape score rate load"
).split()
_MEDIA = ("image", "images", "image_uuids", "audio", "audios", "video", "videos")


# -- AIPerf's data models (0.13.0), mirrored -------------------------------------------------

class _Row(BaseModel):
    # AIPerf's models allow unknown keys (AIPerfBaseModel: extra="allow"); they are kept for export
    model_config = ConfigDict(extra="allow")


def _timing_ms(value: int | float | None) -> int | float | None:
    """A ``timestamp`` or ``delay`` (ms) the replayer can wait for (``trace.timing_problem``: finite,
    >= 0, at most a day), the kit's rule for every timing it reads."""
    if value is not None and (problem := timing_problem(value)):
        raise ValueError(problem)
    return value


class AiperfText(_Row):
    """AIPerf's ``Text`` media object: a named field with one or more contents."""

    name: str = ""
    contents: list[str] = Field(default_factory=list)


class AiperfTurn(_Row):
    """AIPerf's ``SingleTurn``: one ``single_turn`` row, or one turn of a ``multi_turn`` row."""

    type: Literal["single_turn"] | None = None
    text: str | None = None
    texts: list[str] | list[AiperfText] | None = None
    image: str | None = None
    images: list[Any] | None = None
    image_uuids: list[str] | None = None
    audio: str | None = None
    audios: list[Any] | None = None
    video: str | None = None
    videos: list[Any] | None = None
    timestamp: int | float | None = None
    delay: int | float | None = None
    role: str | None = None
    session_id: str | None = Field(default=None, min_length=1)  # a trace's sessions are named
    output_length: int | None = Field(default=None, gt=0)
    extra: dict[str, Any] | None = None

    _timings = field_validator("timestamp", "delay")(_timing_ms)

    @model_validator(mode="after")
    def _rules(self) -> AiperfTurn:
        if self.text and self.texts:
            raise ValueError("text and texts cannot be set together")
        if self.timestamp and self.delay:
            raise ValueError("timestamp and delay cannot be set together")
        if not any((self.text, self.texts, self.image, self.images, self.audio, self.audios, self.video,
                    self.videos)):
            raise ValueError("at least one modality must be provided")
        return self


class AiperfMultiTurn(_Row):
    """AIPerf's ``MultiTurn``: one ``multi_turn`` row (rows with the same ``session_id`` add turns)."""

    type: Literal["multi_turn"] | None = None
    session_id: str | None = Field(default=None, min_length=1)  # a trace's sessions are named
    turns: list[AiperfTurn]

    @model_validator(mode="after")
    def _rules(self) -> AiperfMultiTurn:
        if not self.turns:
            raise ValueError("'turns' must be a non-empty list")
        return self


class MooncakeRow(_Row):
    """AIPerf's ``MooncakeTrace``: one request of a Mooncake trace."""

    type: Literal["mooncake_trace"] | None = None
    input_length: int | None = None
    text_input: str | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    payload: dict[str, Any] | None = None
    output_length: int | None = None
    hash_ids: list[int] | None = None
    timestamp: int | float | None = None
    delay: int | float | None = None
    session_id: str | None = Field(default=None, min_length=1)  # a trace's sessions are named
    extra: dict[str, Any] | None = None

    _timings = field_validator("timestamp", "delay")(_timing_ms)

    @model_validator(mode="after")
    def _rules(self) -> MooncakeRow:
        modes = sum(x is not None for x in (self.input_length, self.text_input, self.messages, self.payload))
        if modes != 1:
            raise ValueError("exactly one of 'input_length', 'text_input', 'messages' or 'payload' "
                             "must be given")
        if self.hash_ids is not None and self.input_length is None:
            raise ValueError("'hash_ids' is only allowed with 'input_length'")
        if self.tools is not None and (self.messages is None or not self.tools):
            raise ValueError("'tools' (a non-empty list) is only allowed with 'messages'")
        if self.messages is not None and (not self.messages or any("role" not in m for m in self.messages)):
            raise ValueError("'messages' must be a non-empty list of objects with a 'role'")
        if self.payload is not None and not self.payload:
            raise ValueError("'payload' must be a non-empty object")
        return self


@dataclass(frozen=True)
class Export:
    """An export's text and what the target format could not hold (one sentence each)."""

    text: str
    warnings: list[str] = field(default_factory=list)


# -- reading -------------------------------------------------------------------------------

def read_text(path: str | Path) -> str:
    """A file's text, gunzipped when it starts with the gzip magic bytes (any name), within the trace
    reader's size bound (``trace.read_file_text``: TraceError for a broken or oversized file)."""
    return read_file_text(path)


def _rows(source: str | Path | Iterable[str]) -> list[tuple[int, dict[str, Any]]]:
    if isinstance(source, Path) or (
            isinstance(source, str) and "\n" not in source and Path(source).is_file()):
        lines = read_text(source).splitlines()
    elif isinstance(source, str):
        lines = source.splitlines()
    else:
        lines = list(source)
    out = []
    for n, ln in enumerate(lines, 1):
        if not ln.strip():
            continue
        try:
            d = json.loads(ln)
        except ValueError as exc:
            raise ValueError(f"line {n}: not JSON: {exc}") from exc
        except RecursionError:
            raise ValueError(f"line {n}: JSON nested too deeply") from None
        if not isinstance(d, dict):
            raise ValueError(f"line {n}: expected a JSON object")
        out.append((n, d))
    return out


def _validate(model: type[BaseModel], d: dict[str, Any], where: str) -> Any:
    try:
        return model.model_validate(d)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or 'row'}: {e['msg']}"
                             for e in exc.errors())
        raise ValueError(f"{where}: {problems}") from None


def _given(row: BaseModel) -> dict[str, Any]:
    """The fields a row gave (declared and unknown), as plain JSON values."""
    return row.model_dump(mode="json", exclude_unset=True)


# -- requests ------------------------------------------------------------------------------

def _top_fields(api: str, model: str, output_length: int | None,
                extra: dict[str, Any] | None) -> dict[str, Any]:
    """Every request field but the history: model, stream, max tokens, then ``extra`` merged over."""
    mod, f = get_api(api), form(api)
    body: dict[str, Any] = {"model": model, "stream": True, **copy.deepcopy(f.stream_fields)}
    if output_length is not None:
        body[mod.MAX_TOKENS_FIELD] = max(output_length, mod.MIN_OUTPUT_TOKENS)
    elif f.required_max_tokens is not None:  # (the Messages API requires max_tokens)
        body[mod.MAX_TOKENS_FIELD] = f.required_max_tokens
    body.update(copy.deepcopy(extra or {}))
    return body


def _text_part(api: str, text: str) -> dict[str, Any]:
    return {"type": form(api).text_part, "text": text}


def _aiperf_content(api: str, t: AiperfTurn) -> str | list[dict[str, Any]]:
    if t.text is not None and not t.texts:
        return t.text
    strings: list[str] = []
    for x in t.texts or []:
        strings += [x] if isinstance(x, str) else x.contents
    return [_text_part(api, s) for s in strings]


def _system_fields(api: str, content: str | list[dict[str, Any]]
                   ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A system prompt as request fields and leading history entries, per API."""
    f = form(api)
    if f.system_field is not None and (isinstance(content, str) or not f.system_field_text_only):
        return {f.system_field: content}, []
    return {}, [{"role": "system", "content": content}]


def _hoistable(turns: list[AiperfTurn]) -> bool:
    """AIPerf's rule for lifting a leading system turn into the conversation's system message."""
    t = turns[0]
    return (len(turns) > 1 and t.role == "system" and turns[1].role != "system"
            and t.timestamp is None and t.delay is None and t.output_length is None and t.extra is None
            and not any(getattr(t, m) for m in _MEDIA) and bool(t.text or t.texts))


def _delta_fields(prev: dict[str, Any], cur: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sets = {k: v for k, v in cur.items() if prev.get(k, object()) != v}
    unset = [k for k in prev if k not in cur]
    if sets:
        out["set"] = sets
    if unset:
        out["unset"] = unset
    return out


# -- AIPerf import -------------------------------------------------------------------------

def _aiperf_kind(rows: list[tuple[int, dict[str, Any]]]) -> str:
    for n, d in rows:
        if d.get("type") is not None and not isinstance(d["type"], str):
            raise ValueError(f"line {n}: 'type' must be a string, got {json.dumps(d['type'])[:60]}")
    kinds = {d.get("type") or ("multi_turn" if "turns" in d else "single_turn") for _, d in rows}
    if len(kinds) > 1:
        raise ValueError(f"rows of more than one AIPerf type in one file: {sorted(kinds)}")
    kind = kinds.pop() if kinds else "multi_turn"
    if kind not in ("single_turn", "multi_turn"):
        raise ValueError(f"AIPerf type {kind!r}: this importer reads single_turn and multi_turn "
                         "(mooncake_trace: `trace import mooncake`)")
    return kind


def _turn_record(t: AiperfTurn) -> dict[str, Any]:
    """What export needs to give the row back: the given fields, texts reduced to their layout."""
    rec = _given(t)
    rec.pop("text", None)
    texts = rec.pop("texts", None)
    if texts and not isinstance(texts[0], str):
        rec["text_fields"] = [[x.get("name", ""), len(x.get("contents") or [])] for x in texts]
    elif texts is not None:
        rec["texts"] = True
    return rec


def import_aiperf(source: str | Path | Iterable[str], *, api: str = "chat", model: str = "",
                  kind: str | None = None) -> Trace:
    """An AIPerf ``single_turn`` or ``multi_turn`` file (``kind`` None: told by the rows) as a trace."""
    rows = _rows(source)
    kind = kind or _aiperf_kind(rows)
    sessions: dict[str, list[AiperfTurn]] = {}
    given_sid: dict[str, bool] = {}
    for n, d in rows:
        if kind == "multi_turn":
            if not isinstance(d.get("turns"), list) or not d["turns"]:
                raise ValueError(f"line {n}: 'turns' must be a non-empty list")
            row = _validate(AiperfMultiTurn, d, f"line {n}")
            sid, turns = row.session_id, list(row.turns)
        else:
            t = _validate(AiperfTurn, d, f"line {n}")
            sid, turns = t.session_id, [t]
        key = sid if sid is not None else f"aiperf-{n}"
        given_sid[key] = sid is not None
        sessions.setdefault(key, []).extend(turns)
    out: list[TraceTurn] = []
    for sid, turns in sessions.items():
        for k, t in enumerate(turns):
            if any(getattr(t, m) for m in _MEDIA):
                raise ValueError(f"session {sid!r} turn {k}: images, audio and video are not replayed")
        system: AiperfTurn | None = None
        if kind == "multi_turn" and _hoistable(turns):
            system, turns = turns[0], turns[1:]
        sys_fields: dict[str, Any] = {}
        sys_entries: list[dict[str, Any]] = []
        if system is not None:
            sys_fields, sys_entries = _system_fields(api, _aiperf_content(api, system))
        prev_top: dict[str, Any] | None = None
        for k, t in enumerate(turns):
            role = t.role or "user"
            roles = form(api).roles
            if roles is not None and role not in roles:
                raise ValueError(f"session {sid!r} turn {k}: role {role!r} has no place in {get_api(api).LABEL} "
                                 f"(its history admits {', '.join(roles)}; import with --apis chat)")
            msg = {"role": role, "content": _aiperf_content(api, t)}
            top = {**_top_fields(api, model, t.output_length, t.extra), **sys_fields}
            syn: dict[str, Any] = {"format": "aiperf", "kind": kind, "fields": _turn_record(t)}
            if k == 0:
                syn["session_id"] = given_sid[sid]
                if system is not None:
                    syn["system_turn"] = _turn_record(system)
            timing = Timing(at_ms=t.timestamp, think_ms=float(t.delay or 0))
            tt = TraceTurn(session=sid, turn=k, api=api, path=DEFAULT_PATHS[api], timing=timing,
                           synthetic=syn)
            if k == 0 or kind == "single_turn":
                tt.request = {**top, history_key(api): [*sys_entries, msg]}
            else:
                tt.delta = {"base": "previous", "append": [dict(ANSWER), msg],
                            **_delta_fields(prev_top or {}, top)}
            prev_top = top
            out.append(tt)
    return Trace.build(out, source="aiperf", meta={"aiperf_type": kind})


# -- AIPerf export -------------------------------------------------------------------------

class _Notes:
    """What an export could not carry, field by field, counted: one sentence per (field, what),
    "TARGET: FIELD: what became of it (N turns)". A value that was there and is not written is said
    to be dropped, never to have been absent."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()

    def add(self, field: str, what: str, n: int = 1, unit: str = "turn") -> None:
        self.counts[(field, what, unit)] += n

    def sentences(self, target: str) -> list[str]:
        return [f"{target}: {field}: {what} ({n} {unit}{'s' if n != 1 else ''})"
                for (field, what, unit), n in self.counts.items()]


def _part_texts(api: str, content: Any, notes: _Notes) -> list[str]:
    """The texts of a content (string or parts); tool results count as text, others are noted."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        typ = block.get("type")
        if typ in ("text", "input_text", "output_text") and isinstance(block.get("text"), str):
            out.append(block["text"])
        elif typ == "tool_result":
            notes.add("tool results", "exported as user text (AIPerf turns are text messages)", unit="result")
            out += _part_texts(api, block.get("content") or "", _Notes())
        else:
            notes.add("content", f"{typ!r} blocks dropped (AIPerf turns hold text only)", unit="block")
    return out


def _entry_texts(api: str, e: Any, notes: _Notes) -> tuple[str | None, list[str], bool]:
    """(role, texts, was a plain string) of one new history entry."""
    if not isinstance(e, dict):
        return None, [], False
    if e.get("role") == "tool" or e.get("type") == "function_call_output":
        notes.add("tool results", "exported as user text (AIPerf turns are text messages)", unit="result")
        content = e.get("content", e.get("output"))
        return "user", _part_texts(api, content or "", _Notes()), False
    content = e.get("content")
    role = e.get("role") if isinstance(e.get("role"), str) else None
    return role, _part_texts(api, content, notes), isinstance(content, str)


def _is_model_entry(api: str, e: Any) -> bool:
    if not isinstance(e, dict) or not isinstance(e.get("type", ""), str):
        return False
    return form(api).model_entry(e)


def _system_of(api: str, full: dict[str, Any], notes: _Notes) -> tuple[list[str] | None, bool, int]:
    """(system texts, was one string, leading history entries it took) of a full request."""
    hist = full.get(history_key(api))
    hist = hist if isinstance(hist, list) else []
    key = form(api).system_field
    value = full.get(key) if key is not None else None
    if isinstance(value, str):
        return [value], True, 0
    if isinstance(value, list):
        if any(set(b) - {"type", "text"} for b in value if isinstance(b, dict)):
            notes.add("system", "block attributes (cache_control, ...) dropped")
        return _part_texts(api, value, notes), False, 0
    lead = 0
    while (lead < len(hist) and isinstance(hist[lead], dict)
           and hist[lead].get("role") in ("system", "developer")):
        if hist[lead].get("role") == "developer":
            notes.add("history", "developer message exported as the system turn", unit="message")
        lead += 1
    if not lead:
        return None, False, 0
    texts = [s for e in hist[:lead] for s in _part_texts(api, e.get("content"), notes)]
    return texts, lead == 1 and isinstance(hist[0].get("content"), str), lead


_STANDARD = {"model", "messages", "input", "system", "instructions", "stream", "stream_options", "max_tokens",
             "max_output_tokens", "max_completion_tokens", "tools", "tool_choice", "parallel_tool_calls"}


def _text_fields(texts: list[str], plain: bool, rec: dict[str, Any] | None) -> dict[str, Any]:
    """``text`` or ``texts`` (the layout an imported row had, when it had one)."""
    rec = rec or {}
    if rec.get("text_fields"):
        out, i = [], 0
        for name, n in rec["text_fields"]:
            out.append({"name": name, "contents": texts[i:i + n]})
            i += n
        if i == len(texts):
            return {"texts": out}
    if rec.get("texts") or not (plain and len(texts) == 1):
        return {"texts": texts}
    return {"text": texts[0]}


def _new_entries(api: str, t: TraceTurn, full: dict[str, Any], lead: int, notes: _Notes) -> list[Any]:
    if t.delta is not None:
        if t.delta.get("keep") is not None:
            notes.add("history", "a rewrite of earlier history (delta keep) exported as appended messages "
                                 "(AIPerf only appends)")
        return [e for e in t.delta.get("append") or () if not is_answer_marker(e)]
    hist = full.get(history_key(api))
    if isinstance(hist, str):
        return [{"role": "user", "content": hist}]
    hist = list(hist or [])[lead:]
    last_model = max((i for i, e in enumerate(hist) if _is_model_entry(api, e)), default=-1)
    if last_model >= 0:
        notes.add("history", "the recorded conversation up to the turn's last model answer dropped (AIPerf "
                             "builds the history from the endpoint's live answers)")
    return hist[last_model + 1:]


def _timing_fields(t: TraceTurn, k: int, fixed: bool, rec: dict[str, Any] | None) -> dict[str, Any]:
    gap = t.timing.think_ms + t.timing.tool_ms
    if rec is not None:  # an imported row: the keys it had, the values the trace has now
        out = {}
        if "timestamp" in rec:
            out["timestamp"] = _int(t.timing.at_ms if t.timing.at_ms is not None else rec["timestamp"])
        if "delay" in rec:
            out["delay"] = _int(gap)
        return out
    if t.timing.at_ms is not None and (k == 0 or fixed):
        return {"timestamp": _int(t.timing.at_ms)}
    return {"delay": _int(gap)} if gap > 0 else {}


def _export_turn(t: TraceTurn, k: int, full: dict[str, Any], fixed: bool, kind: str, notes: _Notes
                 ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(the leading system turn or None, the AIPerf turn) of one trace turn."""
    api = t.api
    syn = t.synthetic or {}
    rec = syn.get("fields") if syn.get("format") == "aiperf" else None
    system_turn = None
    lead = 0
    if k == 0 or kind == "single_turn":
        texts, plain, lead = _system_of(api, full, notes)
        if texts is not None:
            if kind == "single_turn":
                notes.add("system", "system prompt dropped (AIPerf single_turn rows have none)")
            else:
                sys_rec = syn.get("system_turn") or {}
                system_turn = {**{k2: v for k2, v in sys_rec.items() if k2 not in ("texts", "text_fields")},
                               "role": "system", **_text_fields(texts, plain, sys_rec)}
    entries = _new_entries(api, t, full, lead, notes)
    if kind == "single_turn" and k > 0:
        notes.add("history", "sent without the conversation before it (single_turn rows carry no history; "
                             "multi_turn keeps it)")
    roles, texts, plains = [], [], []
    for e in entries:
        role, ts, plain = _entry_texts(api, e, notes)
        roles.append(role)
        texts += ts
        plains.append(plain)
    d: dict[str, Any] = {}
    if rec is not None:
        d.update({k2: v for k2, v in rec.items() if k2 not in ("texts", "text_fields", "timestamp", "delay")})
    d.update(_text_fields(texts, len(entries) == 1 and plains[0], rec))
    d.update(_timing_fields(t, k, fixed, rec))
    if rec is None:
        role = roles[0] if roles and all(r == roles[0] for r in roles) else "user"
        if len(set(roles)) > 1:
            notes.add("role", f"messages of roles {', '.join(sorted(map(str, set(roles))))} merged into one "
                              "user turn")
        if role not in (None, "user"):
            d["role"] = role
        out_len = full.get(get_api(api).MAX_TOKENS_FIELD, full.get("max_completion_tokens"))
        if isinstance(out_len, int) and not isinstance(out_len, bool) and out_len > 0:
            d["output_length"] = out_len
        elif out_len is not None:
            notes.add("output_length", f"the request's {get_api(api).MAX_TOKENS_FIELD} {str(out_len)[:40]!r} is "
                                       "not a positive integer: dropped")
        extra = {k2: v for k2, v in full.items() if k2 not in _STANDARD}
        if extra:
            d["extra"] = extra
        _note_request_fields(full, notes)
    return system_turn, d


def _note_request_fields(full: dict[str, Any], notes: _Notes) -> None:
    """The standard request fields a row of the target has no place for (the model id aside)."""
    for key in ("tool_choice", "parallel_tool_calls"):
        if key in full:
            notes.add(key, "dropped with the tool definitions")


def export_aiperf(trace: Trace, *, kind: str | None = None) -> Export:
    """The trace as AIPerf ``multi_turn`` rows (``single_turn`` for a trace imported from one, or
    ``kind="single_turn"``), and what they could not hold."""
    kind = kind or trace.meta.get("aiperf_type") or "multi_turn"
    notes = _Notes()
    lines: list[str] = []
    for s in trace.sessions:
        fulls = _safe_expand(s.turns)
        if any(f.get("tools") for f in fulls):
            notes.add("tools", "tool definitions dropped (AIPerf turns carry no tools)", unit="session")
        if any(t.response for t in s.turns):
            notes.add("recorded answers", "not exported (AIPerf threads the endpoint's live answers)",
                      unit="session")
        if any(f.get(k) != fulls[0].get(k) for f in fulls[1:] for k in ("system", "instructions")):
            notes.add("system", "changes mid-session: only the first is exported", unit="session")
        models = {str(f.get("model")) for t, f in zip(s.turns, fulls)
                  if f.get("model") and (t.synthetic or {}).get("format") != "aiperf"}  # an import's is --model's
        if models:
            notes.add("model", f"{', '.join(sorted(map(str, models)))} not held by AIPerf rows (give it with "
                               "`trace import --model` or `replay --model`)", len(s.turns))
        fixed = all(t.timing.at_ms is not None and t.timing.think_ms + t.timing.tool_ms == 0 for t in s.turns)
        syn0 = (s.turns[0].synthetic or {}) if s.turns else {}
        sid_given = syn0.get("session_id", True) if syn0.get("format") == "aiperf" else True
        turns: list[dict[str, Any]] = []
        for k, (t, full) in enumerate(zip(s.turns, fulls, strict=True)):
            system_turn, d = _export_turn(t, k, full, fixed, kind, notes)
            if kind == "single_turn":
                if sid_given:
                    d["session_id"] = s.id
                lines.append(json.dumps(_ordered(d, _TURN_ORDER), ensure_ascii=False))
                continue
            if system_turn is not None:
                turns.append(_ordered(system_turn, _TURN_ORDER))
            turns.append(_ordered(d, _TURN_ORDER))
        if kind == "multi_turn" and turns:
            row: dict[str, Any] = {"session_id": s.id} if sid_given else {}
            row["turns"] = turns
            lines.append(json.dumps(row, ensure_ascii=False))
    return Export("".join(ln + "\n" for ln in lines), notes.sentences(f"AIPerf {kind}"))


_TURN_ORDER = ("type", "session_id", "role", "text", "texts", "timestamp", "delay", "output_length", "extra")
_ROW_ORDER = ("type", "session_id", "timestamp", "delay", "input_length", "text_input", "messages", "tools",
              "payload", "output_length", "hash_ids", "extra")


def _ordered(d: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """The row's keys in AIPerf's field order, unknown keys after (stable bytes for round trips)."""
    return {**{k: d[k] for k in order if k in d}, **{k: v for k, v in d.items() if k not in order}}


def _int(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


def _safe_expand(turns: list[TraceTurn]) -> list[dict[str, Any]]:
    """Full requests with the recorded answers; a turn with none adds nothing (AIPerf imports)."""
    answers = {t.turn: (t.response if t.response is not None else []) for t in turns}
    return expand_session(turns, answers)


# -- text of a request ---------------------------------------------------------------------

def _entry_text(entry: Any) -> str:
    if not isinstance(entry, dict):
        return ""
    content = entry.get("content", entry.get("output"))
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict):
            if isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif block.get("type") == "tool_result":
                parts.append(_entry_text(block))
    return "\n".join(p for p in parts if p)


def request_text(api: str, body: dict[str, Any]) -> str:
    """All the prompt text of a request (system, tools, history), for token counting."""
    parts: list[str] = []
    for key in ("system", "instructions"):
        v = body.get(key)
        if isinstance(v, str):
            parts.append(v)
        elif isinstance(v, list):
            parts += [b["text"] for b in v if isinstance(b, dict) and isinstance(b.get("text"), str)]
    if body.get("tools"):
        parts.append(json.dumps(body["tools"], sort_keys=True))
    hist = body.get(history_key(api))
    if isinstance(hist, str):
        parts.append(hist)
    else:
        for e in hist or ():
            parts.append(_entry_text(e) or json.dumps(e, sort_keys=True))
    return "\n".join(parts)


def _answer_text(answer: list[Any]) -> str:
    """The text a recorded answer produced: its texts and reasoning, and each tool call's arguments."""
    parts: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k in ("text", "thinking", "arguments"):
                if isinstance(x.get(k), str):
                    parts.append(x[k])
            if isinstance(x.get("input"), dict):
                parts.append(json.dumps(x["input"]))
            if isinstance(x.get("content"), str):
                parts.append(x["content"])
            for k in ("content", "tool_calls", "summary", "function"):
                if isinstance(x.get(k), list | dict):
                    walk(x[k])
        elif isinstance(x, list):
            for y in x:
                walk(y)

    walk(answer)
    return "\n".join(parts)


# -- Mooncake ------------------------------------------------------------------------------

def _block_words(key: int | str, n: int) -> list[str]:
    rng = random.Random(f"harnesscheck-block-{key}")
    return [rng.choice(_VOCAB) for _ in range(n)]


def synth_prompt(input_length: int, hash_ids: list[int], block_size: int = DEFAULT_BLOCK_SIZE, *,
                 salt: str = "") -> str:
    """A prompt of ``input_length`` words; block i is seeded by ``hash_ids[i]`` (shared ids, shared
    prefix). Words past the blocks come from a block of their own (``salt`` keeps rows without hash
    ids apart)."""
    words: list[str] = []
    for h in hash_ids:
        need = min(block_size, input_length - len(words))
        if need <= 0:
            break
        words += _block_words(int(h), need)
    if len(words) < input_length:
        words += _block_words(f"{salt}{-len(hash_ids) - 1}" if salt else -len(hash_ids) - 1,
                              input_length - len(words))
    return " ".join(words)


def import_mooncake(source: str | Path | Iterable[str], *, api: str = "chat", model: str = "",
                    block_size: int = DEFAULT_BLOCK_SIZE) -> Trace:
    """A Mooncake trace (AIPerf ``mooncake_trace`` rows) as a trace: one turn per row, each a whole
    request; rows with the same ``session_id`` are one session, in file order."""
    out: list[TraceTurn] = []
    counts: dict[str, int] = {}
    for n, d in _rows(source):
        row: MooncakeRow = _validate(MooncakeRow, d, f"line {n}")
        sid = row.session_id if row.session_id is not None else f"m{n}"
        k = counts.get(sid, 0)
        counts[sid] = k + 1
        fields = _given(row)
        bulky = [k2 for k2 in _MOONCAKE_INPUTS if k2 in fields]  # the request holds them: export reads them
        syn: dict[str, Any] = {"format": "mooncake", "inputs": bulky,
                               "fields": {k2: v for k2, v in fields.items() if k2 not in bulky}}
        if row.payload is not None:
            request = copy.deepcopy(row.payload)
        else:
            if row.messages is not None:
                if not form(api).chat_messages:
                    raise ValueError(f"line {n}: 'messages' rows are OpenAI chat messages: "
                                     "import with --apis chat")
                history: list[dict[str, Any]] = copy.deepcopy(row.messages)
            else:
                if row.text_input is not None:
                    prompt = row.text_input
                else:
                    prompt = synth_prompt(int(row.input_length or 0), list(row.hash_ids or []), block_size,
                                          salt="" if row.hash_ids else f"row{n}:")
                    syn["block_size"] = block_size
                history = [{"role": "user", "content": prompt}]
            request = {**_top_fields(api, model, row.output_length, row.extra), history_key(api): history}
            if row.tools is not None:
                request["tools"] = copy.deepcopy(row.tools)
        timing = Timing(at_ms=row.timestamp, think_ms=float(row.delay or 0))
        out.append(TraceTurn(session=sid, turn=k, api=api, path=DEFAULT_PATHS[api], timing=timing,
                             request=request, synthetic=syn))
    return Trace.build(out, source="mooncake", meta={"block_size": block_size})


_TOKEN = re.compile(r"\w+|[^\w\s]")
# An AIPerf turn's fields a Mooncake row holds or counts (texts into input_length, role in the prompt)
_AIPERF_CARRIED = {"type", "session_id", "role", "text", "texts", "text_fields", "timestamp", "delay", "output_length",
                   "extra"}
_MOONCAKE_INPUTS = ("text_input", "messages", "tools", "payload")


def _hash_blocks(text: str, block_size: int, ids: dict[str, int]) -> tuple[int, list[int]]:
    tokens = _TOKEN.findall(text)
    out: list[int] = []
    prev = ""
    for i in range(0, len(tokens), block_size):
        h = hashlib.sha256((prev + "\x00" + " ".join(tokens[i:i + block_size])).encode()).hexdigest()
        prev = h
        out.append(ids.setdefault(h, len(ids)))
    return len(tokens), out


def _mooncake_inputs(api: str, full: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """An imported row's text_input / messages / tools / payload, read back from its request."""
    out: dict[str, Any] = {}
    for name in names:
        if name == "payload":
            out[name] = full
        elif name == "text_input":
            out[name] = _entry_text((full.get(history_key(api)) or [{}])[-1])
        elif name in full:
            out[name] = full[name]
    return out


def _output_length(t: TraceTurn) -> int | None:
    """The output length a Mooncake row asks for: an AIPerf row's own ``output_length`` (the same
    field in both formats: the turn's max tokens), else the recorded output's length (the usage a
    capture kept, else the recorded answer's words)."""
    syn = t.synthetic or {}
    if syn.get("format") == "aiperf" and isinstance((syn.get("fields") or {}).get("output_length"), int):
        return int(syn["fields"]["output_length"])
    tokens = (t.meta or {}).get("output_tokens")
    if isinstance(tokens, int):
        return tokens
    if t.response:
        return len(_TOKEN.findall(_answer_text(t.response)))
    return None


def export_mooncake(trace: Trace, *, block_size: int = DEFAULT_BLOCK_SIZE, mode: str = "lengths") -> Export:
    """The trace as Mooncake rows: ``mode="lengths"`` (``input_length`` + ``hash_ids``, the prompt
    as counts) or ``"payload"`` (each request body whole, AIPerf's verbatim mode). Rows imported
    from Mooncake come back as they were."""
    if mode not in ("lengths", "payload"):
        raise ValueError(f"mode must be 'lengths' or 'payload', got {mode!r}")
    notes = _Notes()
    ids: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    apis = Counter(t.api for t in trace.turns)
    if len(apis) > 1:
        notes.add("api", "rows carry no API or route: every row goes to the one endpoint AIPerf is given ("
                         + ", ".join(f"{n} {a}" for a, n in sorted(apis.items())) + ")", sum(apis.values()))
    for s in trace.sessions:
        fulls = _safe_expand(s.turns)
        multi = len(s.turns) > 1
        live = [t for prev, t in zip(s.turns, s.turns[1:]) if prev.response is None and t.delta is not None
                and any(is_answer_marker(e) for e in t.delta.get("append") or ())]
        if live:
            notes.add("history", "the endpoint's live answer to the turn before ($answer) is not in the row "
                                 "(a Mooncake row is a whole request, sent as written)", len(live))
        for t, full in zip(s.turns, fulls, strict=True):
            syn = t.synthetic or {}
            gap = t.timing.think_ms + t.timing.tool_ms
            if syn.get("format") == "mooncake" and isinstance(syn.get("fields"), dict):
                d = dict(syn["fields"])  # what the row gave; inputs, timing, session as the trace has them
                d.update(_mooncake_inputs(t.api, full, syn.get("inputs") or []))
                if "timestamp" in d or t.timing.at_ms is not None:
                    d["timestamp"] = _int(t.timing.at_ms) if t.timing.at_ms is not None else d["timestamp"]
                if "delay" in d or gap > 0:
                    d["delay"] = _int(gap)
                if "session_id" in d or multi:
                    d["session_id"] = s.id
                rows.append(d)
                continue
            d = {}
            if multi:
                d["session_id"] = s.id
            if t.timing.at_ms is not None:
                d["timestamp"] = _int(t.timing.at_ms)
            if mode == "payload":
                d["payload"] = full
            else:
                d["input_length"], d["hash_ids"] = _hash_blocks(request_text(t.api, full), block_size, ids)
                notes.add("prompt", "text counted into input_length + hash_ids, not kept (the words are made "
                                    "up again on import; --mooncake-mode payload keeps them)")
                if full.get("tools"):
                    notes.add("tools", "tool definitions counted into input_length, not kept")
                _note_request_fields(full, notes)
                extra = {k2: v for k2, v in full.items() if k2 not in _STANDARD}
                fields = (syn.get("fields") or {}) if syn.get("format") == "aiperf" else {}
                if isinstance(fields.get("extra"), dict):
                    extra = {**extra, **fields["extra"]}
                for name in sorted(set(fields) - _AIPERF_CARRIED):
                    notes.add(name, "an AIPerf field Mooncake rows do not have, dropped")
                if extra:
                    d["extra"] = extra
            out_len = _output_length(t)
            if out_len is not None:
                d["output_length"] = out_len
            elif mode == "lengths":
                cap = full.get(get_api(t.api).MAX_TOKENS_FIELD, full.get("max_completion_tokens"))
                if cap is not None:
                    notes.add("output_length", f"not written: no recorded output, and the request's "
                                               f"{get_api(t.api).MAX_TOKENS_FIELD} (a cap, not a length) dropped; "
                                               "the endpoint decides")
                else:
                    notes.add("output_length", "not written: the turn has no recorded output and no output "
                                               "limit; the endpoint decides")
            if gap > 0:
                d["delay"] = _int(gap)
            rows.append(d)
    text = "".join(json.dumps(_ordered(d, _ROW_ORDER), ensure_ascii=False) + "\n" for d in rows)
    return Export(text, notes.sentences("Mooncake"))
