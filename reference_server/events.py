"""The one internal event model that every API adapter maps.

The stream parser turns model text into these events once; the Anthropic, Chat and Responses
adapters only translate them into their own SSE frames (DESIGN.md, "Data flow, server side").
Tool calls are numbered by `index` in the order the model started them, across the whole turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """The model committed to a call: the name is complete from here on."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallArgsDelta:
    index: int
    text: str  # a fragment of the JSON object; the fragments of one index join to it


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """The call is structurally complete: `arguments` is the whole JSON object text."""

    index: int
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int  # the whole prompt, cached part included
    cached_tokens: int  # prompt tokens served from the prefix cache
    completion_tokens: int = 0

    @property
    def uncached_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens


FinishReason = Literal["stop", "length", "tool_calls"]


@dataclass(frozen=True, slots=True)
class Finish:
    reason: FinishReason
    usage: Usage


ParsedEvent = Union[ReasoningDelta, TextDelta, ToolCallStart, ToolCallArgsDelta, ToolCallEnd]
Event = Union[ParsedEvent, Finish]


@dataclass(slots=True)
class ToolCall:
    index: int
    id: str
    name: str
    arguments: str = ""


@dataclass(slots=True)
class Part:
    """One ordered piece of an assistant turn, as the model wrote it."""

    kind: Literal["reasoning", "text", "tool_call"]
    text: str = ""
    call: ToolCall | None = None


@dataclass(slots=True)
class Folded:
    """A whole turn folded from events: the parts in model order, plus the finish."""

    parts: list[Part] = field(default_factory=list)
    finish: Finish | None = None

    def add(self, event: Event) -> None:
        match event:
            case ReasoningDelta(text=t) | TextDelta(text=t):
                kind: Literal["reasoning", "text"]
                kind = "reasoning" if isinstance(event, ReasoningDelta) else "text"
                if self.parts and self.parts[-1].kind == kind:
                    self.parts[-1].text += t
                else:
                    self.parts.append(Part(kind=kind, text=t))
            case ToolCallStart(index=i, id=cid, name=name):
                self.parts.append(Part(kind="tool_call", call=ToolCall(index=i, id=cid, name=name)))
            case ToolCallArgsDelta(index=i, text=t):
                self._call(i).arguments += t
            case ToolCallEnd(index=i, arguments=a):
                self._call(i).arguments = a
            case Finish():
                self.finish = event

    def _call(self, index: int) -> ToolCall:
        for part in self.parts:
            if part.call is not None and part.call.index == index:
                return part.call
        raise KeyError(f"tool call {index} was never started")

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p.call for p in self.parts if p.call is not None]
