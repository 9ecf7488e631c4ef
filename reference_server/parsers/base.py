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

from reference_server.conversation import ToolSpec
from reference_server.events import ParsedEvent, ToolCall


class ReasoningParser(ABC):
    """Splits model text into ReasoningDelta and TextDelta events.

    `start_in_reasoning`: the chat template's generation prompt already opened the reasoning
    section (e.g. DeepSeek-R1 ends it with `<think>\\n`), so output begins inside reasoning.
    """

    name: str = ""

    def __init__(self, *, start_in_reasoning: bool = False) -> None:
        self.start_in_reasoning = start_in_reasoning

    @abstractmethod
    def feed(self, text: str) -> list[ParsedEvent]: ...

    @abstractmethod
    def finish(self) -> list[ParsedEvent]: ...

    @abstractmethod
    def render(self, reasoning: str) -> str:
        """Raw model text for one reasoning segment, separators included."""


class ToolParser(ABC):
    """Splits the non-reasoning text into TextDelta and ToolCallStart/ArgsDelta/End events.

    `tools` gives parameter types (qwen3_coder needs them to turn raw values into JSON);
    `id_factory(index)` makes the call id, so ids are deterministic per request.
    """

    name: str = ""

    def __init__(self, *, tools: Sequence[ToolSpec] = (), id_factory: Callable[[int], str]) -> None:
        self.tools = {t.name: t for t in tools}
        self.id_factory = id_factory

    @abstractmethod
    def feed(self, text: str) -> list[ParsedEvent]: ...

    @abstractmethod
    def finish(self) -> list[ParsedEvent]: ...

    @abstractmethod
    def render(self, call: ToolCall) -> str:
        """Raw model text for one tool call, separators included."""

    def render_text(self, text: str) -> str:
        """Raw model text for one text segment, separators included."""
        return text + "\n\n"
