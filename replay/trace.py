"""The trace format: replayable multi-turn sessions as JSONL (documented in docs/trace-format.md).

A trace file is a header line, then one line per turn::

    {"schema": "harnesscheck.trace", "version": 1, "source": "capture", "created": "...", "meta": {}}
    {"session": "s0", "turn": 0, "api": "anthropic", "path": "/v1/messages", "request": {...}, ...}
    {"session": "s0", "turn": 1, "api": "anthropic", "path": "/v1/messages",
     "delta": {"base": "previous", "keep": 2, "append": [{"$answer": "previous"}, {...}]}, ...}

Turns of a session are numbered 0, 1, 2, ... and replayed in that order; sessions run concurrently.
A turn's request is given whole (``request``) or as a ``delta`` on the previous turn's request:
the previous request's history list (``messages`` for anthropic/chat, ``input`` for responses)
cut to its first ``keep`` entries (default: all), then ``append`` added; top-level fields in
``set`` replaced, names in ``unset`` removed. An ``append`` entry ``{"$answer": "previous"}``
stands for the previous turn's answer in history form: the recorded ``response`` of that turn in
fixed mode, the endpoint's own answer in live mode.

Public API: ``Trace``, ``Session``, ``TraceTurn``, ``Timing``, ``load``, ``loads``, ``save``,
``dumps``, ``validate``, ``expand_session``, ``history_key``, ``TraceError``.

Errors: ``TraceError(ValueError)``, with every problem found (line, session, turn) in its message.

Why one module (641 lines): it is the format, whole: the dataclasses, the delta expansion, the
validation and the JSONL reading and writing all follow docs/trace-format.md section by section, and
each part leans on the others' private rules (validation expands every session's deltas; `Trace`
expands through `expand_session`; loading validates). Split, every part would import the others'
helpers; its sections (expansion, validation, load / save) are marked in the file instead.
"""

from __future__ import annotations

from harnesscheck.protocol import apis
from harnesscheck.errors import HarnesscheckError
from harnesscheck.protocol.wire import files
from harnesscheck.replay.forms import FORMS

import copy
import gzip
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ANSWER",
    "DEFAULT_PATHS",
    "SCHEMA",
    "MAX_TIMING_MS",
    "VERSION",
    "Session",
    "Timing",
    "Trace",
    "TraceError",
    "TraceTurn",
    "dumps",
    "expand_session",
    "history_key",
    "load",
    "loads",
    "path_problem",
    "save",
    "timing_problem",
    "validate",
]

SCHEMA = "harnesscheck.trace"
VERSION = 1
DEFAULT_PATHS: Mapping[str, str] = apis.Table(lambda module: module.PATH)  # each API's route, read when looked up
ANSWER = {"$answer": "previous"}
_TURN_KEYS = {"session", "turn", "api", "path", "headers", "request", "delta", "response", "timing",
              "expect", "synthetic", "meta"}
_DELTA_KEYS = {"base", "keep", "append", "set", "unset"}
_TIMING_FIELDS = ("at_ms", "offset_ms", "think_ms", "tool_ms", "duration_ms")
_TIMING_KEYS = set(_TIMING_FIELDS)


class TraceError(HarnesscheckError, ValueError):
    """A trace that does not follow the format; the message (one line) says where (line, session,
    turn); ``problems`` lists every problem found."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or [message]


def _invalid(problems: list[str]) -> TraceError:
    more = f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})" if len(problems) > 1 else ""
    return TraceError(f"invalid trace: {problems[0]}{more}", problems)


def history_key(api: str) -> str:
    """The request field that holds the conversation (``replay.forms``): ``input`` for responses, else
    ``messages`` (an API the kit does not know included)."""
    known = FORMS.get(api)
    return known.history_key if known is not None else "messages"


def text_history(api: str) -> bool:
    """The API's history field may be one string (``Form.text_history``: Responses' ``input``)."""
    known = FORMS.get(api)
    return known is not None and known.text_history


def is_answer_marker(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("$answer") == "previous" and len(entry) == 1


MAX_TIMING_MS = 86_400_000  # a day: no wait, schedule time or duration in a trace may be longer


def timing_problem(value: Any) -> str | None:
    """Why ``value`` is no timing in milliseconds the replayer can wait for, or None: it must be a
    number (not a bool), finite (no NaN, no Infinity), >= 0 and at most MAX_TIMING_MS (a day). The one
    rule of every reader and importer of timings (trace files, AIPerf and Mooncake files, captures)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return f"must be a number of milliseconds, got {value!r}"
    if not math.isfinite(value) or value < 0:
        return f"must be a number >= 0 (finite), got {value!r}"
    if value > MAX_TIMING_MS:
        return f"must be a number of at most {MAX_TIMING_MS} ms (a day), got {value!r}"
    return None


