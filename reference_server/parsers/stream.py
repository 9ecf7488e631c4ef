"""One stream parser per request: the reasoning parser first, then the tool-call parser.

    parser = StreamParser(reasoning_parser=..., tool_parser=...)   # either may be None
    for chunk in engine_text: events += parser.feed(chunk)
    events += parser.finish()

The reasoning parser sees the raw model text; its TextDelta output goes through the tool parser,
its ReasoningDelta passes straight through (so a `<tool_call>` inside reasoning is reasoning).
Before a ReasoningDelta goes out, the tool parser is told that its text was cut off
(`ToolParser.end_text_segment`, once until it is fed text again), so a held-back partial tag or
trailing whitespace does not leak past the reasoning. With no tool parser the text still follows
the whitespace rule of base.py.
Adjacent deltas of one kind from one call are merged.

`render_part` / `render_parts` write parts back in the model's raw form with the same parsers; `parse_text` is
the one-shot form of the stream (feed whole, finish, fold): both give the same parts.
"""

from __future__ import annotations

from collections.abc import Iterable

from harnesscheck.reference_server.events import (
    Folded,
    ParsedEvent,
    Part,
    ReasoningDelta,
    TextDelta,
    ToolCallArgsDelta,
)
from harnesscheck.reference_server.parsers import get_tool_parser
from harnesscheck.reference_server.parsers.base import ReasoningParser, ToolParser, TrimmedSegment

__all__ = ["StreamParser", "fold", "parse_text", "render_part", "render_parts"]


class StreamParser:
    def __init__(
        self,
        reasoning_parser: ReasoningParser | None = None,
        tool_parser: ToolParser | None = None,
    ) -> None:
        self.reasoning_parser = reasoning_parser
        self.tool_parser = tool_parser
        self._text = TrimmedSegment()  # used only when neither parser trims text
        self._finished = False
        # The tool parser was told its text was cut off and has been fed nothing since: telling it
        # again (`end_text_segment`) would do nothing, so the next reasoning passes straight through.
        self._cut = tool_parser is None

    def feed(self, text: str) -> list[ParsedEvent]:
        if self._finished:
            raise RuntimeError("StreamParser.feed after finish")
        if not text:
            return []
        if self.reasoning_parser is None:
            return _merge(self._text_out(text))
        events = self.reasoning_parser.feed(text)
        if self._cut and len(events) == 1 and type(events[0]) is ReasoningDelta:
            return events  # the usual token inside reasoning: what _route and _merge would give
        return _merge(self._route(events))

    def finish(self, *, cut: bool = False) -> list[ParsedEvent]:
        """The end of the output; ``cut``: the output limit ended it (``ToolParser.finish``)."""
        if self._finished:
            return []
        self._finished = True
        out: list[ParsedEvent] = []
        if self.reasoning_parser is not None:
            out += self._route(self.reasoning_parser.finish())
        if self.tool_parser is not None:
            out += self.tool_parser.finish(cut=cut)
        self._text.end()
        return _merge(out)

    def _route(self, events: Iterable[ParsedEvent]) -> list[ParsedEvent]:
        out: list[ParsedEvent] = []
        for event in events:
            if isinstance(event, TextDelta):
                out += self._text_out(event.text)
                self._cut = self.tool_parser is None
            else:
                if not self._cut:
                    out += self.tool_parser.end_text_segment()  # type: ignore[union-attr]
                    self._cut = True
                out.append(event)
        return out

    def _text_out(self, text: str) -> list[ParsedEvent]:
        if self.tool_parser is not None:
            return self.tool_parser.feed(text)
        if self.reasoning_parser is not None:
            return [TextDelta(text)]  # already trimmed by the reasoning parser
        t = self._text.push(text)
        return [TextDelta(t)] if t else []


def _merge(events: list[ParsedEvent]) -> list[ParsedEvent]:
    if len(events) < 2:
        return events
    out: list[ParsedEvent] = []
    for event in events:
        last = out[-1] if out else None
        if isinstance(event, TextDelta) and isinstance(last, TextDelta):
            out[-1] = TextDelta(last.text + event.text)
        elif isinstance(event, ReasoningDelta) and isinstance(last, ReasoningDelta):
            out[-1] = ReasoningDelta(last.text + event.text)
        elif (
            isinstance(event, ToolCallArgsDelta)
            and isinstance(last, ToolCallArgsDelta)
            and last.index == event.index
        ):
            out[-1] = ToolCallArgsDelta(index=event.index, text=last.text + event.text)
        else:
            out.append(event)
    return out


def fold(events: Iterable[ParsedEvent]) -> list[Part]:
    """The parts of a turn, folded from its events (events.Folded)."""
    folded = Folded()
    for event in events:
        folded.add(event)
    return folded.parts


def parse_text(
    text: str,
    reasoning_parser: ReasoningParser | None = None,
    tool_parser: ToolParser | None = None,
) -> list[Part]:
    """One-shot: the parts of a whole model output. The parsers must be fresh (they keep state)."""
    parser = StreamParser(reasoning_parser, tool_parser)
    return fold(parser.feed(text) + parser.finish())


def render_part(
    part: Part,
    reasoning_parser: ReasoningParser | None = None,
    tool_parser: ToolParser | None = None,
) -> str:
    """Raw model text for one part, separators included: the one tool-call and reasoning renderer
    (the history rebuild and the scripted output both write through it).

    With no reasoning parser a reasoning part is written in `<think>` tags (what every built-in
    reasoning parser writes); with no tool parser a tool call is written in the Hermes form, its
    name JSON-escaped (`HermesToolParser.render`), so the Hermes parser reads it back. A parser's own
    ValueError (arguments its format cannot write) propagates.
    """
    if part.kind == "reasoning":
        return reasoning_parser.render(part.text) if reasoning_parser else f"<think>\n{part.text}\n</think>\n\n"
    if part.kind == "tool_call":
        if part.call is None:
            raise ValueError("a tool call part needs a call to render")
        return (tool_parser or _hermes()).render(part.call)
    return tool_parser.render_text(part.text) if tool_parser else part.text + "\n\n"


def render_parts(
    parts: Iterable[Part],
    reasoning_parser: ReasoningParser | None = None,
    tool_parser: ToolParser | None = None,
) -> str:
    """Raw model text for the parts, in order (`render_part` each)."""
    return "".join(render_part(part, reasoning_parser, tool_parser) for part in parts)


def _hermes() -> ToolParser:
    """A Hermes tool parser, the form a tool call takes when no tool parser is configured."""
    return get_tool_parser("hermes")(id_factory=str)
