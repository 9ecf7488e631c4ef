"""What every API module in `protocol/apis/` offers (the `Api` protocol), the tool call it reports,
and the fold over a recorded stream that all of them share.

An API module is the kit's one home for what it knows of one wire API: its route and headers, how a
request is built (first turn, follow-up with tool results), the one pure fold `accumulate(event,
snapshot)` that turns the stream's events into a snapshot of the answer, the rule for when a tool call
is complete, and what an answer holds (tool calls, usage, stop reason, content). Everything else in the
kit (the grammar validators, the replay client and executor, the benchmarks, the client runner, the
history witnesses) asks the API module, or the registry (`apis.APIS`), so a fourth API is one new module
(with its server frontend; what else it takes to be checked: docs/architecture.md, "one home per API";
tests/conformance/test_fourth_api.py registers a throwaway one).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard

from harnesscheck.protocol.wire.sse import SSEFrame
from harnesscheck.protocol.wire.transcript import Transcript
from harnesscheck.scenarios.loader import Scenario

ANTHROPIC_VERSION = "2023-06-01"
Snapshot = dict[str, Any] | None  # a stream's fold so far (None before its first event)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an answer, in stream order.

    ``key`` identifies the call within its stream (content block index, tool-call index, output index);
    ``index`` is its position among the answer's tool calls; ``arguments`` the JSON text as sent (a
    parsed Anthropic input is dumped again); ``complete`` whether the API's rule says the call is done
    (always true for a non-streamed answer), and ``source`` the event that made it so.
    """

    key: int
    index: int
    id: str
    name: str
    arguments: str
    complete: bool = True
    source: str = ""


@dataclass(frozen=True, slots=True)
class Form:
    """One API's request shape as replay builds and reads it (traces, capture, import, replay)."""

    history_key: str  # the request field that holds the conversation
    system_field: str | None  # the top-level field of a system prompt; None: a leading system message
    system_field_text_only: bool  # the field takes a string only (a block list goes in as a system message)
    text_part: str  # the type of a text content part in a request
    key_header: tuple[str, str]  # the header a replay sends the API key in, and its value ({key}: the key)
    roles: tuple[str, ...] | None = None  # the message roles the history admits (None: any)
    stream_fields: dict[str, Any] = field(default_factory=dict)  # what a streamed request adds
    required_max_tokens: int | None = None  # the token limit put in when a trace gives none (a required field)
    model_items: frozenset[str] = frozenset()  # history item types that are the model's output (besides assistant)
    one_answer_entry: bool = True  # an answer is one history entry (an assistant message)
    chat_messages: bool = False  # the history is OpenAI chat messages
    version_headers: dict[str, str] = field(default_factory=dict)  # headers the API requires on every request
    call_id_prefix: str = "call"  # how the API's tool call ids start
    text_history: bool = False  # the history field may be one string (Responses' input)

    def model_entry(self, entry: Any) -> bool:
        """The history entry is the model's output (part of an answer)."""
        return isinstance(entry, dict) and (entry.get("role") == "assistant"
                                            or entry.get("type") in self.model_items)