@dataclass(slots=True)
class Timing:
    """Milliseconds. ``at_ms``: earliest send time from the trace start (a fixed schedule; None =
    as soon as allowed); ``offset_ms``: when it was sent from the session start (informational);
    ``think_ms``: user think time before this turn, after the previous turn ended; ``tool_ms``:
    tool execution time before this turn. The replayer waits ``think_ms + tool_ms`` (scaled)
    after the previous turn, and no earlier than ``at_ms`` (scaled)."""

    at_ms: float | None = None
    offset_ms: float | None = None
    think_ms: float = 0.0
    tool_ms: float = 0.0
    duration_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in _TIMING_FIELDS:
            value = getattr(self, name)
            if value is not None and not (name in ("think_ms", "tool_ms") and value == 0):
                out[name] = _num(value)
        return out

    def problems(self) -> list[str]:
        """What in these timings no replay can wait for (``timing_problem``), as sentences."""
        return [f"timing {name!r} {problem}" for name in _TIMING_FIELDS
                if (value := getattr(self, name)) is not None and (problem := timing_problem(value))]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Timing:
        d = d or {}
        return cls(at_ms=d.get("at_ms"), offset_ms=d.get("offset_ms"), think_ms=float(d.get("think_ms") or 0),
                   tool_ms=float(d.get("tool_ms") or 0), duration_ms=d.get("duration_ms"))


def _num(v: float) -> float | int:
    return int(v) if float(v).is_integer() else round(float(v), 3)


@dataclass(slots=True, kw_only=True)
class TraceTurn:
    """One request of a session. Exactly one of ``request`` (the whole body) and ``delta``.

    ``response``: the answer in history form (the entries it adds to the next request: one
    assistant message for anthropic/chat, output items for responses), used for ``$answer`` in
    fixed mode. ``expect``: the answer's structure (``blocks``: kinds in order; ``tool_calls``:
    names; ``stop``). ``synthetic``: what an importer knew (e.g. Mooncake ``input_length``,
    ``hash_ids``, ``block_size``), kept so that export gives the same lines back.
    """

    session: str
    turn: int
    api: str = "chat"
    path: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    request: dict[str, Any] | None = None
    delta: dict[str, Any] | None = None
    response: list[Any] | None = None
    timing: Timing = field(default_factory=Timing)
    expect: dict[str, Any] | None = None
    synthetic: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not self.path:
            self.path = apis.APIS[self.api].PATH if self.api in apis.APIS else ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"session": self.session, "turn": self.turn, "api": self.api, "path": self.path}
        if self.headers:
            out["headers"] = dict(self.headers)
        if self.request is not None:
            out["request"] = self.request
        if self.delta is not None:
            out["delta"] = self.delta
        if self.response is not None:
            out["response"] = self.response
        timing = self.timing.to_dict()
        if timing:
            out["timing"] = timing
        for name in ("expect", "synthetic", "meta"):
            value = getattr(self, name)
            if value:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TraceTurn:
        return cls(
            session=str(d["session"]), turn=int(d["turn"]), api=d.get("api", "chat"), path=d.get("path", ""),
            headers=dict(d.get("headers") or {}), request=d.get("request"), delta=d.get("delta"),
            response=d.get("response"), timing=Timing.from_dict(d.get("timing")), expect=d.get("expect"),
            synthetic=d.get("synthetic"), meta=d.get("meta"),
        )


@dataclass(slots=True)
class Session:
    id: str
    turns: list[TraceTurn] = field(default_factory=list)

    @property
    def start_ms(self) -> float | None:
        return self.turns[0].timing.at_ms if self.turns else None

    def requests(self, answers: Mapping[int, list[Any]] | None = None) -> list[dict[str, Any]]:
        """Every turn's full request body (see ``expand_session``)."""
        return expand_session(self.turns, answers)


