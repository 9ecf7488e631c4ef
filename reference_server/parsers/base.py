"""Base classes for the stream parsers: reasoning first, then tool calls (STYLE.md, rule 7).

Each parser knows its model format both ways: `feed`/`finish` parse model text incrementally into
events, and `render` writes parts back in the exact raw form the model would have produced. The
history rebuild and the scripted engine both use `render`, so the round trip
`parse(render(parts)) == parts` is what keeps turn N's output a token prefix of turn N+1's prompt.

Whitespace rule shared by all parsers: a text or reasoning segment is trimmed at its ends (leading
whitespace is dropped, trailing whitespace is held back until non-space text follows, and dropped
when a tag or the end comes instead); whitespace inside a segment is kept. Renderers put their own
separators around segments, so scenario text never needs leading or trailing whitespace.

Feeding a text split at any byte (any character) must give the same joined events as feeding it
whole; partial tags are held back, never emitted as text.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from harnesscheck.reference_server.conversation import ToolSpec
from harnesscheck.reference_server.events import ParsedEvent, TextDelta, ToolCall, ToolCallStart


class _TextSplitter(ABC):
    """Model text fed piece by piece (`feed`) turned into events; `finish` releases what is held back
    when the stream ends."""

    name: str = ""

    @abstractmethod
    def feed(self, text: str) -> list[ParsedEvent]: ...

    @abstractmethod
    def finish(self) -> list[ParsedEvent]: ...


class ReasoningParser(_TextSplitter):
    """Splits model text into ReasoningDelta and TextDelta events.

    `start_in_reasoning`: the chat template's generation prompt already opened the reasoning
    section (e.g. DeepSeek-R1 ends it with `<think>\\n`), so output begins inside reasoning.
    """

    def __init__(self, *, start_in_reasoning: bool = False) -> None:
        self.start_in_reasoning = start_in_reasoning

    @abstractmethod
    def render(self, reasoning: str) -> str:
        """Raw model text for one reasoning segment, separators included."""


class ToolParser(_TextSplitter):
    """Splits the non-reasoning text into TextDelta and ToolCallStart/ArgsDelta/End events.

    `tools` gives parameter types (qwen3_coder needs them to turn raw values into JSON);
    `id_factory(index)` makes the call id, so ids are deterministic per request.
    """

    def __init__(self, *, tools: Sequence[ToolSpec] = (), id_factory: Callable[[int], str]) -> None:
        self.tools = {t.name: t for t in tools}
        self.id_factory = id_factory

    @abstractmethod
    def finish(self, *, cut: bool = False) -> list[ParsedEvent]:
        """The end of the text; ``cut``: the output limit ended it (TaggedToolParser.finish)."""

    @abstractmethod
    def render(self, call: ToolCall) -> str:
        """Raw model text for one tool call, separators included."""

    def render_text(self, text: str) -> str:
        """Raw model text for one text segment, separators included."""
        return text + "\n\n"

    def end_text_segment(self) -> list[ParsedEvent]:
        """The text fed so far was cut off by something this parser does not see (a reasoning
        segment): release a held-back partial tag as text and close the text segment. Inside a
        tool call it does nothing. The stream parser calls it before passing a ReasoningDelta on, once
        per cut: not again until text was fed (a second call would have nothing left to do).
        """
        return []


# --- shared helpers -------------------------------------------------------------------------------


def held_suffix(text: str, tags: Sequence[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of one of `tags`.

    That suffix may still become a tag, so a streaming parser holds it back until more text comes.
    Only a suffix that starts with a tag's first character can qualify, so the search looks at
    those positions alone (a chunk with no `<` in its tail costs one `find`).
    """
    if len(tags) == 1:  # the usual call: one tag
        tag = tags[0]
        i = text.find(tag[:1], max(0, len(text) - len(tag) + 1)) if len(tag) > 1 else -1
        while i >= 0:
            if tag.startswith(text[i:]):
                return len(text) - i
            i = text.find(tag[0], i + 1)
        return 0
    longest = max((len(t) for t in tags), default=0)
    start = max(0, len(text) - longest + 1)
    firsts = [t[0] for t in tags if t]
    while start < len(text):
        found = [i for i in (text.find(f, start) for f in firsts) if i >= 0]
        if not found:
            return 0
        i = min(found)
        tail = text[i:]
        if any(t.startswith(tail) for t in tags):
            return len(text) - i
        start = i + 1
    return 0


class TrimmedSegment:
    """The whitespace rule above, for one kind of segment at a time.

    `push(text)` returns what may be emitted now: leading whitespace of the segment is dropped and
    trailing whitespace is held back until non-space text follows. `end()` closes the segment (the
    held whitespace is dropped); the next `push` starts a new one.
    """

    def __init__(self) -> None:
        self.started = False
        self.pending = ""

    def push(self, text: str) -> str:
        if not self.started:
            text = text.lstrip()
            if not text:
                return ""
            self.started = True
        body = text.rstrip()
        if not body:
            self.pending += text
            return ""
        out = self.pending + body
        self.pending = text[len(body) :]
        return out

    def end(self) -> None:
        self.started = False
        self.pending = ""