class Api(Protocol):
    """The members of each API module (anthropic.py, chat.py, responses.py)."""

    NAME: str
    PATH: str
    PREFIX: str
    LABEL: str
    SDK: str  # the official SDK package that speaks the API ("anthropic", "openai")
    SIGNS_THINKING: bool  # the endpoint signs reasoning the client must send back (Anthropic thinking)
    MIN_OUTPUT_TOKENS: int  # the smallest output limit the API accepts
    MAX_TOKENS_FIELD: str  # the request field of the output limit
    LENGTH_STOP: str  # stop_reason() of an answer cut by its output limit
    # Per-API knowledge other parts of the kit read through the registry (issue 32: no table keyed by an
    # API's name outside this package):
    GRAMMAR: str  # the module of the API's stream validator (grammar.module_for imports it by this name)
    ALIASES: tuple[str, ...]  # other names the grammar lookup accepts ("messages", "openai-chat", ...)
    ANSWER_ENDS: tuple[str, ...]  # frame types after which a client has its whole answer (Chat's "[DONE]")
    BAD_REQUESTS: tuple[tuple[str, Any], ...]  # (what, body) the reference refuses: <P>-ERR-001 wants a 4xx
    ALLOWED_REQUESTS: tuple[tuple[str, dict[str, Any]], ...]  # (what, body) allowed: <P>-ERR-001:allowed

    def headers(self, api_key: str | None = None) -> dict[str, str]: ...
    def tools(self, scenario: Scenario) -> list[dict[str, Any]]: ...
    def tool(self, spec: dict[str, Any], *, strict: bool | None = None) -> dict[str, Any]: ...
    def tool_choice(self, mode: str, name: str = "") -> Any: ...  # modes: auto, required, named, none
    def without_parallel(self, body: dict[str, Any]) -> dict[str, Any]: ...
    PARALLEL_FIELD: str  # the request field without_parallel sets
    def cut_answer(self, name: str, arguments: str) -> dict[str, Any]: ...  # a non-streamed answer, one call cut
    def first(self, scenario: Scenario, model: str, *, stream: bool = True) -> dict[str, Any]: ...
    def follow(self, body: dict[str, Any], answer: dict[str, Any], scenario: Scenario, turn: int) -> dict[str, Any]: ...
    def accumulate(self, event: Any, snapshot: dict[str, Any] | None) -> dict[str, Any] | None: ...
    # accumulate without the per-event record (``_g``, ``_event``, ``_at``, ``_said``, ``_closed``): the same
    # snapshot otherwise, what the answer reads (`Reading.snapshot`); an API that records nothing: accumulate
    def place(self, event: Any, snapshot: dict[str, Any] | None) -> dict[str, Any] | None: ...
    def fold_input(self, frame: SSEFrame) -> Any: ...  # what the fold takes of a frame (base.fold_input)
    def final_message(self, source: Any) -> dict[str, Any] | None: ...
    def tool_calls(self, answer: dict[str, Any] | None) -> list[ToolCall]: ...
    def is_content(self, event: Any) -> bool: ...
    def error_of(self, event: Any) -> str | None: ...
    # answers and requests as the history witnesses and the session see them
    def final_answer(self, source: Any) -> dict[str, Any] | None: ...
    def parts(self, answer: dict[str, Any]) -> list[tuple[str, str]]: ...
    def usage(self, answer: dict[str, Any]) -> dict[str, Any]: ...
    def usage_tokens(self, answer: dict[str, Any]) -> tuple[int, int, int]: ...
    def stop_reason(self, answer: dict[str, Any]) -> str | None: ...
    def rewritten(self, answer: dict[str, Any]) -> dict[str, Any] | None: ...
    def without_reasoning(self, answer: dict[str, Any]) -> dict[str, Any] | None: ...
    def missing_calls(self, answer: dict[str, Any]) -> str: ...  # a call the stop reason names, not in the answer
    def kit_answer(self, scenario: Scenario, *, signature: str = "") -> dict[str, Any]: ...
    def thinking_on(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def with_system_prefix(self, body: dict[str, Any], prefix: str) -> dict[str, Any]: ...
    def append_user(self, body: dict[str, Any], user: str) -> dict[str, Any]: ...
    def tokenize_fields(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def is_error_body(self, body: Any) -> bool: ...
    def malformed_history(self, body: Any) -> str: ...  # a sent-back call whose arguments are no JSON object
    # what the replay client reads from a stream's snapshot, and the request shape of traces and capture
    FORM: Form
    PER_CALL_END: bool  # the wire marks each tool call's end (Chat's does not: the next index or the finish)
    stream_grown: Callable[[Snapshot, Snapshot, list[str]], None] | None  # logs part order where none is kept
    def stream_history(self, snap: Snapshot) -> list[Any]: ...
    def stream_structure(self, snap: Snapshot, kinds: list[str]) -> dict[str, Any]: ...
    def stream_usage(self, snap: Snapshot) -> dict[str, Any]: ...
    def stream_stop(self, snap: Snapshot) -> str | None: ...
    def stream_ended(self, snap: Snapshot) -> bool: ...
    def stream_error(self, event: Any) -> str | None: ...
    def stream_part(self, snap: Snapshot, key: Any) -> str | None: ...  # a part (`_at`) by name
    def answer_text(self, answer: list[Any] | None) -> str: ...
    def answer_call_ids(self, answer: list[Any] | None) -> list[str]: ...
    # what a synthetic agent session writes (replay/workloads.py): the first request, history entries
    def agent_request(self, model: str, system: str, tools: list[Any], new: list[Any],
                      max_tokens: int) -> dict[str, Any]: ...
    def history_answer(self, texts: list[str], calls: list[tuple[str, Any]]) -> list[dict[str, Any]]: ...
    def history_results(self, results: list[tuple[str, str]]) -> list[dict[str, Any]]: ...
    # what the kit's levers (conformance/levers.py) do to an opening request on this API; None where the
    # API has no such setting (a lever that has none for an API is never pulled on it)
    def is_opening(self, body: dict[str, Any]) -> bool: ...  # no earlier answer in the request
    def forcing_refused(self, body: dict[str, Any]) -> bool: ...  # a forced call refused (Anthropic thinking)
    def least_limit(self, body: dict[str, Any]) -> int: ...  # the smallest output limit this request takes
    lever_thinking_off: Callable[[dict[str, Any]], dict[str, Any] | None]
    lever_thinking_on: Callable[[dict[str, Any]], dict[str, Any] | None]
    lever_reasoning_minimal: Callable[[dict[str, Any]], dict[str, Any] | None] | None
    lever_prefill: Callable[[dict[str, Any], str], dict[str, Any] | None] | None
    # a recorded client session replayed (conformance/client_replay.py)
    def is_stream_event(self, e: dict[str, Any]) -> bool: ...  # a recorded data object is a stream event
    def answer_values(self, answer: dict[str, Any]) -> list[tuple[str, Any]]: ...  # what the next request carries
    # a refused over-long prompt (conformance/window.py): the marker the clients match; a 200 stream's verdict
    def overflow_marker_problem(self, body: Any) -> str | None: ...
    def streamed_refusal(self, frames: list[Any]) -> list[tuple[str, str]] | None: ...  # None: not a refusal form


def headers(api_key: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """JSON request headers with the key both ways (x-api-key and Bearer), plus an API's own."""
    out = {"content-type": "application/json", **(extra or {})}
    if api_key:
        out["x-api-key"] = api_key
        out["authorization"] = f"Bearer {api_key}"
    return out


def frames_and_request(source: Any, request: Any = None) -> tuple[list[SSEFrame], Any]:
    """A stream's frames and its request body: from a Transcript, or a sequence of SSEFrames.

    Anything else yields no frames: a validator never raises on its input."""
    if isinstance(source, Transcript):
        return list(source.frames), request if request is not None else source.request_body
    if isinstance(source, Iterable) and not isinstance(source, str | bytes | dict):
        return [f for f in source if isinstance(f, SSEFrame)], request
    return [], request


def fold(source: Any, accumulate: Callable[[Any, Any], Any]) -> dict[str, Any] | None:
    """Fold a recorded stream's JSON events with an API's pure `accumulate(event, snapshot)` (an API module
    reads a stream through its `Reading` instead: one fold per transcript for all its readers)."""
    frames, _ = frames_and_request(source)
    snap: dict[str, Any] | None = None
    for f in frames:
        if f.kind == "event" and isinstance(f.json, dict):
            snap = accumulate(f.json, snap)
    return snap


def fold_input(frame: SSEFrame) -> Any:
    """What an API's fold takes of a frame: its JSON object (None: the fold takes nothing). An API whose
    wire has frames of its own (Chat's Dynamo `tool_call_dispatch`) names its own `fold_input`."""
    return frame.json if frame.kind == "event" and isinstance(frame.json, dict) else None


RECORD = frozenset({"_g", "_event", "_at", "_said", "_closed"})  # what `accumulate` adds to `place`'s snapshot


@dataclass(slots=True)
class _Path:
    """One fold of a stream from one start: the inputs folded so far and the snapshot after each."""

    start: Snapshot
    inputs: list[Any] = field(default_factory=list)
    snaps: list[Snapshot] = field(default_factory=list)


class Fold:
    """One reader's fold over a `Reading`: ``fold(data)`` returns the snapshot after ``data``, taken from
    the stream's one fold while the reader folds what it folded (the same inputs, in the same order), its
    own from the first input that differs (a reader that skips or adds an event: only on a broken stream).
    A reader that goes past the end of the stream's fold extends it for the next reader."""

    __slots__ = ("_accumulate", "_n", "_own", "_path", "snap")

    def __init__(self, accumulate: Callable[[Any, Any], Any], path: _Path) -> None:
        self._accumulate, self._path, self._n, self._own = accumulate, path, 0, False
        self.snap: Snapshot = path.start

    def __call__(self, data: Any) -> Snapshot:
        path, n = self._path, self._n
        if not self._own:
            if n < len(path.inputs):
                known = path.inputs[n]
                if known is data or known == data:
                    self._n = n + 1
                    self.snap = path.snaps[n]
                    return self.snap
                self._own = True
            else:
                self.snap = self._accumulate(data, self.snap)
                path.inputs.append(data)
                path.snaps.append(self.snap)
                self._n = n + 1
                return self.snap
        self.snap = self._accumulate(data, self.snap)
        return self.snap


class Reading:
    """A stream read once with its API's fold, that every reader of the transcript shares: the final
    answer (``snapshot``), the grammar validator (``fold(start)``, ``findings``), the trace of parts and
    tool calls (``trace``: paths, dispatch checks, timeline). Memoised on the Transcript (``Reading.of``);
    a transcript still growing (frames appended) gets a fresh one."""

    __slots__ = ("_findings", "_inputs", "_paths", "_snapshot", "_trace", "api", "events", "key")

    def __init__(self, api: Any, events: list[SSEFrame], key: tuple[int, int] = (0, 0)) -> None:
        self.api = api
        self.events = events
        self.key = key
        self._paths: list[_Path] = []
        self._trace: StreamTrace | None = None
        self._findings: Any = None
        self._inputs: list[tuple[int, Any]] | None = None
        self._snapshot: tuple[Snapshot] | None = None

    @classmethod
    def of(cls, api: Any, source: Any) -> Reading:
        """The reading of a Transcript (memoised on it) or of a list of frames (not memoised)."""
        if not isinstance(source, Transcript):
            frames, _ = frames_and_request(source)
            return cls(api, [f for f in frames if f.kind == "event"])
        key = (id(source.frames), len(source.frames))
        memo = source.readings
        if memo is None:
            memo = source.readings = {}
        known = memo.get(api.NAME)
        if isinstance(known, Reading) and known.api is api and known.key == key:
            return known
        made = memo[api.NAME] = cls(api, source.events, key)
        return made

    def fold(self, start: Snapshot = None) -> Fold:
        """A reader's fold from ``start`` (None, or the API's recording start)."""
        path = next((p for p in self._paths if p.start == start), None)
        if path is None:
            path = _Path(start)
            self._paths.append(path)
        return Fold(self.api.accumulate, path)

    def inputs(self) -> list[tuple[int, Any]]:
        """(frame index, what the fold takes) for every frame the fold takes (read once)."""
        if self._inputs is None:
            take = self.api.fold_input
            self._inputs = [(f.index, data) for f in self.events if (data := take(f)) is not None]
        return self._inputs

    @property
    def snapshot(self) -> Snapshot:
        """The snapshot after every JSON object of the stream (what `final_message` reads; read once): taken
        from the stream's recorded fold when a reader (the validator, the trace) has folded those objects
        already, else folded with the API's ``place`` (the fold without its per-event record: the answer
        alone costs what it cost before the record, issue 44; the record is built when a reader asks).
        Either way without the record's keys (`RECORD`)."""
        if self._snapshot is None:
            self._snapshot = (self._answer(),)
        return self._snapshot[0]

    def _answer(self) -> Snapshot:
        path = next((p for p in self._paths if p.start is None), None)
        if path is not None or self._inputs is not None:
            data = [d for _, d in self.inputs() if isinstance(d, dict)]
            n = len(data)
            if path is not None and n and len(path.inputs) >= n and all(
                    a is b or a == b for a, b in zip(path.inputs, data, strict=False)):
                snap = path.snaps[n - 1]
                return None if snap is None else {k: v for k, v in snap.items() if k not in RECORD}
        else:  # the answer alone: folded as the inputs are taken, no list of them made
            take, place = self.api.fold_input, self.api.place
            out: Snapshot = None
            for f in self.events:
                d = take(f)
                if isinstance(d, dict):
                    out = place(d, out)
            return out
        place = self.api.place
        out = None
        for d in data:
            out = place(d, out)
        return out

    @property
    def trace(self) -> StreamTrace:
        if self._trace is None:
            self._trace = trace(self.api, self.inputs(), self)
        return self._trace

    def findings(self, validate: Callable[[Any, Any], Any], source: Transcript) -> Any:
        """The validator's findings on the transcript with its own request (memoised)."""
        if self._findings is None:
            self._findings = validate(source, None)
        return self._findings


@dataclass(slots=True)
class CallTrace:
    """One tool call of a stream as the API's fold placed it: ``frames`` every frame the fold placed in
    it (its start, argument deltas, its end event where the wire has one), ``complete`` the frame where
    the API's rule (``_complete``) made it complete (None: never)."""

    key: Any
    name: str
    frames: list[int] = field(default_factory=list)
    complete: int | None = None

    @property
    def ended(self) -> int:
        """The frame where the model finished the call: the last frame placed in it up to the frame that
        completed it (Chat marks no call's end: its last delta, before the next index or the finish that
        tell a client so); -1 for a call with no frame."""
        upto = [n for n in self.frames if self.complete is None or n <= self.complete]
        return max(upto, default=self.complete if self.complete is not None else -1)


@dataclass(slots=True)
class StreamTrace:
    """A stream read once, with the API's fold: per frame, the parts it placed something in and what it
    closed; the tool calls in order of appearance; the text said per channel ("reasoning", "text")."""

    calls: list[CallTrace] = field(default_factory=list)
    said: list[tuple[str, str, int]] = field(default_factory=list)  # (channel, text, frame)
    # (frame, the parts it placed something in, the parts it closed)
    placed: list[tuple[int, tuple[Any, ...], tuple[Any, ...]]] = field(default_factory=list)
    names: dict[Any, str | None] = field(default_factory=dict)  # each part as the API names it at its start
    snapshot: Snapshot = None


def trace(api: Any, events: Iterable[tuple[int, Any]], reading: Reading | None = None) -> StreamTrace:
    """Fold ``(frame index, decoded data)`` pairs with ``api.accumulate`` (the ``reading``'s one fold when
    given) and read, after each, what the fold recorded (``_at``, ``_said``, ``_closed``, ``_complete``)
    and the API's tool calls."""
    out = StreamTrace()
    calls: dict[Any, CallTrace] = {}
    snap: Snapshot = None
    name = getattr(api, "stream_part", None)
    step = reading.fold() if reading is not None else None
    for index, data in events:
        if not isinstance(data, dict):
            continue
        snap = step(data) if step is not None else api.accumulate(data, snap)
        if snap is None:
            continue
        parts, closed = _keys(snap.get("_at")), _keys(snap.get("_closed"))
        out.placed.append((index, parts, closed))
        for key in parts:
            if key not in out.names:
                out.names[key] = name(snap, key) if name is not None else None
        out.said += [(channel, said, index) for channel, said in snap.get("_said") or ()]
        for call in api.tool_calls(snap):
            known = calls.get(call.key)
            if known is None:
                known = calls[call.key] = CallTrace(call.key, call.name)
                out.calls.append(known)
                known.frames.append(index)
            elif call.key in parts and not snap.get("_said"):  # words said in a call's part are words
                known.frames.append(index)
            known.name = known.name or call.name
            if call.complete and known.complete is None:
                known.complete = index
    out.snapshot = snap
    return out


def _keys(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else () if value is None else (value,)


def unplaced(snapshot: dict[str, Any], what: str) -> dict[str, Any]:
    """The snapshot with one more event it could not place (a short description), not mutated."""
    return {**snapshot, "_unplaced": (*snapshot.get("_unplaced", ()), what)}


def completed(snapshot: dict[str, Any], key: int, source: str) -> dict[str, Any]:
    """The snapshot with tool call ``key`` marked complete by ``source`` (the first such event wins)."""
    done = snapshot.get("_complete") or {}
    if key in done:
        return snapshot
    return {**snapshot, "_complete": {**done, key: source}}


def public(obj: dict[str, Any]) -> dict[str, Any]:
    """An object without the fold's private keys (those starting with an underscore)."""
    return {k: v for k, v in obj.items() if not k.startswith("_")}


def is_openai_error(body: Any) -> bool:
    """The body is OpenAI's error shape (Chat Completions and Responses): ``{"error": {"message", "type"}}``."""
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and isinstance(error.get("message"), str) and "type" in error


def not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def finite_float(literal: str) -> float:
    """json.loads' parse_float for outside data: a number past a float's range (`1e999`, vLLM 0.32's random
    model under a forced choice) reads as inf in Python, which json.dumps can never send again."""
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"{literal[:40]} is out of a float's range")
    return value


def json_object_text(arguments: Any) -> bool:
    """Whether tool-call arguments as sent (text) are a JSON object (RFC 8259: no NaN, no Infinity)."""
    try:
        return isinstance(json.loads(arguments, parse_constant=not_json), dict)
    except (TypeError, ValueError, RecursionError):
        return False


def is_int(v: Any) -> TypeGuard[int]:
    """An int that is not a bool (JSON's numbers, as the fold reads an index)."""
    return isinstance(v, int) and not isinstance(v, bool)


def text(v: Any) -> str:
    return v if isinstance(v, str) else ""


REVISED = "(revised) "  # what `rewritten(answer)` puts before the first reasoning
MAX_TOKENS = 4096  # the most any scenario asks for
MIN_BUDGET = 64  # tokens: a real model's tool call or short answer fits; the scripted ones are sized by script

# What a user types to get a scenario's path (the scripted engine still finds the scenario: its first
# user text is kept, these words follow it). A model takes a path far more often when asked plainly.
PLAIN_ASKS = {
    "interleaved": "Do both steps in this one turn: think, then call read_file on src/math.py; think again, "
                   "then call run_tests on tests/test_math.py.",
    "long_reasoning": "Do both steps in this one turn: reason at length, then call bash to build; reason again, "
                      "then call bash to list src.",
    "parallel_tools": "Call Read twice in this one turn, once for package.json and once for tsconfig.json.",
    "long_agent_turn": "Reason step by step first, then call read_file on src/parser.py.",
}


def user_text(scenario: Scenario) -> str:
    """The first user message: the scenario's own words, then the plain ask for its path, if any."""
    user = scenario.turns[0].user or ""
    ask = PLAIN_ASKS.get(scenario.id)
    return f"{user} {ask}" if ask else user


def output_budget(scenario: Scenario) -> int:
    """The output limit a scenario's answers need, plus a margin: its longest scripted turn counted at
    one token per two characters plus 32 (the reference server's tokenizer packs the scripts at 2.2-3.2
    characters a token, measured; English BPE at about 4), at least MIN_BUDGET, at most MAX_TOKENS.
    A model that never emits its end token then stops after as many tokens as the script needs, not
    after 4,096 (issue 36: a 270M model at a few tokens a second spent minutes on 300-token answers)."""
    longest = 0
    for turn in scenario.turns:
        size = 0
        for part in turn.model:
            size += len(part.text) + len(part.arguments) + len(part.name) + 16
        longest = max(longest, size)
    return max(MIN_BUDGET, min(MAX_TOKENS, longest // 2 + 32))


def next_user(scenario: Scenario, turn: int) -> str | None:
    """The user text of ``turn``, if the scenario has one."""
    return scenario.turns[turn].user if turn < len(scenario.turns) else None


def snapshot_usage(snap: Snapshot) -> dict[str, Any]:
    """The usage a stream's snapshot holds so far."""
    return dict((snap or {}).get("usage") or {})


def snapshot_ended(snap: Snapshot) -> bool:
    """The API's end event arrived (the stream is whole)."""
    return bool((snap or {}).get("_end"))


# -- the kit's levers (conformance/levers.py): what each does to one API's opening request -------------

def set_absent(body: dict[str, Any], **fields: Any) -> dict[str, Any] | None:
    """`body` with `fields` added; None when the body set one of them itself (a lever never changes those)."""
    if any(k in body for k in fields):
        return None
    return {**body, **fields}


def reasoning_effort(body: dict[str, Any], effort: str, summary: bool = False) -> dict[str, Any] | None:
    """`body` with ``reasoning.effort`` (and a summary asked for); None when the body set an effort itself."""
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and "effort" in reasoning:
        return None
    extra = {"summary": "auto"} if summary and not (reasoning or {}).get("summary") else {}
    return {**body, "reasoning": {**(reasoning or {}), "effort": effort, **extra}}


def is_opening_messages(body: dict[str, Any]) -> bool:
    """A messages-form request holds no earlier answer (no assistant or tool message)."""
    messages = body.get("messages")
    return isinstance(messages, list) and not any(
        isinstance(m, dict) and m.get("role") in ("assistant", "tool") for m in messages)


# -- a refused over-long prompt (conformance/window.py) ------------------------------------------------
OVERFLOW_CODE = "context_length_exceeded"  # OpenAI's error.code for a prompt over the window


def openai_overflow_problem(body: Any) -> str | None:
    """Why an OpenAI-shape refusal lacks the overflow marker the OpenAI clients match, or None."""
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    if code != OVERFLOW_CODE:
        return f"error.code is {code!r}, not {OVERFLOW_CODE!r} (what the OpenAI clients match)"
    return None


def refused_in_stream(what: str, error: Any, marker: str | None, why: str) -> list[tuple[str, str]]:
    """(part, problem) for an over-long prompt answered HTTP 200 and then refused inside the stream by
    ``what`` (an error event or chunk; ``error``: its error object), judged as an HTTP error is: not the 400
    before any stream that the clients act on (part "", ``why`` says what the client does instead), and
    ``marker``, the API's ``overflow_marker_problem`` of the error (part "marker"; None: it carries it)."""
    shown = json.dumps(error, ensure_ascii=False)[:200] if error is not None else "no error object"
    problems = [("", f"refused inside a 200 stream with {what} ({shown}): the clients act on a 400 in the API's "
                     f"error shape, sent before any stream ({why})")]
    if marker is not None:
        problems.append(("marker", f"the error inside a 200 stream: {marker}"))
    return problems