@dataclass(slots=True)
class Trace:
    sessions: list[Session] = field(default_factory=list)
    source: str = ""
    created: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def turns(self) -> list[TraceTurn]:
        return [t for s in self.sessions for t in s.turns]

    def session(self, sid: str) -> Session:
        for s in self.sessions:
            if s.id == sid:
                return s
        raise KeyError(sid)

    def header(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": SCHEMA, "version": VERSION, "source": self.source,
                               "created": self.created or _now_iso()}
        if self.meta:
            out["meta"] = self.meta
        return out

    @classmethod
    def build(cls, turns: Iterable[TraceTurn], *, source: str = "", meta: dict[str, Any] | None = None) -> Trace:
        """Group turns into sessions (first-seen order), turns sorted by number."""
        by: dict[str, Session] = {}
        for t in turns:
            by.setdefault(t.session, Session(t.session)).turns.append(t)
        for s in by.values():
            s.turns.sort(key=lambda t: t.turn)
        return cls(sessions=list(by.values()), source=source, created=_now_iso(), meta=dict(meta or {}))


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# -- expansion ---------------------------------------------------------------------------

def _apply_delta(
    prev: dict[str, Any], delta: Mapping[str, Any], api: str, answer: list[Any] | None,
    remap: Callable[[list[Any]], list[Any]] | None = None,
) -> dict[str, Any]:
    key = history_key(api)
    body = copy.deepcopy(prev)
    history = body.get(key)
    if not isinstance(history, list):
        raise TraceError(f"delta needs the previous request's {key!r} to be a list")
    keep = delta.get("keep")
    if keep is not None:
        history = history[: int(keep)]
    appended: list[Any] = []
    for entry in delta.get("append") or []:
        if is_answer_marker(entry):
            if answer is None:
                raise TraceError("delta refers to the previous answer, but the previous turn has none "
                                 "(no recorded response and no live answer)")
            appended.extend(copy.deepcopy(answer))
        else:
            appended.append(copy.deepcopy(entry))
    if remap is not None:
        appended = remap(appended)
    body[key] = history + appended
    for name, value in (delta.get("set") or {}).items():
        body[name] = copy.deepcopy(value)
    for name in delta.get("unset") or []:
        body.pop(name, None)
    return body


def expand_session(
    turns: list[TraceTurn], answers: Mapping[int, list[Any]] | None = None,
) -> list[dict[str, Any]]:
    """The full request body of every turn, deltas applied in order.

    ``answers`` (turn number -> answer in history form) overrides recorded responses (live mode);
    without it, ``$answer`` takes the previous turn's recorded ``response``.
    """
    out: list[dict[str, Any]] = []
    for i, t in enumerate(turns):
        if t.request is not None:
            out.append(copy.deepcopy(t.request))
            continue
        if i == 0 or t.delta is None:
            raise TraceError(f"session {t.session!r} turn {t.turn}: a delta needs a previous turn")
        prev_turn = turns[i - 1]
        answer = (answers or {}).get(prev_turn.turn, prev_turn.response)
        out.append(_apply_delta(out[-1], t.delta, t.api, answer))
    return out


def expand_turn(
    prev_request: dict[str, Any] | None, turn: TraceTurn, answer: list[Any] | None,
    remap: Callable[[list[Any]], list[Any]] | None = None,
) -> dict[str, Any]:
    """One turn's full request from the previous one actually sent (the replayer's step)."""
    if turn.request is not None:
        return copy.deepcopy(turn.request)
    if prev_request is None or turn.delta is None:
        raise TraceError(f"session {turn.session!r} turn {turn.turn}: a delta needs a previous turn")
    return _apply_delta(prev_request, turn.delta, turn.api, answer, remap)


def make_delta(prev: dict[str, Any], cur: dict[str, Any], api: str,
               answer_slot: tuple[int, int] | None = None) -> dict[str, Any] | None:
    """The delta that turns ``prev`` into ``cur``, or None when ``cur`` is best given whole.

    ``answer_slot`` (start, length) in ``cur``'s history: those entries become one ``$answer``
    marker (they must lie in the appended part).
    """
    key = history_key(api)
    ph, ch = prev.get(key), cur.get(key)
    if not isinstance(ph, list) or not isinstance(ch, list):
        return None
    keep = 0
    while keep < min(len(ph), len(ch)) and ph[keep] == ch[keep]:
        keep += 1
    if keep == 0 and ph:
        return None  # nothing shared: a new conversation, give it whole
    append: list[Any] = list(ch[keep:])
    if answer_slot is not None:
        start, length = answer_slot
        if start >= keep and length > 0:
            rel = start - keep
            append = append[:rel] + [dict(ANSWER)] + append[rel + length:]
    delta: dict[str, Any] = {"base": "previous"}
    if keep != len(ph):
        delta["keep"] = keep
    delta["append"] = append
    sets = {k: v for k, v in cur.items() if k != key and (k not in prev or prev[k] != v)}
    unset = [k for k in prev if k != key and k not in cur]
    if sets:
        delta["set"] = sets
    if unset:
        delta["unset"] = unset
    return delta