def is_prefix_at(text: str, pos: int, tag: str) -> bool:
    """`text[pos:]` is a proper prefix of `tag`: it may still become the tag."""
    return len(text) - pos < len(tag) and tag.startswith(text[pos:])


MORE = "more"  # the call needs more text
DONE = "done"  # the call is over; the text after it follows
NOT_A_CALL = "text"  # the body cannot be a call: the open tag and the body are text after all


class CallScanner(ABC):
    """One tool call's body (the text after the open tag), scanned incrementally.

    `feed` returns the events it can emit now and an outcome: (MORE, ""), (DONE, rest) or
    (NOT_A_CALL, ""). NOT_A_CALL is only returned before the call's ToolCallStart was emitted
    (`started` False); once started, a call is always ended with a ToolCallEnd. `raw` keeps the whole
    body, so that a body that is not a call can be read again as text.
    """

    close_tag = "</tool_call>"

    def __init__(self, start: Callable[[str], ParsedEvent]) -> None:
        self.raw = ""
        self.started = False
        self._start_event = start

    def start(self, name: str) -> ParsedEvent:
        self.started = True
        return self._start_event(name)

    @abstractmethod
    def feed(self, text: str) -> tuple[list[ParsedEvent], tuple[str, str]]: ...

    @abstractmethod
    def close(self) -> list[ParsedEvent]:
        """The stream ended inside this started call: end it with what it has."""


class TaggedToolParser(ToolParser):
    """Text with `<tool_call>` ... `</tool_call>` blocks; subclasses scan a block's body.

    Outside calls the text follows the whitespace rule; a held-back trailing whitespace before a
    call is dropped when the call's ToolCallStart is emitted. A body that turns out not to be a call
    (malformed before the name is known, or unterminated at finish before the name was known) is
    given back as text, `<tool_call>` included, and read again (it may hold a real call).
    """

    open_tag = "<tool_call>"

    def __init__(self, *, tools: Sequence[ToolSpec] = (), id_factory: Callable[[int], str]) -> None:
        super().__init__(tools=tools, id_factory=id_factory)
        self._buf = ""
        self._text = TrimmedSegment()
        self._call: CallScanner | None = None
        self._next_index = 0

    @abstractmethod
    def new_call(self, start: Callable[[str], ParsedEvent]) -> CallScanner: ...

    def _start(self, name: str) -> ParsedEvent:
        index = self._next_index
        self._next_index += 1
        self._text.end()
        return ToolCallStart(index=index, id=self.id_factory(index), name=name)

    def feed(self, text: str) -> list[ParsedEvent]:
        out: list[ParsedEvent] = []
        if self._call is None and not self._buf and "<" not in text:
            self._emit_text(out, text)  # outside a call, no tag can start here: all text (as `_run` finds)
            return out
        self._buf += text
        self._run(out)
        return out

    def finish(self, *, cut: bool = False) -> list[ParsedEvent]:
        """The end of the text. ``cut``: the output limit ended it, so a call begun before its name
        was known is dropped, as is a held-back start of ``<tool_call>``: markup cut short is
        neither text nor a call (conformance TOOLS-005:markup)."""
        out: list[ParsedEvent] = []
        while self._call is not None:
            call, self._call = self._call, None
            if call.started:
                out.extend(call.close())
            elif cut:
                self._buf = ""
            else:
                self._emit_text(out, self.open_tag)
                self._buf = call.raw
                self._run(out)
        if cut and self._buf:
            self._buf = self._buf[:len(self._buf) - held_suffix(self._buf, [self.open_tag])]
        self._emit_text(out, self._buf)
        self._buf = ""
        self._text.end()
        return out

    def end_text_segment(self) -> list[ParsedEvent]:
        out: list[ParsedEvent] = []
        if self._call is None:
            self._emit_text(out, self._buf)
            self._buf = ""
            self._text.end()
        return out

    def _run(self, out: list[ParsedEvent]) -> None:
        while self._buf:
            if self._call is None:
                i = self._buf.find(self.open_tag)
                if i < 0:
                    keep = held_suffix(self._buf, [self.open_tag])
                    self._emit_text(out, self._buf[: len(self._buf) - keep])
                    self._buf = self._buf[len(self._buf) - keep :]
                    return
                self._emit_text(out, self._buf[:i])
                self._buf = self._buf[i + len(self.open_tag) :]
                self._call = self.new_call(self._start)
                continue
            events, (outcome, rest) = self._call.feed(self._buf)
            self._buf = ""
            out.extend(events)
            if outcome == MORE:
                return
            if outcome == DONE:
                self._call = None
                self._buf = rest
            else:  # NOT_A_CALL
                self._emit_text(out, self.open_tag)
                self._buf = self._call.raw
                self._call = None

    def _emit_text(self, out: list[ParsedEvent], text: str) -> None:
        if text and (t := self._text.push(text)):
            out.append(TextDelta(t))
