"""One stream parser per request: the reasoning parser first, then the tool-call parser.

    parser = StreamParser(reasoning_parser=..., tool_parser=...)   # either may be None
    for chunk in engine_text: events += parser.feed(chunk)
    events += parser.finish()

The reasoning parser sees the raw model text; its TextDelta output goes through the tool parser,
its ReasoningDelta passes straight through (so a `<tool_call>` inside reasoning is reasoning).
Before a ReasoningDelta goes out, the tool parser is told that its text was cut off
(`ToolParser.end_text_segment`), so a held-back partial tag or trailing whitespace does not leak
past the reasoning. With no tool parser the text still follows the whitespace rule of base.py.
Adjacent deltas of one kind from one call are merged.

`render_parts` writes parts back in the model's raw form with the same parsers; `parse_text` is
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
from harnesscheck.reference_server.parsers.base import ReasoningParser, ToolParser, TrimmedSegment

__all__ = ["StreamParser", "fold", "parse_text", "render_parts"]


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

    def feed(self, text: str) -> list[ParsedEvent]:
        if self._finished:
            raise RuntimeError("StreamParser.feed after finish")
        if not text:
            return []
        if self.reasoning_parser is None:
            return _merge(self._text_out(text))
        return _merge(self._route(self.reasoning_parser.feed(text)))

    def finish(self) -> list[ParsedEvent]:
        if self._finished:
            return []
        self._finished = True
        out: list[ParsedEvent] = []
        if self.reasoning_parser is not None:
            out += self._route(self.reasoning_parser.finish())
        if self.tool_parser is not None:
            out += self.tool_parser.finish()
        self._text.end()
        return _merge(out)

    def _route(self, events: Iterable[ParsedEvent]) -> list[ParsedEvent]:
        out: list[ParsedEvent] = []
        for event in events:
            if isinstance(event, TextDelta):
                out += self._text_out(event.text)
            else:
                if self.tool_parser is not None:
                    out += self.tool_parser.end_text_segment()
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


def render_parts(
    parts: Iterable[Part],
    reasoning_parser: ReasoningParser | None = None,
    tool_parser: ToolParser | None = None,
) -> str:
    """Raw model text for the parts, in order, with each parser's own separators.

    Raises ValueError for a reasoning part without a reasoning parser or a tool call without a
    tool parser: neither has a raw form then, and dropping it silently would hide the bug.
    """
    out: list[str] = []
    for part in parts:
        if part.kind == "reasoning":
            if reasoning_parser is None:
                raise ValueError("a reasoning part needs a reasoning parser to render")
            out.append(reasoning_parser.render(part.text))
        elif part.kind == "tool_call":
            if tool_parser is None or part.call is None:
                raise ValueError("a tool call part needs a call and a tool parser to render")
            out.append(tool_parser.render(part.call))
        elif tool_parser is not None:
            out.append(tool_parser.render_text(part.text))
        else:
            out.append(part.text + "\n\n")
    return "".join(out)