# -- validation ----------------------------------------------------------------------------

def _where(t: Mapping[str, Any], line: int | None) -> str:
    loc = f"line {line}: " if line is not None else ""
    return f"{loc}session {t.get('session')!r} turn {t.get('turn')!r}"


def validate_turn_dict(d: Any, line: int | None = None) -> list[str]:
    """Problems with one turn line, as sentences (empty when fine)."""
    loc = f"line {line}: " if line is not None else ""
    if not isinstance(d, dict):
        return [f"{loc}a turn line must be a JSON object, got {type(d).__name__}"]
    errs: list[str] = []
    where = _where(d, line)
    for name in ("session", "turn"):
        if name not in d:
            errs.append(f"{loc}missing required field {name!r}")
    if errs:
        return errs
    if not isinstance(d["session"], str) or not d["session"]:
        errs.append(f"{where}: 'session' must be a non-empty string")
    if not isinstance(d["turn"], int) or isinstance(d["turn"], bool) or d["turn"] < 0:
        errs.append(f"{where}: 'turn' must be an integer >= 0")
    unknown = set(d) - _TURN_KEYS
    if unknown:
        errs.append(f"{where}: unknown field(s) {sorted(unknown)} (known: {sorted(_TURN_KEYS)})")
    api = d.get("api", "chat")
    if api not in apis.APIS:
        errs.append(f"{where}: 'api' must be one of {list(apis.NAMES)}, got {api!r}")
    if "path" in d and (problem := path_problem(d["path"])):
        errs.append(f"{where}: 'path' {problem}")
    has_req, has_delta = d.get("request") is not None, d.get("delta") is not None
    if has_req == has_delta:
        errs.append(f"{where}: give exactly one of 'request' (the whole body) and 'delta'")
    if has_req:
        if not isinstance(d["request"], dict):
            errs.append(f"{where}: 'request' must be a JSON object")
    if has_delta:
        delta = d["delta"]
        if not isinstance(delta, dict):
            errs.append(f"{where}: 'delta' must be a JSON object")
        else:
            if delta.get("base") != "previous":
                errs.append(f"{where}: delta 'base' must be \"previous\"")
            bad = set(delta) - _DELTA_KEYS
            if bad:
                errs.append(f"{where}: unknown delta field(s) {sorted(bad)} (known: {sorted(_DELTA_KEYS)})")
            if "keep" in delta and (not isinstance(delta["keep"], int) or delta["keep"] < 0):
                errs.append(f"{where}: delta 'keep' must be an integer >= 0")
            if not isinstance(delta.get("append", []), list):
                errs.append(f"{where}: delta 'append' must be a list")
            if not isinstance(delta.get("set", {}), dict):
                errs.append(f"{where}: delta 'set' must be an object")
            if not isinstance(delta.get("unset", []), list):
                errs.append(f"{where}: delta 'unset' must be a list of field names")
    if has_req and isinstance(d["request"], dict):
        errs += _body_problems(d["request"], api if api in apis.APIS else "chat", f"{where}: request")
    if has_delta and isinstance(d["delta"], dict):
        delta = d["delta"]
        if not _objects(delta.get("append", [])):
            errs.append(f"{where}: delta 'append' entries must be JSON objects (history entries or "
                        "{\"$answer\": \"previous\"})")
        if isinstance(delta.get("set", {}), dict):
            errs += _body_problems(delta.get("set") or {}, api if api in apis.APIS else "chat",
                                   f"{where}: delta set", history=False)
        unset = delta.get("unset", [])
        if isinstance(unset, list) and not all(isinstance(x, str) for x in unset):
            errs.append(f"{where}: delta 'unset' must be a list of field names")
    if d.get("response") is not None and not _objects(d["response"]):
        errs.append(f"{where}: 'response' must be a list of history entries (JSON objects)")
    if "headers" in d:
        errs += _header_problems(d["headers"], where)
    for name in ("meta", "synthetic", "expect"):
        if d.get(name) is not None and not isinstance(d[name], dict):
            errs.append(f"{where}: {name!r} must be a JSON object")
    if isinstance(d.get("meta"), dict) and "output_tokens" in d["meta"] and not (
            isinstance(d["meta"]["output_tokens"], int) and not isinstance(d["meta"]["output_tokens"], bool)):
        errs.append(f"{where}: meta 'output_tokens' must be an integer")
    timing = d.get("timing")
    if timing is not None:
        if not isinstance(timing, dict):
            errs.append(f"{where}: 'timing' must be an object")
        else:
            bad = set(timing) - _TIMING_KEYS
            if bad:
                errs.append(f"{where}: unknown timing field(s) {sorted(bad)} (known: {sorted(_TIMING_KEYS)})")
            for k, v in timing.items():
                if v is not None and (problem := timing_problem(v)):
                    errs.append(f"{where}: timing {k!r} {problem}")
    return errs


def _objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, dict) for x in value)


def _body_problems(body: Mapping[str, Any], api: str, where: str, *, history: bool = True) -> list[str]:
    """What in a request body (or a delta's ``set``) the kit could not build on: the history a list of
    JSON objects (Responses' ``input`` may be a string), the system prompt a string or a list of
    objects, the tools a list of objects."""
    errs: list[str] = []
    key = history_key(api)
    if key in body:
        value = body[key]
        if not history:
            errs.append(f"{where}: {key!r} belongs in 'append' (the history), not in 'set'")
        elif not (_objects(value) or (text_history(api) and isinstance(value, str))):
            errs.append(f"{where}: {key!r} must be a list of JSON objects"
                        + (" or a string" if text_history(api) else ""))
    for name in ("system", "instructions"):
        if name in body and body[name] is not None and not (isinstance(body[name], str) or _objects(body[name])):
            errs.append(f"{where}: {name!r} must be a string or a list of JSON objects")
    if "tools" in body and body["tools"] is not None and not _objects(body["tools"]):
        errs.append(f"{where}: 'tools' must be a list of JSON objects")
    return errs


# A request target in origin form (RFC 9112 §3.2.1: absolute-path [ "?" query ]), of RFC 3986's
# characters: unreserved, sub-delims, ":", "@", "/", "?" and percent-encoded octets. No space, CR, LF,
# NUL, "#" or non-ASCII: the request line would be malformed, and the endpoint blamed for it.
_TARGET_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?%")
_HEX = frozenset("0123456789abcdefABCDEF")
MAX_PATH_CHARS = 8000  # RFC 9112 §3: a request line of at least 8000 octets should be supported


def path_problem(path: Any) -> str | None:
    """Why `path` cannot be a turn's request target (an origin-form path, as it goes on the request
    line), or None."""
    if not isinstance(path, str) or not path.startswith("/"):
        return f"must be a request path starting with '/', got {str(path)[:80]!r}"
    if path.startswith("//"):
        return f"must be a path, not a network path ('//host'), got {path[:80]!r}"
    if len(path) > MAX_PATH_CHARS:
        return f"is longer than {MAX_PATH_CHARS} characters"
    bad = next((c for c in path if c not in _TARGET_CHARS), None)
    if bad is not None:
        return (f"holds {bad!r}, which a request target cannot (a space, a line break, '#', non-ASCII: "
                f"percent-encode it), got {path[:80]!r}")
    for n, c in enumerate(path):
        if c == "%" and not (len(path) > n + 2 and path[n + 1] in _HEX and path[n + 2] in _HEX):
            return f"holds a '%' that is not a percent-encoded octet, got {path[:80]!r}"
    return None


# RFC 9110 field names are tokens; field values hold no CR, LF or NUL (and go on the wire as Latin-1)
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _header_problems(headers: Any, where: str) -> list[str]:
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        return [f"{where}: 'headers' must map names to strings"]
    errs: list[str] = []
    for name, value in headers.items():
        if not name or not set(name) <= _TOKEN_CHARS:
            errs.append(f"{where}: header name {name[:60]!r} is not an HTTP token (letters, digits, "
                        "!#$%&'*+-.^_`|~)")
        elif any(c in value for c in "\r\n\0"):
            errs.append(f"{where}: header {name!r} holds a line break or NUL (HTTP cannot send it)")
        elif any(ord(c) > 0xFF for c in value):
            errs.append(f"{where}: header {name!r} holds characters outside Latin-1 (HTTP cannot send them)")
    return errs


def validate(trace: Trace) -> list[str]:
    """Problems across the trace (numbering, deltas that cannot expand), as sentences."""
    errs: list[str] = []
    seen: set[str] = set()
    for s in trace.sessions:
        if s.id in seen:
            errs.append(f"session {s.id!r} appears twice")
        seen.add(s.id)
        numbers = [t.turn for t in s.turns]
        if numbers != list(range(len(numbers))):
            errs.append(f"session {s.id!r}: turns must be numbered 0..{len(numbers) - 1} without gaps "
                        f"or repeats, got {numbers}")
            continue
        for t in s.turns:
            errs += validate_turn_dict(t.to_dict())
        if s.turns and s.turns[0].delta is not None:
            errs.append(f"session {s.id!r} turn 0: the first turn must give the whole request")
            continue
        try:
            answers: dict[int, list[Any]] = {t.turn: [] for t in s.turns if t.response is None}  # live slots: expand shape only
            expand_session(s.turns, answers)
        except TraceError as exc:
            errs.append(f"session {s.id!r}: {exc}")
    return errs


# -- load / save ---------------------------------------------------------------------------

def loads(text: str, *, check: bool = True) -> Trace:
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if not lines:
        raise TraceError("empty trace: expected a header line")
    n0, first = lines[0]
    try:
        head = json.loads(first)
    except ValueError as exc:
        raise TraceError(f"line {n0}: header is not JSON: {exc}") from exc
    except RecursionError:
        raise TraceError(f"line {n0}: header is JSON nested too deeply") from None
    if not isinstance(head, dict) or head.get("schema") != SCHEMA:
        raise TraceError(f"line {n0}: expected a header with \"schema\": {SCHEMA!r}, got {first[:120]!r}")
    if head.get("version") != VERSION:
        raise TraceError(f"line {n0}: unsupported trace version {head.get('version')!r} (this kit reads {VERSION})")
    turns: list[TraceTurn] = []
    errs: list[str] = []
    for n, ln in lines[1:]:
        try:
            d = json.loads(ln)
        except ValueError as exc:
            errs.append(f"line {n}: not JSON: {exc}")
            continue
        except RecursionError:
            errs.append(f"line {n}: JSON nested too deeply")
            continue
        problems = validate_turn_dict(d, n)
        if problems:
            errs += problems
            continue
        turns.append(TraceTurn.from_dict(d))
    if errs:
        raise _invalid(errs)
    trace = Trace.build(turns, source=head.get("source", ""), meta=head.get("meta"))
    trace.created = head.get("created", "")
    if check:
        problems = validate(trace)
        if problems:
            raise _invalid(problems)
    return trace


#: The most a trace or AIPerf file may hold once decompressed (a gzip bomb stops here, with its name).
MAX_FILE_BYTES = 1 << 30


def read_file_text(path: str | Path, *, limit: int = MAX_FILE_BYTES) -> str:
    """A file's text, gunzipped when it starts with the gzip magic bytes (any name), at most ``limit``
    bytes once decompressed (protocol.wire.files: a regular file only). TraceError for anything else:
    not a regular file (a symlink to /dev/zero), a broken gzip stream, a file past the limit, text
    that is not UTF-8; OSError when the file cannot be opened."""
    try:
        return files.read_text(path, limit=limit, gunzip=True)
    except files.NotReadable as exc:
        raise TraceError(f"{path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text (nor gzip): {exc}") from None


def load(path: str | Path, *, check: bool = True) -> Trace:
    """A trace file; gzip-compressed ones (told by the magic bytes, whatever the name) too."""
    return loads(read_file_text(path), check=check)


def dumps(trace: Trace) -> str:
    lines = [json.dumps(trace.header(), ensure_ascii=False)]
    for s in trace.sessions:
        for t in s.turns:
            lines.append(json.dumps(t.to_dict(), ensure_ascii=False))
    return "\n".join(lines) + "\n"


def save(trace: Trace, path: str | Path) -> Path:
    """Write the trace; a name ending in ``.gz`` is written gzip-compressed."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    data = dumps(trace).encode("utf-8")
    p.write_bytes(gzip.compress(data, mtime=0) if p.suffix == ".gz" else data)
    return p
